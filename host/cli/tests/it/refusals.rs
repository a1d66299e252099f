//! Inputs and environments kpack refuses cleanly (exit 2 and a sentence)
//! instead of panicking or reporting success.

use std::process::{Command, Stdio};

use kpack_tests::{fixture, stderr};

use crate::util::{KPACK, kpack, offload_into};

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let lib = fixture("corpus/libaxpy_2arch.so");
    let out = Command::new(KPACK)
        .args(["inspect".as_ref(), lib.as_os_str()])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("error: cannot write to stdout") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn hipk_wrappers_without_a_marker_are_refused_not_taken_for_offloaded() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload_into(&fixture("corpus/libaxpy_2arch.so"), dir.path(), &[]);
    // Rename the marker section (same length) so that only the HIPK
    // wrappers remain.
    let mut bytes = std::fs::read(&bin).unwrap();
    let name = b".rocm_kpack_ref\0";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("marker section name");
    bytes[at + 1] = b'X';
    let damaged = dir.path().join("damaged.so");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = kpack([
        "offload".as_ref(),
        damaged.as_os_str(),
        "-o".as_ref(),
        dir.path().join("again.so").as_os_str(),
        "--archives".as_ref(),
        dir.path().join("again").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no .rocm_kpack_ref marker section"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("again.so").exists());
}

/// `libaxpy_2arch.so` with a RELATIVE relocation that is not the
/// wrapper's aimed into `.hip_fatbin`: `verify-elf --pruned` fails on it.
fn with_stray_pointer() -> Vec<u8> {
    use object::read::elf::{ElfFile64, SectionHeader as _};
    use object::{LittleEndian as LE, Object, ObjectSection};
    let mut bytes = std::fs::read(fixture("corpus/libaxpy_2arch.so")).unwrap();
    let (fatbin, slot, rela) = {
        let obj = ElfFile64::<LE, _>::parse(&bytes[..]).unwrap();
        let fatbin = obj.section_by_name(".hip_fatbin").unwrap().address();
        let slot = obj.section_by_name(".hipFatBinSegment").unwrap().address() + 8;
        let rela = obj.section_by_name(".rela.dyn").unwrap();
        (
            fatbin,
            slot,
            rela.elf_section_header().sh_offset(LE) as usize,
        )
    };
    let at = (rela..)
        .step_by(24)
        .find(|&e| {
            let info = u64::from_le_bytes(bytes[e + 8..e + 16].try_into().unwrap());
            let off = u64::from_le_bytes(bytes[e..e + 8].try_into().unwrap());
            info & 0xffff_ffff == 8 && off != slot
        })
        .unwrap();
    bytes[at + 16..at + 24].copy_from_slice(&(fatbin + 0x10).to_le_bytes());
    bytes
}

#[test]
fn prune_refuses_an_input_that_fails_verify_elf() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("stray.so");
    std::fs::write(&input, with_stray_pointer()).unwrap();
    let out_dir = dir.path().join("new/sub");
    let out = crate::util::kpack_prune(&input, &out_dir.join("p.so"), "gfx90a", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fails `kpack verify-elf --pruned`")
            && stderr(&out).contains("not a wrapper's pointer"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("new").exists(), "no directory left behind");
}
