//! A second opinion on the archive format: `tests/python/kpak_read.py`, a
//! reader written in Python from the format description (spec §2) with
//! PyPI's `msgpack` and `zstandard`, not from our reader, reads archives
//! kpack writes (every corpus fixture offloaded with zstd at levels 1, 3
//! and 19 and with no compression, and the level-3 ones converted to KPAK
//! v2 `zstd-delta`) and
//! AMD's test vectors. It must see the same entries, and
//! their bytes must equal what `kpack archive extract` writes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{fixture, sha256_hex, stderr, stdout, workspace_root};

use crate::util::{Venv, kpack, scratch};

/// The reader's PyPI dependencies, pinned: a new release changes what the
/// independent reader runs on only when this file says so.
const MSGPACK: &str = "msgpack==1.2.4";
const ZSTANDARD: &str = "zstandard==0.25.0";

/// A venv with msgpack and zstandard, made once per target directory and
/// again when it no longer runs (a target directory moved with its venv).
fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let dir = scratch().join("kpak-reader-venv");
            let py = dir.join("bin/python");
            // Runs, and holds exactly the pinned versions.
            let pinned = format!(
                "import importlib.metadata as m, sys; sys.exit(['msgpack==' + \
                 m.version('msgpack'), 'zstandard==' + m.version('zstandard')] != \
                 ['{MSGPACK}', '{ZSTANDARD}'])"
            );
            let runs = Command::new(&py)
                .args(["-c", &pinned])
                .output()
                .is_ok_and(|o| o.status.success());
            if !runs {
                let _ = std::fs::remove_dir_all(&dir);
                let o = Venv::at(&dir).pip(&["install", "-q", MSGPACK, ZSTANDARD]);
                assert!(o.status.success(), "pip install:\n{}", stderr(&o));
            }
            py
        })
        .clone()
}

/// `(file, key, arch, size, sha256)` of every entry, as `kpack archive
/// extract` writes them.
fn extracted(archive: &Path, tmp: &Path) -> BTreeSet<(String, String, String, u64, String)> {
    let out = tmp.join(format!(
        "x-{}",
        sha256_hex(archive.to_string_lossy().as_bytes())
    ));
    let o = kpack([
        "archive",
        "extract",
        archive.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}: {}", archive.display(), stderr(&o));
    let mut set = BTreeSet::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(&out).unwrap().to_str().unwrap().to_string();
            let (arch, key) = rel.split_once('/').unwrap();
            let key = key.strip_suffix(".hsaco").unwrap();
            let bytes = std::fs::read(&p).unwrap();
            set.insert((
                archive.display().to_string(),
                key.to_string(),
                arch.to_string(),
                bytes.len() as u64,
                sha256_hex(&bytes),
            ));
        }
    }
    set
}

#[test]
fn an_independent_python_reader_agrees_with_archive_extract() {
    let tmp = tempfile::tempdir().unwrap();
    let mut archives = vec![
        PathBuf::from("/work/shared/corpus/vectors/amd_test_noop.kpack"),
        PathBuf::from("/work/shared/corpus/vectors/amd_test_zstd.kpack"),
    ];
    archives.retain(|p| p.is_file());
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(fixture("corpus"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            // Executables and shared libraries: what `offload` takes.
            let n = p.file_name().unwrap().to_str().unwrap();
            (n.starts_with("lib") || n.starts_with("exe_")) && !n.ends_with(".o")
        })
        .collect();
    fixtures.sort();
    for f in &fixtures {
        let name = f.file_name().unwrap().to_str().unwrap();
        // Level 3 is the default; 1 and 19 are the ends of the range
        // (19 with the long window; the v1 frames must stay readable).
        for (compression, level) in [("zstd", "3"), ("zstd", "1"), ("zstd", "19"), ("none", "3")] {
            let dir = tmp.path().join(format!("{compression}-{level}")).join(name);
            let o = kpack([
                "offload".as_ref(),
                f.as_os_str(),
                "-o".as_ref(),
                dir.join("host").as_os_str(),
                "--archives".as_ref(),
                dir.join("arch").as_os_str(),
                "--compression".as_ref(),
                compression.as_ref(),
                "--compression-level".as_ref(),
                level.as_ref(),
            ]);
            assert!(o.status.success(), "offload {name}: {}", stderr(&o));
            let mut written: Vec<PathBuf> = match std::fs::read_dir(dir.join("arch")) {
                Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
                Err(_) => Vec::new(),
            };
            written.sort();
            if compression == "zstd" && level == "3" && !written.is_empty() {
                // Our v1 archives carry the frame index AMD's parser skips;
                // the Python reader checks it against its own walk. Their
                // zstd-delta conversion is read too (KPAK v2).
                for a in &written {
                    assert!(kpack_format::Archive::open(a).unwrap().has_frame_index());
                }
                let mut args: Vec<std::ffi::OsString> = vec!["archive".into(), "convert".into()];
                args.extend(written.iter().map(|p| p.clone().into_os_string()));
                args.extend(["-o".into(), dir.join("delta").into_os_string()]);
                args.extend(["--compression".into(), "zstd-delta".into()]);
                let o = kpack(&args);
                assert!(o.status.success(), "convert {name}: {}", stderr(&o));
                archives.extend(
                    std::fs::read_dir(dir.join("delta"))
                        .unwrap()
                        .map(|e| e.unwrap().path()),
                );
            }
            archives.extend(written);
        }
    }
    archives.sort();
    assert!(archives.len() > 4 * fixtures.len(), "{archives:?}");

    let script = workspace_root().join("tests/python/kpak_read.py");
    let o = Command::new(python())
        .arg(&script)
        .args(&archives)
        .output()
        .unwrap();
    assert!(o.status.success(), "kpak_read.py: {}", stderr(&o));
    let python: BTreeSet<_> = stdout(&o)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "{l}");
            (
                f[0].to_string(),
                f[1].to_string(),
                f[2].to_string(),
                f[3].parse::<u64>().unwrap(),
                f[4].to_string(),
            )
        })
        .collect();
    let ours: BTreeSet<_> = archives
        .iter()
        .flat_map(|a| extracted(a, tmp.path()))
        .collect();
    assert!(ours.len() >= archives.len(), "{}", ours.len());
    let only_py: Vec<_> = python.difference(&ours).collect();
    let only_ours: Vec<_> = ours.difference(&python).collect();
    assert!(
        only_py.is_empty() && only_ours.is_empty(),
        "only the Python reader: {only_py:#?}\nonly kpack: {only_ours:#?}"
    );
}

/// Entries of `archives` as the independent Python reader sees them:
/// (key, arch, size, sha256), per archive.
fn python_entries(archives: &[&Path]) -> Vec<BTreeSet<(String, String, u64, String)>> {
    let script = workspace_root().join("tests/python/kpak_read.py");
    archives
        .iter()
        .map(|a| {
            let o = Command::new(python()).arg(&script).arg(a).output().unwrap();
            assert!(
                o.status.success(),
                "kpak_read.py {}: {}",
                a.display(),
                stderr(&o)
            );
            stdout(&o)
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    (
                        f[1].to_string(),
                        f[2].to_string(),
                        f[3].parse().unwrap(),
                        f[4].to_string(),
                    )
                })
                .collect()
        })
        .collect()
}

/// `kpack offload FIXTURE` with kernel name `lib` and archive prefix
/// `name` into `dir`; the archive of `processor`.
fn offload_as_lib(dir: &Path, fixture_name: &str, name: &str, processor: &str) -> PathBuf {
    let o = kpack([
        "offload",
        fixture(&format!("corpus/{fixture_name}")).to_str().unwrap(),
        "-o",
        dir.join(format!("{name}.so")).to_str().unwrap(),
        "--archives",
        dir.join("arch").to_str().unwrap(),
        "--key",
        "lib",
        "--name",
        name,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(format!("arch/{name}_{processor}.kpack"))
}

/// `kpack archive replace` swaps one key's code objects in and back out
/// (byte-identical round trip, v1 and v2), `merge` joins archives; the
/// Python reader reads every output and sees exactly the entries asked for.
#[test]
fn archive_replace_and_merge_round_trip_and_stay_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = offload_as_lib(d, "lib2tu_2arch.so", "two", "gfx90a");
    let new = offload_as_lib(d, "libaxpy_2arch.so", "one", "gfx90a");
    let run = |args: &[&str]| {
        let o = kpack(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let (out1, out2) = (d.join("out1.kpack"), d.join("out2.kpack"));
    run(&[
        "archive",
        "replace",
        &s(&base),
        "--from",
        &s(&new),
        "--keys",
        "lib#0",
        "-o",
        &s(&out1),
    ]);
    run(&[
        "archive",
        "replace",
        &s(&out1),
        "--from",
        &s(&base),
        "--keys",
        "lib#*",
        "-o",
        &s(&out2),
    ]);
    assert!(
        std::fs::read(&out2).unwrap() == std::fs::read(&base).unwrap(),
        "round trip"
    );
    let [b, n, o1] = &python_entries(&[&base, &new, &out1])[..] else {
        unreachable!()
    };
    let want: BTreeSet<_> = b
        .iter()
        .filter(|e| e.0 != "lib#0")
        .chain(n.iter().filter(|e| e.0 == "lib#0"))
        .cloned()
        .collect();
    assert_eq!(o1, &want);

    // A key BASE lacks needs --add; a glob matching nothing is an error.
    let o = kpack([
        "archive",
        "replace",
        &s(&new),
        "--from",
        &s(&base),
        "--keys",
        "lib#1",
        "-o",
        &s(&d.join("x.kpack")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--add"), "{}", stderr(&o));
    let o = kpack([
        "archive",
        "replace",
        &s(&base),
        "--from",
        &s(&new),
        "--keys",
        "nothing*",
        "-o",
        &s(&d.join("x.kpack")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!d.join("x.kpack").exists());
    let added = d.join("added.kpack");
    run(&[
        "archive",
        "replace",
        &s(&new),
        "--from",
        &s(&base),
        "--keys",
        "lib#1",
        "--add",
        "-o",
        &s(&added),
    ]);
    assert_eq!(python_entries(&[&added])[0].len(), n.len() + 1);

    // merge: disjoint archives join; the same entry twice names both files.
    let other = d.join("arch/two_gfx1030.kpack");
    let merged = d.join("merged.kpack");
    run(&["archive", "merge", &s(&base), &s(&other), "-o", &s(&merged)]);
    let [m, b, g] = &python_entries(&[&merged, &base, &other])[..] else {
        unreachable!()
    };
    assert_eq!(m, &b.union(g).cloned().collect());
    let o = kpack([
        "archive",
        "merge",
        &s(&base),
        &s(&out1),
        "-o",
        &s(&d.join("y.kpack")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("out1.kpack") && stderr(&o).contains("two_gfx90a"),
        "{}",
        stderr(&o)
    );

    // v2: the same round trip on zstd-delta archives.
    let conv = |a: &Path, out: &str| {
        run(&[
            "archive",
            "convert",
            &s(a),
            "-o",
            &s(&d.join(out)),
            "--compression",
            "zstd-delta",
        ]);
        std::fs::read_dir(d.join(out))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let (base2, new2) = (conv(&base, "b2"), conv(&new, "n2"));
    let (v1, v2) = (d.join("v1.kpack"), d.join("v2.kpack"));
    run(&[
        "archive",
        "replace",
        &s(&base2),
        "--from",
        &s(&new2),
        "--keys",
        "lib#0",
        "-o",
        &s(&v1),
    ]);
    run(&[
        "archive",
        "replace",
        &s(&v1),
        "--from",
        &s(&base2),
        "--keys",
        "lib#0",
        "-o",
        &s(&v2),
    ]);
    assert!(
        std::fs::read(&v2).unwrap() == std::fs::read(&base2).unwrap(),
        "v2 round trip"
    );
    assert_eq!(&python_entries(&[&v1])[0], o1);
}
