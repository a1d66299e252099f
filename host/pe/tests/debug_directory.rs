//! The CodeView debug directory entry through `kpack offload`: the record
//! (RSDS: PDB GUID, age, path) a debugger matches against the PDB must be
//! where the entry says, with the same bytes. Read before and after by
//! LLVM's `llvm-readobj-19 --coff-debug-directory` (an oracle we did not
//! write), and by offset: `PointerToRawData` is the file offset of
//! `AddressOfRawData` in the rewritten image.
//!
//! `dll_debug.dll` keeps its headers (the record stays at its offset);
//! `pdb/dll_pdb_dwarf.dll` has no room for another section header, so the
//! headers grow and the record moves (`tests/fixtures/pe/pdb/build.sh`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_bundle::WalkOptions;
use kpack_format::Marker;
use object::read::pe::PeFile64;

const FIXTURES: [&str; 2] = ["dll_debug.dll", "pdb/dll_pdb_dwarf.dll"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/pe")
        .join(name)
}

fn offload(input: &Path) -> Vec<u8> {
    let fat = kpack_pe::read_fat_binary(input, WalkOptions::default()).unwrap();
    let marker = Marker {
        kernel_name: "bin/fixture.dll".into(),
        search_paths: vec![".kpack/fixture_@GFXARCH@.kpack".into()],
    }
    .to_bytes();
    kpack_pe::transform(input, &fat, &marker).unwrap().0
}

/// One debug directory entry as `llvm-readobj-19` prints it: its field
/// lines, the `PDBInfo` block's included (`Name: value`).
type Entry = Vec<String>;

/// The entries of `file`'s debug directory, as LLVM reads them. Fails
/// (never skips) without llvm-readobj-19: scripts/test.sh installs llvm-19.
fn readobj_entries(file: &Path) -> Vec<Entry> {
    let out = Command::new("llvm-readobj-19")
        .arg("--coff-debug-directory")
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("llvm-readobj-19 is required by this test: {e}"));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "llvm-readobj-19 {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut entries: Vec<Entry> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("DebugEntry {") {
            entries.push(Vec::new());
        } else if let (Some(entry), true) = (entries.last_mut(), line.contains(": ")) {
            entry.push(line.to_string());
        }
    }
    entries
}

/// The value of field `name` in `entry`.
fn field<'e>(entry: &'e Entry, name: &str) -> &'e str {
    entry
        .iter()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {name} in {entry:?}"))
}

fn hex(value: &str) -> u32 {
    u32::from_str_radix(value.trim_start_matches("0x"), 16).unwrap()
}

/// The file offset of `rva` in `image`, through its section table.
fn file_offset(image: &[u8], rva: u32) -> u32 {
    let pe = PeFile64::<&[u8]>::parse(image).unwrap();
    let (offset, _) = pe
        .section_table()
        .pe_file_range_at(rva)
        .unwrap_or_else(|| panic!("RVA {rva:#x} has no file bytes"));
    offset
}

#[test]
fn codeview_record_keeps_its_pdb_identity_and_stays_where_the_entry_points() {
    let dir = tempfile::tempdir().unwrap();
    let mut moved = 0;
    for name in FIXTURES {
        let input = fixture(name);
        let output = dir.path().join(Path::new(name).file_name().unwrap());
        let image = offload(&input);
        std::fs::write(&output, &image).unwrap();
        let original = std::fs::read(&input).unwrap();
        let (before, after) = (readobj_entries(&input), readobj_entries(&output));
        assert_eq!(before.len(), after.len(), "{name}: debug entries");
        let codeview: Vec<(&Entry, &Entry)> = before
            .iter()
            .zip(&after)
            .filter(|(b, _)| field(b, "Type").starts_with("CodeView"))
            .collect();
        assert_eq!(
            codeview.len(),
            1,
            "{name}: one CodeView entry in {before:?}"
        );
        for (b, a) in &codeview {
            assert_eq!(field(b, "PDBSignature"), "0x53445352", "{name}: RSDS");
            // Every field but the file offset is the input's: type, size,
            // RVA, GUID, age, PDB path.
            let without_pointer = |e: &Entry| -> Entry {
                e.iter()
                    .filter(|l| !l.starts_with("PointerToRawData"))
                    .cloned()
                    .collect()
            };
            assert_eq!(without_pointer(a), without_pointer(b), "{name}");
            let rva = hex(field(a, "AddressOfRawData"));
            let (old, new) = (
                hex(field(b, "PointerToRawData")),
                hex(field(a, "PointerToRawData")),
            );
            assert_eq!(new, file_offset(&image, rva), "{name}: PointerToRawData");
            let size = hex(field(a, "SizeOfData")) as usize;
            assert_eq!(
                image[new as usize..][..size],
                original[old as usize..][..size],
                "{name}: RSDS record bytes"
            );
            moved += usize::from(new != old);
        }
    }
    assert_eq!(moved, 1, "pdb/dll_pdb_dwarf.dll's record must move");
}
