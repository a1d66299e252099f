//! Inputs and environments kpack refuses cleanly (exit 2 and a sentence)
//! instead of panicking or reporting success.

use std::process::{Command, Stdio};

use kpack_tests::{fixture, stderr};

use crate::util::{KPACK, kpack, offload_into};

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let lib = fixture("corpus/libaxpy_2arch.so");
    let out = Command::new(KPACK)
        .args(["inspect".as_ref(), lib.as_os_str()])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("error: cannot write to stdout") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn hipk_wrappers_without_a_marker_are_refused_not_taken_for_offloaded() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload_into(&fixture("corpus/libaxpy_2arch.so"), dir.path(), &[]);
    // Rename the marker section (same length) so that only the HIPK
    // wrappers remain.
    let mut bytes = std::fs::read(&bin).unwrap();
    let name = b".rocm_kpack_ref\0";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("marker section name");
    bytes[at + 1] = b'X';
    let damaged = dir.path().join("damaged.so");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = kpack([
        "offload".as_ref(),
        damaged.as_os_str(),
        "-o".as_ref(),
        dir.path().join("again.so").as_os_str(),
        "--archives".as_ref(),
        dir.path().join("again").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no .rocm_kpack_ref marker section"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("again.so").exists());
}
