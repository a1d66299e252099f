//! Reading stays linear in the size of the image: a DLL with 200,000
//! wrappers, each with its base relocation, reads in well under a second
//! (looking each wrapper's relocation up by scanning them all took 2e10
//! comparisons, minutes).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use kpack_bundle::WalkOptions;
use kpack_pe::{PointerVia, SEGMENT_SECTION};

const WRAPPER: usize = 24;

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// A PE32+ section header.
fn section(b: &mut [u8], at: usize, name: &str, rva: u32, len: u32, raw: u32) {
    put(b, at, name.as_bytes());
    put(b, at + 8, &len.to_le_bytes());
    put(b, at + 12, &rva.to_le_bytes());
    put(b, at + 16, &len.to_le_bytes());
    put(b, at + 20, &raw.to_le_bytes());
    put(b, at + 36, &0x4000_0040u32.to_le_bytes());
}

/// Base relocation blocks with one DIR64 entry for each wrapper's pointer
/// slot (8 bytes into the wrapper), wrappers starting at `rva`.
fn relocs(rva: u32, n: usize) -> Vec<u8> {
    let mut slots: Vec<u32> = (0..n).map(|i| rva + (i * WRAPPER) as u32 + 8).collect();
    slots.sort_unstable();
    let mut out = Vec::new();
    for page in slots.chunk_by(|a, b| a >> 12 == b >> 12) {
        let mut entries: Vec<u16> = page
            .iter()
            .map(|s| (10 << 12) | (s & 0xfff) as u16)
            .collect();
        if entries.len() % 2 == 1 {
            entries.push(0); // IMAGE_REL_BASED_ABSOLUTE pads to 4 bytes
        }
        out.extend((page[0] & !0xfff).to_le_bytes());
        out.extend(((8 + 2 * entries.len()) as u32).to_le_bytes());
        for e in entries {
            out.extend(e.to_le_bytes());
        }
    }
    out
}

/// A DLL whose only device-code section is `.hipFatB` with `n` wrappers
/// (magic 0: neither HIPF nor HIPK), each pointer slot base-relocated.
fn dll_with_wrappers(n: usize) -> Vec<u8> {
    let seg_len = n * WRAPPER;
    assert_eq!(seg_len % 0x200, 0);
    let seg_rva = 0x1000u32;
    let reloc_rva = (seg_rva + seg_len as u32).next_multiple_of(0x1000);
    let mut rel = relocs(seg_rva, n);
    rel.resize(rel.len().next_multiple_of(0x200), 0);
    let rel_len = relocs(seg_rva, n).len();
    let mut b = vec![0u8; 0x400 + seg_len + rel.len()];
    put(&mut b, 0, b"MZ");
    put(&mut b, 0x3c, &0x40u32.to_le_bytes());
    put(&mut b, 0x40, b"PE\0\0");
    // COFF header: x86-64, two sections, a 240-byte optional header, a DLL.
    put(&mut b, 0x44, &0x8664u16.to_le_bytes());
    put(&mut b, 0x46, &2u16.to_le_bytes());
    put(&mut b, 0x54, &240u16.to_le_bytes());
    put(&mut b, 0x56, &0x2022u16.to_le_bytes());
    let oh = 0x58;
    put(&mut b, oh, &0x20bu16.to_le_bytes());
    put(&mut b, oh + 24, &0x1_8000_0000u64.to_le_bytes());
    put(&mut b, oh + 32, &0x1000u32.to_le_bytes());
    put(&mut b, oh + 36, &0x200u32.to_le_bytes());
    put(&mut b, oh + 40, &6u16.to_le_bytes());
    put(&mut b, oh + 48, &6u16.to_le_bytes());
    let image_size = (reloc_rva + rel.len() as u32).next_multiple_of(0x1000);
    put(&mut b, oh + 56, &image_size.to_le_bytes());
    put(&mut b, oh + 60, &0x400u32.to_le_bytes());
    put(&mut b, oh + 68, &3u16.to_le_bytes());
    put(&mut b, oh + 108, &16u32.to_le_bytes());
    // Data directory 5: base relocations.
    put(&mut b, oh + 112 + 5 * 8, &reloc_rva.to_le_bytes());
    put(
        &mut b,
        oh + 112 + 5 * 8 + 4,
        &(rel_len as u32).to_le_bytes(),
    );
    let table = oh + 240;
    section(
        &mut b,
        table,
        SEGMENT_SECTION,
        seg_rva,
        seg_len as u32,
        0x400,
    );
    let rel_raw = 0x400 + seg_len as u32;
    section(
        &mut b,
        table + 40,
        ".reloc",
        reloc_rva,
        rel.len() as u32,
        rel_raw,
    );
    put(&mut b, rel_raw as usize, &rel);
    b
}

#[test]
fn two_hundred_thousand_relocated_wrappers_read_in_one_pass() {
    let n = 204_800;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.dll");
    std::fs::write(&path, dll_with_wrappers(n)).unwrap();
    let fat = kpack_pe::read_fat_binary(&path, WalkOptions::default()).unwrap();
    assert_eq!(fat.wrappers.len(), n);
    assert!(
        fat.wrappers.iter().all(|w| w.via == PointerVia::BaseReloc),
        "every pointer slot has its relocation"
    );
}
