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
        "share/doc/rocm-kpack/LICENSE",
        "lib/.debug/librocm_kpack.so.0.1.0.debug",
    ] {
        assert!(p.join(file).is_file(), "{file} not installed");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert_eq!(
        std::fs::read(p.join("share/doc/rocm-kpack/LICENSE")).unwrap(),
        std::fs::read(root.join("LICENSE")).unwrap(),
        "the installed LICENSE is not the repository's"
    );
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

/// Section names of an ELF file or of every member of an archive.
fn sections(path: &Path) -> Vec<String> {
    let out = run(Command::new("readelf").arg("-SW").arg(path));
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('[')?;
            let (_, after) = rest.split_once(']')?;
            after.split_whitespace().next().map(str::to_string)
        })
        .collect()
}

/// Stripped as distributions ship it: no debug sections or symbol table in
/// the installed library, a `.gnu_debuglink` naming the separate debug file,
/// and that file holding the line tables cargo built.
#[test]
fn installs_a_stripped_library_with_separate_debug_info() {
    let inst = installed();
    let lib = inst.prefix.join("lib/librocm_kpack.so.0.1.0");
    let debug = inst.prefix.join("lib/.debug/librocm_kpack.so.0.1.0.debug");
    let built = sections(&inst.built.join("librocm_kpack.so"));
    assert!(
        built.iter().any(|s| s == ".debug_line"),
        "cargo's library has no line tables to keep: {built:?}"
    );
    let stripped = sections(&lib);
    let left: Vec<&String> = stripped
        .iter()
        .filter(|s| s.starts_with(".debug") || *s == ".symtab")
        .collect();
    assert!(left.is_empty(), "installed library keeps {left:?}");
    assert!(
        stripped.iter().any(|s| s == ".gnu_debuglink"),
        "installed library has no .gnu_debuglink: {stripped:?}"
    );
    let link = run(Command::new("readelf")
        .args(["-p", ".gnu_debuglink"])
        .arg(&lib));
    assert!(
        text(&link.stdout).contains("librocm_kpack.so.0.1.0.debug"),
        "{}",
        text(&link.stdout)
    );
    assert!(
        sections(&debug).iter().any(|s| s == ".debug_line"),
        "{} holds no line tables",
        debug.display()
    );
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&lib) < size(&inst.built.join("librocm_kpack.so")),
        "stripping made nothing smaller"
    );
    // `.debug_gdb_scripts` is not debug info: an allocated section naming
    // Rust's gdb pretty-printers, which `--strip-debug` rightly keeps.
    let archive = sections(&inst.prefix.join("lib/librocm_kpack.a"));
    let kept: Vec<&String> = archive
        .iter()
        .filter(|s| s.starts_with(".debug") && *s != ".debug_gdb_scripts")
        .collect();
    assert!(
        kept.is_empty(),
        "librocm_kpack.a keeps debug info: {kept:?}"
    );
}

/// `ROCM_KPACK_DEBUG=1` names the library a process loaded: kpack's, from
/// which file (how a user tells it from AMD's librocm_kpack).
#[test]
fn debug_output_names_the_library_the_process_loaded() {
    let inst = installed();
    let src = inst.work.join("which.c");
    std::fs::write(
        &src,
        "#include <rocm_kpack/kpack.h>\n\
         int main(void) { kpack_cache_t c = 0; int e = kpack_cache_create(&c); \
         kpack_cache_destroy(c); return e; }\n",
    )
    .unwrap();
    let exe = inst.work.join("which");
    let lib = inst.prefix.join("lib");
    run(Command::new("cc")
        .arg("-I")
        .arg(inst.prefix.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-lrocm_kpack"));
    let out = run(Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .env("ROCM_KPACK_DEBUG", "1"));
    let first = text(&out.stderr).lines().next().unwrap_or("").to_string();
    let want = format!(
        "of kpack (https://github.com/ROCm/kpack), loaded from {}",
        lib.canonicalize()
            .unwrap()
            .join("librocm_kpack.so.0.1.0")
            .display()
    );
    assert!(
        first.starts_with("kpack: librocm_kpack 0.1.0 ") && first.ends_with(&want),
        "first debug line: {first:?}"
    );
    let quiet = run(Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("ROCM_KPACK_DEBUG"));
    assert_eq!(text(&quiet.stderr), "");
}
