//! Instrumented builds survive kpack: `clang19/libaxpy_profile.so` carries
//! LLVM's profile runtime in its host code (`build-profile.sh`). Offloaded
//! (loaded through the marker by kpack's runtime under the loading stub)
//! and pruned (the stub runs the kept bundle), the program that calls it
//! exits 0, the library writes its `.profraw` at exit (reading the program
//! headers through `__ehdr_start`), and `llvm-profdata-19 merge` accepts
//! the profile with the library's functions in it.

use std::path::Path;
use std::process::Command;

use kpack_tests::{fixture, stderr, stub_command};

use crate::runtime_e2e::{Load, run_loading};
use crate::util::{kpack_prune, offload_into, stub_hip};

/// `llvm-profdata-19 merge` of every `.profraw` in `dir`: it must succeed
/// and the merged profile name the library's host function.
fn assert_profile_merges(dir: &Path) {
    let raws: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "profraw"))
        .collect();
    assert_eq!(raws.len(), 1, "one .profraw in {}", dir.display());
    let merged = dir.join("merged.profdata");
    let out = Command::new("llvm-profdata-19")
        .arg("merge")
        .arg("-o")
        .arg(&merged)
        .args(&raws)
        .output()
        .unwrap();
    assert!(out.status.success(), "merge: {}", stderr(&out));
    let out = Command::new("llvm-profdata-19")
        .args(["show", "--all-functions"])
        .arg(&merged)
        .output()
        .unwrap();
    assert!(out.status.success(), "show: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("corpus_run_axpy"), "{text}");
}

#[test]
fn an_offloaded_instrumented_library_runs_and_writes_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture("clang19/libaxpy_profile.so");
    offload_into(&lib, dir.path(), &[]);
    let exe = dir.path().join("exe_axpy_profile");
    std::fs::copy(fixture("clang19/exe_axpy_profile"), &exe).unwrap();
    let profile = dir.path().join("%p.profraw");
    let run = run_loading(
        &exe,
        "gfx1100",
        &[("LLVM_PROFILE_FILE", profile.as_os_str())],
    );
    assert_eq!(run.code, Some(0), "{}", run.log);
    assert_eq!(run.fatbins, 1, "{}", run.log);
    assert!(
        matches!(run.loads.as_slice(), [Load::Ok { co: 0, .. }]),
        "{}",
        run.log
    );
    assert_profile_merges(dir.path());
}

#[test]
fn a_pruned_instrumented_library_runs_and_writes_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture("clang19/libaxpy_profile.so");
    let out = kpack_prune(&lib, &dir.path().join("libaxpy_profile.so"), "gfx1100", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exe = dir.path().join("exe_axpy_profile");
    std::fs::copy(fixture("clang19/exe_axpy_profile"), &exe).unwrap();
    let log = dir.path().join("stub.log");
    let out = stub_command(stub_hip(false), &exe)
        .env("KPACK_STUB_LOG", &log)
        .env("KPACK_STUB_ARCHS", "gfx1100")
        .env("LLVM_PROFILE_FILE", dir.path().join("%p.profraw"))
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("fatbin HIPF"), "{text}");
    assert!(text.contains("launch"), "{text}");
    assert_profile_merges(dir.path());
}
