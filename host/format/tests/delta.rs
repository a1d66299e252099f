//! The `zstd-delta` scheme (KPAK v2) and the v1 `zstd_frame_offsets`
//! index: round trips, determinism at any thread count, and hand-corrupted
//! TOCs that must be clear errors, never panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod common;

use std::path::Path;

use kpack_format::testing::noise;
use kpack_format::{
    Archive, ArchiveWriter, Compression, DeltaCompressor, DeltaPlan, EntryOrder, ErrorKind,
    FRAME_INDEX_KEY, Scheme, WriterOptions,
};

/// `base` with a few bytes changed at `at`: a sibling target's object.
fn sibling(base: &[u8], at: usize, fill: u8) -> Vec<u8> {
    let mut v = base.to_vec();
    v[at..at + 64].fill(fill);
    v
}

/// (key, arch, bytes): two keys, a family of three siblings each, and one
/// unrelated object under the second key.
fn family() -> Vec<(String, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (k, key) in ["lib/a.so#0", "lib/b.so#0"].iter().enumerate() {
        let base = noise(k as u32 + 1, 30_000);
        out.push((key.to_string(), "gfx1100".into(), base.clone()));
        out.push((key.to_string(), "gfx1101".into(), sibling(&base, 100, 1)));
        out.push((key.to_string(), "gfx1102".into(), sibling(&base, 9000, 2)));
    }
    out.push(("lib/b.so#0".into(), "gfx900".into(), noise(99, 20_000)));
    out
}

fn write(path: &Path, compression: Compression, items: &[(String, String, Vec<u8>)]) -> Vec<u8> {
    let items = items.iter().rev();
    common::write(
        path,
        "gfx11",
        compression,
        items.map(|(k, a, d)| (k.as_str(), a.as_str(), d.as_slice())),
    )
}

const DELTA: Compression = Compression::ZstdDelta { level: 3 };

#[test]
fn delta_archive_round_trips_and_is_smaller_than_per_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let delta = write(&dir.path().join("d.kpack"), DELTA, &items);
    let per_kernel = write(
        &dir.path().join("z.kpack"),
        Compression::Zstd { level: 3 },
        &items,
    );
    assert_eq!(&delta[4..8], &2u32.to_le_bytes());
    let a = Archive::from_bytes(delta.clone()).unwrap();
    assert_eq!(a.scheme(), Scheme::ZstdDelta);
    assert_eq!(a.version(), 2);
    for (k, arch, d) in &items {
        assert_eq!(&*a.get(k, arch).unwrap(), &d[..], "{k} {arch}");
    }
    // Three siblings share one base per key (the unrelated gfx900 object
    // may go either way); bases are never deltas.
    let deltas = a.entries().filter(|e| e.base().is_some()).count();
    assert!(deltas >= 4, "{}", a.dump());
    for e in a.entries() {
        if let Some(b) = e.base() {
            assert_eq!(a.entry_by_ordinal(b).unwrap().base(), None);
            assert_eq!(a.entry_by_ordinal(b).unwrap().key(), e.key());
        }
    }
    assert!(
        delta.len() * 2 < per_kernel.len(),
        "{} vs {}",
        delta.len(),
        per_kernel.len()
    );
    assert!(a.verify().is_empty(), "{:?}", a.verify());
    // A memoised base gives the same bytes as a fresh read.
    let e = a.entries().find(|e| e.base().is_some()).unwrap();
    let base = a.read_base(e).unwrap().unwrap();
    assert_eq!(a.read_with_base(e, &base).unwrap(), &*a.read(e).unwrap());
}

#[test]
fn delta_output_is_identical_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    common::assert_same_at_thread_counts(&[1, 4], |threads| {
        write(&dir.path().join(format!("{threads}.kpack")), DELTA, &items)
    });
}

/// A zstd-delta writer fed by [`DeltaCompressor`]: each `(key, arch
/// indices)` call encodes those members of `items` as one key, and every
/// index not named is added raw.
fn write_keys(path: &Path, items: &[(String, String, Vec<u8>)], calls: &[Vec<usize>]) -> Vec<u8> {
    write_keys_planned(path, items, calls, DeltaPlan::Estimated)
}

/// [`write_keys`] with bases chosen as `plan` says, by the writer and its
/// compressor alike.
fn write_keys_planned(
    path: &Path,
    items: &[(String, String, Vec<u8>)],
    calls: &[Vec<usize>],
    plan: DeltaPlan,
) -> Vec<u8> {
    let options = WriterOptions {
        group_name: "g".into(),
        gfx_arch_family: "gfx11".into(),
        compression: DELTA,
        delta_plan: plan,
        ..Default::default()
    };
    let mut w = ArchiveWriter::create(path, options).unwrap();
    let c = DeltaCompressor::new(DELTA)
        .unwrap()
        .unwrap()
        .with_plan(plan);
    for call in calls {
        let key = &items[call[0]].0;
        let members: Vec<(&str, &[u8])> = call
            .iter()
            .map(|&i| (items[i].1.as_str(), items[i].2.as_slice()))
            .collect();
        w.add_delta_key(c.compress_key(key, &members, 1 + call.len() % 3).unwrap())
            .unwrap();
    }
    for (i, (k, a, d)) in items.iter().enumerate() {
        if !calls.iter().flatten().any(|&j| j == i) {
            w.add(k, a, d).unwrap();
        }
    }
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn keys_encoded_by_workers_are_byte_identical_to_keys_encoded_at_finish() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let serial = write(&dir.path().join("s.kpack"), DELTA, &items);
    // Indices 0..3: key a (3 arches); 3..7: key b (4 arches). Members in
    // reverse arch order: the compressor sorts them as the TOC does.
    let whole = write_keys(
        &dir.path().join("w.kpack"),
        &items,
        &[vec![2, 1, 0], vec![6, 5, 4, 3]],
    );
    assert_eq!(whole, serial, "one call per key");
    // A key split over two calls (two bundles) and a framed key that later
    // gets a raw entry: both are encoded again at finish, same bytes.
    let split = write_keys(
        &dir.path().join("x.kpack"),
        &items,
        &[vec![0, 1], vec![2], vec![3, 4]],
    );
    assert_eq!(split, serial, "keys spanning calls");
    let a = Archive::from_bytes(split).unwrap();
    for (k, arch, data) in &items {
        assert_eq!(&a.get(k, arch).unwrap()[..], &data[..], "{k} {arch}");
    }
}

#[test]
fn the_measured_plan_is_the_same_on_workers_and_at_finish_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let calls = [vec![2, 1, 0], vec![6, 5, 4, 3]];
    let p = |n: &str| dir.path().join(n);
    let at_finish = write_keys_planned(&p("f.kpack"), &items, &[], DeltaPlan::Exhaustive);
    let by_workers = write_keys_planned(&p("w.kpack"), &items, &calls, DeltaPlan::Exhaustive);
    assert_eq!(by_workers, at_finish);
    let a = Archive::from_bytes(at_finish).unwrap();
    for (k, arch, data) in &items {
        assert_eq!(&a.get(k, arch).unwrap()[..], &data[..], "{k} {arch}");
    }
}

#[test]
fn a_worker_encoded_key_needs_a_matching_writer() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let members: Vec<(&str, &[u8])> = items[..3]
        .iter()
        .map(|(_, a, d)| (a.as_str(), d.as_slice()))
        .collect();
    let c = DeltaCompressor::new(DELTA).unwrap().unwrap();
    assert!(
        DeltaCompressor::new(Compression::Zstd { level: 3 })
            .unwrap()
            .is_none()
    );
    for compression in [
        Compression::Zstd { level: 3 },
        Compression::ZstdDelta { level: 5 },
    ] {
        let options = WriterOptions {
            compression,
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(dir.path().join("a.kpack"), options).unwrap();
        let e = w
            .add_delta_key(c.compress_key(&items[0].0, &members, 2).unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    let twice = [members[0], members[0]];
    let e = c.compress_key("k", &twice, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn amd_style_v1_readers_never_see_the_delta_scheme() {
    // The delta scheme only exists under header version 2, and version 2
    // only holds it: either mismatch is refused.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = write(&dir.path().join("d.kpack"), DELTA, &family());
    bytes[4] = 1;
    let e = Archive::from_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVersion, "{e}");
    let mut v1 = write(
        &dir.path().join("z.kpack"),
        Compression::Zstd { level: 3 },
        &family(),
    );
    v1[4] = 3;
    let e = Archive::from_bytes(v1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVersion, "{e}");
}

/// A msgpack value for hand-made TOCs.
enum V {
    U(u64),
    S(&'static str),
    A(Vec<V>),
    M(Vec<(&'static str, V)>),
}

fn enc(v: &V, out: &mut Vec<u8>) {
    match v {
        V::U(n) => drop(rmp::encode::write_uint(out, *n)),
        V::S(s) => drop(rmp::encode::write_str(out, s)),
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

/// A v2 archive of three real frames (ordinals 0, 1, 2 of one key) whose
/// TOC entries get `bases[i]` as their `base` and `offsets[i]` as offset.
fn hand_made(bases: [Option<u64>; 3], bad_offset: Option<u64>) -> Vec<u8> {
    let objects: Vec<Vec<u8>> = (0..3).map(|i| noise(i + 1, 500)).collect();
    let frames: Vec<Vec<u8>> = objects
        .iter()
        .map(|o| zstd::bulk::compress(o, 3).unwrap())
        .collect();
    let blob: Vec<u8> = frames.concat();
    let mut offsets = Vec::new();
    let mut at = 64u64;
    for f in &frames {
        offsets.push(at);
        at += f.len() as u64;
    }
    let entry = |i: usize| {
        let mut m = vec![
            ("type", V::S("hsaco")),
            ("ordinal", V::U(i as u64)),
            ("original_size", V::U(500)),
            (
                "offset",
                V::U(if i == 2 {
                    bad_offset.unwrap_or(offsets[i])
                } else {
                    offsets[i]
                }),
            ),
            ("size", V::U(frames[i].len() as u64)),
        ];
        if let Some(b) = bases[i] {
            m.push(("base", V::U(b)));
        }
        V::M(m)
    };
    let toc = V::M(vec![
        ("format_version", V::U(2)),
        ("group_name", V::S("g")),
        ("gfx_arch_family", V::S("f")),
        (
            "gfx_arches",
            V::A(vec![V::S("gfx1100"), V::S("gfx1101"), V::S("gfx1102")]),
        ),
        (
            "toc",
            V::M(vec![(
                "a#0",
                V::M(vec![
                    ("gfx1100", entry(0)),
                    ("gfx1101", entry(1)),
                    ("gfx1102", entry(2)),
                ]),
            )]),
        ),
        ("compression_scheme", V::S("zstd-delta")),
    ]);
    let mut out = b"KPAK".to_vec();
    out.extend(2u32.to_le_bytes());
    out.extend((64 + blob.len() as u64).to_le_bytes());
    out.resize(64, 0);
    out.extend(&blob);
    enc(&toc, &mut out);
    out
}

fn open_error(bytes: Vec<u8>) -> String {
    let e = Archive::from_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFormat, "{e}");
    e.to_string()
}

#[test]
fn hand_made_v2_without_bases_reads() {
    let a = Archive::from_bytes(hand_made([None; 3], None)).unwrap();
    assert_eq!(a.get("a#0", "gfx1102").unwrap().len(), 500);
    assert!(a.verify().is_empty());
}

#[test]
fn a_missing_base_is_a_clear_error() {
    let e = open_error(hand_made([None, Some(7), None], None));
    assert!(
        e.contains("toc[\"a#0\"][\"gfx1101\"]: base 7 is not an entry of this archive"),
        "{e}"
    );
}

#[test]
fn a_base_that_is_a_delta_is_a_clear_error() {
    let e = open_error(hand_made([None, Some(0), Some(1)], None));
    assert!(
        e.contains("base 1 is itself a delta, bases must not be deltas (1 has base 0)"),
        "{e}"
    );
}

#[test]
fn a_cycle_and_a_self_reference_are_clear_errors() {
    let e = open_error(hand_made([Some(1), Some(0), None], None));
    assert!(e.contains("a cycle: 0 -> 1 -> 0"), "{e}");
    let e = open_error(hand_made([None, None, Some(2)], None));
    assert!(e.contains("names itself as its base"), "{e}");
}

#[test]
fn frames_outside_the_blob_or_overlapping_are_clear_errors() {
    let e = open_error(hand_made([None; 3], Some(u64::MAX - 3)));
    assert!(e.contains("is outside the blob area"), "{e}");
    let e = open_error(hand_made([None; 3], Some(64)));
    assert!(e.contains("overlaps ordinal 0"), "{e}");
}

#[test]
fn a_delta_against_the_wrong_base_fails_to_decode_without_panicking() {
    // Entry 1 claims base 0 but its frame is a plain frame of other bytes:
    // zstd decodes it regardless (a plain frame ignores the prefix), so
    // point it at a real delta instead by writing one.
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let bytes = write(&dir.path().join("d.kpack"), DELTA, &items);
    let a = Archive::from_bytes(bytes).unwrap();
    let e = a.entries().find(|e| e.base().is_some()).unwrap();
    let wrong = noise(1234, 30_000);
    let decoded = a.read_with_base(e, &wrong);
    let original = &items
        .iter()
        .find(|(k, arch, _)| k == e.key() && arch == e.arch())
        .unwrap()
        .2;
    match decoded {
        Ok(bytes) => assert_ne!(&bytes, original),
        Err(err) => assert_eq!(err.kind(), ErrorKind::DecompressionFailed),
    }
}

#[test]
fn sorted_per_kernel_archives_carry_the_frame_index_and_insertion_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let bytes = write(
        &dir.path().join("z.kpack"),
        Compression::Zstd { level: 3 },
        &items,
    );
    let a = Archive::from_bytes(bytes.clone()).unwrap();
    assert_eq!(a.version(), 1);
    assert!(a.has_frame_index());
    for (k, arch, d) in &items {
        assert_eq!(&*a.get(k, arch).unwrap(), &d[..]);
    }
    assert!(a.verify().is_empty());
    // The index names the same frames a walk finds: drop the key (rename
    // it to one nobody reads) and compare.
    let mut walked = bytes.clone();
    let at = walked
        .windows(FRAME_INDEX_KEY.len())
        .position(|w| w == FRAME_INDEX_KEY.as_bytes())
        .unwrap();
    walked[at] = b'Z';
    let w = Archive::from_bytes(walked).unwrap();
    assert!(!w.has_frame_index());
    let placed = |a: &Archive| -> Vec<(u64, u64)> {
        a.entries()
            .map(|e| (e.stored_offset(), e.stored_size()))
            .collect()
    };
    assert_eq!(placed(&a), placed(&w));

    let options = WriterOptions {
        order: EntryOrder::Insertion,
        ..Default::default()
    };
    let path = dir.path().join("i.kpack");
    let mut w = ArchiveWriter::create(&path, options).unwrap();
    w.add("a#0", "gfx900", b"abc").unwrap();
    w.finish().unwrap();
    assert!(!Archive::open(&path).unwrap().has_frame_index());
}

#[test]
fn a_frame_index_that_disagrees_with_the_blob_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let bytes = write(
        &dir.path().join("z.kpack"),
        Compression::Zstd { level: 3 },
        &items,
    );
    // Size word of the first frame changed: open succeeds (it is not
    // walked), reading that frame and verify report it.
    let mut word = bytes.clone();
    word[68] ^= 1;
    let a = Archive::from_bytes(word).unwrap();
    let first = a.entries().find(|e| e.ordinal() == 0).unwrap().clone();
    let e = a.read(&first).unwrap_err();
    assert!(e.to_string().contains("size word"), "{e}");
    assert_eq!(a.verify().len(), 1);
    // An index entry moved by one byte: the index still tiles the blob, so
    // open accepts it; the two frames it resizes fail their size-word check.
    let a = Archive::from_bytes(bytes.clone()).unwrap();
    let second = a.entries().find(|e| e.ordinal() == 1).unwrap();
    let needle = rmp_uint(second.stored_offset());
    let mut moved = bytes.clone();
    let toc = a.toc_offset() as usize;
    let key_at = toc
        + moved[toc..]
            .windows(FRAME_INDEX_KEY.len())
            .position(|w| w == FRAME_INDEX_KEY.as_bytes())
            .unwrap();
    let at = key_at
        + moved[key_at..]
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .unwrap();
    let last = at + needle.len() - 1;
    moved[last] = moved[last].wrapping_add(1);
    let a = Archive::from_bytes(moved).unwrap();
    let found: Vec<String> = a.verify().iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|f| f.contains("size word")), "{found:?}");
    // The first offset is anchored to the blob start: moving it is refused
    // at open.
    let mut first = bytes.clone();
    let at = key_at + FRAME_INDEX_KEY.len() + 1;
    assert_eq!(first[at], 72, "first offset is a fixint 72");
    first[at] = 73;
    let e = Archive::from_bytes(first).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFormat);
    assert!(e.to_string().contains(FRAME_INDEX_KEY), "{e}");
}

fn rmp_uint(n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    rmp::encode::write_uint(&mut v, n).unwrap();
    v
}

#[test]
fn read_into_a_callers_buffer_matches_read_for_every_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    for (name, compression) in [
        ("n", Compression::None),
        ("z", Compression::Zstd { level: 3 }),
        ("d", DELTA),
    ] {
        let a = Archive::from_bytes(write(
            &dir.path().join(format!("{name}.kpack")),
            compression,
            &items,
        ))
        .unwrap();
        for e in a.entries() {
            let size = a.decoded_size(e).unwrap();
            assert_eq!(size as u64, e.original_size(), "{name}");
            // Filled with garbage first: every byte must be overwritten.
            let mut out = vec![0xa5; size];
            a.read_into(e, &mut out).unwrap();
            assert_eq!(out, &*a.read(e).unwrap(), "{name} {:?}", e.arch());
            if let Some(base) = a.read_base(e).unwrap() {
                let mut again = vec![0; size];
                a.read_with_base_into(e, &base, &mut again).unwrap();
                assert_eq!(again, out, "{name} {:?}", e.arch());
            }
            // A buffer of any other size is refused, never overrun.
            for wrong in [size - 1, size + 1] {
                let err = a.read_into(e, &mut vec![0; wrong]).unwrap_err();
                assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            }
        }
    }
}

#[test]
fn a_delta_decoded_against_the_wrong_base_is_an_error_or_differs() {
    let dir = tempfile::tempdir().unwrap();
    let items = family();
    let a = Archive::from_bytes(write(&dir.path().join("d.kpack"), DELTA, &items)).unwrap();
    let e = a.entries().find(|e| e.base().is_some()).unwrap();
    let right = a.read(e).unwrap().into_owned();
    let wrong = noise(1234, 30_000);
    let mut out = vec![0; right.len()];
    let decoded = a.read_with_base_into(e, &wrong, &mut out);
    assert!(decoded.is_err() || out != right);
    // The per-thread context is left usable: the next read is right.
    assert_eq!(&*a.read(e).unwrap(), &right[..]);
}
