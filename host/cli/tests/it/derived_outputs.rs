//! Every path a command writes is checked against every input and every
//! other output, with or without `--force`: an archive, an extracted code
//! object or the host binary never lands on the input (or on each other).

use std::path::Path;

use kpack_tests::{fixture, sha256_hex, stderr};

use crate::util::kpack;

/// A fat library with gfx942 code, copied to `path`.
fn fat_copy(path: &Path) -> String {
    std::fs::copy(fixture("clang19/libaxpy_plain.so"), path).unwrap();
    sha256_hex(&std::fs::read(path).unwrap())
}

#[test]
fn offload_never_writes_an_archive_over_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path();
    // The input is named like the archive `--name lib` gives gfx942.
    let input = m.join("lib_gfx942.kpack");
    let before = fat_copy(&input);
    let o = kpack([
        "offload".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        m.join("out.so").as_os_str(),
        "--archives".as_ref(),
        m.as_os_str(),
        "--name".as_ref(),
        "lib".as_ref(),
        "--force".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("would replace"), "{}", stderr(&o));
    assert_eq!(sha256_hex(&std::fs::read(&input).unwrap()), before);
    assert!(!m.join("out.so").exists());
}

#[test]
fn offload_never_writes_an_archive_over_its_host_output() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path();
    let input = m.join("in.so");
    fat_copy(&input);
    let out = m.join("arch/lib_gfx942.kpack");
    let o = kpack([
        "offload".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--archives".as_ref(),
        m.join("arch").as_os_str(),
        "--name".as_ref(),
        "lib".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("would replace"), "{}", stderr(&o));
    assert!(!out.exists(), "an output was left behind");
}

#[test]
fn extract_never_writes_a_code_object_over_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // Named like the file `--target gfx942` writes for bundle 0.
    let input = d.join("bundle0-gfx942.hsaco");
    let before = fat_copy(&input);
    let o = kpack([
        "extract".as_ref(),
        input.as_os_str(),
        "--target".as_ref(),
        "gfx942".as_ref(),
        "-o".as_ref(),
        d.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(sha256_hex(&std::fs::read(&input).unwrap()), before);
}

#[test]
fn a_failed_prune_removes_the_directories_it_created() {
    let tmp = tempfile::tempdir().unwrap();
    // The directory is created, then the rename onto a name longer than
    // any file system allows fails.
    let new_dir = tmp.path().join("new/deeper");
    let out = new_dir.join("x".repeat(300));
    let o = crate::util::kpack_prune(&fixture("clang19/libaxpy_plain.so"), &out, "gfx942", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!tmp.path().join("new").exists(), "{}", stderr(&o));
}
