//! A C program compiled with `cc` against the generated header exercises
//! every exported function, against the shared and the static library.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_format::testing::noise;
use kpack_runtime::Marker;

/// target/debug/, after `cargo build -p kpack-capi` put librocm_kpack.{so,a}
/// there (a test build does not reliably leave the cdylib/staticlib behind).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
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
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// A directory under `work` holding `librocm_kpack.so.0` (a link to
/// cargo's library): programs record the SONAME as NEEDED, and cargo writes
/// only `librocm_kpack.so`.
fn soname_dir(work: &Path) -> PathBuf {
    let dir = work.join("soname");
    if !dir.exists() {
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(
            lib_dir().join("librocm_kpack.so"),
            dir.join("librocm_kpack.so.0"),
        )
        .unwrap();
    }
    dir
}

fn compile_and_run(link: &[&str], name: &str, args: &[PathBuf], work: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = work.join(name);
    let status = Command::new("cc")
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-D_DEFAULT_SOURCE")
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/test_kpack.c"))
        .arg("-o")
        .arg(&exe)
        .args(link)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed for {name}");
    let out = Command::new(&exe)
        .args(args)
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[test]
fn c_program_exercises_every_function_with_shared_and_static_library() {
    let work = tempfile::tempdir().unwrap();
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/vectors");
    let noop = std::fs::canonicalize(vectors.join("amd_test_noop.kpack")).unwrap();
    let zstd = std::fs::canonicalize(vectors.join("amd_test_zstd.kpack")).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = work.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = Marker {
        kernel_name: "lib/libtest.so".into(),
        search_paths: vec![noop.to_str().unwrap().into()],
    };
    let missing = Marker {
        kernel_name: "lib/libtest.so".into(),
        search_paths: vec!["../.kpack/none_@GFXARCH@.kpack".into()],
    };
    let args = vec![
        noop,
        zstd,
        write("good.marker", &good.to_bytes()),
        write("missing.marker", &missing.to_bytes()),
        write("bad.marker", &[0x91, 0x01]),
        write("empty.kpack", b""),
    ];
    let dir = lib_dir();
    let so = format!("-L{}", dir.display());
    let rpath = format!("-Wl,-rpath,{}", soname_dir(work.path()).display());
    compile_and_run(
        &[&so, &rpath, "-lrocm_kpack"],
        "test_kpack_shared",
        &args,
        work.path(),
    );
    let a = dir.join("librocm_kpack.a");
    compile_and_run(
        &[a.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
        "test_kpack_static",
        &args,
        work.path(),
    );
}

/// `tests/c/amd_abi.c` declares the API exactly as AMD's header does (spec
/// §10), not through our generated header, and links the shared library.
#[test]
fn c_program_with_amds_own_declarations_links_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vectors = crate_dir.join("../format/tests/vectors");
    let noop = std::fs::canonicalize(vectors.join("amd_test_noop.kpack")).unwrap();
    let zstd = std::fs::canonicalize(vectors.join("amd_test_zstd.kpack")).unwrap();
    let empty = work.path().join("empty.kpack");
    std::fs::write(&empty, b"").unwrap();
    let exe = build_program(work.path(), "amd_abi");
    let out = Command::new(&exe)
        .args([&noop, &zstd, &empty])
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `tests/c/two_gpus.c`: one cache serving a gfx1100 and a gfx1201 device
/// (and lists naming both) from eight threads at once returns each the
/// object of its own arch and index. The two arches' archives use the two
/// schemes, so raw and zstd loads interleave.
#[test]
fn one_cache_serves_two_gpu_architectures_from_many_threads() {
    use kpack_format::{ArchiveWriter, Compression, WriterOptions};
    const CO_COUNT: u32 = 12;
    let work = tempfile::tempdir().unwrap();
    let kpack_dir = work.path().join(".kpack");
    std::fs::create_dir(&kpack_dir).unwrap();
    for (arch, compression) in [
        ("gfx1100", Compression::Zstd { level: 3 }),
        ("gfx1201", Compression::None),
    ] {
        let options = WriterOptions {
            group_name: "two".into(),
            gfx_arch_family: arch.into(),
            compression,
            ..Default::default()
        };
        let path = kpack_dir.join(format!("two_{arch}.kpack"));
        let mut w = ArchiveWriter::create(&path, options).unwrap();
        for co in 0..CO_COUNT {
            let unit = format!("{arch}#{co};");
            let size = 1000 + 37 * co as usize;
            let bytes: Vec<u8> = unit.bytes().cycle().take(size).collect();
            w.add(&format!("lib/libtwo.so#{co}"), arch, &bytes).unwrap();
        }
        w.finish().unwrap();
    }
    let marker = Marker {
        kernel_name: "lib/libtwo.so".into(),
        search_paths: vec![format!("{}/two_@GFXARCH@.kpack", kpack_dir.display())],
    };
    let marker_path = work.path().join("two.marker");
    std::fs::write(&marker_path, marker.to_bytes()).unwrap();

    let exe = build_program(work.path(), "two_gpus");
    let out = Command::new(&exe)
        .arg(&marker_path)
        .arg(work.path().join("lib/libtwo.so"))
        .arg(CO_COUNT.to_string())
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("1648 passed"), "{stdout}");
}

/// `tests/c/delta_loads.c`: a per-target `zstd-delta` archive whose
/// kernels are deltas against kernels of other keys (like kernels of one
/// library) serves every code object byte-exact, cold and warm, at the
/// lowest and the highest level.
#[test]
fn c_program_loads_kernels_stored_against_other_kernels() {
    use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};
    const CO_COUNT: u32 = 6;
    let work = tempfile::tempdir().unwrap();
    let exe = build_program(work.path(), "delta_loads");
    // Two like pairs and two strangers: code objects 0/1 and 2/3 differ by
    // 100 bytes each.
    let (a, b) = (noise(1, 40_000), noise(2, 30_000));
    let edit = |v: &[u8], at: usize| {
        let mut v = v.to_vec();
        v[at..at + 100].copy_from_slice(&noise(at as u32, 100));
        v
    };
    let objects = [
        a.clone(),
        edit(&a, 7000),
        b.clone(),
        edit(&b, 100),
        noise(3, 5000),
        noise(4, 8000),
    ];
    let expect = work.path().join("expect");
    std::fs::create_dir(&expect).unwrap();
    for (co, o) in objects.iter().enumerate() {
        std::fs::write(expect.join(format!("{co}.bin")), o).unwrap();
    }
    for level in [1, 19] {
        let kpack_dir = work.path().join(format!("l{level}/.kpack"));
        std::fs::create_dir_all(&kpack_dir).unwrap();
        let path = kpack_dir.join("d_gfx1100.kpack");
        let options = WriterOptions {
            group_name: "d".into(),
            gfx_arch_family: "gfx1100".into(),
            compression: Compression::ZstdDelta { level },
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(&path, options).unwrap();
        for (co, o) in objects.iter().enumerate() {
            w.add(&format!("lib/libd.so#{co}"), "gfx1100", o).unwrap();
        }
        w.finish().unwrap();
        let deltas = Archive::open(&path)
            .unwrap()
            .entries()
            .filter(|e| e.base().is_some())
            .count();
        assert_eq!(deltas, 2, "level {level}: one delta per like pair");
        let marker = Marker {
            kernel_name: "lib/libd.so".into(),
            search_paths: vec![format!("{}/d_@GFXARCH@.kpack", kpack_dir.display())],
        };
        let marker_path = work.path().join(format!("l{level}.marker"));
        std::fs::write(&marker_path, marker.to_bytes()).unwrap();
        let out = Command::new(&exe)
            .arg(&marker_path)
            .arg(work.path().join("lib/libd.so"))
            .arg("gfx1100")
            .arg(&expect)
            .arg(CO_COUNT.to_string())
            .env_remove("ROCM_KPACK_PATH")
            .env_remove("ROCM_KPACK_PATH_PREFIX")
            .env_remove("ROCM_KPACK_DISABLE")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.starts_with("12 passed, 0 failed"),
            "level {level}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `tests/c/verify_digest.c`: with `ROCM_KPACK_VERIFY=1` a code object
/// whose stored bytes were changed after the archive was written (a `none`
/// archive, so it still decodes) fails to load, and
/// `kpack_last_error_detail` names the entry; without it the load succeeds.
/// `tests/c/<name>.c` compiled into `work` against the shared library
/// (with our header on the include path; `amd_abi.c` declares AMD's own).
fn build_program(work: &Path, name: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = work.join(name);
    let status = Command::new("cc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_DEFAULT_SOURCE",
            "-pthread",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib_dir().display()))
        .arg(format!("-Wl,-rpath,{}", soname_dir(work).display()))
        .arg("-lrocm_kpack")
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed for {name}.c");
    exe
}

#[test]
fn verified_load_catches_a_changed_code_object() {
    use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};
    let work = tempfile::tempdir().unwrap();
    let exe = build_program(work.path(), "verify_digest");
    let kpack_dir = work.path().join(".kpack");
    std::fs::create_dir(&kpack_dir).unwrap();
    let path = kpack_dir.join("v_gfx1100.kpack");
    let options = WriterOptions {
        group_name: "v".into(),
        gfx_arch_family: "gfx1100".into(),
        compression: Compression::None,
        ..Default::default()
    };
    let mut w = ArchiveWriter::create(&path, options).unwrap();
    w.add("lib/libv.so#0", "gfx1100", &noise(7, 3000)).unwrap();
    w.finish().unwrap();
    let at = {
        let a = Archive::open(&path).unwrap();
        let e = a.entries().next().unwrap();
        assert!(e.sha256().is_some(), "the writer records a digest");
        e.stored_offset() as usize + 100
    };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let marker = Marker {
        kernel_name: "lib/libv.so".into(),
        search_paths: vec![".kpack/v_@GFXARCH@.kpack".into()],
    };
    let marker_file = work.path().join("v.marker");
    std::fs::write(&marker_file, marker.to_bytes()).unwrap();
    let out = Command::new(&exe)
        .arg(&marker_file)
        .arg(work.path().join("libv.so"))
        .args(["gfx1100", "lib/libv.so#0"])
        .env("ROCM_KPACK_VERIFY", "1")
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `tests/c/load_stats.c` with `ROCM_KPACK_STATS=1`: one summary line on
/// stderr, printed by `kpack_cache_destroy` or, for a cache never
/// destroyed, at process exit, counting what the loads did: one archive
/// opened (its size mapped), three loads (one of a missing key), one fresh
/// resolution and two from the memo, two zstd frames of 3000 bytes each.
/// Without the variable, nothing is printed.
#[test]
fn load_statistics_are_printed_once_with_rocm_kpack_stats() {
    use kpack_format::{Archive, ArchiveWriter, WriterOptions};
    let work = tempfile::tempdir().unwrap();
    let exe = build_program(work.path(), "load_stats");
    let kpack_dir = work.path().join(".kpack");
    std::fs::create_dir(&kpack_dir).unwrap();
    let path = kpack_dir.join("s_gfx1100.kpack");
    let options = WriterOptions {
        group_name: "s".into(),
        gfx_arch_family: "gfx1100".into(),
        ..Default::default()
    };
    let mut w = ArchiveWriter::create(&path, options).unwrap();
    w.add("lib/libs.so#0", "gfx1100", &noise(3, 3000)).unwrap();
    w.finish().unwrap();
    let stored = Archive::open(&path)
        .unwrap()
        .entries()
        .next()
        .unwrap()
        .stored_size();
    let mapped = std::fs::metadata(&path).unwrap().len();
    let marker = Marker {
        kernel_name: "lib/libs.so".into(),
        search_paths: vec![".kpack/s_@GFXARCH@.kpack".into()],
    };
    let marker_file = work.path().join("s.marker");
    std::fs::write(&marker_file, marker.to_bytes()).unwrap();
    let run = |mode: &str, stats: bool| {
        let mut cmd = Command::new(&exe);
        cmd.arg(&marker_file)
            .arg(work.path().join("libs.so"))
            .args(["gfx1100", mode])
            .env_remove("ROCM_KPACK_PATH")
            .env_remove("ROCM_KPACK_PATH_PREFIX")
            .env_remove("ROCM_KPACK_DISABLE")
            .env_remove("ROCM_KPACK_DEBUG");
        if stats {
            cmd.env("ROCM_KPACK_STATS", "1");
        } else {
            cmd.env_remove("ROCM_KPACK_STATS");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success() && stdout.contains("3 passed, 0 failed"),
            "{mode}: {stdout}\n{stderr}"
        );
        stderr
    };
    let want = format!(
        "kpack stats: 1 archives opened ({mapped} bytes mapped); 3 loads (1 failed), \
         1 resolutions, 2 from the memo; 2 frames decoded, {} bytes read, 6000 bytes inflated; \
         0 delta bases decoded, 0 from the memo; ",
        2 * stored
    );
    for mode in ["destroy", "exit"] {
        let stderr = run(mode, true);
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("kpack stats:"))
            .collect();
        assert_eq!(lines.len(), 1, "{mode}: {stderr}");
        assert!(
            lines[0].starts_with(&want) && lines[0].ends_with(" ms in loads"),
            "{mode}: {}\nwanted {want}",
            lines[0]
        );
    }
    assert!(!run("destroy", false).contains("kpack stats"));
}
