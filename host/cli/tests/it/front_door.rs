//! Every command takes every host format `kpack offload` takes: split and
//! verify handle aarch64 ELF and PE images like x86-64 ELF, and prune says
//! in one line what it does with a PE image.

use std::path::Path;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::{kpack, kpack_prune};

/// `kpack verify --json DIR`.
fn verify_json(dir: &Path) -> (Option<i32>, serde_json::Value) {
    let o = kpack(["verify".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    let v = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (o.status.code(), v)
}

/// An artifact whose `stage` holds an x86-64 and an aarch64 shared library
/// and a Windows DLL, each fat.
fn mixed_artifact(art: &Path) {
    crate::util::artifact_with_library(art, fixture("clang19/libaxpy_ccob.so"), "libx86.so");
    let lib = art.join("stage/lib");
    std::fs::copy(
        fixture("clang19/libaxpy_aarch64_ccob.so"),
        lib.join("libarm.so"),
    )
    .unwrap();
    std::fs::create_dir_all(art.join("stage/bin")).unwrap();
    std::fs::copy(fixture("pe/dll_2tu.dll"), art.join("stage/bin/k.dll")).unwrap();
}

/// [`mixed_artifact`] split into `tmp/out`, which is returned.
fn split_mixed(tmp: &Path) -> std::path::PathBuf {
    let art = tmp.join("blas_lib");
    mixed_artifact(&art);
    let out = tmp.join("out");
    let o = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

/// The wrappers of `bin` as `kpack inspect --json` shows them.
fn wrapper_magics(bin: &Path) -> Vec<String> {
    let o = kpack(["inspect".as_ref(), "--json".as_ref(), bin.as_os_str()]);
    // 1: the generic artifact alone has none of the archives its markers
    // name (a finding of the listing through the marker).
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["files"][0]["wrappers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["magic"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn split_offloads_aarch64_and_pe_binaries_like_x86_64_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_mixed(tmp.path());
    let generic = out.join("blas_generic/stage");
    for bin in ["lib/libx86.so", "lib/libarm.so", "bin/k.dll"] {
        let magics = wrapper_magics(&generic.join(bin));
        assert!(
            !magics.is_empty() && magics.iter().all(|m| m == "HIPK"),
            "{bin}: {magics:?}"
        );
    }
    let (code, v) = verify_json(&out);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["report"]["binaries"], 3, "{v}");
    assert_eq!(v["errors"], 0, "{v}");
    assert_eq!(v["report"]["resolved"], 9, "{v}");
}

#[test]
fn verify_reports_missing_archives_of_a_pe_image_as_for_elf() {
    let tmp = tempfile::tempdir().unwrap();
    let out = split_mixed(tmp.path());
    // Delete the DLL's archives (and only those) from every arch artifact.
    let mut removed = 0;
    for e in walkdir::WalkDir::new(&out) {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy();
        if name.ends_with(".kpack") && name.contains("k.dll") {
            std::fs::remove_file(e.path()).unwrap();
            removed += 1;
        }
    }
    assert!(removed > 0, "no archive of k.dll was written");
    let (code, v) = verify_json(&out);
    assert_eq!(code, Some(1), "{v}");
    let text = v.to_string();
    assert!(text.contains("k.dll#"), "{v}");
}

#[test]
fn prune_says_in_one_line_that_pe_images_cannot_be_pruned_yet() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k.dll");
    let o = kpack_prune(&fixture("pe/dll_2tu.dll"), &out, "gfx1100", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("PE images (DLL, EXE) cannot be pruned yet"),
        "{err}"
    );
    assert!(!out.exists());
}
