//! Target ids as AMD's compiler for ROCm 10 spells them: `amdhsa.target`
//! with a four-field triple (`amdgcn-amd-amdhsa-unknown-gfx942`), and the
//! same spelling handed to `--gpu`, `--gpu-targets` and the runtime. Public
//! LLVM still writes `amdgcn-amd-amdhsa--`, so the code object is a clang
//! one with its metadata note respelled
//! ([`kpack_tests::with_four_field_target`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{FOUR_FIELD_PREFIX, fixture, stderr, stdout, with_four_field_target};

use crate::util::kpack;

/// `clang19/libaxpy_plain.so`'s gfx942 code object, respelled, in `dir`.
fn four_field_code_object(dir: &Path) -> PathBuf {
    let out = kpack([
        "extract".as_ref(),
        fixture("clang19/libaxpy_plain.so").as_os_str(),
        "--target".as_ref(),
        "gfx942".as_ref(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.join("axpy-gfx942.hsaco");
    std::fs::write(&path, with_four_field_target(&out.stdout)).unwrap();
    path
}

#[test]
fn inspect_strict_is_silent_on_a_four_field_amdhsa_target() {
    let dir = tempfile::tempdir().unwrap();
    let co = four_field_code_object(dir.path());
    // An independent reader agrees the rebuilt note is well formed and
    // carries the new spelling.
    if let Ok(o) = Command::new("llvm-readobj-22")
        .arg("--notes")
        .arg(&co)
        .output()
    {
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            text.contains(&format!("amdhsa.target:   {FOUR_FIELD_PREFIX}gfx942")),
            "{text}"
        );
    }
    let out = kpack(["inspect".as_ref(), "--strict".as_ref(), co.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!stderr(&out).contains("amdhsa.target"), "{}", stderr(&out));
    let out = kpack(["inspect".as_ref(), "--json".as_ref(), co.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("{FOUR_FIELD_PREFIX}gfx942")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn verify_gpu_and_target_lists_read_the_four_field_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let out = kpack([
        "offload".as_ref(),
        fixture("clang19/libaxpy_plain.so").as_os_str(),
        "-o".as_ref(),
        root.join("lib/libaxpy.so").as_os_str(),
        "--archives".as_ref(),
        root.join("lib/.kpack").as_os_str(),
        "--name".as_ref(),
        "axpy".as_ref(),
        "--gpu-targets".as_ref(),
        format!("{FOUR_FIELD_PREFIX}gfx942,hipv4-amdgcn-amd-amdhsa--gfx1100").as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(root.join("lib/.kpack/axpy_gfx942.kpack").exists());
    assert!(root.join("lib/.kpack/axpy_gfx1100.kpack").exists());
    assert!(!root.join("lib/.kpack/axpy_gfx1201.kpack").exists());
    for gpu in [
        "amdgcn-amd-amdhsa-unknown-gfx942",
        "amdgcn-amd-amdhsa-unknown-gfx942:sramecc+:xnack-",
        "amdgcn-amd-amdhsa--gfx942",
    ] {
        let out = kpack([
            "verify".as_ref(),
            "--gpu".as_ref(),
            gpu.as_ref(),
            root.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{gpu}: {}", stdout(&out));
        let text = stdout(&out);
        assert!(
            text.contains("libaxpy.so#0: lib/.kpack/axpy_gfx942.kpack as gfx942"),
            "{gpu}: {text}"
        );
        assert!(text.contains(", 0 missing for "), "{gpu}: {text}");
    }
}
