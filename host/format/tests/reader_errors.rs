//! The strict reader: every inconsistency is a typed error naming an offset,
//! and no input makes it panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use kpack_format::{Archive, ErrorKind};

fn vector(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors")
            .join(name),
    )
    .unwrap()
}

/// A msgpack value for hand-made TOCs.
enum V {
    U(u64),
    S(&'static str),
    A(Vec<V>),
    M(Vec<(&'static str, V)>),
    Nil,
}

fn enc(v: &V, out: &mut Vec<u8>) {
    match v {
        V::U(n) => drop(rmp::encode::write_uint(out, *n)),
        V::S(s) => drop(rmp::encode::write_str(out, s)),
        V::Nil => rmp::encode::write_nil(out).unwrap(),
        V::A(items) => {
            rmp::encode::write_array_len(out, items.len() as u32).unwrap();
            items.iter().for_each(|i| enc(i, out));
        }
        V::M(items) => {
            rmp::encode::write_map_len(out, items.len() as u32).unwrap();
            for (k, v) in items {
                rmp::encode::write_str(out, k).unwrap();
                enc(v, out);
            }
        }
    }
}

/// Header + 48 zero bytes + `blob` + encoded `toc`.
fn archive(blob: &[u8], toc: &V) -> Vec<u8> {
    let mut out = b"KPAK".to_vec();
    out.extend(1u32.to_le_bytes());
    out.extend((64 + blob.len() as u64).to_le_bytes());
    out.resize(64, 0);
    out.extend(blob);
    enc(toc, &mut out);
    out
}

fn entry(ordinal: u64, size: u64) -> V {
    V::M(vec![
        ("type", V::S("hsaco")),
        ("ordinal", V::U(ordinal)),
        ("original_size", V::U(size)),
    ])
}

/// A valid NoOp TOC with two 4-byte blobs, with `edit` applied to its fields.
fn noop_toc(edit: impl FnOnce(&mut Vec<(&'static str, V)>)) -> V {
    let mut fields = vec![
        ("format_version", V::U(1)),
        ("group_name", V::S("g")),
        ("gfx_arch_family", V::S("f")),
        ("gfx_arches", V::A(vec![V::S("gfx900")])),
        (
            "toc",
            V::M(vec![
                ("a#0", V::M(vec![("gfx900", entry(0, 4))])),
                ("b#0", V::M(vec![("gfx900", entry(1, 4))])),
            ]),
        ),
        ("compression_scheme", V::S("none")),
        (
            "blobs",
            V::A(vec![
                V::M(vec![("offset", V::U(64)), ("size", V::U(4))]),
                V::M(vec![("offset", V::U(68)), ("size", V::U(4))]),
            ]),
        ),
    ];
    edit(&mut fields);
    V::M(fields)
}

fn set(fields: &mut [(&'static str, V)], key: &str, value: V) {
    fields.iter_mut().find(|(k, _)| *k == key).unwrap().1 = value;
}

fn blobs(list: &[(u64, u64)]) -> V {
    V::A(
        list.iter()
            .map(|&(o, s)| V::M(vec![("offset", V::U(o)), ("size", V::U(s))]))
            .collect(),
    )
}

#[track_caller]
fn rejects(bytes: Vec<u8>, kind: ErrorKind, needle: &str) {
    let err = Archive::from_bytes(bytes).expect_err("archive should be rejected");
    assert_eq!(err.kind(), kind, "{err}");
    assert!(err.to_string().contains(needle), "{err:?} lacks {needle:?}");
    assert!(err.offset().is_some(), "{err} names no offset");
}

#[test]
fn hand_made_noop_archive_is_valid() {
    let a = Archive::from_bytes(archive(b"AAAABBBB", &noop_toc(|_| {}))).unwrap();
    assert_eq!(&*a.get("b#0", "gfx900").unwrap(), b"BBBB");
}

#[test]
fn rejects_short_file_bad_magic_and_version() {
    rejects(
        b"KPAK\x01".to_vec(),
        ErrorKind::InvalidFormat,
        "shorter than the 16-byte header",
    );
    // Any other file (a text file given by mistake) is said to be none.
    rejects(
        vec![b'K'; 8],
        ErrorKind::InvalidFormat,
        "not a .kpack archive",
    );
    rejects(
        b"notes\n".to_vec(),
        ErrorKind::InvalidFormat,
        "not a .kpack archive",
    );
    let mut bad = vector("amd_test_noop.kpack");
    bad[0] = b'X';
    rejects(
        bad,
        ErrorKind::InvalidFormat,
        "not a .kpack archive (it starts with",
    );
    let mut bad = vector("amd_test_noop.kpack");
    bad[4..8].copy_from_slice(&999u32.to_le_bytes());
    rejects(bad, ErrorKind::UnsupportedVersion, "version 999");
}

#[test]
fn rejects_toc_offset_outside_file_or_inside_header() {
    let mut bad = vector("amd_test_noop.kpack");
    bad[8..16].copy_from_slice(&903u64.to_le_bytes());
    rejects(bad, ErrorKind::InvalidFormat, "not inside");
    let mut bad = vector("amd_test_noop.kpack");
    bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    rejects(bad, ErrorKind::InvalidFormat, "not inside");
    let mut bad = vector("amd_test_noop.kpack");
    bad[8..16].copy_from_slice(&16u64.to_le_bytes());
    rejects(bad, ErrorKind::InvalidFormat, "into the 64-byte header");
}

#[test]
fn rejects_broken_msgpack_and_non_map_root() {
    let mut bad = vector("amd_test_noop.kpack");
    bad.truncate(bad.len() - 1);
    rejects(bad, ErrorKind::MsgpackParseFailed, "not valid msgpack");
    rejects(
        archive(b"", &V::A(vec![])),
        ErrorKind::MsgpackParseFailed,
        "not a map",
    );
}

#[test]
fn tolerates_trailing_bytes_after_the_toc_like_amds_runtime() {
    let mut ok = vector("amd_test_noop.kpack");
    ok.extend_from_slice(b"trailing junk");
    assert_eq!(Archive::from_bytes(ok).unwrap().entry_count(), 3);
}

#[test]
fn rejects_missing_and_wrong_typed_keys() {
    for key in [
        "format_version",
        "group_name",
        "gfx_arch_family",
        "gfx_arches",
        "toc",
        "blobs",
    ] {
        let toc = noop_toc(|f| f.retain(|(k, _)| *k != key));
        rejects(
            archive(b"AAAABBBB", &toc),
            ErrorKind::InvalidFormat,
            &format!("no \"{key}\" key"),
        );
    }
    rejects(
        archive(b"AAAABBBB", &noop_toc(|f| set(f, "group_name", V::U(3)))),
        ErrorKind::InvalidFormat,
        "group_name: invalid type: integer `3`, expected a string",
    );
    rejects(
        archive(
            b"AAAABBBB",
            &noop_toc(|f| set(f, "gfx_arches", V::A(vec![V::Nil]))),
        ),
        ErrorKind::InvalidFormat,
        "gfx_arches[0]: invalid type",
    );
    let toc = noop_toc(|f| {
        set(
            f,
            "toc",
            V::M(vec![(
                "a#0",
                V::M(vec![("gfx900", V::M(vec![("ordinal", V::U(0))]))]),
            )]),
        )
    });
    rejects(
        archive(b"AAAABBBB", &toc),
        ErrorKind::InvalidFormat,
        "original_size",
    );
    let toc = noop_toc(|f| {
        set(
            f,
            "toc",
            V::M(vec![(
                "a#0",
                V::M(vec![(
                    "gfx900",
                    V::M(vec![("ordinal", V::S("0")), ("original_size", V::U(4))]),
                )]),
            )]),
        )
    });
    rejects(
        archive(b"AAAABBBB", &toc),
        ErrorKind::InvalidFormat,
        "ordinal is a msgpack str, of the wrong type",
    );
}

#[test]
fn rejects_unknown_scheme_and_format_version() {
    rejects(
        archive(
            b"AAAABBBB",
            &noop_toc(|f| set(f, "compression_scheme", V::S("lz4"))),
        ),
        ErrorKind::NotImplemented,
        "lz4",
    );
    rejects(
        archive(
            b"AAAABBBB",
            &noop_toc(|f| set(f, "format_version", V::U(2))),
        ),
        ErrorKind::UnsupportedVersion,
        "format_version 2",
    );
}

#[test]
fn rejects_bad_blob_ranges() {
    let cases = [
        (blobs(&[(64, 4), (68, 5)]), "outside the blob area"),
        (blobs(&[(0, 4), (68, 4)]), "outside the blob area"),
        (blobs(&[(64, 4), (u64::MAX, 4)]), "outside the blob area"),
        (blobs(&[(64, 4), (66, 4)]), "overlaps"),
    ];
    for (b, needle) in cases {
        rejects(
            archive(b"AAAABBBB", &noop_toc(|f| set(f, "blobs", b))),
            ErrorKind::InvalidFormat,
            needle,
        );
    }
}

#[test]
fn rejects_ordinal_out_of_range_and_size_mismatch() {
    rejects(
        archive(
            b"AAAABBBB",
            &noop_toc(|f| set(f, "blobs", blobs(&[(64, 4)]))),
        ),
        ErrorKind::InvalidFormat,
        "ordinal 1",
    );
    let toc = noop_toc(|f| {
        set(
            f,
            "toc",
            V::M(vec![("a#0", V::M(vec![("gfx900", entry(0, 5))]))]),
        )
    });
    rejects(
        archive(b"AAAABBBB", &toc),
        ErrorKind::InvalidFormat,
        "original_size is 5",
    );
}

#[test]
fn rejects_duplicate_keys() {
    let toc = noop_toc(|f| {
        set(
            f,
            "toc",
            V::M(vec![
                ("a#0", V::M(vec![("gfx900", entry(0, 4))])),
                ("a#0", V::M(vec![])),
            ]),
        )
    });
    rejects(
        archive(b"AAAABBBB", &toc),
        ErrorKind::InvalidFormat,
        "duplicate key \"a#0\"",
    );
}

fn zstd_toc(size: u64, entries: Vec<(&'static str, V)>) -> V {
    V::M(vec![
        ("format_version", V::U(1)),
        ("group_name", V::S("g")),
        ("gfx_arch_family", V::S("f")),
        ("gfx_arches", V::A(vec![V::S("gfx900")])),
        ("toc", V::M(entries)),
        ("compression_scheme", V::S("zstd-per-kernel")),
        ("zstd_offset", V::U(64)),
        ("zstd_size", V::U(size)),
    ])
}

fn zstd_blob(frames: &[&[u8]]) -> Vec<u8> {
    let mut b = (frames.len() as u32).to_le_bytes().to_vec();
    for f in frames {
        b.extend((f.len() as u32).to_le_bytes());
        b.extend(*f);
    }
    b
}

#[test]
fn rejects_bad_zstd_frame_tables() {
    let frame = zstd::bulk::compress(b"hello kernel", 3).unwrap();
    let good = zstd_blob(&[&frame]);
    let one = || vec![("a#0", V::M(vec![("gfx900", entry(0, 12))]))];
    let a = Archive::from_bytes(archive(&good, &zstd_toc(good.len() as u64, one()))).unwrap();
    assert_eq!(&*a.get("a#0", "gfx900").unwrap(), b"hello kernel");

    // Count claims more frames than there are.
    let mut more = good.clone();
    more[0] = 2;
    rejects(
        archive(&more, &zstd_toc(more.len() as u64, one())),
        ErrorKind::InvalidFormat,
        "frame 1",
    );
    // Bytes left over after the last frame.
    let mut extra = good.clone();
    extra.extend([0, 0, 0, 0]);
    rejects(
        archive(&extra, &zstd_toc(extra.len() as u64, one())),
        ErrorKind::InvalidFormat,
        "after the last of 1 frames",
    );
    // Frame size word past the blob.
    let mut long = good.clone();
    long[4] = 0xff;
    rejects(
        archive(&long, &zstd_toc(long.len() as u64, one())),
        ErrorKind::InvalidFormat,
        "runs past the zstd blob end",
    );
    // zstd_size past toc_offset, or too small for a count.
    rejects(
        archive(&good, &zstd_toc(good.len() as u64 + 1, one())),
        ErrorKind::InvalidFormat,
        "outside the blob area",
    );
    rejects(
        archive(&good[..2], &zstd_toc(2, vec![])),
        ErrorKind::InvalidFormat,
        "no frame count",
    );
    // Absurd frame count.
    let mut huge = good.clone();
    huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    rejects(
        archive(&huge, &zstd_toc(huge.len() as u64, one())),
        ErrorKind::InvalidFormat,
        "more than",
    );
    // Ordinal beyond the frames.
    let toc = zstd_toc(
        good.len() as u64,
        vec![("a#0", V::M(vec![("gfx900", entry(1, 12))]))],
    );
    rejects(archive(&good, &toc), ErrorKind::InvalidFormat, "ordinal 1");
}

#[test]
fn zstd_size_mismatch_fails_at_get_with_decompression_failed() {
    let frame = zstd::bulk::compress(b"hello kernel", 3).unwrap();
    let blob = zstd_blob(&[&frame]);
    for wrong in [11, 13, 1 << 40] {
        let toc = zstd_toc(
            blob.len() as u64,
            vec![("a#0", V::M(vec![("gfx900", entry(0, wrong))]))],
        );
        let a = Archive::from_bytes(archive(&blob, &toc)).unwrap();
        let err = a.get("a#0", "gfx900").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::DecompressionFailed, "{err}");
        assert_eq!(err.offset(), Some(72), "{err}");
    }
    // Garbage instead of a frame.
    let blob = zstd_blob(&[b"not a zstd frame"]);
    let toc = zstd_toc(
        blob.len() as u64,
        vec![("a#0", V::M(vec![("gfx900", entry(0, 12))]))],
    );
    let a = Archive::from_bytes(archive(&blob, &toc)).unwrap();
    assert_eq!(
        a.get("a#0", "gfx900").unwrap_err().kind(),
        ErrorKind::DecompressionFailed
    );
}

#[test]
fn open_maps_amd_error_kinds_for_missing_and_empty_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Archive::open(dir.path().join("nope.kpack")).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::FileNotFound);
    assert!(missing.to_string().contains("nope.kpack"), "{missing}");
    let empty = dir.path().join("empty.kpack");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(Archive::open(&empty).unwrap_err().kind(), ErrorKind::Io);
}

/// Every truncation and every single-byte change of both AMD vectors either
/// opens or fails with an error; decoding never panics.
#[test]
fn never_panics_on_truncated_or_mutated_vectors() {
    for name in ["amd_test_noop.kpack", "amd_test_zstd.kpack"] {
        let good = vector(name);
        let exercise = |bytes: Vec<u8>| {
            if let Ok(a) = Archive::from_bytes(bytes) {
                for e in a.entries() {
                    let _ = a.read(e);
                }
                let _ = a.dump();
            }
        };
        for len in 0..good.len() {
            exercise(good[..len].to_vec());
        }
        for i in 0..good.len() {
            // Flip all bits, the top bit and the low bit, and zero the
            // byte: every one differs from the original (an XOR with 0
            // would leave the vector unchanged and test nothing).
            let mutated = [good[i] ^ 0xff, good[i] ^ 0x80, good[i] ^ 0x01, 0x00];
            for b in mutated.into_iter().filter(|&b| b != good[i]) {
                let mut bad = good.clone();
                bad[i] = b;
                exercise(bad);
            }
        }
    }
}

/// A rejected archive is parsed a second time with offsets tracked: the
/// offset an error names is the offending value's own.
#[test]
fn error_offsets_point_at_the_offending_value() {
    let bytes = archive(
        b"AAAABBBB",
        &noop_toc(|f| set(f, "format_version", V::U(2))),
    );
    let at = Archive::from_bytes(bytes.clone())
        .unwrap_err()
        .offset()
        .unwrap() as usize;
    assert_eq!(&bytes[at - 14..=at], b"format_version\x02");

    let bytes = archive(
        b"AAAABBBB",
        &noop_toc(|f| set(f, "blobs", blobs(&[(64, 4), (0x99, 4)]))),
    );
    let at = Archive::from_bytes(bytes.clone())
        .unwrap_err()
        .offset()
        .unwrap() as usize;
    assert_eq!(&bytes[at - 6..=at + 1], b"offset\xcc\x99");
}
