//! `scripts/install-runtime.sh` as a distribution uses it: the installed
//! prefix has the SONAME and its symlinks, exports only `kpack_*` from the
//! shared and the static library, links beside Debian's `libzstd.a`, and a
//! C++ consumer builds and runs with CMake (`find_package(rocm-kpack)`) and
//! with pkg-config. Needs cc, c++, cmake, pkg-config and libzstd-dev
//! (scripts/test.sh installs them).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The target directory's debug/ after `cargo build -p kpack-capi --lib`:
/// the build c_abi.rs makes too, so CI compiles the library once.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "-q", "-p", "kpack-capi", "--lib"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "building librocm_kpack failed:\n{}",
        text(&out.stderr)
    );
    target.join("debug")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Run a command, fail the test with its output unless it succeeds.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

struct Installed {
    /// Where cargo put librocm_kpack.{so,a}.
    built: PathBuf,
    /// The install prefix.
    prefix: PathBuf,
    /// Scratch space for consumers.
    work: PathBuf,
}

/// One install per test binary, into the target's scratch directory.
fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let built = lib_dir();
        let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kpack-capi-install");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let prefix = work.join("prefix");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-runtime.sh");
        run(Command::new("bash")
            .arg(script)
            .arg("--from")
            .arg(&built)
            .arg(&prefix));
        Installed {
            built,
            prefix,
            work,
        }
    })
}

fn zstd_vector() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/vectors/amd_test_zstd.kpack")
        .canonicalize()
        .unwrap()
}

/// What the consumer prints for AMD's zstd test vector, after its linkage.
const CONSUMER_OUTPUT: &str = "arches gfx1100,gfx1101 kernel 1018 bytes (error 0)\n";

fn dynamic_section(path: &Path) -> String {
    text(&run(Command::new("readelf").arg("-dW").arg(path)).stdout)
}

/// Defined global symbols of an ELF file or archive (`nm -g --defined-only`).
fn defined_globals(path: &Path, dynamic: bool) -> Vec<String> {
    let mut cmd = Command::new("nm");
    cmd.args(["-g", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    let out = run(cmd.arg(path));
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| f[2].to_string())
        })
        .collect()
}

#[test]
fn cargo_builds_the_shared_library_with_its_soname() {
    let so = installed().built.join("librocm_kpack.so");
    assert!(
        dynamic_section(&so).contains("Library soname: [librocm_kpack.so.0]"),
        "{} has no SONAME librocm_kpack.so.0",
        so.display()
    );
}

#[test]
fn installs_the_layout_distributions_expect() {
    let p = &installed().prefix;
    for file in [
        "include/rocm_kpack/kpack.h",
        "lib/librocm_kpack.so.0.1.0",
        "lib/librocm_kpack.a",
        "lib/pkgconfig/rocm-kpack.pc",
        "lib/cmake/rocm-kpack/rocm-kpackConfig.cmake",
        "lib/cmake/rocm-kpack/rocm-kpackConfigVersion.cmake",
        "share/doc/rocm-kpack/THIRD-PARTY-NOTICES.md",
    ] {
        assert!(p.join(file).is_file(), "{file} not installed");
    }
    let link = |name: &str| std::fs::read_link(p.join("lib").join(name)).unwrap();
    assert_eq!(
        link("librocm_kpack.so.0"),
        Path::new("librocm_kpack.so.0.1.0")
    );
    assert_eq!(link("librocm_kpack.so"), Path::new("librocm_kpack.so.0"));
}

#[test]
fn exports_only_kpack_symbols() {
    let lib = installed().prefix.join("lib");
    let shared = defined_globals(&lib.join("librocm_kpack.so.0.1.0"), true);
    let archive = defined_globals(&lib.join("librocm_kpack.a"), false);
    for (what, symbols) in [("shared", &shared), ("static", &archive)] {
        assert!(
            symbols.iter().any(|s| s == "kpack_open"),
            "{what}: no kpack_open"
        );
        let foreign: Vec<_> = symbols
            .iter()
            .filter(|s| !s.starts_with("kpack_"))
            .collect();
        assert!(foreign.is_empty(), "{what} library exports {foreign:?}");
    }
    assert_eq!(
        shared.len(),
        archive.len(),
        "shared {shared:?}\nstatic {archive:?}"
    );
}

/// Both archives linked whole (as when folding static libraries into one
/// shared object): every ZSTD_* of librocm_kpack.a would be a "multiple
/// definition"; the program's own ZSTD_* calls must reach Debian's libzstd.
#[test]
fn static_library_links_beside_debian_libzstd() {
    let inst = installed();
    let zstd = text(&run(Command::new("cc").arg("-print-file-name=libzstd.a")).stdout);
    let zstd = PathBuf::from(zstd.trim());
    assert!(
        zstd.is_absolute(),
        "libzstd.a not found (Debian: apt-get install libzstd-dev)"
    );
    let exe = inst.work.join("zstd_coexist");
    let libs = pkg_config(&["--static", "--libs-only-l", "rocm-kpack"]);
    run(Command::new("cc")
        .arg("-I")
        .arg(inst.prefix.join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/zstd_coexist.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-Wl,--whole-archive")
        .arg(inst.prefix.join("lib/librocm_kpack.a"))
        .arg(&zstd)
        .arg("-Wl,--no-whole-archive")
        .args(libs.split_whitespace().filter(|l| *l != "-lrocm_kpack")));
    let out = run(Command::new(&exe).arg(zstd_vector()));
    let version = text(&run(Command::new("pkg-config").args(["--modversion", "libzstd"])).stdout);
    assert_eq!(
        text(&out.stdout),
        format!(
            "kernel 1018 bytes, libzstd {} round trip ok\n",
            version.trim()
        )
    );
}

fn pkg_config(args: &[&str]) -> String {
    let dir = installed().prefix.join("lib/pkgconfig");
    text(
        &run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", dir)
            .args(args))
        .stdout,
    )
}

fn consumer_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/consumer")
}

fn needed(exe: &Path) -> bool {
    dynamic_section(exe).contains("Shared library: [librocm_kpack.so.0]")
}

#[test]
fn cmake_consumer_builds_and_runs_shared_and_static() {
    let inst = installed();
    for (name, flag, shared) in [("cmake-shared", "OFF", true), ("cmake-static", "ON", false)] {
        let build = inst.work.join(name);
        run(Command::new("cmake")
            .arg("-S")
            .arg(consumer_source())
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", inst.prefix.display()))
            .arg(format!("-DROCM_KPACK_STATIC={flag}")));
        run(Command::new("cmake").arg("--build").arg(&build));
        let exe = build.join("consumer");
        assert_eq!(needed(&exe), shared, "{name}: NEEDED librocm_kpack.so.0");
        let out = run(Command::new(&exe).arg(zstd_vector()));
        let linkage = if shared { "shared" } else { "static" };
        assert_eq!(
            text(&out.stdout),
            format!("{linkage}: {CONSUMER_OUTPUT}"),
            "{name}"
        );
    }
}

#[test]
fn pkg_config_consumer_builds_and_runs() {
    let inst = installed();
    let exe = inst.work.join("pkg-config-consumer");
    let flags = pkg_config(&["--cflags", "--libs", "rocm-kpack"]);
    run(Command::new("c++")
        .arg(consumer_source().join("main.cpp"))
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", inst.prefix.join("lib").display())));
    assert!(
        needed(&exe),
        "pkg-config consumer does not record the SONAME"
    );
    let out = run(Command::new(&exe).arg(zstd_vector()));
    assert_eq!(text(&out.stdout), format!("shared: {CONSUMER_OUTPUT}"));
}

#[test]
fn third_party_notices_are_current() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/notices.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "host/capi/THIRD-PARTY-NOTICES.md: {}",
        text(&out.stderr)
    );
}
