//! The streaming reader ([`Item::stream_entries`]) against the whole-bundle
//! one ([`inflate`] + [`parse_bundle`], what `walk` did before it
//! streamed): the same bytes for every entry of every fixture's bundles,
//! and memory bounded by the budget.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
#![allow(
    clippy::ptr_arg,
    reason = "`ReadAt` is implemented for `Vec<u8>`, and `[u8]` is unsized as `&dyn ReadAt`"
)]

use kpack_bundle::{
    CcobHeader, ErrorKind, Format, Item, MemoryBudget, Method, WalkOptions, deflate, inflate,
    md5_low, parse_bundle, walk, write_bundle,
};
use kpack_tests::fixture;
use object::{Object, ObjectSection};

/// Every entry of `item`, as `stream_entries` hands them on, by index.
fn streamed(item: &Item, src: &Vec<u8>, budget: &MemoryBudget) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new(); item.entries.len()];
    let mut last = 0;
    item.stream_entries(src, budget, |i, e, bytes| {
        assert!(e.offset >= last, "entries arrive in offset order");
        last = e.offset;
        out[i] = bytes.to_vec();
        Ok::<(), kpack_bundle::Error>(())
    })
    .unwrap();
    out
}

/// The entries the old path read: the whole bundle inflated, then sliced.
fn whole(item: &Item, src: &Vec<u8>) -> Vec<Vec<u8>> {
    let (data, base) = match item.format {
        Format::Compressed(_) => {
            let inf = inflate(src, item.abs_offset(), src.len() as u64, true).unwrap();
            (inf.data, 0)
        }
        _ => (src.clone(), item.abs_offset()),
    };
    if let Format::Compressed(_) = item.format {
        let h = parse_bundle(&data, 0, data.len() as u64).unwrap();
        assert_eq!(h.entries.len(), item.entries.len());
    }
    item.entries
        .iter()
        .map(|e| data[(base + e.offset) as usize..(base + e.offset + e.size) as usize].to_vec())
        .collect()
}

fn fatbin_of(path: &std::path::Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let obj = object::File::parse(&*bytes).ok()?;
    Some(obj.section_by_name(".hip_fatbin")?.data().ok()?.to_vec())
}

#[test]
fn streamed_entries_equal_whole_inflate_on_every_fixture() {
    let mut bundles = 0;
    let mut compressed = 0;
    for dir in ["clang19", "corpus"] {
        for f in std::fs::read_dir(fixture(dir)).unwrap() {
            let path = f.unwrap().path();
            let Some(data) = fatbin_of(&path) else {
                continue;
            };
            let budget = MemoryBudget::new(64 << 20);
            for item in walk(&data, 0, data.len() as u64, WalkOptions::default()) {
                let item = item.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    streamed(&item, &data, &budget),
                    whole(&item, &data),
                    "{}",
                    path.display()
                );
                bundles += 1;
                compressed += usize::from(matches!(item.format, Format::Compressed(_)));
            }
            assert_eq!(budget.in_flight(), 0);
        }
    }
    assert!(bundles >= 30 && compressed >= 12, "{bundles} {compressed}");
}

fn code(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ tag).collect()
}

/// Several CCOB v3 bundles (zstd and zlib) back to back.
fn multi_bundle_region() -> (Vec<u8>, u64) {
    let mut region = Vec::new();
    let mut largest = 0;
    for b in 0..6u8 {
        let objects: Vec<(String, Vec<u8>)> = (0..4u8)
            .map(|k| {
                let id = format!(
                    "hipv4-amdgcn-amd-amdhsa--gfx9{}",
                    ["00", "06", "08", "0a"][k as usize]
                );
                (id, code(b * 4 + k, 20_000 + 7_000 * usize::from(k + b)))
            })
            .collect();
        largest = largest.max(objects.iter().map(|o| o.1.len() as u64).max().unwrap());
        let refs: Vec<(&str, &[u8])> = objects.iter().map(|(i, c)| (i.as_str(), &c[..])).collect();
        let plain = write_bundle(&refs, 4096);
        let method = if b % 2 == 0 {
            Method::Zstd
        } else {
            Method::Zlib
        };
        region.extend(deflate(&plain, 3, method, 3).unwrap());
        region.resize(region.len().next_multiple_of(4096), 0);
    }
    (region, largest)
}

/// Whether the zstd CCOB at `item` is one single-segment frame (window =
/// its whole content, as LLVM writes them); zlib ones answer `None`.
fn single_segment(item: &Item, region: &[u8]) -> Option<bool> {
    match item.format {
        Format::Compressed(h) if h.method == Method::Zstd => {
            let frame = &region[(item.abs_offset() + h.header_len()) as usize..];
            assert_eq!(frame[..4], [0x28, 0xb5, 0x2f, 0xfd]);
            Some(frame[4] & 0x20 != 0)
        }
        _ => None,
    }
}

/// Stream every item on two threads, three items each.
fn stream_on_two_threads(items: &[Item], region: &Vec<u8>, budget: &MemoryBudget) {
    std::thread::scope(|s| {
        for chunk in items.chunks(items.len().div_ceil(2)) {
            s.spawn(move || {
                for item in chunk {
                    streamed(item, region, budget);
                }
            });
        }
    });
}

#[test]
fn peak_memory_is_one_entry_and_one_decoder_per_thread() {
    let (region, largest) = multi_bundle_region();
    let items: Vec<Item> = walk(&region, 0, region.len() as u64, WalkOptions::default())
        .map(Result::unwrap)
        .collect();
    assert_eq!(items.len(), 6);
    let needed: Vec<u64> = items
        .iter()
        .map(|i| i.memory_needed(&region).unwrap())
        .collect();
    let mut sorted = needed.clone();
    sorted.sort_unstable();
    let two_largest = sorted[4] + sorted[5];
    let budget = MemoryBudget::new(1 << 30);
    stream_on_two_threads(&items, &region, &budget);
    assert!(budget.peak() >= sorted[5] && budget.peak() > largest);
    assert!(
        budget.peak() <= two_largest,
        "peak {} > {two_largest}",
        budget.peak()
    );
    // Whole bundles would have been several times the entries.
    let inflated: u64 = items
        .iter()
        .map(|i| match i.format {
            Format::Compressed(h) => h.uncompressed_size,
            _ => 0,
        })
        .sum();
    assert!(inflated > 8 * largest);
}

/// CCOB v3 zstd bundles like LLVM's: each one single-segment frame whose
/// window is its whole content (here 1.2 MB), entries of 100 KB.
fn big_window_region() -> (Vec<u8>, u64) {
    let mut region = Vec::new();
    for b in 0..4u8 {
        let objects: Vec<(String, Vec<u8>)> = (0..12u8)
            .map(|k| {
                (
                    format!("hipv4-amdgcn-amd-amdhsa--gfx9{k:02}"),
                    code(b * 16 + k, 100_000),
                )
            })
            .collect();
        let refs: Vec<(&str, &[u8])> = objects.iter().map(|(i, c)| (i.as_str(), &c[..])).collect();
        region.extend(deflate(&write_bundle(&refs, 4096), 3, Method::Zstd, 3).unwrap());
        region.resize(region.len().next_multiple_of(4096), 0);
    }
    (region, 100_000)
}

/// [`big_window_region`] walked: the region, its items, the entry size and
/// the most memory one item needs.
fn big_window_items() -> (Vec<u8>, Vec<Item>, u64, u64) {
    let (region, entry) = big_window_region();
    let items: Vec<Item> = walk(&region, 0, region.len() as u64, WalkOptions::default())
        .map(Result::unwrap)
        .collect();
    let one = items
        .iter()
        .map(|i| i.memory_needed(&region).unwrap())
        .max()
        .unwrap();
    (region, items, entry, one)
}

#[test]
fn peak_memory_counts_decoder_windows_and_stays_under_the_ceiling() {
    let (region, items, entry, one) = big_window_items();
    assert_eq!(items.len(), 4);
    for item in &items {
        assert_eq!(single_segment(item, &region), Some(true));
        let Format::Compressed(h) = item.format else {
            unreachable!()
        };
        // The window (the whole content) is counted, not only the entry.
        assert!(item.memory_needed(&region).unwrap() > h.uncompressed_size + entry);
    }
    // Room for one decoder and a half: two threads, one bundle at a time.
    let ceiling = one + one / 2;
    let budget = MemoryBudget::new(ceiling);
    stream_on_two_threads(&items, &region, &budget);
    assert!(budget.peak() >= one);
    assert!(
        budget.peak() <= ceiling,
        "peak {} > {ceiling}",
        budget.peak()
    );
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn one_decoder_serves_bundle_after_bundle_on_one_thread() {
    let (region, items, _, one) = big_window_items();
    let budget = MemoryBudget::new(8 * one);
    for item in &items {
        assert_eq!(streamed(item, &region, &budget), whole(item, &region));
        assert_eq!(budget.in_flight(), 0);
        assert!(budget.spare_bytes() > 0);
    }
    // A fresh decoder beside the kept one would have held two windows.
    assert!(budget.peak() <= one, "peak {} > {one}", budget.peak());
    assert!(budget.spare_bytes() < one);
}

/// A CCOB v3 of `plain` whose zstd frame has a 1 KiB window and no
/// content size (not single-segment, unlike LLVM's): it cannot be inflated
/// whole within its window, so it is streamed through the pipe.
fn small_window_ccob(plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.window_log(10).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.write_all(plain).unwrap();
    let payload = enc.finish().unwrap();
    let mut header = CcobHeader {
        version: 3,
        method: Method::Zstd,
        total_size: None,
        uncompressed_size: plain.len() as u64,
        hash: md5_low(plain),
    };
    header.total_size = Some(header.header_len() + payload.len() as u64);
    let mut ccob = header.to_bytes();
    ccob.extend(payload);
    ccob
}

/// A plain bundle of six code objects of `len` bytes each.
fn six_objects(len: usize) -> Vec<u8> {
    let objects: Vec<(String, Vec<u8>)> = (0..6u8)
        .map(|k| (format!("hipv4-amdgcn-amd-amdhsa--gfx90{k}"), code(k, len)))
        .collect();
    let refs: Vec<(&str, &[u8])> = objects.iter().map(|(i, c)| (i.as_str(), &c[..])).collect();
    write_bundle(&refs, 4096)
}

#[test]
fn a_frame_with_a_small_window_streams_and_a_single_segment_frame_inflates_whole() {
    // 9 MB in a frame with a 1 KiB window: streamed through the pipe in a
    // few MB. 300 KB in a single-segment frame (as LLVM writes them), whose
    // window is the whole bundle anyway: inflated whole, in that much.
    let big = six_objects(1_500_000);
    let small = six_objects(50_000);
    let cases = [
        (small_window_ccob(&big), big.len() as u64, true),
        (
            deflate(&small, 3, Method::Zstd, 3).unwrap(),
            small.len() as u64,
            false,
        ),
    ];
    for (ccob, inflated, streams) in &cases {
        let item = walk(ccob, 0, ccob.len() as u64, WalkOptions::default())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(single_segment(&item, ccob), Some(!streams));
        let needed = item.memory_needed(ccob).unwrap();
        assert_eq!(needed < *inflated, *streams, "{needed} vs {inflated}");
        let budget = MemoryBudget::new(1 << 30);
        assert_eq!(streamed(&item, ccob, &budget), whole(&item, ccob));
        assert_eq!(budget.peak(), needed);
        // A wrong hash is caught on both paths, after every entry.
        let mut bad = ccob.clone();
        bad[24] ^= 1;
        let item = walk(&bad, 0, bad.len() as u64, WalkOptions::default())
            .next()
            .unwrap()
            .unwrap();
        let mut seen = 0;
        let e = item
            .stream_entries(&bad, &MemoryBudget::default(), |_, _, _| {
                seen += 1;
                Ok::<(), kpack_bundle::Error>(())
            })
            .unwrap_err();
        assert_eq!((e.kind(), seen), (ErrorKind::HashMismatch, 6));
    }
}

#[test]
fn a_window_larger_than_the_ceiling_streams_alone() {
    let (region, items, entry, one) = big_window_items();
    // The entries fit, their decoders do not: each bundle runs alone.
    let budget = MemoryBudget::new(entry * 2);
    stream_on_two_threads(&items, &region, &budget);
    assert_eq!(budget.peak(), one);
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn an_entry_larger_than_the_budget_is_an_error_naming_it() {
    let (region, largest) = multi_bundle_region();
    let item = walk(&region, 0, region.len() as u64, WalkOptions::default())
        .next()
        .unwrap()
        .unwrap();
    let budget = MemoryBudget::new(largest / 2);
    let e = item
        .stream_entries(
            &region,
            &budget,
            |_, _, _| Ok::<(), kpack_bundle::Error>(()),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MemoryLimit);
    assert_eq!(e.offset(), Some(0));
    let msg = e.to_string();
    assert!(
        msg.contains("gfx9") && msg.contains("--max-memory"),
        "{msg}"
    );
    assert!(msg.contains(&(largest / 2).to_string()), "{msg}");
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn overlapping_and_unordered_entries_stream_from_one_buffer() {
    // A hand-made bundle: entry 0 after entry 1, entry 2 inside entry 1.
    let body = code(9, 12_000);
    let ids = [
        "hipv4-amdgcn-amd-amdhsa--gfx900",
        "hipv4-amdgcn-amd-amdhsa--gfx906",
        "hipv4-amdgcn-amd-amdhsa--gfx908",
    ];
    let ranges = [(8192u64, 3000u64), (1024, 6000), (2048, 1000)];
    let mut b = Vec::new();
    b.extend_from_slice(b"__CLANG_OFFLOAD_BUNDLE__");
    b.extend_from_slice(&3u64.to_le_bytes());
    for (id, (off, size)) in ids.iter().zip(ranges) {
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&(id.len() as u64).to_le_bytes());
        b.extend_from_slice(id.as_bytes());
    }
    b.resize(1024, 0);
    // Up to the end of the last entry: more bytes would read as a second
    // inner bundle.
    b.extend_from_slice(&body[..8192 + 3000 - 1024]);
    let c = deflate(&b, 3, Method::Zstd, 3).unwrap();
    let item = walk(&c, 0, c.len() as u64, WalkOptions::default())
        .next()
        .unwrap()
        .unwrap();
    let budget = MemoryBudget::new(1 << 20);
    let got = streamed(&item, &c, &budget);
    for (i, (off, size)) in ranges.iter().enumerate() {
        assert_eq!(got[i], b[*off as usize..(off + size) as usize]);
    }
    // The compressed bundle holds its decoder beside the largest buffer.
    assert_eq!(budget.peak(), item.memory_needed(&c).unwrap());
    // Entries 1 and 2 share one buffer; entry 0 gets its own: read plain,
    // with no decoder, the largest buffer is 6000 bytes.
    let plain = walk(&b, 0, b.len() as u64, WalkOptions::default())
        .next()
        .unwrap()
        .unwrap();
    let budget = MemoryBudget::new(1 << 20);
    assert_eq!(streamed(&plain, &b, &budget), got);
    assert_eq!(budget.peak(), 6000);
}

#[test]
fn a_corrupt_hash_is_reported_after_streaming() {
    let (mut region, _) = multi_bundle_region();
    region[24] ^= 0x55;
    let item = walk(&region, 0, region.len() as u64, WalkOptions::default())
        .next()
        .unwrap()
        .unwrap();
    let e = item
        .stream_entries(&region, &MemoryBudget::default(), |_, _, _| {
            Ok::<(), kpack_bundle::Error>(())
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::HashMismatch);
    assert_eq!(e.offset(), Some(0));
    let unchecked = walk(
        &region,
        0,
        region.len() as u64,
        WalkOptions { verify_hash: false },
    )
    .next()
    .unwrap()
    .unwrap();
    unchecked
        .stream_entries(&region, &MemoryBudget::default(), |_, _, _| {
            Ok::<(), kpack_bundle::Error>(())
        })
        .unwrap();
}
