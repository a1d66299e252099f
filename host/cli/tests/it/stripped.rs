//! Offloaded and pruned binaries after the strippers distributions run:
//! GNU `strip --strip-all`, elfutils' `eu-strip` and GNU
//! `objcopy --strip-debug`, each on a fresh copy. After each, `verify-elf`
//! passes and an offloaded binary still loads, through kpack's runtime,
//! the code object clang-offload-bundler extracts for every target.
//!
//! The strippers are required: a missing one fails the test (scripts/test.sh
//! installs binutils and elfutils). BFD's strip and objcopy only read x86-64
//! here, so aarch64 outputs go through `eu-strip` alone; they do not run
//! (no emulator).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{
    CLANG19_FAT_FIXTURES, CLANG22_FAT_FIXTURES, FAT_FIXTURES, OracleEntry, fixture, stderr, stdout,
};

use crate::runtime_e2e::{Load, run_loading};
use crate::util::kpack;

const X86_64: u16 = 62;

/// (tool, arguments before the file), as distributions' packaging runs them.
const STRIPPERS: [(&str, &[&str]); 3] = [
    ("strip", &["--strip-all"]),
    ("eu-strip", &[]),
    ("objcopy", &["--strip-debug"]),
];

/// Every offloadable fixture: (set directory, file name, its oracle).
fn fixtures() -> Vec<(&'static str, &'static str, &'static [OracleEntry])> {
    let mut all: Vec<(&str, &str, &[OracleEntry])> = FAT_FIXTURES
        .iter()
        .map(|name| ("corpus", *name, kpack_tests::oracle()))
        .collect();
    all.extend(
        CLANG19_FAT_FIXTURES
            .iter()
            .map(|(name, _)| ("clang19", *name, kpack_tests::clang19_oracle())),
    );
    // .hip_fatbin in a PT_LOAD of its own, starting part-way into a page
    // (the layout of real ROCm libraries); not in the oracle.
    all.extend(
        ["libaxpy_segment_490.so", "libaxpy_segment_d00.so"]
            .map(|name| ("clang19", name, &[] as &[OracleEntry])),
    );
    all.extend(
        CLANG22_FAT_FIXTURES
            .iter()
            .map(|(name, _)| ("clang22", *name, kpack_tests::clang22_oracle())),
    );
    all
}

/// The strippers that read `machine` (BFD's only read x86-64 here).
fn strippers(machine: u16) -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
    STRIPPERS
        .into_iter()
        .filter(move |(tool, _)| machine == X86_64 || *tool == "eu-strip")
}

/// Copy `bin` to `dir/<name>.<tool>` and run `tool args` on the copy; the
/// tool must exist, succeed and not warn.
fn stripped_copy(bin: &Path, dir: &Path, tool: &str, args: &[&str]) -> PathBuf {
    let name = bin.file_name().unwrap().to_string_lossy();
    let copy = dir.join(format!("{name}.{tool}"));
    std::fs::copy(bin, &copy).unwrap();
    let out = Command::new(tool)
        .args(args)
        .arg(&copy)
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool} is required by this test (scripts/test.sh installs it): {e}")
        });
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.to_lowercase().contains("warning"),
        "{tool} {args:?} {}: {err}",
        bin.display()
    );
    copy
}

fn verify_elf_passes(path: &Path, extra: &[&str], what: &str) {
    let mut args: Vec<&OsStr> = vec!["verify-elf".as_ref()];
    args.extend(extra.iter().map(OsStr::new));
    args.push(path.as_os_str());
    let out = kpack(args);
    assert!(
        out.status.success(),
        "{what}: verify-elf {extra:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// Every target `name` ships loads, through kpack's runtime, the object
/// clang-offload-bundler extracts: one load per wrapper.
fn assert_kernels_load(bin: &Path, name: &str, oracle: &[OracleEntry], what: &str) {
    let want: BTreeMap<(usize, &str), &str> = oracle
        .iter()
        .filter(|e| e.file == name && e.target.starts_with("gfx"))
        .map(|e| ((e.bundle, e.target.as_str()), e.sha256.as_str()))
        .collect();
    let targets: std::collections::BTreeSet<&str> = want.keys().map(|(_, t)| *t).collect();
    for target in targets {
        let run = run_loading(bin, target, &[]);
        assert_eq!(run.code, Some(0), "{what} on {target}: exit\n{}", run.log);
        assert!(
            run.fatbins > 0 && run.loads.len() == run.fatbins,
            "{what} on {target}: one load per wrapper\n{}",
            run.log
        );
        for load in &run.loads {
            let Load::Ok { co, sha, .. } = load else {
                panic!("{what} on {target}: {load:?}\n{}", run.log)
            };
            assert_eq!(
                want.get(&(*co as usize, target)).copied(),
                Some(sha.as_str()),
                "{what} #{co} on {target}: not the object clang-offload-bundler extracts"
            );
        }
    }
}

#[test]
fn offloaded_fixtures_verify_and_load_their_kernels_after_every_stripper() {
    for (set, name, oracle) in fixtures() {
        let input = fixture(&format!("{set}/{name}"));
        let machine = kpack_tests::e_machine(&input);
        let dir = tempfile::tempdir().unwrap();
        let bin = crate::util::offload_into(&input, dir.path(), &[]);
        for (tool, args) in strippers(machine) {
            let what = format!("{set}/{name} after {tool} {args:?}");
            let copy = stripped_copy(&bin, dir.path(), tool, args);
            verify_elf_passes(&copy, &[], &what);
            if machine == X86_64 {
                assert_kernels_load(&copy, name, oracle, &what);
            }
        }
    }
}

#[test]
fn pruned_fixtures_verify_after_every_stripper() {
    // Wide fixtures whose pruned bundles free whole pages: prune then takes
    // the offload layout (a kpack page holding the new program headers).
    for (set, name, keep) in [
        ("corpus", "libaxpy_wide.so", "gfx1010"),
        ("corpus", "exe_axpy_wide", "gfx1010"),
        ("corpus", "lib2tu_2arch.so", "gfx90a"),
    ] {
        let input = fixture(&format!("{set}/{name}"));
        let dir = tempfile::tempdir().unwrap();
        let pruned = dir.path().join(name);
        let out = crate::util::kpack_prune(&input, &pruned, keep, &["--json"]);
        assert!(out.status.success(), "prune {name}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let machine = kpack_tests::e_machine(&input);
        for (tool, args) in strippers(machine) {
            let layout = &report["result"]["layout"];
            let what = format!("{name} pruned to {keep} (layout {layout}) after {tool} {args:?}");
            let copy = stripped_copy(&pruned, dir.path(), tool, args);
            verify_elf_passes(&copy, &["--pruned"], &what);
        }
    }
}

/// The sha256 of the code object clang-offload-bundler-22 extracts for
/// `target` from the one bundle of `bin`'s `.hip_fatbin`.
fn bundler_sha256(bin: &Path, target: &str, dir: &Path) -> String {
    let fatbin = dir.join("fatbin.bin");
    let out = Command::new("objcopy")
        .args(["-O", "binary", "--only-section=.hip_fatbin"])
        .arg(bin)
        .arg(&fatbin)
        .output()
        .expect("objcopy (binutils) is required");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let co = dir.join(format!("{target}.co"));
    let out = Command::new("clang-offload-bundler-22")
        .args(["--type=o", "--unbundle"])
        .arg(format!("--input={}", fatbin.display()))
        .arg(format!("--output={}", co.display()))
        .arg(format!("--targets=hipv4-amdgcn-amd-amdhsa--{target}"))
        .output()
        .expect("clang-offload-bundler-22 (clang-tools-22) is required");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kpack_tests::sha256_hex(&std::fs::read(co).unwrap())
}

/// A shared library defining every undefined, unversioned symbol of `bin`
/// (a Python extension's `Py*`), built with `cc` into `dir`: enough for the
/// dynamic loader to load the extension outside Python.
fn python_stand_in(bin: &Path, dir: &Path) -> PathBuf {
    let out = Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(bin)
        .output()
        .expect("nm (binutils) is required");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut f = line.split_whitespace();
        if let (Some("U"), Some(name)) = (f.next(), f.next())
            && !name.contains('@')
        {
            c.push_str(&format!("void *{name}[16];\n"));
        }
    }
    assert!(c.contains("PyExc_"), "{}: no Python symbols", bin.display());
    let src = dir.join("python_stand_in.c");
    std::fs::write(&src, c).unwrap();
    let lib = dir.join("libpython_stand_in.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// A library nobody here built (jax-rocm7-plugin 0.10.2's `_prng.so`, its
/// `.hip_fatbin` in a PT_LOAD of its own): offloaded, then each stripper;
/// `verify-elf` passes and kpack's runtime loads the very code object the
/// bundler extracts from the original.
#[test]
fn a_real_library_offloaded_survives_every_stripper() {
    let input = fixture("real/jax-rocm7-plugin-0.10.2/_prng.so");
    let dir = tempfile::tempdir().unwrap();
    let bin = crate::util::offload_into(&input, dir.path(), &[]);
    let oracle: Vec<(&str, String)> = ["gfx1100", "gfx1030", "gfx942"]
        .into_iter()
        .map(|t| (t, bundler_sha256(&input, t, dir.path())))
        .collect();
    // It needs TheRock's libamdhip64.so.7: the stub answers to that name too.
    let hip7 = dir.path().join("hip7");
    std::fs::create_dir_all(&hip7).unwrap();
    let stub = crate::util::stub_hip(true);
    std::os::unix::fs::symlink(stub.join("libamdhip64.so.5"), hip7.join("libamdhip64.so.7"))
        .unwrap();
    let path = std::env::join_paths([hip7.as_path(), stub]).unwrap();
    // A Python extension: its Python symbols are stood in for (never
    // called; loading it only runs the HIP registration).
    let python = python_stand_in(&input, dir.path());
    for (tool, args) in STRIPPERS {
        let what = format!("_prng.so after {tool} {args:?}");
        let copy = stripped_copy(&bin, dir.path(), tool, args);
        verify_elf_passes(&copy, &[], &what);
        for (target, sha) in &oracle {
            let env = [
                ("LD_LIBRARY_PATH", path.as_os_str()),
                ("LD_PRELOAD", python.as_os_str()),
            ];
            let run = run_loading(&copy, target, &env);
            assert_eq!(run.code, Some(0), "{what} on {target}\n{}", run.log);
            assert_eq!(run.loads.len(), 1, "{what} on {target}\n{}", run.log);
            let Load::Ok { sha: got, .. } = &run.loads[0] else {
                panic!("{what} on {target}: {:?}\n{}", run.loads[0], run.log)
            };
            assert_eq!(got, sha, "{what} on {target}: not the bundler's object");
        }
    }
}
