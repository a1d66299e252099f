//! Arbitrary bytes (seeded with the clang-19 objects and archives) through
//! `kpack prune`'s library half: `device_targets`, then `prune_object` or
//! `prune_archive` keeping the first target (or `gfx942`). Nothing may
//! panic, and whatever prune writes must read back with no entry the
//! filter dropped.
#![no_main]

use kpack_offloading::{device_targets, is_archive, prune_archive, prune_object};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let keep_target = device_targets(data)
        .ok()
        .and_then(|t| t.first().cloned())
        .unwrap_or_else(|| "gfx942".to_string());
    let keep = |t: &str| t == keep_target;
    let pruned = if is_archive(data) {
        prune_archive(data, &keep)
    } else {
        prune_object(data, &keep)
    };
    if let Ok((out, _)) = pruned
        && let Ok(after) = device_targets(&out)
    {
        assert!(after.iter().all(|t| *t == keep_target), "{after:?}");
    }
});
