//! Inputs with no device code to move: separated debug files
//! (`objcopy --only-keep-debug`, whose `.hip_fatbin` is `SHT_NOBITS`) are
//! host files without device code for offload, split, verify and wheel
//! split; a library whose compressed bundle is smaller than a page is
//! offloaded, and the report says why its device code stayed in the
//! file's pages. Portable SPIR-V in a wheel gets a device wheel of its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::kpack;
use crate::wheel::{build_fat_wheel, fat_files, kpack_env, read_wheel};

/// `objcopy --only-keep-debug` of `fixture` into `dir`.
fn debug_file(fixture_name: &str, dir: &Path) -> PathBuf {
    let out = dir.join("libaxpy.so.debug");
    let o = Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(fixture(fixture_name))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn separated_debug_files_are_host_files_without_device_code() {
    let tmp = tempfile::tempdir().unwrap();
    let dbg = debug_file("clang22/libaxpy_plain.so", tmp.path());
    let out = kpack(["inspect".as_ref(), "--strict".as_ref(), dbg.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no device code"), "{}", stdout(&out));

    let out = kpack([
        "offload".as_ref(),
        dbg.as_os_str(),
        "-o".as_ref(),
        tmp.path().join("out.debug").as_os_str(),
        "--archives".as_ref(),
        tmp.path().join(".kpack").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!tmp.path().join(".kpack").exists());

    // In an artifact beside the library it was split from.
    let art = tmp.path().join("blas_lib_gfx94X");
    crate::util::artifact_with_library(&art, fixture("clang22/libaxpy_plain.so"), "libaxpy.so");
    std::fs::create_dir_all(art.join("stage/lib/.debug")).unwrap();
    std::fs::copy(&dbg, art.join("stage/lib/.debug/libaxpy.so.debug")).unwrap();
    let split = tmp.path().join("split");
    let out = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        split.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(split.join("blas_lib_generic/stage/lib/.debug/libaxpy.so.debug")).unwrap(),
        std::fs::read(&dbg).unwrap(),
        "the debug file is copied unchanged"
    );
    let out = crate::util::verify_passes(&split);
    assert!(stdout(&out).contains(" 0 errors"), "{}", stdout(&out));
}

#[test]
fn wheel_split_keeps_debug_files_on_the_host_and_gives_spirv_its_own_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let dbg = debug_file("clang22/libaxpy_plain.so", tmp.path());
    let mut files = fat_files();
    let dbg_bytes = std::fs::read(&dbg).unwrap();
    files.insert(
        "fatpkg/lib/.debug/libaxpy.so.debug".into(),
        (dbg_bytes.clone(), 0o644),
    );
    files.insert(
        "fatpkg/lib/libspirv.so".into(),
        (
            std::fs::read(fixture("clang22/libaxpy_spirv.so")).unwrap(),
            0o755,
        ),
    );
    let input = build_fat_wheel(tmp.path(), &files);
    let out_dir = tmp.path().join("out");
    let args = [
        "wheel".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
    ];
    let o = kpack_env(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let host = read_wheel(&out_dir.join(crate::wheel::WHEEL));
    assert_eq!(host["fatpkg/lib/.debug/libaxpy.so.debug"].0, dbg_bytes);
    let spirv = out_dir.join("fatpkg_device_amdgcnspirv-1.0-py3-none-linux_x86_64.whl");
    let spirv = read_wheel(&spirv);
    assert!(
        spirv
            .keys()
            .any(|k| k.ends_with("libspirv.so_amdgcnspirv.kpack")),
        "{:?}",
        spirv.keys()
    );
}

#[test]
fn a_bundle_smaller_than_a_page_says_its_device_code_stayed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = kpack([
        "offload".as_ref(),
        fixture("clang22/libaxpy_small.so").as_os_str(),
        "-o".as_ref(),
        tmp.path().join("libaxpy_small.so").as_os_str(),
        "--archives".as_ref(),
        tmp.path().join(".kpack").as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["result"]["transform"];
    assert_eq!(t["layout"], "shared-page", "{v}");
    assert_eq!(t["bytes_removed"], 0, "{v}");
    let notes = t["layout_notes"].as_array().unwrap();
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("holds no whole 4096-byte page, so no page can leave the file; its device code stays in the file's pages"),
        "{notes:?}"
    );
    let out = kpack([
        "offload".as_ref(),
        fixture("clang22/libaxpy_small.so").as_os_str(),
        "-o".as_ref(),
        tmp.path().join("again.so").as_os_str(),
        "--archives".as_ref(),
        tmp.path().join(".kpack2").as_os_str(),
    ]);
    assert!(
        stdout(&out).contains("  in-place refused: .hip_fatbin (1733 bytes at 0x3000)"),
        "{}",
        stdout(&out)
    );
    // A plain library frees its pages and says nothing more.
    let out = kpack([
        "offload".as_ref(),
        fixture("clang22/libaxpy_plain.so").as_os_str(),
        "-o".as_ref(),
        tmp.path().join("plain.so").as_os_str(),
        "--archives".as_ref(),
        tmp.path().join(".kpack3").as_os_str(),
        "--json".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["result"]["transform"]["layout_notes"].is_null(), "{v}");
}
