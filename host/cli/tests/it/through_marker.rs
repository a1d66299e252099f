//! `kpack inspect` and `kpack extract` of a host-only binary follow its
//! marker as the loader does: on every fixture, the offloaded binary lists
//! and extracts exactly what its fat original does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kpack_tests::{fixture, stderr, stdout};
use serde_json::Value;

use crate::util::{kpack, offload_into};

/// (bundle / code-object index, target, size, sha256) of one code object.
type Row = (u64, String, u64, String);

/// Every fixture host binary (ELF and PE) with device code: each oracle's
/// files but relocatable objects, static archives and bundle files.
fn host_fixtures() -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    for set in ["corpus", "clang19", "clang22", "pe"] {
        let tsv = std::fs::read_to_string(fixture(&format!("{set}/ORACLE.tsv"))).unwrap();
        for line in tsv.lines().skip(1) {
            let file = line.split('\t').next().unwrap();
            let linked = (file.starts_with("lib") && file.ends_with(".so"))
                || (file.starts_with("exe_") && !file.contains('.'))
                || file.ends_with(".dll")
                || file.ends_with(".exe");
            if linked {
                out.insert(fixture(&format!("{set}/{file}")));
            }
        }
    }
    out.into_iter().collect()
}

fn inspect_json(path: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args: Vec<std::ffi::OsString> = vec!["inspect".into(), "--json".into()];
    args.extend(extra.iter().map(Into::into));
    args.push(path.into());
    let out = kpack(args);
    let doc: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{}: {e}: {}", path.display(), stderr(&out)));
    (out.status.code(), doc["files"][0].clone())
}

/// The code objects of a fat binary's inspect document.
fn fat_rows(file: &Value) -> BTreeSet<Row> {
    let mut rows = BTreeSet::new();
    for b in file["bundles"].as_array().unwrap() {
        for e in b["entries"].as_array().unwrap() {
            if let Some(sha) = e["sha256"].as_str() {
                rows.insert((
                    b["index"].as_u64().unwrap(),
                    e["target"].as_str().unwrap().to_owned(),
                    e["size"].as_u64().unwrap(),
                    sha.to_owned(),
                ));
            }
        }
    }
    rows
}

/// The code objects an offloaded binary's inspect document lists through
/// its marker.
fn marker_rows(file: &Value) -> BTreeSet<Row> {
    file["through_marker"]["code_objects"]
        .as_array()
        .unwrap_or_else(|| panic!("no through_marker listing: {file}"))
        .iter()
        .map(|c| {
            (
                c["bundle"].as_u64().unwrap(),
                c["target"].as_str().unwrap().to_owned(),
                c["size"].as_u64().unwrap(),
                c["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `kpack extract --all FILE -o DIR`: every file written, name → bytes.
fn extract_all(file: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let out = kpack([
        "extract".as_ref(),
        "--all".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}: {}", file.display(), stderr(&out));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn offloaded_binaries_list_and_extract_what_their_fat_originals_do() {
    let fixtures = host_fixtures();
    assert!(fixtures.len() >= 40, "too few fixtures: {fixtures:?}");
    for fat in fixtures {
        let dir = tempfile::tempdir().unwrap();
        let host_only = offload_into(&fat, dir.path(), &[]);
        let (code, fat_doc) = inspect_json(&fat, &[]);
        assert_eq!(code, Some(0), "{}", fat.display());
        let expected = fat_rows(&fat_doc);
        assert!(!expected.is_empty(), "{}: no code objects", fat.display());
        let (code, doc) = inspect_json(&host_only, &[]);
        assert_eq!(code, Some(0), "{}: {doc}", fat.display());
        assert_eq!(marker_rows(&doc), expected, "{}", fat.display());
        let fat_files = extract_all(&fat, &dir.path().join("fat"));
        let marker_files = extract_all(&host_only, &dir.path().join("marker"));
        assert_eq!(
            marker_files.iter().map(|f| &f.0).collect::<Vec<_>>(),
            fat_files.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "{}",
            fat.display()
        );
        assert!(marker_files == fat_files, "{}: bytes differ", fat.display());
    }
}

#[test]
fn inspect_gpu_lists_what_that_gpu_loads() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload_into(&fixture("corpus/libaxpy_2arch.so"), dir.path(), &[]);
    let (code, doc) = inspect_json(&bin, &["--gpu", "gfx90a:xnack-"]);
    assert_eq!(code, Some(0), "{doc}");
    let m = &doc["through_marker"];
    assert_eq!(m["arch_list"][0], "gfx90a:xnack-");
    let targets: BTreeSet<&str> = m["code_objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, BTreeSet::from(["gfx90a"]), "{m}");

    // A GPU with no code: every index is a finding, exit 1.
    let (code, doc) = inspect_json(&bin, &["--gpu", "gfx1100"]);
    assert_eq!(code, Some(1), "{doc}");
    assert!(
        doc["through_marker"]["code_objects"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        !doc["through_marker"]["findings"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_missing_archive_is_a_finding_and_the_rest_still_listed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload_into(&fixture("corpus/libaxpy_2arch.so"), dir.path(), &[]);
    let (_, before) = inspect_json(&bin, &[]);
    let archives: Vec<PathBuf> = std::fs::read_dir(dir.path().join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(archives.len(), 2, "{archives:?}");
    let gone = archives
        .iter()
        .find(|p| p.to_string_lossy().contains("gfx1030"))
        .unwrap();
    std::fs::remove_file(gone).unwrap();
    // Without a GPU an archive never shipped cannot be told from one
    // lost: the listing shrinks to what is there.
    let (code, after) = inspect_json(&bin, &[]);
    assert_eq!(code, Some(0), "{after}");
    let rows = marker_rows(&after);
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r.1 == "gfx90a"),
        "{rows:?}"
    );
    assert!(rows.len() < marker_rows(&before).len());
    // For the GPU that needs it, it is a finding (exit 1), not an error.
    let (code, doc) = inspect_json(&bin, &["--gpu", "gfx1030"]);
    assert_eq!(code, Some(1), "{doc}");
    let findings = doc["through_marker"]["findings"].to_string();
    assert!(findings.contains("no archive"), "{findings}");

    // With the pattern's only other archive gone too, the pattern itself
    // is named.
    for p in &archives {
        let _ = std::fs::remove_file(p);
    }
    let out = kpack(["inspect".as_ref(), bin.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("no archive matches"), "{text}");
    assert!(text.contains("problem:"), "{text}");

    // extract --all writes nothing and says why.
    let out = kpack([
        "extract".as_ref(),
        "--all".as_ref(),
        bin.as_os_str(),
        "-o".as_ref(),
        dir.path().join("x").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!dir.path().join("x").exists());
}

#[test]
fn text_listing_of_the_host_only_binary_keeps_the_fat_totals() {
    let dir = tempfile::tempdir().unwrap();
    let fat = fixture("corpus/lib2tu_2arch.so");
    let bin = offload_into(&fat, dir.path(), &[]);
    let totals = |o: &std::process::Output| -> String {
        let text = stdout(o);
        let at = text
            .find("  totals per target:")
            .unwrap_or_else(|| panic!("{text}"));
        text[at..].lines().take(3).collect::<Vec<_>>().join("\n")
    };
    let fat_out = kpack(["inspect".as_ref(), fat.as_os_str()]);
    let out = kpack(["inspect".as_ref(), bin.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(totals(&out), totals(&fat_out));
    assert!(
        stdout(&out).contains("bundle 1 from key"),
        "{}",
        stdout(&out)
    );
}

/// `extract` of a library in an installed wheel tree (host wheel and every
/// device wheel unpacked into one site-packages, as pip lays them out)
/// reads the device wheels' archives through the marker and writes exactly
/// the files extracting the fat original gives.
#[test]
fn extract_in_an_installed_wheel_tree_gives_the_fat_originals_files() {
    let tmp = tempfile::tempdir().unwrap();
    let files = crate::wheel_groups::fat_files();
    let fat = crate::wheel::build_fat_wheel(tmp.path(), &files);
    let out = tmp.path().join("out");
    let o = kpack([
        "wheel".as_ref(),
        "split".as_ref(),
        fat.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert!(wheels.len() > 2, "{wheels:?}");
    let site = tmp.path().join("site");
    crate::auditwheel::install(&wheels, &site);
    let mut libs = 0;
    for (rel, (bytes, _)) in files.iter().filter(|(p, _)| p.ends_with(".so")) {
        let original = tmp.path().join("original.so");
        std::fs::write(&original, bytes).unwrap();
        let name = rel.replace('/', "_");
        let want = extract_all(&original, &tmp.path().join(format!("fat-{name}")));
        let got = extract_all(&site.join(rel), &tmp.path().join(format!("site-{name}")));
        assert!(!want.is_empty(), "{rel}");
        assert_eq!(
            got.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            want.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "{rel}"
        );
        assert!(got == want, "{rel}: the bytes differ");
        libs += 1;
    }
    assert_eq!(libs, 3);
}
