//! Inputs the `pe_offload` fuzz target found, each reduced to the field
//! that mattered and applied to a real fixture.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/pe")
        .join(name);
    std::fs::read(p).unwrap()
}

/// File offset of data directory `index`'s size field in a PE32+ image.
fn dir_size_offset(b: &[u8], index: usize) -> usize {
    let lfanew = u32::from_le_bytes(b[0x3c..0x40].try_into().unwrap()) as usize;
    // Signature (4) + COFF header (20) = optional header; PE32+ data
    // directories start 112 bytes into it, 8 bytes each (RVA, size).
    let opt = lfanew + 24;
    assert_eq!(u16::from_le_bytes([b[opt], b[opt + 1]]), 0x20b, "PE32+");
    opt + 112 + index * 8 + 4
}

/// A debug directory whose size claims ~153 million entries, nearly all
/// past the end of the file: the verifier looped over every one of them,
/// formatting a finding each (a fuzzer timeout). One finding for the first
/// entry past the end is enough.
#[test]
fn huge_debug_directory_size_gives_one_finding() {
    let mut b = fixture("dll_debug.dll");
    let at = dir_size_offset(&b, 6);
    assert_ne!(
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap()),
        0,
        "dll_debug.dll has a debug directory"
    );
    b[at..at + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let findings = kpack_pe::verify_image(&b);
    // Entries inside the file are garbage (each may get a finding); the
    // first one whose header is past the end ends the walk.
    let past_end: Vec<_> = findings
        .iter()
        .filter(|f| f.message.starts_with("debug directory entry") && f.message.contains(" at 0x"))
        .collect();
    assert_eq!(past_end.len(), 1, "{past_end:#?}");
    let entries_in_file = b.len() / 28;
    assert!(
        findings.len() <= entries_in_file + 16,
        "{} findings",
        findings.len()
    );
}
