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

/// `kpack completions bash | head -1` and `> /dev/full`: exit 0 for a
/// reader that went away, 2 with a sentence for a full disk; never a panic.
#[test]
fn completions_and_man_to_a_closed_pipe_or_a_full_disk_do_not_panic() {
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(KPACK)
            .args(args)
            .stdout(Stdio::from(full))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to stdout") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        // A reader that closes its end at once.
        let mut child = Command::new(KPACK)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
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

/// `libaxpy_2arch.so` with the `p_align` of the `PT_LOAD` holding
/// `.hip_fatbin` set to `align`.
fn with_fatbin_segment_align(align: u64) -> Vec<u8> {
    use object::read::elf::{ElfFile64, ProgramHeader as _};
    use object::{LittleEndian as LE, Object, ObjectSection};
    let mut bytes = std::fs::read(fixture("corpus/libaxpy_2arch.so")).unwrap();
    let (phoff, index) = {
        let obj = ElfFile64::<LE, _>::parse(&bytes[..]).unwrap();
        let fatbin = obj.section_by_name(".hip_fatbin").unwrap().address();
        let index = obj
            .elf_program_headers()
            .iter()
            .position(|p| {
                p.p_type(LE) == object::elf::PT_LOAD
                    && (p.p_vaddr(LE)..p.p_vaddr(LE) + p.p_filesz(LE)).contains(&fatbin)
            })
            .unwrap();
        (obj.elf_header().e_phoff.get(LE) as usize, index)
    };
    let at = phoff + index * 56 + 48;
    bytes[at..at + 8].copy_from_slice(&align.to_le_bytes());
    bytes
}

/// A `.hip_fatbin` segment whose `p_align` is not a power of two is
/// refused by prune and offload (it used to be pruned into a file that
/// failed `verify-elf --pruned`).
#[test]
fn a_fatbin_segment_aligned_to_no_power_of_two_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("align3.so");
    std::fs::write(&input, with_fatbin_segment_align(3)).unwrap();
    let pruned = dir.path().join("p.so");
    let out = crate::util::kpack_prune(&input, &pruned, "gfx90a", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("p_align 0x3 is not a power of two"), "{err}");
    assert!(!pruned.exists());
    let out = kpack([
        "offload".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        dir.path().join("o.so").as_os_str(),
        "--archives".as_ref(),
        dir.path().join("o").as_os_str(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("p_align 0x3 is not a power of two"), "{err}");
}
