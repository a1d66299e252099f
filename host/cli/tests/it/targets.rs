//! `--gpu-targets` and `--exclude-arch` on `offload`, `split` and
//! `wheel split`: what is kept, what is reported as dropped, and exit 2
//! with nothing written when the filter removes every code object.
//! `libaxpy_feat.so` carries gfx1030, gfx908:sramecc+:xnack-,
//! gfx90a:xnack+ and gfx90a:xnack-.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::kpack;

const FEAT: &str = "corpus/libaxpy_feat.so";

/// Every (archive file name, TOC arch) under `dir`.
fn archived(dir: &Path) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for entry in walk(dir) {
        if entry.extension().is_some_and(|e| e == "kpack") {
            let a = kpack_format::Archive::open(&entry).unwrap();
            let name = entry.file_name().unwrap().to_string_lossy().into_owned();
            for arch in a.arches() {
                out.insert((name.clone(), arch.clone()));
            }
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn offload(dir: &Path, extra: &[&str]) -> Output {
    let input = fixture(FEAT);
    let mut args: Vec<std::ffi::OsString> = vec![
        "offload".into(),
        input.into(),
        "-o".into(),
        dir.join("libaxpy.so").into(),
        "--archives".into(),
        dir.join("kpack").into(),
    ];
    args.extend(extra.iter().map(Into::into));
    kpack(args)
}

#[test]
fn offload_keeps_only_the_named_targets_and_reports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let out = offload(dir.path(), &["--gpu-targets", "gfx90a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        archived(&dir.path().join("kpack")),
        BTreeSet::from([
            ("libaxpy_feat_gfx90a.kpack".into(), "gfx90a:xnack+".into()),
            ("libaxpy_feat_gfx90a.kpack".into(), "gfx90a:xnack-".into()),
        ])
    );
    let text = stdout(&out);
    assert!(text.contains("  excluded gfx1030: 1\n"), "{text}");
    assert!(
        text.contains("  excluded gfx908:sramecc+:xnack-: 1\n"),
        "{text}"
    );

    // AMD's folded spelling names exactly one variant; --json lists the rest.
    let dir = tempfile::tempdir().unwrap();
    let out = offload(dir.path(), &["--gpu-targets", "gfx90a-xnack-", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        archived(&dir.path().join("kpack")),
        BTreeSet::from([("libaxpy_feat_gfx90a.kpack".into(), "gfx90a:xnack-".into())])
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v["result"]["excluded"],
        serde_json::json!(["gfx1030", "gfx908:sramecc+:xnack-", "gfx90a:xnack+"])
    );
}

#[test]
fn offload_exclude_arch_is_the_inverse() {
    let dir = tempfile::tempdir().unwrap();
    let out = offload(dir.path(), &["--exclude-arch", "gfx90a:xnack+,gfx1030"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        archived(&dir.path().join("kpack")),
        BTreeSet::from([
            (
                "libaxpy_feat_gfx908.kpack".into(),
                "gfx908:sramecc+:xnack-".into()
            ),
            ("libaxpy_feat_gfx90a.kpack".into(), "gfx90a:xnack-".into()),
        ])
    );
}

#[test]
fn offload_json_has_no_excluded_field_without_a_filter() {
    let dir = tempfile::tempdir().unwrap();
    let out = offload(dir.path(), &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["result"].get("excluded").is_none(), "{v}");
}

#[test]
fn offload_fails_writing_nothing_when_the_filter_removes_everything() {
    for extra in [
        &["--gpu-targets", "gfx942"][..],
        &["--gpu-targets", "gfx90a:sramecc+:xnack+"],
        &["--exclude-arch", "gfx90a,gfx908,gfx1030"],
        &["--gpu-targets", "gfx90a", "--exclude-arch", "gfx90a"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = offload(dir.path(), extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = stderr(&out);
        assert!(
            err.contains("libaxpy_feat.so: the target filter removes every code object (targets gfx1030, gfx908:sramecc+:xnack-, gfx90a:xnack+, gfx90a:xnack-); nothing written"),
            "{extra:?}: {err}"
        );
        assert_eq!(walk(dir.path()), Vec::<PathBuf>::new(), "{extra:?}");
    }
}

#[test]
fn bad_target_patterns_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let out = offload(dir.path(), &["--gpu-targets", "gfx942,gfx90a:xnack"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("invalid --gpu-targets or --exclude-arch"),
        "{err}"
    );
    assert!(err.contains("\"gfx90a:xnack\""), "{err}");
    assert_eq!(walk(dir.path()), Vec::<PathBuf>::new());
}

/// A TheRock-style artifact `blas_lib_gfx90a` with one fat library.
fn artifact(root: &Path) -> PathBuf {
    let a = root.join("blas_lib_gfx90a");
    crate::util::artifact_with_library(&a, fixture(FEAT), "libaxpy.so");
    a
}

#[test]
fn split_filters_targets_and_refuses_a_binary_left_without_device_code() {
    let dir = tempfile::tempdir().unwrap();
    let input = artifact(dir.path());
    let out_dir = dir.path().join("out");
    let run = |out: &Path, extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "split".into(),
            input.clone().into(),
            "-o".into(),
            out.into(),
            "--json".into(),
        ];
        args.extend(extra.iter().map(Into::into));
        kpack(args)
    };
    let out = run(&out_dir, &["--gpu-targets", "gfx90a:xnack+,gfx1030"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let a = &v["artifacts"][0];
    assert_eq!(
        a["excluded"],
        serde_json::json!({"gfx908:sramecc+:xnack-": 1, "gfx90a:xnack-": 1})
    );
    let arches: BTreeSet<String> = archived(&out_dir).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        arches,
        BTreeSet::from(["gfx1030".into(), "gfx90a:xnack+".into()])
    );

    let out_dir = dir.path().join("out2");
    let out = run(&out_dir, &["--gpu-targets", "gfx942"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the target filter removes every code object"),
        "{err}"
    );
    assert_eq!(archived(&out_dir), BTreeSet::new());
    let written: Vec<PathBuf> = walk(&out_dir);
    assert!(written.is_empty(), "nothing may be written: {written:?}");
}

/// A wheel holding one fat library, with a correct RECORD.
fn wheel(dir: &Path) -> PathBuf {
    let path = dir.join("fatpkg-1.0-py3-none-linux_x86_64.whl");
    let di = "fatpkg-1.0.dist-info";
    let files: Vec<(String, Vec<u8>)> = vec![
        ("fatpkg/libaxpy.so".into(), std::fs::read(fixture(FEAT)).unwrap()),
        (
            format!("{di}/METADATA"),
            b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n".to_vec(),
        ),
        (
            format!("{di}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(),
        ),
    ];
    let members = files.iter().map(|(p, b)| (p.as_str(), b.as_slice(), 0o644));
    crate::util::write_wheel(&path, di, members);
    path
}

#[test]
fn wheel_split_filters_targets_and_refuses_an_empty_result() {
    let dir = tempfile::tempdir().unwrap();
    let input = wheel(dir.path());
    let out_dir = dir.path().join("out");
    let run = |out: &Path, extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "wheel".into(),
            "split".into(),
            input.clone().into(),
            "-o".into(),
            out.into(),
            "--json".into(),
        ];
        args.extend(extra.iter().map(Into::into));
        kpack(args)
    };
    let out = run(
        &out_dir,
        &["--gpu-targets", "gfx90a", "--exclude-arch", "gfx90a-xnack+"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let archs: Vec<&str> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["arch"].as_str().unwrap())
        .collect();
    assert_eq!(archs, ["gfx90a"]);
    assert_eq!(
        v["excluded"],
        serde_json::json!({"gfx1030": 1, "gfx908:sramecc+:xnack-": 1, "gfx90a:xnack+": 1})
    );

    let out_dir = dir.path().join("out2");
    let out = run(&out_dir, &["--gpu-targets", "gfx1100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the target filter removes every code object"),
        "{}",
        stderr(&out)
    );
    assert_eq!(walk(&out_dir), Vec::<PathBuf>::new());
}

#[test]
fn pe_images_are_filtered_the_same_way() {
    let input = fixture("pe/dll_1tu.dll");
    let run = |dir: &Path, targets: &str| {
        kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            dir.join("x.dll").as_os_str(),
            "--archives".as_ref(),
            dir.join("kpack").as_os_str(),
            "--gpu-targets".as_ref(),
            targets.as_ref(),
            "--json".as_ref(),
        ])
    };
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "gfx1100");
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["result"]["format"], "pe");
    assert_eq!(v["result"]["excluded"], serde_json::json!(["gfx90a"]));
    assert_eq!(
        archived(&dir.path().join("kpack")),
        BTreeSet::from([("dll_1tu_gfx1100.kpack".into(), "gfx1100".into())])
    );

    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "gfx942");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "dll_1tu.dll: the target filter removes every code object (targets gfx1100, gfx90a)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(walk(dir.path()), Vec::<PathBuf>::new());
}

/// A typo in a target list is an error naming it, with `verify --gpu`'s
/// sentence, before anything is written: `--gpu-targets`, `--exclude-arch`
/// (offload, split, wheel split) and `--keep` (prune) alike.
#[test]
fn a_mistyped_target_in_any_list_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture(FEAT);
    let out = dir.path().join("out");
    let (lib_out, pruned, archives) = (out.join("lib.so"), out.join("p.so"), out.join(".kpack"));
    let runs: [(&str, Vec<&std::ffi::OsStr>); 3] = [
        (
            "gfx9000",
            vec![
                "offload".as_ref(),
                lib.as_os_str(),
                "-o".as_ref(),
                lib_out.as_os_str(),
                "--archives".as_ref(),
                archives.as_os_str(),
                "--gpu-targets".as_ref(),
                "gfx1030,gfx9000".as_ref(),
            ],
        ),
        (
            "gfx90z",
            vec![
                "offload".as_ref(),
                lib.as_os_str(),
                "-o".as_ref(),
                lib_out.as_os_str(),
                "--archives".as_ref(),
                archives.as_os_str(),
                "--exclude-arch".as_ref(),
                "gfx90z".as_ref(),
            ],
        ),
        (
            "gfx1300",
            vec![
                "prune".as_ref(),
                lib.as_os_str(),
                "-o".as_ref(),
                pruned.as_os_str(),
                "--keep".as_ref(),
                "gfx1030,gfx1300".as_ref(),
            ],
        ),
    ];
    for (typo, args) in runs {
        let o = kpack(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(typo) && err.contains("not a known AMD GPU"),
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // Legal spellings still pass: features, -strict, generic, SPIR-V.
    let o = kpack([
        "offload".as_ref(),
        lib.as_os_str(),
        "-o".as_ref(),
        lib_out.as_os_str(),
        "--archives".as_ref(),
        archives.as_os_str(),
        "--gpu-targets".as_ref(),
        "gfx1030,gfx90a:xnack+,gfx1250-strict,gfx11-generic,amdgcnspirv".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// With `--gpu-targets`, a database file of an excluded target is counted
/// as excluded, not as placed under its handler.
#[test]
fn database_files_of_excluded_targets_are_not_counted_as_placed() {
    let dir = tempfile::tempdir().unwrap();
    let input = artifact(dir.path());
    let library = input.join("stage/lib/rocblas/library");
    std::fs::create_dir_all(&library).unwrap();
    for name in [
        "TensileLibrary_gfx90a.co",
        "TensileLibrary_Type_gfx90a.dat",
        "TensileLibrary_gfx1030.co",
        "TensileLibrary_Type_gfx1030.dat",
        "TensileLibrary.dat",
    ] {
        std::fs::write(library.join(name), name).unwrap();
    }
    let out_dir = dir.path().join("out");
    let out = kpack([
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
        "--json".as_ref(),
        "--split-databases".as_ref(),
        "rocblas".as_ref(),
        "--gpu-targets".as_ref(),
        "gfx90a".as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let a = &v["artifacts"][0];
    let rocblas = a["databases"]["rocblas"].as_object().unwrap();
    assert!(
        !rocblas.keys().any(|k| k.contains("gfx1030")),
        "{rocblas:?}"
    );
    assert!(rocblas.keys().any(|k| k.contains("gfx90a")), "{rocblas:?}");
    assert_eq!(a["excluded"]["gfx1030"], 3, "{}", a["excluded"]);
}
