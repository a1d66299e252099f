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

/// Write `files` (key, arch, relative path, bytes) under `dir` and a
/// descriptor `dir/desc.json` listing them, the sha256 of entry `wrong`
/// (if any) off by one bit.
fn descriptor(dir: &std::path::Path, files: &[(&str, &str, &str, Vec<u8>)], wrong: Option<usize>) {
    let mut entries = Vec::new();
    for (i, (key, arch, rel, bytes)) in files.iter().enumerate() {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        let mut digest = kpack_format::sha256(bytes);
        if wrong == Some(i) {
            digest[0] ^= 1;
        }
        entries.push(serde_json::json!({
            "toc_key": key,
            "arch": arch,
            "path": rel,
            "sha256": kpack_format::digest::to_hex(&digest),
        }));
    }
    let doc = serde_json::json!({ "entries": entries });
    std::fs::write(dir.join("desc.json"), doc.to_string()).unwrap();
}

/// `len` bytes that do not compress well, different for each `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `archive pack --descriptor SRC/desc.json --layout arch-content --lib
/// libfoo -o OUT`.
fn pack_arch_content(src: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    kpack([
        "archive",
        "pack",
        "--descriptor",
        src.join("desc.json").to_str().unwrap(),
        "--layout",
        "arch-content",
        "--lib",
        "libfoo",
        "-o",
        out.to_str().unwrap(),
    ])
}

fn pack_files() -> Vec<(&'static str, &'static str, &'static str, Vec<u8>)> {
    vec![
        ("lib/libfoo.so#0", "gfx1100", "k/a_1100.co", noise(1, 5000)),
        ("lib/libfoo.so#0", "gfx942", "k/a_942.co", noise(2, 4000)),
        (
            "lib/libfoo.so#0",
            "gfx942:xnack+",
            "k/a_942x.co",
            noise(3, 4100),
        ),
        ("lib/libfoo.so#1", "gfx942", "k/b_942.co", noise(4, 300)),
    ]
}

#[test]
fn pack_from_a_descriptor_writes_the_arch_content_layout_and_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let files = pack_files();
    descriptor(&src, &files, None);
    let out = tmp.path().join("out");
    let o = pack_arch_content(&src, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("arch_content/libfoo.kpack-manifest.json")).unwrap(),
    )
    .unwrap();
    let listed: Vec<&str> = manifest["archives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "gfx1100/kpack/libfoo_gfx1100.kpack",
            "gfx942/kpack/libfoo_gfx942.kpack"
        ]
    );
    for a in manifest["archives"].as_array().unwrap() {
        let path = out.join("arch_content").join(a["path"].as_str().unwrap());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            a["sha256"].as_str().unwrap(),
            kpack_format::digest::to_hex(&kpack_format::sha256(&bytes))
        );
        let archive = Archive::open(&path).unwrap();
        assert_eq!(
            archive.entries().count(),
            a["entries"].as_array().unwrap().len()
        );
        for e in a["entries"].as_array().unwrap() {
            let (key, arch) = (e["key"].as_str().unwrap(), e["arch"].as_str().unwrap());
            let want = &files.iter().find(|f| (f.0, f.1) == (key, arch)).unwrap().3;
            let entry = archive.entry(key, arch).unwrap();
            assert_eq!(&archive.read(entry).unwrap()[..], &want[..], "{key} {arch}");
            assert_eq!(e["size"], want.len());
        }
    }
    let gfx942 = Archive::open(out.join("arch_content/gfx942/kpack/libfoo_gfx942.kpack")).unwrap();
    assert_eq!(gfx942.gfx_arch_family(), "gfx942");
    assert_eq!(gfx942.group_name(), "libfoo");
}

#[test]
fn pack_refuses_a_file_whose_sha256_the_descriptor_contradicts() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    descriptor(&src, &pack_files(), Some(3));
    let out = tmp.path().join("out");
    let o = pack_arch_content(&src, &out);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("b_942.co")
            && err.contains("the descriptor says")
            && err.contains("lib/libfoo.so#1"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn pack_into_one_archive_writes_its_manifest_beside_it_unless_told_not_to() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    descriptor(&src, &pack_files(), None);
    let desc = src.join("desc.json");
    let archive = tmp.path().join("one/foo.kpack");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "archive",
            "pack",
            "--descriptor",
            desc.to_str().unwrap(),
            "--gfx-arch-family",
            "mixed",
            "-o",
            archive.to_str().unwrap(),
        ];
        args.extend(extra);
        kpack(args)
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(Archive::open(&archive).unwrap().entries().count(), 4);
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("one/foo.kpack.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["archives"][0]["path"], "foo.kpack");
    // Without --gfx-arch-family, two processors in one archive are refused.
    let o = kpack([
        "archive",
        "pack",
        "--descriptor",
        desc.to_str().unwrap(),
        "--manifest",
        "-",
        "-o",
        tmp.path().join("two/foo.kpack").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--gfx-arch-family"), "{}", stderr(&o));
    let o = run(&["--manifest", "-", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}
