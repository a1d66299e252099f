//! `--archive-group target|sub-family|family`: several targets per
//! `.kpack`, markers that reach the group archives, and the loader (stub
//! HIP runtime) and `kpack verify` following them.

use crate::util::offload_into as offload;
use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, sha256_hex, stderr, stdout};
use object::{Object, ObjectSection};

use crate::runtime_e2e::{Load, run_loading};
use crate::util::kpack;

/// `(sha256, size)` of `file`'s `target` object in `<set>/ORACLE.tsv`.
fn oracle(set: &str, file: &str, target: &str) -> (String, usize) {
    let tsv = std::fs::read_to_string(fixture(&format!("{set}/ORACLE.tsv"))).unwrap();
    tsv.lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|f| f[0] == file && f[2].rsplit("--").next() == Some(target))
        .map(|f| (f[4].to_owned(), f[3].parse().unwrap()))
        .unwrap_or_else(|| panic!("{set}/ORACLE.tsv has no {file} {target}"))
}

/// Relative path → bytes of every file under `dir`.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The `.kpack` file names under `dir/.kpack`.
fn archive_names(dir: &Path) -> Vec<String> {
    files(&dir.join(".kpack")).into_keys().collect()
}

/// The marker's search paths.
fn search_paths(bin: &Path) -> Vec<String> {
    let bytes = std::fs::read(bin).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let sec = elf.section_by_name(".rocm_kpack_ref").unwrap();
    kpack_format::Marker::parse(sec.data().unwrap())
        .unwrap()
        .search_paths
}

/// Every load under the stub for `archs` returned `want`.
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

/// `kpack verify DIR --json` passes and resolves `resolved` lookups.
fn verify_passes(dir: &Path) -> serde_json::Value {
    let out = kpack(["verify".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    assert!(
        out.status.success(),
        "verify {}:\n{}{}",
        dir.display(),
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn archive_group_target_is_todays_output_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    for fx in ["corpus/libaxpy_wide.so", "clang19/libaxpy_generic.so"] {
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        offload(&fixture(fx), &a, &[]);
        offload(&fixture(fx), &b, &["--archive-group", "target"]);
        let (fa, fb) = (files(&a), files(&b));
        assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
        for (k, v) in &fa {
            assert_eq!(sha256_hex(v), sha256_hex(&fb[k]), "{fx}: {k}");
        }
        // Per processor, and the marker is the single `@GFXARCH@` path.
        let bin = a.join(fixture(fx).file_name().unwrap());
        assert_eq!(search_paths(&bin).len(), 1);
        std::fs::remove_dir_all(&a).unwrap();
        std::fs::remove_dir_all(&b).unwrap();
    }
}

#[test]
fn sub_family_archives_serve_gfx90a_and_gfx1030_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "libaxpy_wide.so";
    let bin = offload(
        &fixture(&format!("corpus/{name}")),
        tmp.path(),
        &["--archive-group", "sub-family"],
    );
    // gfx803 and gfx940 are in no rocm-bootstrap sub-family: their own.
    assert_eq!(
        archive_names(tmp.path()),
        [
            "libaxpy_wide_gfx10-1.kpack",
            "libaxpy_wide_gfx10-3.kpack",
            "libaxpy_wide_gfx803.kpack",
            "libaxpy_wide_gfx9-0.kpack",
            "libaxpy_wide_gfx940.kpack",
        ]
    );
    let sp = search_paths(&bin);
    assert_eq!(
        sp,
        [
            ".kpack/libaxpy_wide_@GFXARCH@.kpack",
            ".kpack/libaxpy_wide_gfx10-1.kpack",
            ".kpack/libaxpy_wide_gfx10-3.kpack",
            ".kpack/libaxpy_wide_gfx9-0.kpack",
        ]
    );
    // One archive, several processors; the TOC's family is the group.
    let list = kpack([
        "archive".as_ref(),
        "list".as_ref(),
        "--json".as_ref(),
        tmp.path()
            .join(".kpack/libaxpy_wide_gfx9-0.kpack")
            .as_os_str(),
    ]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = stdout(&list);
    for t in ["gfx900", "gfx906", "gfx908", "gfx90a"] {
        assert!(text.contains(t), "{t}: {text}");
    }
    assert!(text.contains("\"gfx9-0\""), "{text}");

    let want = |t| oracle("corpus", name, t);
    assert_loaded(&bin, "gfx90a:sramecc+:xnack-", &want("gfx90a"));
    assert_loaded(&bin, "gfx906", &want("gfx906"));
    assert_loaded(&bin, "gfx1030", &want("gfx1030"));
    assert_loaded(&bin, "gfx803", &want("gfx803"));
    let v = verify_passes(tmp.path());
    assert_eq!(v["report"]["resolved"], 8, "{v}");
}

#[test]
fn family_archives_serve_gfx1101_through_its_generic_target() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "libaxpy_generic.so";
    for (group, archives) in [
        (
            "sub-family",
            &[
                "libaxpy_generic_gfx10-3.kpack",
                "libaxpy_generic_gfx11.kpack",
                "libaxpy_generic_gfx110x.kpack",
                "libaxpy_generic_gfx12-0.kpack",
                "libaxpy_generic_gfx9-0.kpack",
            ][..],
        ),
        (
            "family",
            &[
                "libaxpy_generic_gfx10.kpack",
                "libaxpy_generic_gfx11.kpack",
                "libaxpy_generic_gfx12.kpack",
                "libaxpy_generic_gfx9.kpack",
            ][..],
        ),
    ] {
        let dir = tmp.path().join(group);
        let bin = offload(
            &fixture(&format!("clang19/{name}")),
            &dir,
            &["--archive-group", group],
        );
        assert_eq!(archive_names(&dir), archives, "{group}");
        let want = |t| oracle("clang19", name, t);
        // CLR's arch list: the device, then its generic target.
        assert_loaded(&bin, "gfx1101,gfx11-generic", &want("gfx11-generic"));
        assert_loaded(&bin, "gfx1100,gfx11-generic", &want("gfx1100"));
        assert_loaded(&bin, "gfx1201,gfx12-generic", &want("gfx12-generic"));
        assert_loaded(
            &bin,
            "gfx90a:sramecc+:xnack-,gfx9-generic:sramecc+:xnack-",
            &want("gfx9-generic"),
        );
        // A per-target archive beside the group (an overlay, or a group
        // archive converted back) is tried first: the most specific wins.
        let overlay = dir.join(".kpack/libaxpy_generic_gfx1100.kpack");
        let plain = offload(
            &fixture("clang19/libaxpy_plain.so"),
            &tmp.path().join("plain"),
            &["--name", "libaxpy_generic", "--key", name],
        );
        std::fs::copy(
            plain
                .parent()
                .unwrap()
                .join(".kpack/libaxpy_generic_gfx1100.kpack"),
            &overlay,
        )
        .unwrap();
        assert_loaded(
            &bin,
            "gfx1100,gfx11-generic",
            &oracle("clang19", "libaxpy_plain.so", "gfx1100"),
        );
        std::fs::remove_file(&overlay).unwrap();
        std::fs::remove_dir_all(tmp.path().join("plain")).unwrap();

        let v = verify_passes(&dir);
        assert_eq!(v["report"]["resolved"], 5, "{group}: {v}");
        let gpu = kpack([
            "verify".as_ref(),
            "--gpu".as_ref(),
            "gfx1101".as_ref(),
            dir.as_os_str(),
        ]);
        assert!(gpu.status.success(), "{}{}", stdout(&gpu), stderr(&gpu));
        assert!(
            stdout(&gpu).contains("libaxpy_generic_gfx11.kpack"),
            "{}",
            stdout(&gpu)
        );
    }
}

#[test]
fn wheel_split_refuses_an_archive_group_coarser_than_the_wheels() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = crate::wheel::build_fat_wheel(tmp.path(), &fat_wheel_files());
    for extra in [
        &["--archive-group", "sub-family"][..],
        &["--group", "sub-family", "--archive-group", "family"][..],
    ] {
        let out = tmp.path().join("out");
        let mut args: Vec<std::ffi::OsString> = vec![
            "wheel".into(),
            "split".into(),
            fat.clone().into(),
            "-o".into(),
            out.clone().into(),
        ];
        args.extend(extra.iter().map(Into::into));
        let o = kpack(args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("coarser"), "{}", stderr(&o));
        assert!(!out.exists(), "{extra:?}: nothing may be written");
    }
}

#[test]
fn wheel_split_device_wheels_hold_their_group_archives() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = crate::wheel::build_fat_wheel(tmp.path(), &fat_wheel_files());
    let out = tmp.path().join("out");
    let o = kpack([
        "wheel".as_ref(),
        "split".as_ref(),
        fat.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--group".as_ref(),
        "family".as_ref(),
        "--archive-group".as_ref(),
        "sub-family".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let dists: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["distribution"].as_str().unwrap())
        .collect();
    assert_eq!(
        dists,
        [
            "fatpkg-device-gfx10",
            "fatpkg-device-gfx11",
            "fatpkg-device-gfx12",
            "fatpkg-device-gfx9"
        ]
    );
    assert!(r["warnings"].as_array().unwrap().is_empty(), "{r}");
    let gfx11 =
        crate::wheel::read_wheel(&out.join("fatpkg_device_gfx11-1.0-py3-none-linux_x86_64.whl"));
    let archives: Vec<&String> = gfx11.keys().filter(|p| p.ends_with(".kpack")).collect();
    assert_eq!(archives.len(), 2, "{archives:?}");
    assert!(
        archives[0].ends_with("libgeneric.so_gfx11.kpack"),
        "{archives:?}"
    );
    assert!(
        archives[1].ends_with("libgeneric.so_gfx110x.kpack"),
        "{archives:?}"
    );
    // Host + every device wheel unpacked together: every marker resolves.
    let site = tmp.path().join("site");
    for w in std::fs::read_dir(&out).unwrap() {
        for (p, (bytes, _)) in crate::wheel::read_wheel(&w.unwrap().path()) {
            let to = site.join(&p);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, bytes).unwrap();
        }
    }
    let v = verify_passes(&site);
    assert!(v["report"]["resolved"].as_u64().unwrap() > 0, "{v}");
}

/// A fat wheel with one clang-19 library of five generic targets and gfx1100.
fn fat_wheel_files() -> BTreeMap<String, (Vec<u8>, u32)> {
    let di = "fatpkg-1.0.dist-info";
    let mut f = BTreeMap::new();
    f.insert(
        "fatpkg/lib/libgeneric.so".to_string(),
        (
            std::fs::read(fixture("clang19/libaxpy_generic.so")).unwrap(),
            0o755,
        ),
    );
    f.insert(
        format!("{di}/METADATA"),
        (
            b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n".to_vec(),
            0o644,
        ),
    );
    f.insert(
        format!("{di}/WHEEL"),
        (b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(), 0o644),
    );
    f
}

#[test]
fn split_writes_group_artifacts_that_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("in/blas_lib_gfx1100");
    crate::util::artifact_with_library(&a, fixture("clang19/libaxpy_generic.so"), "libaxpy.so");
    let out = tmp.path().join("out");
    let o = kpack([
        "split".as_ref(),
        a.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--archive-group".as_ref(),
        "sub-family".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut dirs: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs,
        [
            "blas_lib_generic",
            "blas_lib_gfx10-3",
            "blas_lib_gfx11",
            "blas_lib_gfx110x",
            "blas_lib_gfx12-0",
            "blas_lib_gfx9-0",
        ]
    );
    let v = verify_passes(&out);
    assert_eq!(v["report"]["resolved"], 5, "{v}");
}

/// `(base count, delta count)` of a `zstd-delta` archive, from `archive
/// list --json`; panics if the scheme is another.
fn delta_entries(archive: &Path) -> (usize, usize) {
    let list = kpack([
        "archive".as_ref(),
        "list".as_ref(),
        "--json".as_ref(),
        archive.as_os_str(),
    ]);
    assert!(list.status.success(), "{}", stderr(&list));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(doc["compression_scheme"], "zstd-delta", "{doc}");
    let entries = doc["entries"].as_array().unwrap();
    let deltas = entries.iter().filter(|e| !e["base"].is_null()).count();
    (entries.len() - deltas, deltas)
}

#[test]
fn offload_writes_sub_family_delta_archives_that_load_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "libaxpy_wide.so";
    let flags = [
        "--archive-group",
        "sub-family",
        "--compression",
        "zstd-delta",
    ];
    let one = tmp.path().join("j1");
    let bin = offload(
        &fixture(&format!("corpus/{name}")),
        &one,
        &[&flags[..], &["-j", "1"]].concat(),
    );
    // gfx900..gfx90a share one archive: one base, the siblings deltas.
    let (bases, deltas) = delta_entries(&one.join(".kpack/libaxpy_wide_gfx9-0.kpack"));
    assert!(bases >= 1 && deltas >= 1, "{bases} bases, {deltas} deltas");
    // Byte-identical at any -j.
    let two = tmp.path().join("j2");
    offload(
        &fixture(&format!("corpus/{name}")),
        &two,
        &[&flags[..], &["-j", "2"]].concat(),
    );
    let (f1, f2) = (files(&one), files(&two));
    assert_eq!(f1.keys().collect::<Vec<_>>(), f2.keys().collect::<Vec<_>>());
    for (k, v) in &f1 {
        assert_eq!(sha256_hex(v), sha256_hex(&f2[k]), "-j1 vs -j2: {k}");
    }

    let want = |t| oracle("corpus", name, t);
    for t in ["gfx900", "gfx906", "gfx908"] {
        assert_loaded(&bin, t, &want(t));
    }
    assert_loaded(&bin, "gfx90a:sramecc+:xnack-", &want("gfx90a"));
    assert_loaded(&bin, "gfx1030", &want("gfx1030"));
    let v = verify_passes(&one);
    assert_eq!(v["report"]["resolved"], 8, "{v}");
}

#[test]
fn split_and_wheel_split_take_zstd_delta() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("in/blas_lib_gfx1100");
    crate::util::artifact_with_library(&a, fixture("clang19/libaxpy_generic.so"), "libaxpy.so");
    let out = tmp.path().join("out");
    let o = kpack([
        "split".as_ref(),
        a.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--archive-group".as_ref(),
        "family".as_ref(),
        "--compression".as_ref(),
        "zstd-delta".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = verify_passes(&out);
    assert_eq!(v["report"]["resolved"], 5, "{v}");

    let fat = crate::wheel::build_fat_wheel(tmp.path(), &fat_wheel_files());
    let wout = tmp.path().join("wheels");
    let o = kpack([
        "wheel".as_ref(),
        "split".as_ref(),
        fat.as_os_str(),
        "-o".as_ref(),
        wout.as_os_str(),
        "--group".as_ref(),
        "family".as_ref(),
        "--archive-group".as_ref(),
        "family".as_ref(),
        "--compression".as_ref(),
        "zstd-delta".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let site = tmp.path().join("site");
    let mut schemes = Vec::new();
    for w in std::fs::read_dir(&wout).unwrap() {
        for (p, (bytes, _)) in crate::wheel::read_wheel(&w.unwrap().path()) {
            let to = site.join(&p);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            if p.ends_with(".kpack") {
                // KPAK v2: header version 2 at bytes 4..8.
                schemes.push(u32::from_le_bytes(bytes[4..8].try_into().unwrap()));
            }
            std::fs::write(to, bytes).unwrap();
        }
    }
    assert!(
        !schemes.is_empty() && schemes.iter().all(|&v| v == 2),
        "{schemes:?}"
    );
    let v = verify_passes(&site);
    assert!(v["report"]["resolved"].as_u64().unwrap() > 0, "{v}");
}
