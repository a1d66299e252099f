//! `kpack archive list|extract|pack|verify` on AMD's KPAK test vectors.

use std::path::PathBuf;

use kpack_format::Archive;
use kpack_tests::{stderr, stdout, workspace_root};

use crate::util::kpack;

fn vector(name: &str) -> PathBuf {
    workspace_root()
        .join("host/format/tests/vectors")
        .join(name)
}

#[test]
fn archive_list_json_describes_amd_noop_vector() {
    let out = kpack([
        "archive".as_ref(),
        "list".as_ref(),
        "--json".as_ref(),
        vector("amd_test_noop.kpack").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["compression_scheme"], "none");
    assert_eq!(doc["gfx_arches"], serde_json::json!(["gfx900", "gfx906"]));
    let entries: Vec<(String, String, u64)> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().into(),
                e["arch"].as_str().unwrap().into(),
                e["original_size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("bin/testapp#0".into(), "gfx900".into(), 168),
            ("lib/libtest.so#0".into(), "gfx900".into(), 119),
            ("lib/libtest.so#0".into(), "gfx906".into(), 219)
        ]
    );
}

#[test]
fn archive_extract_then_pack_round_trips_amd_zstd_vector() {
    let dir = tempfile::tempdir().unwrap();
    let src = vector("amd_test_zstd.kpack");
    let tree = dir.path().join("tree");
    let out = kpack([
        "archive".as_ref(),
        "extract".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        tree.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hip = tree.join("gfx1101/lib/libhip.so#0.hsaco");
    assert_eq!(std::fs::read(&hip).unwrap().len(), 619);
    assert!(
        stdout(&out).contains("libhip.so#0.hsaco\t619"),
        "{}",
        stdout(&out)
    );

    let packed = dir.path().join("again.kpack");
    let out = kpack([
        "archive".as_ref(),
        "pack".as_ref(),
        tree.as_os_str(),
        "-o".as_ref(),
        packed.as_os_str(),
        "--group-name".as_ref(),
        "test".as_ref(),
        "--gfx-arch-family".as_ref(),
        "gfx110X".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (a, b) = (
        Archive::open(&src).unwrap(),
        Archive::open(&packed).unwrap(),
    );
    assert_eq!(a.arches(), b.arches());
    assert_eq!(b.entry_count(), 3);
    for e in a.entries() {
        assert_eq!(
            a.read(e).unwrap(),
            b.get(e.key(), e.arch()).unwrap(),
            "{}",
            e.key()
        );
    }
    assert_eq!(b.gfx_arch_family(), "gfx110X");
}

#[test]
fn archive_pack_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("gfx900/lib")).unwrap();
    std::fs::write(tree.join("gfx900/lib/a.so#0.hsaco"), b"code").unwrap();
    let packed = dir.path().join("x.kpack");
    let out = kpack([
        "archive".as_ref(),
        "pack".as_ref(),
        tree.as_os_str(),
        "-o".as_ref(),
        packed.as_os_str(),
        "--dry-run".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("would pack lib/a.so#0 gfx900"),
        "{}",
        stderr(&out)
    );
    assert!(!packed.exists());
}

#[test]
fn archive_pack_creates_missing_parent_directories_and_removes_them_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("gfx900/lib")).unwrap();
    std::fs::write(tree.join("gfx900/lib/a.so#0.hsaco"), b"code").unwrap();
    let pack = |out: &std::path::Path| {
        kpack([
            "archive".as_ref(),
            "pack".as_ref(),
            tree.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ])
    };
    let packed = dir.path().join("a/b/x.kpack");
    let out = pack(&packed);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        &*Archive::open(&packed)
            .unwrap()
            .get("lib/a.so#0", "gfx900")
            .unwrap(),
        b"code"
    );

    // A kernel that cannot be read: exit 2, and the directories made for
    // the output are gone again.
    std::os::unix::fs::symlink(
        dir.path().join("missing"),
        tree.join("gfx900/lib/b.so#0.hsaco"),
    )
    .unwrap();
    let out = pack(&dir.path().join("c/d/x.kpack"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!dir.path().join("c").exists());
}

#[test]
fn archive_verify_exit_codes_distinguish_findings_from_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = vector("amd_test_zstd.kpack");
    let out = kpack(["archive".as_ref(), "verify".as_ref(), good.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Corrupt the first frame's payload: opens, but decoding fails.
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[0x50] ^= 0xff;
    let bad = dir.path().join("bad.kpack");
    std::fs::write(&bad, bytes).unwrap();
    let out = kpack([
        "archive".as_ref(),
        "verify".as_ref(),
        "--json".as_ref(),
        good.as_os_str(),
        bad.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["archives"][0]["ok"], true);
    assert_eq!(doc["archives"][1]["ok"], false);
    assert!(
        doc["archives"][1]["findings"][0]
            .as_str()
            .unwrap()
            .contains("lib/libhip.so#0"),
        "{doc}"
    );

    let missing = dir.path().join("missing.kpack");
    let out = kpack(["archive".as_ref(), "verify".as_ref(), missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.kpack"), "{}", stderr(&out));
}

#[test]
fn archive_extract_of_unknown_key_fails_listing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = kpack([
        "archive".as_ref(),
        "extract".as_ref(),
        vector("amd_test_noop.kpack").as_os_str(),
        "-o".as_ref(),
        dir.path().as_os_str(),
        "--key".as_ref(),
        "nope#0".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bin/testapp#0"), "{}", stderr(&out));
}

/// Every entry of an archive kpack writes records its code object's sha256;
/// `archive verify` and `verify` catch a byte flipped inside a stored
/// (uncompressed, so still decodable) code object, naming the entry.
#[test]
fn archive_verify_catches_a_flipped_byte_through_the_recorded_digest() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crate::util::offload_into(
        &kpack_tests::fixture("corpus/libaxpy_2arch.so"),
        dir.path(),
        &["--compression", "none"],
    );
    let mut archives: Vec<PathBuf> = std::fs::read_dir(dir.path().join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    archives.sort();
    for a in &archives {
        let opened = Archive::open(a).unwrap();
        for e in opened.entries() {
            let bytes = opened.read(e).unwrap();
            assert_eq!(
                e.sha256(),
                Some(&kpack_format::sha256(&bytes)),
                "{} {}",
                a.display(),
                e.key()
            );
        }
    }
    let victim = &archives[0];
    let (at, key) = {
        let a = Archive::open(victim).unwrap();
        let e = a.entries().next().unwrap();
        (e.stored_offset() as usize + 200, e.key().to_owned())
    };
    let out = kpack(["archive".as_ref(), "verify".as_ref(), victim.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[at] ^= 1;
    std::fs::write(victim, &bytes).unwrap();
    let out = kpack(["archive".as_ref(), "verify".as_ref(), victim.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("sha256") && text.contains(&key), "{text}");
    let out = kpack(["verify".as_ref(), dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("sha256"), "{}", stdout(&out));
    drop(bin);
}
