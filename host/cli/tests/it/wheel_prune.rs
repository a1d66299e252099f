//! `kpack wheel prune`: one fat wheel becomes one smaller fat wheel for the
//! kept GPUs. Same name and metadata, RECORD regenerated, reproducible; its
//! binaries hold only the kept code objects (byte-identical to the
//! original ones) and run under a HIP runtime without kpack support; the
//! database files of other targets are left out.

use std::collections::BTreeSet;
use std::path::Path;

use kpack_tests::{fixture, oracle, sha256_hex, stderr, stdout};

use crate::prune::{code_objects, registrations, run_plain_stub};
use crate::util::kpack;
use crate::wheel::{WHEEL, build_fat_wheel, fat_files, read_wheel};

fn prune(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec![
        "wheel".into(),
        "prune".into(),
        input.display().to_string(),
        "-o".into(),
        out.display().to_string(),
        "--split-databases".into(),
        "rocblas".into(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    kpack(&args)
}

#[test]
fn prunes_a_fat_wheel_to_one_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(dir.path(), &fat_files());
    let out = dir.path().join("out");
    let o = prune(&fat, &out, &["--keep", "gfx90a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // libfeat.so brings the gfx90a feature variants along.
    assert_eq!(
        report["kept"],
        serde_json::json!(["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-"]),
        "{report}"
    );
    assert_eq!(
        report["dropped"],
        serde_json::json!(["gfx1030", "gfx908:sramecc+:xnack-"]),
        "{report}"
    );
    let pruned = out.join(WHEEL);
    assert_eq!(report["output"]["path"], pruned.display().to_string());

    // RECORD matches every entry (read_wheel checks), and only the
    // gfx1030 database files are gone.
    let before = fat_files();
    let after = read_wheel(&pruned);
    let db = "fatpkg/lib/rocblas/library";
    let gone: BTreeSet<&str> = before
        .keys()
        .map(String::as_str)
        .filter(|p| !after.contains_key(*p))
        .collect();
    assert_eq!(
        gone,
        BTreeSet::from([
            format!("{db}/TensileLibrary_gfx1030.co").as_str(),
            format!("{db}/TensileLibrary_gfx1030.dat").as_str(),
        ]),
    );
    for (path, (bytes, mode)) in &before {
        let Some((new, new_mode)) = after.get(path) else {
            continue;
        };
        assert_eq!(mode, new_mode, "{path}: mode");
        if path.ends_with(".so") {
            // Pruned in place: never larger (what they hold is checked below).
            assert!(new.len() <= bytes.len(), "{path}: grew");
            assert_ne!(bytes, new, "{path}: not rewritten");
        } else if !path.ends_with("/RECORD") {
            assert_eq!(bytes, new, "{path}: changed");
        }
    }

    // Each binary hands a HIP runtime without kpack support the same
    // kernels, and exactly its gfx90a code objects (as the oracle has them).
    let oracle = oracle();
    for (path, fixture_name) in [
        ("fatpkg/lib/libaxpy.so", "libaxpy_2arch.so"),
        ("fatpkg/lib/lib2tu.so", "lib2tu_2arch.so"),
        (
            "fatpkg-1.0.data/platlib/fatpkg_ext/libfeat.so",
            "libaxpy_feat.so",
        ),
    ] {
        let lib = dir.path().join(fixture_name);
        std::fs::write(&lib, &after[path].0).unwrap();
        let original = fixture(&format!("corpus/{fixture_name}"));
        let (log_in, _) = run_plain_stub(&original, &dir.path().join(format!("{fixture_name}.in")));
        let (log_out, bundles) =
            run_plain_stub(&lib, &dir.path().join(format!("{fixture_name}.out")));
        assert_eq!(registrations(&log_out), registrations(&log_in), "{path}");
        let expected: BTreeSet<(String, String)> = oracle
            .iter()
            .filter(|e| e.file == fixture_name && e.target.starts_with("gfx90a"))
            .map(|e| (e.target.clone(), e.sha256.clone()))
            .collect();
        assert!(
            !expected.is_empty(),
            "{fixture_name}: no gfx90a in the oracle"
        );
        assert_eq!(code_objects(&bundles), expected, "{path}");
    }

    // pip installs it, and what lands in site-packages is the pruned bytes.
    let site = pip_install(dir.path(), &pruned);
    assert_eq!(
        std::fs::read(site.join("fatpkg/lib/libaxpy.so")).unwrap(),
        after["fatpkg/lib/libaxpy.so"].0
    );
    assert!(
        !site
            .join("fatpkg/lib/rocblas/library/TensileLibrary_gfx1030.co")
            .exists()
    );

    // Reproducible: a second run gives the same bytes.
    let again = dir.path().join("again");
    let o = prune(&fat, &again, &["--keep", "gfx90a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        sha256_hex(&std::fs::read(again.join(WHEEL)).unwrap()),
        sha256_hex(&std::fs::read(&pruned).unwrap())
    );
}

/// `pip install --no-index --no-deps WHEEL` into a fresh venv; returns its
/// platlib directory.
fn pip_install(tmp: &Path, wheel: &Path) -> std::path::PathBuf {
    let venv = crate::util::Venv::create(tmp);
    let o = venv.pip(&[
        "install",
        "--no-index",
        "--no-deps",
        wheel.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "pip install: {}\n{}",
        stdout(&o),
        stderr(&o)
    );
    venv.platlib()
}

#[test]
fn keeping_nothing_or_a_missing_target_with_strict_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(dir.path(), &fat_files());
    for (keep, strict, why) in [
        ("gfx942", false, "keep nothing"),
        ("gfx90a,gfx942", true, "gfx942"),
    ] {
        let out = dir.path().join(format!("out-{keep}-{strict}"));
        let mut extra = vec!["--keep", keep];
        if strict {
            extra.push("--strict");
        }
        let o = prune(&fat, &out, &extra);
        assert_eq!(o.status.code(), Some(2), "{keep}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{keep}: {}", stderr(&o));
        assert!(!out.exists(), "{keep}: output directory left behind");
    }
    // Without --strict a missing target is a warning.
    let out = dir.path().join("warned");
    let o = prune(&fat, &out, &["--keep", "gfx90a,gfx942"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning:") && stderr(&o).contains("gfx942"),
        "{}",
        stderr(&o)
    );
    assert!(out.join(WHEEL).is_file());
}
