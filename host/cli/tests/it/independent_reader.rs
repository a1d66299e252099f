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

/// A venv with msgpack and zstandard, made once per target directory and
/// again when it no longer runs (a target directory moved with its venv).
fn python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let dir = scratch().join("kpak-reader-venv");
            let py = dir.join("bin/python");
            let runs = Command::new(&py)
                .args(["-c", "import msgpack, zstandard"])
                .output()
                .is_ok_and(|o| o.status.success());
            if !runs {
                let _ = std::fs::remove_dir_all(&dir);
                let o = Venv::at(&dir).pip(&["install", "-q", "msgpack", "zstandard"]);
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
