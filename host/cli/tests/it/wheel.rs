//! `kpack wheel split` end to end: a fat wheel built here from the corpus
//! fixtures (a package `fatpkg` with fat `.so` files in the root and in
//! `.data/platlib`, and a rocBLAS-style database directory) is split; the
//! outputs are checked entry by entry (RECORD hashes, modes, contents,
//! metadata), split again for byte identity, and installed with pip into a
//! fresh venv (host + one device wheel), where every kernel of that arch
//! resolves through the markers with `kpack-runtime` to exactly what
//! `kpack extract` gives, and the other arch does not resolve.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_bundle::{ReadAt, WalkOptions};
use kpack_format::Marker;
use kpack_runtime::{Cache, Config};
use kpack_tests::{fixture, stderr, stdout};
use zip::write::SimpleFileOptions;

use crate::util::{KPACK, component_cache};

pub(crate) const WHEEL: &str = "fatpkg-1.0-py3-none-linux_x86_64.whl";
pub(crate) const HOST_DI: &str = "fatpkg-1.0.dist-info";

pub(crate) fn kpack_env<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(KPACK);
    cmd.args(args)
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", component_cache())
        .env_remove("SOURCE_DATE_EPOCH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run kpack")
}

/// `kpack wheel split INPUT -o OUT` with `env` (as [`kpack_env`]).
pub(crate) fn wheel_split(input: &str, out: &str, env: &[(&str, &str)]) -> Output {
    kpack_env(&["wheel", "split", input, "-o", out], env)
}

/// Code objects `kpack extract --all` writes for `binary`: (co_index, target) → bytes.
fn extracted(binary: &Path) -> BTreeMap<(u32, String), Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(KPACK)
        .arg("extract")
        .arg("--all")
        .arg("-o")
        .arg(dir.path())
        .arg(binary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut map = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        // bundle{co}-{target, ':' spelled '_'}.hsaco
        let stem = name
            .strip_suffix(".hsaco")
            .unwrap()
            .strip_prefix("bundle")
            .unwrap();
        let (co, target) = stem.split_once('-').unwrap();
        map.insert(
            (co.parse().unwrap(), target.replace('_', ":")),
            std::fs::read(dir.path().join(&name)).unwrap(),
        );
    }
    map
}

fn record_line(path: &str, bytes: &[u8]) -> String {
    format!(
        "{path},{},{}\n",
        kpack_wheel::record_hash(bytes),
        bytes.len()
    )
}

/// The files of the fat wheel: wheel path → (bytes, mode).
pub(crate) fn fat_files() -> BTreeMap<String, (Vec<u8>, u32)> {
    let co = extracted(&fixture("corpus/libaxpy_2arch.so"));
    let mut f = BTreeMap::new();
    let mut add = |p: &str, b: Vec<u8>, m: u32| {
        f.insert(p.to_string(), (b, m));
    };
    add(
        "fatpkg/__init__.py",
        b"from pathlib import Path\nLIB = Path(__file__).parent / 'lib'\n".to_vec(),
        0o644,
    );
    add(
        "fatpkg/lib/libaxpy.so",
        std::fs::read(fixture("corpus/libaxpy_2arch.so")).unwrap(),
        0o755,
    );
    add(
        "fatpkg/lib/lib2tu.so",
        std::fs::read(fixture("corpus/lib2tu_2arch.so")).unwrap(),
        0o755,
    );
    let db = "fatpkg/lib/rocblas/library";
    add(
        &format!("{db}/TensileLibrary_gfx90a.co"),
        co[&(0, "gfx90a".into())].clone(),
        0o644,
    );
    add(
        &format!("{db}/TensileLibrary_gfx1030.co"),
        co[&(0, "gfx1030".into())].clone(),
        0o644,
    );
    add(
        &format!("{db}/TensileLibrary_gfx90a.dat"),
        b"gfx90a solutions".to_vec(),
        0o644,
    );
    add(
        &format!("{db}/TensileLibrary_gfx1030.dat"),
        b"gfx1030 solutions".to_vec(),
        0o644,
    );
    add(
        &format!("{db}/TensileLibrary.dat"),
        b"fallback solutions".to_vec(),
        0o644,
    );
    add(
        "fatpkg-1.0.data/platlib/fatpkg_ext/libfeat.so",
        std::fs::read(fixture("corpus/libaxpy_feat.so")).unwrap(),
        0o755,
    );
    add(
        "fatpkg-1.0.data/scripts/fatpkg-info",
        b"#!/bin/sh\necho fatpkg\n".to_vec(),
        0o755,
    );
    add(
        &format!("{HOST_DI}/METADATA"),
        b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\nSummary: a fat test package\n"
            .to_vec(),
        0o644,
    );
    add(
        &format!("{HOST_DI}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(),
        0o644,
    );
    f
}

/// Write the fat wheel (deliberately unsorted, with real-looking mtimes and a
/// directory entry) with a correct RECORD.
pub(crate) fn build_fat_wheel(dir: &Path, files: &BTreeMap<String, (Vec<u8>, u32)>) -> PathBuf {
    let path = dir.join(WHEEL);
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let when = zip::DateTime::from_date_and_time(2024, 5, 6, 7, 8, 10).unwrap();
    let opts = |m: u32| {
        SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(when)
            .unix_permissions(m)
    };
    z.add_directory("fatpkg/", opts(0o755)).unwrap();
    let mut record = String::new();
    for (p, (b, m)) in files.iter().rev() {
        z.start_file(p.as_str(), opts(*m)).unwrap();
        z.write_all(b).unwrap();
        record.push_str(&record_line(p, b));
    }
    record.push_str(&format!("{HOST_DI}/RECORD,,\n"));
    z.start_file(format!("{HOST_DI}/RECORD"), opts(0o644))
        .unwrap();
    z.write_all(record.as_bytes()).unwrap();
    z.finish().unwrap();
    path
}

/// Every entry of a wheel: path → (bytes, unix mode); checks its RECORD
/// lists exactly the entries with the right hashes and sizes.
pub(crate) fn read_wheel(path: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    let mut order = Vec::new();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        if e.is_dir() {
            continue;
        }
        let mut b = Vec::new();
        e.read_to_end(&mut b).unwrap();
        order.push(e.name().to_string());
        out.insert(e.name().to_string(), (b, e.unix_mode().unwrap() & 0o777));
    }
    let record_name = order.last().unwrap().clone();
    assert!(
        record_name.ends_with(".dist-info/RECORD"),
        "{}: RECORD is not the last entry",
        path.display()
    );
    let rows =
        kpack_wheel::parse_record(std::str::from_utf8(&out[&record_name].0).unwrap()).unwrap();
    let mut listed: Vec<&str> = rows.iter().map(|r| r.path.as_str()).collect();
    listed.sort();
    let mut present: Vec<&str> = out.keys().map(String::as_str).collect();
    present.sort();
    assert_eq!(listed, present, "{}: RECORD vs entries", path.display());
    for r in rows {
        if r.path == record_name {
            assert!(r.hash.is_empty() && r.size.is_none());
            continue;
        }
        let b = &out[&r.path].0;
        assert_eq!(
            r.hash,
            kpack_wheel::record_hash(b),
            "{}: {}",
            path.display(),
            r.path
        );
        assert_eq!(
            r.size,
            Some(b.len() as u64),
            "{}: {}",
            path.display(),
            r.path
        );
    }
    out
}

fn split(input: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut args: Vec<String> = vec![
        "wheel".into(),
        "split".into(),
        input.display().to_string(),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend([
        "--split-databases".into(),
        "rocblas".into(),
        "--json".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = kpack_env(&args, env);
    assert!(
        o.status.success(),
        "kpack wheel split failed:\n{}",
        stderr(&o)
    );
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn dir_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn splits_a_fat_wheel_into_host_and_device_wheels() {
    let tmp = tempfile::tempdir().unwrap();
    let files = fat_files();
    let input = build_fat_wheel(tmp.path(), &files);
    let out = tmp.path().join("out");
    let report = split(&input, &out, &[], &[]);

    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["device_code"], true);
    let archs: Vec<&str> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["arch"].as_str().unwrap())
        .collect();
    assert_eq!(archs, ["gfx1030", "gfx908", "gfx90a"]);
    let bins: Vec<&str> = report["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        bins,
        [
            "fatpkg-1.0.data/platlib/fatpkg_ext/libfeat.so",
            "fatpkg/lib/lib2tu.so",
            "fatpkg/lib/libaxpy.so"
        ]
    );
    assert_eq!(report["databases"]["rocblas"]["gfx90a"], 2, "{report:#}");
    assert_eq!(report["databases"]["rocblas"]["generic"], 1, "{report:#}");

    let names: Vec<String> = dir_bytes(&out).into_keys().collect();
    assert_eq!(
        names,
        [
            WHEEL,
            "fatpkg_device_gfx1030-1.0-py3-none-linux_x86_64.whl",
            "fatpkg_device_gfx908-1.0-py3-none-linux_x86_64.whl",
            "fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl",
        ],
        "no staging left behind"
    );
    for (k, w) in [("host", &report["host"]), ("gfx90a", &report["devices"][2])] {
        assert_eq!(
            w["bytes"].as_u64().unwrap(),
            std::fs::metadata(out.join(w["file"].as_str().unwrap()))
                .unwrap()
                .len(),
            "{k}"
        );
    }

    // Host wheel: same name, device code gone, everything else unchanged.
    let host = read_wheel(&out.join(WHEEL));
    let host_paths: Vec<&str> = host.keys().map(String::as_str).collect();
    assert_eq!(
        host_paths,
        [
            "fatpkg-1.0.data/platlib/fatpkg_ext/libfeat.so",
            "fatpkg-1.0.data/scripts/fatpkg-info",
            "fatpkg-1.0.dist-info/METADATA",
            "fatpkg-1.0.dist-info/RECORD",
            "fatpkg-1.0.dist-info/WHEEL",
            "fatpkg/__init__.py",
            "fatpkg/lib/lib2tu.so",
            "fatpkg/lib/libaxpy.so",
            "fatpkg/lib/rocblas/library/TensileLibrary.dat",
        ]
    );
    for (p, (b, m)) in &host {
        if p.ends_with("RECORD") {
            continue;
        }
        // Split by target by default: the host names its extras.
        if p.ends_with("METADATA") {
            let text = String::from_utf8_lossy(b);
            assert!(text.contains("Provides-Extra: device-all\n"), "{text}");
            continue;
        }
        assert_eq!(*m, files[p].1, "{p}: mode");
        if p.ends_with(".so") {
            assert!(b.len() < files[p].0.len(), "{p}: not smaller");
        } else {
            assert_eq!(b, &files[p].0, "{p}: changed");
        }
    }
    // Reproducible zip metadata: fixed timestamp, dist-info last, RECORD last.
    let mut z = zip::ZipArchive::new(std::fs::File::open(out.join(WHEEL)).unwrap()).unwrap();
    let names: Vec<String> = z.file_names().map(str::to_string).collect();
    for i in 0..z.len() {
        let e = z.by_index(i).unwrap();
        let t = e.last_modified().unwrap();
        assert_eq!(
            (t.year(), t.month(), t.day(), t.hour(), t.minute()),
            (1980, 1, 1, 0, 0),
            "{}",
            e.name()
        );
    }
    let first_di = names.iter().position(|n| n.starts_with(HOST_DI)).unwrap();
    assert!(
        names[first_di..].iter().all(|n| n.starts_with(HOST_DI)),
        "{names:?}"
    );

    // Device wheel: only gfx90a archives and gfx90a database files, overlaying the host.
    let dev = read_wheel(&out.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl"));
    let dev_paths: Vec<&str> = dev.keys().map(String::as_str).collect();
    assert_eq!(
        dev_paths,
        [
            "_fatpkg_kpack/fatpkg.fatpkg.lib.lib2tu.so_gfx90a.kpack",
            "_fatpkg_kpack/fatpkg.fatpkg.lib.libaxpy.so_gfx90a.kpack",
            "fatpkg/lib/rocblas/library/TensileLibrary_gfx90a.co",
            "fatpkg/lib/rocblas/library/TensileLibrary_gfx90a.dat",
            "fatpkg_device_gfx90a-1.0.data/platlib/_fatpkg_kpack/fatpkg.platlib.fatpkg_ext.libfeat.so_gfx90a.kpack",
            "fatpkg_device_gfx90a-1.0.dist-info/METADATA",
            "fatpkg_device_gfx90a-1.0.dist-info/RECORD",
            "fatpkg_device_gfx90a-1.0.dist-info/WHEEL",
        ]
    );
    let meta =
        String::from_utf8(dev["fatpkg_device_gfx90a-1.0.dist-info/METADATA"].0.clone()).unwrap();
    assert!(
        meta.contains("Name: fatpkg-device-gfx90a\n") && meta.contains("Version: 1.0\n"),
        "{meta}"
    );
    assert!(meta.contains("Requires-Dist: fatpkg == 1.0\n"), "{meta}");
    let wheel =
        String::from_utf8(dev["fatpkg_device_gfx90a-1.0.dist-info/WHEEL"].0.clone()).unwrap();
    assert!(
        wheel.contains("Root-Is-Purelib: false\n")
            && wheel.contains("Tag: py3-none-linux_x86_64\n"),
        "{wheel}"
    );
    let db = "fatpkg/lib/rocblas/library/TensileLibrary_gfx90a.dat";
    assert_eq!(dev[db].0, files[db].0);
    // Device wheels never share a path.
    let other = read_wheel(&out.join("fatpkg_device_gfx1030-1.0-py3-none-linux_x86_64.whl"));
    assert!(other.keys().all(|p| !dev.contains_key(p)));
    assert!(
        other
            .keys()
            .filter(|p| !p.contains(".dist-info/"))
            .all(|p| p.contains("gfx1030")),
        "{:?}",
        other.keys()
    );

    // Byte-identical on a second run, whatever the thread count.
    let out2 = tmp.path().join("out2");
    split(&input, &out2, &["-j", "1"], &[]);
    assert!(dir_bytes(&out) == dir_bytes(&out2), "two splits differ");
    // SOURCE_DATE_EPOCH sets the timestamps.
    let out3 = tmp.path().join("out3");
    split(&input, &out3, &[], &[("SOURCE_DATE_EPOCH", "1700000000")]);
    let mut z = zip::ZipArchive::new(std::fs::File::open(out3.join(WHEEL)).unwrap()).unwrap();
    let t = z.by_index(0).unwrap().last_modified().unwrap();
    assert_eq!(
        (
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        (2023, 11, 14, 22, 13, 20)
    );

    // --dry-run reports the same and writes nothing.
    let dry = tmp.path().join("dry");
    let r = split(&input, &dry, &["--dry-run"], &[]);
    let moved: Vec<serde_json::Value> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d["path"] = dry
                .join(d["file"].as_str().unwrap())
                .display()
                .to_string()
                .into();
            d
        })
        .collect();
    assert_eq!(r["devices"], serde_json::Value::Array(moved));
    assert!(!dry.exists(), "dry run wrote {}", dry.display());

    install_and_resolve(tmp.path(), &out);
}

/// pip-install the host wheel and the gfx90a device wheel into a fresh venv;
/// every kernel resolves for gfx90a through the installed markers, none for gfx1030.
fn install_and_resolve(tmp: &Path, out: &Path) {
    let venv = crate::util::Venv::create(tmp);
    let pip = |args: &[&str]| venv.pip(args);
    let host = out.join(WHEEL);
    let dev = out.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl");
    let o = pip(&[
        "install",
        "--no-index",
        "--no-deps",
        host.to_str().unwrap(),
        dev.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "pip install failed:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    let o = pip(&["check"]);
    assert!(o.status.success(), "pip check:\n{}", stdout(&o));
    let site = venv.platlib();
    assert!(
        site.join("fatpkg/lib/rocblas/library/TensileLibrary_gfx90a.co")
            .is_file()
    );
    assert!(
        site.join("fatpkg/lib/rocblas/library/TensileLibrary.dat")
            .is_file()
    );
    assert!(
        !site
            .join("fatpkg/lib/rocblas/library/TensileLibrary_gfx1030.co")
            .exists()
    );

    let cache = Cache::new(Config::default());
    let mut resolved = 0;
    for (installed, original) in [
        ("fatpkg/lib/libaxpy.so", "corpus/libaxpy_2arch.so"),
        ("fatpkg/lib/lib2tu.so", "corpus/lib2tu_2arch.so"),
        ("fatpkg_ext/libfeat.so", "corpus/libaxpy_feat.so"),
    ] {
        let bin = site.join(installed);
        let fat = kpack_elf::read_fat_binary(&bin, WalkOptions { verify_hash: true }).unwrap();
        assert!(
            fat.is_transformed() && fat.bundles.is_empty(),
            "{installed}: not offloaded"
        );
        let sec = fat.marker.unwrap();
        let mut bytes = vec![0u8; sec.size as usize];
        fat.source.read_exact_at(sec.offset, &mut bytes).unwrap();
        let marker = Marker::parse(&bytes).unwrap();
        let want = extracted(&fixture(original));
        for w in &fat.wrappers {
            let co = (w.reserved & 0xffff_ffff) as u32;
            let mut gfx90a = 0;
            for ((c, target), code) in &want {
                if *c != co {
                    continue;
                }
                let isa = format!("amdgcn-amd-amdhsa--{target}");
                let got = cache.load(&marker, &bin, co, &[isa.as_str()]);
                if target.starts_with("gfx90a") {
                    assert_eq!(
                        got.as_deref().ok(),
                        Some(code.as_slice()),
                        "{installed} co {co} {target}: {:?}",
                        got.as_ref().err()
                    );
                    gfx90a += 1;
                    resolved += 1;
                } else {
                    assert!(
                        got.is_err(),
                        "{installed} co {co} {target} resolved without its device wheel"
                    );
                }
            }
            assert!(
                gfx90a > 0,
                "{installed} co {co}: no gfx90a code object to check"
            );
        }
    }
    // libaxpy 1 + lib2tu 2 + libfeat (xnack+ and xnack-) 2.
    assert_eq!(resolved, 5);

    // `kpack verify` on the installed tree reaches the same verdict.
    let v = verify_json(&site);
    assert_eq!(v["report"]["resolved"], 5, "{v}");
    assert_eq!(v["report"]["binaries"], 3, "{v}");
    // One installed package: its archives are outside it (in
    // `_fatpkg_kpack/`), reached by following the markers.
    assert!(
        walk_files(&site.join("fatpkg"))
            .iter()
            .all(|f| f.extension().is_none_or(|x| x != "kpack")),
        "archives inside the package directory: the check below proves nothing"
    );
    let o = Command::new(KPACK)
        .args(["verify", "--json"])
        .arg(site.join("fatpkg"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "kpack verify {}/fatpkg:\n{}{}",
        site.display(),
        stdout(&o),
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // libaxpy 1 + lib2tu 2.
    assert_eq!(v["report"]["resolved"], 3, "{v}");
    assert_eq!(v["report"]["binaries"], 2, "{v}");
    // Without the device wheel's archives every marker is a miss.
    for e in walk_files(&site) {
        if e.extension().is_some_and(|x| x == "kpack") {
            std::fs::remove_file(&e).unwrap();
        }
    }
    let o = Command::new(KPACK)
        .args(["verify"])
        .arg(&site)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("no archive in") && stdout(&o).contains("fatpkg/lib/libaxpy.so"),
        "{}",
        stdout(&o)
    );
}

pub(crate) fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk_files(&p))
        } else {
            out.push(p)
        }
    }
    out
}

#[test]
fn wheel_without_device_code_is_copied_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = fat_files();
    files.retain(|p, _| {
        p.contains(".dist-info/") || p.ends_with(".py") || p.ends_with("TensileLibrary.dat")
    });
    files.insert(
        "fatpkg/lib/libhostonly.so".into(),
        (
            std::fs::read(fixture("corpus/libhostonly.so")).unwrap(),
            0o755,
        ),
    );
    let input = build_fat_wheel(tmp.path(), &files);
    let out = tmp.path().join("out");
    let report = split(&input, &out, &[], &[]);
    assert_eq!(report["device_code"], false);
    assert_eq!(report["devices"].as_array().unwrap().len(), 0);
    assert_eq!(
        std::fs::read(out.join(WHEEL)).unwrap(),
        std::fs::read(&input).unwrap()
    );
    let run = |force: bool| {
        let mut args = vec![
            "wheel",
            "split",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        kpack_env(&args, &[])
    };
    // The host wheel is there from the first run, the same bytes: left
    // alone. Another file of its name is refused without --force.
    let o = run(false);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("{WHEEL}: identical to the existing output")),
        "{}",
        stdout(&o)
    );
    std::fs::write(out.join(WHEEL), b"another wheel").unwrap();
    let o = run(false);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    let o = run(true);
    assert!(
        o.status.success() && stdout(&o).contains("no device code"),
        "{}",
        stdout(&o)
    );
}

/// A stale RECORD row is accepted as pip accepts it
/// (`wheel_hardening.rs`); the output directory may not be the input's
/// (the host wheel has its name).
#[test]
fn refuses_an_output_directory_that_holds_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat_wheel(tmp.path(), &fat_files());
    let o = wheel_split(input.to_str().unwrap(), tmp.path().to_str().unwrap(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds the input"), "{}", stderr(&o));
}

/// The fat wheel with RECORD's hash (and size) fields emptied, as some
/// wheels on PyPI ship them, at `dir/WHEEL`.
fn fat_wheel_without_record_hashes(dir: &Path) -> PathBuf {
    let mut files = fat_files();
    let record: String = files
        .keys()
        .map(|p| format!("{p},,\n"))
        .chain([format!("{HOST_DI}/RECORD,,\n")])
        .collect();
    files.insert(format!("{HOST_DI}/RECORD"), (record.into_bytes(), 0o644));
    let path = dir.join(WHEEL);
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    // RECORD last, as wheels have it.
    let (record_name, rest): (Vec<_>, Vec<_>) =
        files.iter().partition(|(p, _)| p.ends_with("/RECORD"));
    for (p, (b, m)) in rest.into_iter().chain(record_name) {
        z.start_file(
            p.as_str(),
            SimpleFileOptions::default().unix_permissions(*m),
        )
        .unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap();
    path
}

#[test]
fn takes_record_rows_without_a_hash_as_pip_does_and_writes_every_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let input = fat_wheel_without_record_hashes(tmp.path());
    let out = tmp.path().join("out");
    let o = wheel_split(input.to_str().unwrap(), out.to_str().unwrap(), &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("RECORD rows carry no hash; accepted, as pip does")
            .count(),
        1,
        "{err}"
    );
    let wheels: Vec<PathBuf> = walk_files(&out)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert!(wheels.len() >= 2, "{wheels:?}");
    for w in &wheels {
        // Every file of every wheel written has its sha256 and size.
        read_wheel(w);
    }
    // wheel prune writes every hash too.
    let pruned = tmp.path().join("pruned");
    let o = kpack_env(
        &[
            "wheel",
            "prune",
            input.to_str().unwrap(),
            "--keep",
            "gfx90a",
            "-o",
            pruned.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    read_wheel(&pruned.join(WHEEL));
}

#[test]
fn max_unpacked_size_limits_what_a_wheel_may_inflate_to() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let args = |max: &'static str| {
        [
            "wheel".to_string(),
            "split".into(),
            input.to_str().unwrap().into(),
            "-o".into(),
            out.to_str().unwrap().into(),
            "--max-unpacked-size".into(),
            max.into(),
        ]
    };
    let o = kpack_env(&args("1K"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "inflates to more than 1024 bytes (raise the limit with --max-unpacked-size)"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out.join(WHEEL).exists());
    // The size grammar of --max-memory: fractions and KiB/MiB/GiB too.
    let o = kpack_env(&args("1.5GiB"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join(WHEEL).exists());
}

/// Re-running the split on its own output is refused (exit 2, nothing
/// written): a host wheel by its offloaded binaries, a device wheel by the
/// WHEEL file wheel split writes for it.
#[test]
fn refuses_to_split_its_own_host_and_device_wheels() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    split(&input, &out, &[], &[]);
    let host = out.join(WHEEL);
    let device = dir_bytes(&out)
        .into_keys()
        .find(|n| n.contains("device_gfx90a"))
        .map(|n| out.join(n))
        .unwrap();
    for (wheel, what, names) in [
        (
            &host,
            "a host wheel",
            "(fatpkg/lib/lib2tu.so is already offloaded by kpack)",
        ),
        (&device, "a device wheel", "WHEEL Generator: kpack-wheel"),
    ] {
        let again = tmp.path().join("again");
        let o = wheel_split(wheel.to_str().unwrap(), again.to_str().unwrap(), &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("{what} written by kpack wheel split")) && err.contains(names),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(&again)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// `kpack verify --json DIR`, which must pass; its parsed report.
pub(crate) fn verify_json(dir: &Path) -> serde_json::Value {
    let o = Command::new(KPACK)
        .args(["verify", "--json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "kpack verify {}:\n{}{}",
        dir.display(),
        stdout(&o),
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A wheel `bomb-1.0-…` of `n` entries of 16 MiB zeros (each under the
/// per-entry ratio's floor) and a correct dist-info; the zeros are
/// deflated once and copied raw.
fn many_zero_entries(dir: &Path, n: usize) -> PathBuf {
    let one = dir.join("one.zip");
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let zeros = vec![0u8; 16 << 20];
    let mut z = zip::ZipWriter::new(std::fs::File::create(&one).unwrap());
    z.start_file("z", opts).unwrap();
    z.write_all(&zeros).unwrap();
    z.finish().unwrap();
    let mut one = zip::ZipArchive::new(std::fs::File::open(&one).unwrap()).unwrap();
    let path = dir.join("bomb-1.0-py3-none-any.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let mut record = String::new();
    for i in 0..n {
        let name = format!("bomb/zeros{i}");
        z.raw_copy_file_rename(one.by_index_raw(0).unwrap(), &name)
            .unwrap();
        record.push_str(&record_line(&name, &zeros));
    }
    for (name, text) in [
        (
            "bomb-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (
            "bomb-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n",
        ),
    ] {
        z.start_file(name, opts).unwrap();
        z.write_all(text.as_bytes()).unwrap();
        record.push_str(&record_line(name, text.as_bytes()));
    }
    record.push_str("bomb-1.0.dist-info/RECORD,,\n");
    z.start_file("bomb-1.0.dist-info/RECORD", opts).unwrap();
    z.write_all(record.as_bytes()).unwrap();
    z.finish().unwrap();
    path
}

/// Many entries each too small for the per-entry ratio add up to a bomb:
/// the whole wheel's ratio refuses it (exit 2), and neither split nor
/// prune leaves anything behind.
#[test]
fn refuses_a_wheel_whose_small_entries_inflate_to_a_bomb() {
    let tmp = tempfile::tempdir().unwrap();
    let input = many_zero_entries(tmp.path(), 8);
    for cmd in [&["split"][..], &["prune", "--keep", "gfx90a"]] {
        let out = tmp.path().join("out");
        let mut args = vec!["wheel"];
        args.extend_from_slice(cmd);
        args.extend([input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let o = kpack_env(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("50 times its") && stderr(&o).contains("a zip bomb?"),
            "{}",
            stderr(&o)
        );
        assert!(!out.exists(), "{cmd:?} left {}", out.display());
    }
}

/// Two targets whose wheel names normalise alike (`gfx1_30`, `gfx1-30`)
/// are refused before anything is written, even into an existing output
/// directory.
#[test]
fn refuses_two_targets_whose_wheel_names_normalise_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let patched = |fx: &str, to: &[u8]| {
        let mut b = std::fs::read(fixture(fx)).unwrap();
        let mut i = 0;
        while i + 7 <= b.len() {
            if &b[i..i + 7] == b"gfx1030" {
                b[i..i + 7].copy_from_slice(to);
            }
            i += 1;
        }
        b
    };
    let mut files = fat_files();
    files.retain(|p, _| p.contains(".dist-info/"));
    files.insert(
        "fatpkg/lib/liba.so".into(),
        (patched("corpus/libaxpy_2arch.so", b"gfx1_30"), 0o755),
    );
    files.insert(
        "fatpkg/lib/libb.so".into(),
        (patched("corpus/lib2tu_2arch.so", b"gfx1-30"), 0o755),
    );
    let input = build_fat_wheel(tmp.path(), &files);
    let out = tmp.path().join("dist");
    std::fs::create_dir(&out).unwrap();
    let o = wheel_split(input.to_str().unwrap(), out.to_str().unwrap(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the device wheels of gfx1-30 and gfx1_30 would both be")
            && stderr(&o).contains("normalise alike"),
        "{}",
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// On a terminal, `wheel split` shows its phases and the bytes done; on a
/// stderr that is not one, nothing but the closing line.
#[test]
fn shows_phases_on_a_terminal_and_nothing_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("plain");
    let o = wheel_split(
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        &[("TERM", "xterm")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    // Which runtimes read the archives, then the time: no progress lines.
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.len() == 2 && lines[0].starts_with("archives: ") && lines[1].starts_with("done in "),
        "{err:?}"
    );
    assert!(!err.contains(['\r', '\x1b']), "{err:?}");
    // Under a pseudo-terminal (util-linux `script`).
    let has_script = Command::new("script").arg("--version").output().is_ok();
    if !has_script {
        eprintln!("skipped the terminal half: no `script` (apt-get install util-linux)");
        return;
    }
    let out = tmp.path().join("tty");
    let cmd = format!(
        "{KPACK} wheel split {} -o {} > /dev/null",
        input.display(),
        out.display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", component_cache())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stdout(&o));
    let shown = stdout(&o);
    assert!(shown.contains(&format!("unpacking {WHEEL}")), "{shown:?}");
    assert!(shown.contains(" B/"), "{shown:?}");
}

/// A large file the split writes anew (a 6 MiB database file, deflated in
/// parallel chunks) comes out byte-identical at any thread count, and
/// Python's own zlib inflates it to what went in.
#[test]
fn large_entries_deflate_to_the_same_bytes_at_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = fat_files();
    let mut x = 7u32;
    let big: Vec<u8> = (0..6_300_000u32)
        .map(|i| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            if i % 4 == 0 {
                (x >> 24) as u8
            } else {
                (i / 5) as u8
            }
        })
        .collect();
    let path = "fatpkg/lib/rocblas/library/TensileLibrary_Type_HH_gfx90a.dat";
    files.insert(path.into(), (big.clone(), 0o644));
    let input = build_fat_wheel(tmp.path(), &files);
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    split(&input, &one, &["-j", "1"], &[]);
    split(&input, &two, &["-j", "2"], &[]);
    assert_eq!(dir_bytes(&one), dir_bytes(&two), "-j 1 and -j 2 differ");
    let dev = one.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl");
    let entries = read_wheel(&dev);
    let (got, _) = &entries[path];
    assert!(got == &big, "the database file changed");
    let check = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nassert z.testzip() is None\n\
                 print(max(i.file_size for i in z.infolist()))";
    let o = Command::new("python3")
        .args(["-c", check])
        .arg(&dev)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), big.len().to_string());
}
