//! Crashers found by the `elf_offload` fuzz target (fuzz/), reduced to the
//! one header field that mattered and applied to a real fixture: each must
//! now give findings or a typed error, never a panic or an abort.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};

use kpack_bundle::WalkOptions;
use kpack_elf::{ErrorKind, read_fat_binary, transform, verify_image};

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/corpus")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn u16_at(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([b[at], b[at + 1]]))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// File offsets of the PT_LOAD program headers.
fn loads(b: &[u8]) -> Vec<usize> {
    let (phoff, phnum) = (u64_at(b, 0x20) as usize, u16_at(b, 0x38));
    (0..phnum)
        .map(|i| phoff + i * 56)
        .filter(|&p| b[p..p + 4] == 1u32.to_le_bytes())
        .collect()
}

/// File offset of the section header of the section named `name`.
fn section(b: &[u8], name: &str) -> usize {
    let (shoff, shnum, shstrndx) = (u64_at(b, 0x28) as usize, u16_at(b, 0x3c), u16_at(b, 0x3e));
    let strtab = u64_at(b, shoff + shstrndx * 64 + 0x18) as usize;
    (0..shnum)
        .map(|i| shoff + i * 64)
        .find(|&sh| {
            let n = strtab + u32::from_le_bytes(b[sh..sh + 4].try_into().unwrap()) as usize;
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// The PT_LOAD whose file range holds the section header at `sh`.
fn load_holding(b: &[u8], sh: usize) -> usize {
    let off = u64_at(b, sh + 0x18);
    *loads(b)
        .iter()
        .find(|&&p| u64_at(b, p + 8) <= off && off < u64_at(b, p + 8) + u64_at(b, p + 0x20))
        .expect("a PT_LOAD holds the section")
}

/// Write `bytes` to a file of its own and read its fat binary.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "kpack-elf-fuzz-regression-{}-{name}",
        std::process::id()
    ));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn marker() -> Vec<u8> {
    kpack_format::Marker {
        kernel_name: "lib/libaxpy_2arch.so".into(),
        search_paths: vec!["axpy.kpack".into()],
    }
    .to_bytes()
}

#[test]
fn verify_reports_segments_and_sections_past_u64_max() {
    // fuzz/artifacts/elf_offload/crash-3266ddbc: p_offset + p_filesz overflowed.
    let mut b = fixture("libaxpy_2arch.so");
    let first = loads(&b)[0];
    set_u64(&mut b, first + 0x20, u64::MAX); // p_filesz
    set_u64(&mut b, first + 0x28, u64::MAX); // p_memsz
    let findings = verify_image(&b[..]).expect("still an ELF");
    assert!(
        findings
            .iter()
            .any(|f| f.message.contains("runs past the end of the file")),
        "{findings:?}"
    );

    // The same for a section's sh_addr + sh_size and the .hip_fatbin range.
    let mut b = fixture("libaxpy_2arch.so");
    let text = section(&b, ".text");
    set_u64(&mut b, text + 0x20, u64::MAX); // sh_size
    let fb = section(&b, ".hip_fatbin");
    set_u64(&mut b, fb + 0x10, u64::MAX - 8); // sh_addr
    let findings = verify_image(&b[..]).expect("still an ELF");
    assert!(
        findings.iter().any(|f| f.message.contains("section .text")),
        "{findings:?}"
    );
}

#[test]
fn transform_rejects_a_device_code_segment_with_memsz_below_filesz() {
    // p_memsz < p_filesz made the post-piece size underflow.
    let mut b = fixture("libaxpy_2arch.so");
    let t = load_holding(&b, section(&b, ".hip_fatbin"));
    set_u64(&mut b, t + 0x28, 0); // p_memsz
    let p = scratch("memsz", &b);
    let fat = read_fat_binary(&p, WalkOptions::default()).expect("reads");
    let e = transform(&p, &fat, &marker()).unwrap_err();
    std::fs::remove_file(&p).ok();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    assert!(e.to_string().contains("is impossible"), "{e}");
}

#[test]
fn transform_rejects_a_section_name_table_past_the_end_before_allocating() {
    // A huge .shstrtab sh_size was allocated before the read failed.
    let mut b = fixture("libaxpy_2arch.so");
    let shstrndx = u16_at(&b, 0x3e);
    let shstr = u64_at(&b, 0x28) as usize + shstrndx * 64;
    // Keep it readable for the reader (object) by pointing the name
    // lookup at the original table first, then break the size.
    let p = scratch("shstrtab-ok", &b);
    let fat = read_fat_binary(&p, WalkOptions::default()).expect("reads");
    set_u64(&mut b, shstr + 0x20, 1 << 60); // sh_size
    std::fs::write(&p, &b).unwrap();
    let e = transform(&p, &fat, &marker()).unwrap_err();
    std::fs::remove_file(&p).ok();
    assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
}

#[test]
fn unmodified_fixture_still_transforms_and_verifies() {
    let b = fixture("libaxpy_2arch.so");
    let p = scratch("clean", &b);
    let fat = read_fat_binary(&p, WalkOptions::default()).expect("reads");
    let (image, _) = transform(&p, &fat, &marker()).expect("transforms");
    std::fs::remove_file(&p).ok();
    assert_eq!(verify_image(&image[..]).unwrap(), Vec::new());
}
