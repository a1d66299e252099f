//! `zstd-delta` (KPAK v2) through the CLI: `archive convert` both ways on
//! every fixture's offloaded archives (lossless, deterministic, and back to
//! byte-identical per-target archives), `archive list` bases and ratios,
//! and convert's output safety.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kpack_tests::{CLANG19_FAT_FIXTURES, fixture, stderr, stdout, tree_digest};

use crate::util::kpack;

fn run(args: Vec<OsString>) -> std::process::Output {
    kpack(&args)
}

fn os(items: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    items.iter().map(|s| s.as_ref().to_os_string()).collect()
}

fn kpacks(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn convert(inputs: &[PathBuf], out: &Path, scheme: &str) -> Vec<PathBuf> {
    let mut args = os(&[&"archive", &"convert"]);
    args.extend(inputs.iter().map(|p| p.clone().into_os_string()));
    args.extend(os(&[&"-o", &out, &"--compression", &scheme]));
    let o = run(args);
    assert!(o.status.success(), "convert to {scheme}: {}", stderr(&o));
    kpacks(out)
}

fn extract_all(archives: &[PathBuf], out: &Path) -> std::collections::BTreeMap<String, String> {
    for a in archives {
        let o = run(os(&[&"archive", &"extract", a, &"-o", &out]));
        assert!(
            o.status.success(),
            "extract {}: {}",
            a.display(),
            stderr(&o)
        );
    }
    tree_digest(out)
}

/// Fat executables and libraries of both fixture sets.
fn fat_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture("corpus"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            (n.starts_with("lib") || n.starts_with("exe_")) && !n.ends_with(".o")
        })
        .collect();
    v.sort();
    v.extend(
        CLANG19_FAT_FIXTURES
            .iter()
            .map(|(n, _)| fixture(&format!("clang19/{n}"))),
    );
    v
}

#[test]
fn every_fixture_round_trips_through_zstd_delta_and_back_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let mut multi_target = 0;
    for (i, f) in fat_fixtures().iter().enumerate() {
        let dir = tmp.path().join(i.to_string());
        let o = run(os(&[
            &"offload",
            f,
            &"-o",
            &dir.join("host"),
            &"--archives",
            &dir.join("arch"),
        ]));
        assert!(
            o.status.success(),
            "offload {}: {}",
            f.display(),
            stderr(&o)
        );
        let originals = kpacks(&dir.join("arch"));
        if originals.is_empty() {
            continue;
        }
        multi_target += usize::from(originals.len() > 1);
        let delta = convert(&originals, &dir.join("delta"), "zstd-delta");
        assert_eq!(delta.len(), 1, "{delta:?}");
        let o = run(os(&[&"archive", &"verify", &delta[0]]));
        assert!(o.status.success(), "verify: {}", stdout(&o));
        // Same code objects, byte for byte.
        let want = extract_all(&originals, &dir.join("x-orig"));
        let got = extract_all(&delta, &dir.join("x-delta"));
        assert_eq!(got, want, "{}", f.display());
        // Deterministic: converting again writes the same bytes.
        let again = convert(&originals, &dir.join("delta2"), "zstd-delta");
        assert_eq!(
            std::fs::read(&delta[0]).unwrap(),
            std::fs::read(&again[0]).unwrap()
        );
        // And back: the per-target archives offload wrote, byte-identical,
        // under the names markers look for.
        let back = convert(&delta, &dir.join("back"), "zstd-per-kernel");
        let names = |v: &[PathBuf]| -> Vec<OsString> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(&back), names(&originals));
        for (b, o) in back.iter().zip(&originals) {
            assert!(
                std::fs::read(b).unwrap() == std::fs::read(o).unwrap(),
                "{} differs from {}",
                b.display(),
                o.display()
            );
        }
    }
    assert!(
        multi_target >= 3,
        "{multi_target} fixtures with several targets"
    );
}

#[test]
fn archive_list_shows_bases_and_ratios_of_a_delta_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let f = fixture("clang19/libaxpy_plain.so");
    let o = run(os(&[
        &"offload",
        &f,
        &"-o",
        &tmp.path().join("host"),
        &"--archives",
        &tmp.path().join("arch"),
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let delta = convert(
        &kpacks(&tmp.path().join("arch")),
        &tmp.path().join("d"),
        "zstd-delta",
    );
    let o = run(os(&[&"archive", &"list", &"--json", &delta[0]]));
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["compression_scheme"], "zstd-delta");
    let entries = doc["entries"].as_array().unwrap();
    assert!(entries.len() >= 2);
    let mut deltas = 0;
    for e in entries {
        let ratio = e["ratio"].as_f64().unwrap();
        assert!(ratio > 0.0 && ratio < 1.5, "{e}");
        if !e["base"].is_null() {
            deltas += 1;
            assert_eq!(e["base"]["key"], e["key"]);
            let base = entries
                .iter()
                .find(|b| b["ordinal"] == e["base"]["ordinal"])
                .unwrap();
            assert!(base["base"].is_null(), "a base is a delta: {base}");
        }
    }
    assert!(deltas >= 1, "{doc}");
    let o = run(os(&[&"archive", &"list", &delta[0]]));
    let text = stdout(&o);
    assert!(text.contains("RATIO  BASE"), "{text}");
    assert!(text.contains("scheme=zstd-delta"), "{text}");
}

#[test]
fn archive_convert_refuses_to_overwrite_without_force_and_its_own_input() {
    let tmp = tempfile::tempdir().unwrap();
    let f = fixture("clang19/libaxpy_plain.so");
    let arch = tmp.path().join("arch");
    let o = run(os(&[
        &"offload",
        &f,
        &"-o",
        &tmp.path().join("host"),
        &"--archives",
        &arch,
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let originals = kpacks(&arch);
    // Converting per-kernel archives into their own directory would
    // replace them: refused, even with --force.
    let mut args = os(&[&"archive", &"convert"]);
    args.extend(originals.iter().map(|p| p.clone().into_os_string()));
    args.extend(os(&[&"-o", &arch, &"--compression", &"none", &"--force"]));
    let o = run(args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(kpacks(&arch), originals);
    let out = tmp.path().join("d");
    convert(&originals, &out, "zstd-delta");
    let mut args = os(&[&"archive", &"convert"]);
    args.extend(originals.iter().map(|p| p.clone().into_os_string()));
    args.extend(os(&[&"-o", &out, &"--compression", &"zstd-delta"]));
    let o = run(args.clone());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    args.push("--force".into());
    let o = run(args);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `kpack offload --compression zstd-delta` encodes each kernel key in the
/// worker that streams its bundle (`add_delta`); the writer's serial path
/// (raw kernels added one by one, encoded at `finish`) must give the same
/// bytes, on fixtures with several bundles, plain and compressed.
#[test]
fn offloaded_delta_archives_are_byte_identical_to_the_serial_encoding() {
    use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};
    let tmp = tempfile::tempdir().unwrap();
    let mut deltas = 0;
    for (n, (rel, group)) in [
        ("corpus/exe_2tu_wide", "family"),
        ("corpus/exe_2tu_2arch_lld", "family"),
        ("clang19/lib2tu_ccob.so", "family"),
        ("corpus/libaxpy_wide.so", "sub-family"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tmp.path().join(n.to_string());
        let flags = [
            "--archive-group",
            group,
            "--compression",
            "zstd-delta",
            "-j",
            "2",
        ];
        crate::util::offload_into(&fixture(rel), &dir, &flags);
        let archives = kpacks(&dir.join(".kpack"));
        assert!(!archives.is_empty(), "{rel}");
        for path in archives {
            let a = Archive::open(&path).unwrap();
            deltas += a.entries().filter(|e| e.base().is_some()).count();
            let serial = tmp.path().join("serial.kpack");
            let options = WriterOptions {
                group_name: a.group_name().to_owned(),
                gfx_arch_family: a.gfx_arch_family().to_owned(),
                gfx_arches: Some(a.arches().to_vec()),
                compression: Compression::ZstdDelta { level: 3 },
                ..Default::default()
            };
            let mut w = ArchiveWriter::create(&serial, options).unwrap();
            for e in a.entries() {
                w.add(e.key(), e.arch(), &a.read(e).unwrap()).unwrap();
            }
            w.finish().unwrap();
            assert!(
                std::fs::read(&path).unwrap() == std::fs::read(&serial).unwrap(),
                "{rel}: {} differs from the serial encoding",
                path.display()
            );
        }
    }
    assert!(deltas > 0, "no fixture produced a delta entry");
}
