//! Side by side with AMD's wheel splitter: the fat wheels of
//! `tests/fixtures/amd-wheel/*.tsv` split by `kpack wheel split` with the
//! arguments AMD's `python -m rocm_kpack.tools.split_python_wheels` took
//! (`cases.json`: TheRock's invocations, and a variant-wheel one), compared
//! with what AMD's splitter wrote for the same input
//! (`reference/<case>.json`, made by `scripts/amd-wheel-reference.sh`):
//! wheel file names, member paths and modes, dist-info files line by line,
//! the bytes of every member copied through, every archive's entries (TOC
//! key, arch) as `kpack archive list` gives them with each code object's
//! sha256, the compression scheme, and each host binary's marker.
//!
//! Where kpack differs on purpose, the comparison says so by name:
//! - [`DIFF_GENERATOR`]: a device wheel's `WHEEL` names its generator;
//! - [`DIFF_BYTES`]: host binaries, archives and RECORDs are compared by
//!   content (marker, entries, code-object digests), not bytes: kpack's
//!   transform and archive writer lay bytes out their own way, and AMD's
//!   archive bytes vary with `-j` (workers append kernels as they finish);
//! - [`DIFF_LEFTOVERS`]: kpack leaves only the wheels in the output
//!   directory (AMD leaves its `.kpack_staging` directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_bundle::{ReadAt, WalkOptions};
use kpack_format::{Archive, Marker};
use kpack_tests::{fixture, sha256_hex, stderr, stdout};
use serde_json::Value;

use crate::wheel::kpack_env;

/// `WHEEL`'s `Generator:` line is not compared.
const DIFF_GENERATOR: &str = "Generator:";
/// Members whose bytes are not compared, only their content.
const DIFF_BYTES: &str = "host binaries, archives and RECORD are compared by content";
/// What AMD leaves beside the wheels and kpack does not.
const DIFF_LEFTOVERS: &str = ".kpack_staging";

type Members = BTreeMap<String, (Vec<u8>, u32)>;

fn amd_dir() -> PathBuf {
    fixture("amd-wheel")
}

fn load(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(amd_dir().join(rel)).unwrap()).unwrap()
}

/// The fat wheel a `.tsv` describes, with a correct RECORD.
fn build_tsv_wheel(tsv: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(amd_dir().join(tsv)).unwrap();
    let mut name = String::new();
    let mut members: Members = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let f: Vec<&str> = line.split('\t').collect();
        if f[0] == "wheel" {
            name = f[1].to_string();
            continue;
        }
        let bytes = match f[2].split_once(':').unwrap() {
            ("fixture", p) => std::fs::read(fixture(p)).unwrap(),
            ("text", t) => t.replace("\\n", "\n").into_bytes(),
            (k, _) => panic!("{tsv}: source kind {k}"),
        };
        members.insert(
            f[0].to_string(),
            (bytes, u32::from_str_radix(f[1], 8).unwrap()),
        );
    }
    let dist_info = members
        .keys()
        .find_map(|p| {
            p.split_once(".dist-info/")
                .map(|(d, _)| format!("{d}.dist-info"))
        })
        .unwrap();
    let path = dir.join(&name);
    let entries = members
        .iter()
        .map(|(p, (b, m))| (p.as_str(), b.as_slice(), *m));
    crate::util::write_wheel(&path, &dist_info, entries);
    path
}

/// Split the case's wheel with kpack, AMD's arguments unchanged; the output
/// directory.
fn split_case(case: &Value, tmp: &Path) -> PathBuf {
    let input = build_tsv_wheel(case["wheel"].as_str().unwrap(), tmp);
    let out = tmp.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut args: Vec<String> = vec!["wheel".into(), "split".into()];
    for a in case["args"].as_array().unwrap() {
        let a = a.as_str().unwrap();
        args.push(
            a.replace("{input}", input.to_str().unwrap())
                .replace("{output}", out.to_str().unwrap()),
        );
    }
    let o = kpack_env(&args, &[]);
    assert!(
        o.status.success(),
        "kpack {}\n{}{}",
        args.join(" "),
        stdout(&o),
        stderr(&o)
    );
    out
}

fn lines_of(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn json_lines(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// Compare the dist-info text files (not RECORD).
fn compare_dist_info(wheel: &str, want: &Value, got: &Members) {
    for (file, want_lines) in want.as_object().unwrap() {
        let entry = got
            .iter()
            .find(|(p, _)| p.split_once(".dist-info/").is_some_and(|(_, f)| f == file))
            .unwrap_or_else(|| panic!("{wheel}: no dist-info/{file}"));
        let mut want_lines = json_lines(want_lines);
        let mut got_lines = lines_of(&entry.1.0);
        if file == "WHEEL" {
            want_lines.retain(|l| !l.starts_with(DIFF_GENERATOR));
            got_lines.retain(|l| !l.starts_with(DIFF_GENERATOR));
        }
        // The references predate AMD's splitter requiring rocm-bootstrap
        // >= 0.3.0 (its provider and ownership data); kpack writes the newer line.
        for l in want_lines
            .iter_mut()
            .filter(|l| *l == "Requires-Dist: rocm-bootstrap")
        {
            *l = "Requires-Dist: rocm-bootstrap >= 0.3.0".into();
        }
        assert_eq!(got_lines, want_lines, "{wheel}: dist-info/{file}");
    }
}

/// An archive's entries as `kpack archive list --json` gives them, each with
/// its code object's size and sha256, against AMD's reader's listing.
fn compare_archive(wheel: &str, path: &str, want: &Value, bytes: &[u8], tmp: &Path) {
    let file = tmp.join("listed.kpack");
    std::fs::write(&file, bytes).unwrap();
    let o = kpack_env(&["archive", "list", "--json", file.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{wheel}: {path}: {}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let archive = Archive::open(&file).unwrap();
    let mut got = Vec::new();
    for e in listed["entries"].as_array().unwrap() {
        let (key, arch) = (e["key"].as_str().unwrap(), e["arch"].as_str().unwrap());
        let code = archive.get(key, arch).unwrap();
        got.push(serde_json::json!({
            "key": key, "arch": arch, "size": code.len(), "sha256": sha256_hex(&code),
        }));
    }
    got.sort_by_key(|k| (k["key"].to_string(), k["arch"].to_string()));
    assert_eq!(
        got,
        want["kernels"].as_array().unwrap().clone(),
        "{wheel}: {path}"
    );
    for field in [
        "compression_scheme",
        "group_name",
        "gfx_arch_family",
        "gfx_arches",
    ] {
        assert_eq!(listed[field], want[field], "{wheel}: {path}: {field}");
    }
}

/// A host binary's marker: kernel name and search paths, as AMD wrote them.
fn compare_marker(wheel: &str, path: &str, want: &Value, bytes: &[u8], tmp: &Path) {
    let file = tmp.join("marked.so");
    std::fs::write(&file, bytes).unwrap();
    let fat = kpack_elf::read_fat_binary(&file, WalkOptions { verify_hash: true }).unwrap();
    let sec = fat
        .marker
        .unwrap_or_else(|| panic!("{wheel}: {path}: no marker"));
    let mut raw = vec![0u8; sec.size as usize];
    fat.source.read_exact_at(sec.offset, &mut raw).unwrap();
    let m = Marker::parse(&raw).unwrap();
    assert_eq!(m.kernel_name, want["kernel_name"], "{wheel}: {path}");
    assert_eq!(
        m.search_paths,
        json_lines(&want["kpack_search_paths"]),
        "{wheel}: {path}"
    );
}

fn compare_wheel(wheel: &str, want: &Value, got: &Members, tmp: &Path) {
    let want_members: Vec<(String, String)> = want["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().into(),
                m["mode"].as_str().unwrap().into(),
            )
        })
        .collect();
    let got_members: Vec<(String, String)> = got
        .iter()
        .map(|(p, (_, m))| (p.clone(), format!("{m:o}")))
        .collect();
    assert_eq!(got_members, want_members, "{wheel}: members and modes");
    compare_dist_info(wheel, &want["dist_info"], got);
    let archives = want["archives"].as_object().unwrap();
    let markers = want["markers"].as_object().unwrap();
    for m in want["members"].as_array().unwrap() {
        let path = m["path"].as_str().unwrap();
        let bytes = &got[path].0;
        if let Some(a) = archives.get(path) {
            compare_archive(wheel, path, a, bytes, tmp);
        } else if let Some(mk) = markers.get(path) {
            compare_marker(wheel, path, mk, bytes, tmp);
        } else if !path.ends_with(".dist-info/RECORD") && !path.ends_with(".dist-info/METADATA") {
            // Copied through (or written by both as the same text): same bytes.
            assert_eq!(
                sha256_hex(bytes),
                m["sha256"],
                "{wheel}: {path} ({DIFF_BYTES})"
            );
        }
    }
}

/// Split the case with kpack and compare everything with AMD's reference.
fn side_by_side(case_name: &str) {
    let cases = load("cases.json");
    let reference = load(&format!("reference/{case_name}.json"));
    assert_eq!(
        cases[case_name]["args"], reference["args"],
        "{case_name}: stale reference"
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = split_case(&cases[case_name], tmp.path());
    let want = reference["outputs"].as_object().unwrap();
    let mut got_names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    got_names.sort();
    let want_names: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        got_names, want_names,
        "{case_name}: output files ({DIFF_LEFTOVERS})"
    );
    for (name, w) in want {
        compare_wheel(
            name,
            w,
            &crate::wheel::read_wheel(&out.join(name)),
            tmp.path(),
        );
    }
}

#[test]
fn therock_linux_torch_matches_amd() {
    side_by_side("therock-linux-torch");
}

#[test]
fn therock_linux_torchvision_matches_amd() {
    side_by_side("therock-linux-torchvision");
}

#[test]
fn therock_windows_torch_matches_amd() {
    side_by_side("therock-windows-torch");
}

#[test]
fn therock_windows_torchvision_matches_amd() {
    side_by_side("therock-windows-torchvision");
}

#[test]
fn variant_wheel_uncompressed_matches_amd() {
    side_by_side("variant-uncompressed");
}

#[test]
fn every_case_has_a_test_and_a_reference() {
    let cases = load("cases.json");
    let this = include_str!("wheel_amd_reference.rs");
    for name in cases.as_object().unwrap().keys() {
        assert!(
            amd_dir().join(format!("reference/{name}.json")).is_file(),
            "{name}: no reference"
        );
        assert!(
            this.contains(&format!("side_by_side(\"{name}\")")),
            "{name}: no test"
        );
    }
}

#[test]
fn a_variant_label_installers_cannot_read_is_refused_before_anything_is_written() {
    let cases = load("cases.json");
    let tmp = tempfile::tempdir().unwrap();
    let input = build_tsv_wheel(
        cases["variant-uncompressed"]["wheel"].as_str().unwrap(),
        tmp.path(),
    );
    let out = tmp.path().join("out");
    let o = kpack_env(
        &[
            "wheel",
            "split",
            "--input",
            input.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--device-package-prefix",
            "amd-torch-device",
            "--overlay-root",
            "torch/",
            "--generate-variant-wheel",
            "--variant-label",
            "AMD-1",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("variant label \"AMD-1\""),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "nothing is written");
}
