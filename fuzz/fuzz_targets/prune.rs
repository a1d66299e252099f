//! Arbitrary bytes (seeded with the clang-19 objects and archives) through
//! `kpack prune`'s library half: `device_targets`, then `prune_object` or
//! `prune_archive` keeping the first target (or `gfx942`). Nothing may
//! panic, and whatever prune writes must read back with no entry the
//! filter dropped. A linked executable or shared library (seed it with the
//! fixture ELFs) goes through `kpack_elf::prune` instead (its runs and
//! in-place layouts), whose output must pass `verify_pruned_image`'s
//! parse and be as long as its report says.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use kpack_bundle::WalkOptions;
use kpack_llvm_offload::{device_targets, is_archive, prune_archive, prune_object};
use libfuzzer_sys::fuzz_target;

/// One scratch file per fuzzing process (`read_fat_binary` takes a path).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("kpack-fuzz-prune-{}.bin", std::process::id()))
    })
}

/// A linked ELF (`ET_EXEC` or `ET_DYN`) through `kpack_elf::prune`.
fn prune_linked(data: &[u8]) {
    let path = scratch();
    if std::fs::write(path, data).is_err() {
        return;
    }
    let Ok(fat) = kpack_elf::read_fat_binary(path, WalkOptions { verify_hash: false }) else {
        return;
    };
    let Some(first) = fat.targets().into_iter().next() else {
        return;
    };
    let keep = |id: &kpack_bundle::EntryId| id.target().is_some_and(|t| t.to_string() == first);
    if let Ok((image, report)) = kpack_elf::prune(path, &fat, &keep, &budget()) {
        assert_eq!(report.output_size, image.len() as u64);
        let _ = kpack_elf::verify_pruned_image(&image[..]);
    }
}

fuzz_target!(|data: &[u8]| {
    // e_type at 16: ET_EXEC (2) or ET_DYN (3).
    if data.starts_with(b"\x7fELF") && matches!(data.get(16), Some(2 | 3)) {
        prune_linked(data);
        return;
    }
    let keep_target = device_targets(data)
        .ok()
        .and_then(|t| t.first().cloned())
        .unwrap_or_else(|| "gfx942".to_string());
    let keep = |t: &str| t == keep_target;
    let pruned = if is_archive(data) {
        prune_archive(data, &keep, &budget())
    } else {
        prune_object(data, &keep, &budget())
    };
    if let Ok((out, _)) = pruned
        && let Ok(after) = device_targets(&out)
    {
        assert!(after.iter().all(|t| *t == keep_target), "{after:?}");
    }
});

/// The budget pruning runs under here.
fn budget() -> kpack_bundle::MemoryBudget {
    kpack_bundle::MemoryBudget::new(256 << 20)
}
