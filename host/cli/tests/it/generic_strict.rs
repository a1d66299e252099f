//! Generic (`gfx11-generic`) and `-strict` (`gfx1250-strict`) targets end
//! to end: inspect, offload (archive file name and TOC arch), split, and
//! the runtime's target matching under the loading stub HIP runtime.

use std::path::{Path, PathBuf};

use kpack_bundle::{WalkOptions, walk, write_bundle};
use kpack_tests::{fixture, sha256_hex, stderr, stdout};
use object::{Object, ObjectSection};

use crate::runtime_e2e::{
    KPACK_ERROR_ARCH_NOT_FOUND, KPACK_ERROR_ARCHIVE_NOT_FOUND, Load, run_loading,
};
use crate::util::kpack;

/// `(sha256, size)` of `file`'s `target` object in clang19/ORACLE.tsv
/// (clang-offload-bundler-19's listing, checked against the raw entry).
fn clang19_oracle(file: &str, target: &str) -> (String, usize) {
    let tsv = std::fs::read_to_string(fixture("clang19/ORACLE.tsv")).unwrap();
    let want = format!("hipv4-amdgcn-amd-amdhsa--{target}");
    tsv.lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|f| f[0] == file && f[2] == want)
        .map(|f| (f[4].to_owned(), f[3].parse().unwrap()))
        .unwrap_or_else(|| panic!("clang19/ORACLE.tsv has no {file} {target}"))
}

fn offload(input: &Path, dir: &Path) -> PathBuf {
    crate::util::offload_into(input, dir, &[])
}

/// Every load of a run for `archs` must have returned `(sha, size)`.
fn assert_loaded(bin: &Path, archs: &str, want: &(String, usize)) {
    let run = run_loading(bin, archs, &[]);
    assert_eq!(run.code, Some(0), "{archs}: exit\n{}", run.log);
    assert!(!run.loads.is_empty(), "{archs}: no loads\n{}", run.log);
    for l in &run.loads {
        match l {
            Load::Ok { sha, size, .. } => {
                assert_eq!((sha, size), (&want.0, &want.1), "{archs}\n{}", run.log)
            }
            other => panic!("{archs}: {other:?}\n{}", run.log),
        }
    }
}

fn assert_load_error(bin: &Path, archs: &str, code: i32, env: &[(&str, &std::ffi::OsStr)]) {
    let run = run_loading(bin, archs, env);
    assert_eq!(run.code, Some(0), "{archs}: exit\n{}", run.log);
    assert!(!run.loads.is_empty(), "{archs}: no loads\n{}", run.log);
    for l in &run.loads {
        assert!(
            matches!(l, Load::Err { code: c, .. } if *c == code),
            "{archs}: expected error {code}, got {l:?}\n{}",
            run.log
        );
    }
}

#[test]
fn gfx1101_device_reaches_gfx11_generic_through_clrs_fallback_list() {
    let name = "libaxpy_generic.so";
    let dir = tempfile::tempdir().unwrap();
    let bin = offload(&fixture(&format!("clang19/{name}")), dir.path());
    // Stored under the generic target id itself: one archive per generic
    // processor, the TOC arch spelled as the bundle entry spells it.
    let archive = dir
        .path()
        .join(".kpack/libaxpy_generic_gfx11-generic.kpack");
    let list = kpack(["archive".as_ref(), "list".as_ref(), archive.as_os_str()]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stdout(&list).contains("gfx11-generic"), "{}", stdout(&list));

    // CLR passes the native ISA first, then its generic fallback.
    let generic11 = clang19_oracle(name, "gfx11-generic");
    assert_loaded(&bin, "gfx1101,gfx11-generic", &generic11);
    assert_loaded(
        &bin,
        "amdgcn-amd-amdhsa--gfx1151,amdgcn-amd-amdhsa--gfx11-generic",
        &generic11,
    );
    // A native object wins over the generic one when both are shipped.
    assert_loaded(
        &bin,
        "gfx1100,gfx11-generic",
        &clang19_oracle(name, "gfx1100"),
    );
    assert_loaded(
        &bin,
        "gfx1201,gfx12-generic",
        &clang19_oracle(name, "gfx12-generic"),
    );
    // Feature suffixes CLR copies onto the fallback fall back to the
    // featureless generic object (its xnack is "any").
    assert_loaded(
        &bin,
        "gfx906:sramecc+:xnack-,gfx9-generic:sramecc+:xnack-",
        &clang19_oracle(name, "gfx9-generic"),
    );
    // kpack does not derive generic targets itself: without CLR's
    // fallback in the list, a gfx1101 device has no archive.
    assert_load_error(&bin, "gfx1101", KPACK_ERROR_ARCHIVE_NOT_FOUND, &[]);
}

/// Inspect a fixture's `.hip_fatbin`: (file offset, size).
fn fatbin_range(elf: &[u8]) -> (usize, usize) {
    let file = object::File::parse(elf).unwrap();
    let s = file.section_by_name(".hip_fatbin").unwrap();
    let (off, size) = s.file_range().unwrap();
    (off as usize, size as usize)
}

/// clang-19 cannot emit `-strict` targets, so craft one: clang19's
/// libaxpy_plain.so with its gfx1201 entry turned into a gfx1250-strict
/// object (bundle id `…--gfx1250-strict`, `EF_AMDGPU_MACH` gfx1250 (0x049),
/// `amdhsa.target` gfx1250), the bundle rewritten by kpack-bundle's writer
/// in place of the old one. Returns the library and the crafted object.
fn strict_library(dir: &Path) -> (PathBuf, Vec<u8>) {
    let mut elf = std::fs::read(fixture("clang19/libaxpy_plain.so")).unwrap();
    let (off, size) = fatbin_range(&elf);
    let section = elf[off..off + size].to_vec();
    let items: Vec<_> = walk(&section, 0, size as u64, WalkOptions::default())
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(items.len(), 1);
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut strict = Vec::new();
    for (i, e) in items[0].entries.iter().enumerate() {
        let mut bytes = items[0].read_entry(&section, i).unwrap();
        let mut id = e.id.raw().to_owned();
        if let Some(head) = id.strip_suffix("gfx1201") {
            id = format!("{head}gfx1250-strict");
            let flags = u32::from_le_bytes(bytes[48..52].try_into().unwrap());
            bytes[48..52].copy_from_slice(&((flags & !0xff) | 0x049).to_le_bytes());
            let (from, to) = (b"amdgcn-amd-amdhsa--gfx1201", b"amdgcn-amd-amdhsa--gfx1250");
            let at = bytes
                .windows(from.len())
                .position(|w| w == from)
                .expect("amdhsa.target in the metadata note");
            bytes[at..at + to.len()].copy_from_slice(to);
            strict = bytes.clone();
        }
        entries.push((id, bytes));
    }
    assert!(!strict.is_empty(), "libaxpy_plain.so has no gfx1201 entry");
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(i, b)| (i.as_str(), b.as_slice()))
        .collect();
    let bundle = write_bundle(&refs, 4096);
    assert!(bundle.len() <= size, "{} > {size}", bundle.len());
    elf[off..off + size].fill(0);
    elf[off..off + bundle.len()].copy_from_slice(&bundle);
    let path = dir.join("libstrict.so");
    std::fs::write(&path, elf).unwrap();
    (path, strict)
}

#[test]
fn strict_target_keeps_its_identity_through_inspect_offload_split_and_loading() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, strict) = strict_library(dir.path());
    let want = (sha256_hex(&strict), strict.len());

    // inspect: the entry and the totals name gfx1250-strict; the object's
    // gfx1250 mach value is what a strict object carries, so no warning.
    let out = kpack(["inspect".as_ref(), "--strict".as_ref(), lib.as_os_str()]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("hipv4-amdgcn-amd-amdhsa--gfx1250-strict"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("gfx1250-strict ")),
        "totals per target must keep -strict:\n{text}"
    );

    // offload: its own archive, its own TOC arch.
    let out_dir = dir.path().join("out");
    let bin = offload(&lib, &out_dir);
    let archives: Vec<String> = std::fs::read_dir(out_dir.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        archives.contains(&"libstrict_gfx1250-strict.kpack".to_owned()),
        "{archives:?}"
    );
    assert!(
        !archives.iter().any(|a| a.ends_with("_gfx1250.kpack")),
        "{archives:?}"
    );
    let archive = out_dir.join(".kpack/libstrict_gfx1250-strict.kpack");
    let list = kpack([
        "archive".as_ref(),
        "list".as_ref(),
        "--json".as_ref(),
        archive.as_os_str(),
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    let arches: Vec<&str> = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["arch"].as_str().unwrap())
        .collect();
    assert_eq!(arches, ["gfx1250-strict"], "{json}");

    // The runtime: a gfx1250-strict device loads the strict object; a plain
    // gfx1250 device finds no gfx1250 archive, and even pointed at the
    // strict archive it is not served by it (AMD keeps them distinct).
    assert_loaded(&bin, "gfx1250-strict", &want);
    assert_load_error(&bin, "gfx1250", KPACK_ERROR_ARCHIVE_NOT_FOUND, &[]);
    assert_load_error(
        &bin,
        "gfx1250",
        KPACK_ERROR_ARCH_NOT_FOUND,
        &[("ROCM_KPACK_PATH", archive.as_os_str())],
    );

    // split (artifact `strict_lib`: component `strict`, family `lib`): an
    // arch artifact of its own.
    let art = dir.path().join("art/strict_lib");
    crate::util::artifact_with_library(&art, &lib, "libstrict.so");
    let split_out = dir.path().join("split");
    let out = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        split_out.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(split_out.join("strict_gfx1250-strict").is_dir());
    assert!(!split_out.join("strict_gfx1250").exists());
    let out = kpack(["verify".as_ref(), split_out.as_os_str()]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn verify_counts_a_generic_archive_as_serving_every_processor_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("art/axpy_lib");
    crate::util::artifact_with_library(&art, fixture("clang19/libaxpy_generic.so"), "libaxpy.so");
    let split_out = dir.path().join("split");
    let out = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        split_out.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for g in [
        "gfx9-generic",
        "gfx10-3-generic",
        "gfx11-generic",
        "gfx12-generic",
    ] {
        assert!(split_out.join(format!("axpy_{g}")).is_dir(), "{g}");
    }

    // Each generic arch artifact, flattened with the generic one, serves
    // every processor of its generic target: gfx9-generic 6, gfx10-3 7,
    // gfx11 8, gfx12 2 (one key).
    let out = kpack(["verify".as_ref(), split_out.as_os_str(), "--json".as_ref()]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(out.status.success(), "{v}");
    assert_eq!(v["report"]["generic_served"], 23, "{v}");
    let out = kpack(["verify".as_ref(), split_out.as_os_str()]);
    assert!(
        stdout(&out).contains("(23 more through a generic target)"),
        "{}",
        stdout(&out)
    );

    // Installed together, gfx1100 has its own object, so the generic
    // gfx11 archive serves the 7 other gfx11 processors.
    let install = dir.path().join("install");
    for a in std::fs::read_dir(&split_out).unwrap() {
        let st = a.unwrap().path().join("stage");
        let cp = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", st.display()))
            .arg(&install)
            .status()
            .unwrap();
        assert!(cp.success());
    }
    let out = kpack(["verify".as_ref(), install.as_os_str(), "--json".as_ref()]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(out.status.success(), "{v}");
    assert_eq!(v["report"]["generic_served"], 22, "{v}");
    assert_eq!(v["report"]["resolved"], 5, "{v}");
}
