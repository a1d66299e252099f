//! Arbitrary bytes as a KPAK archive (v1 with or without the frame index,
//! or v2 `zstd-delta`): open, list, decode every entry (deltas both through
//! `read` and with a separately decoded base), dump.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = kpack_format::Archive::from_bytes(data.to_vec()) {
        let _ = a.binaries().count();
        for e in a.entries() {
            if let Ok(bytes) = a.read(e) {
                assert_eq!(bytes.len() as u64, e.original_size());
            }
            if let Some(b) = e.base() {
                assert!(a.entry_by_ordinal(b).is_some_and(|base| base.base().is_none()));
                if let Ok(Some(base)) = a.read_base(e) {
                    let _ = a.read_with_base(e, &base);
                }
            }
        }
        let _ = a.get("lib/libtest.so#0", "gfx900");
        let _ = a.dump();
        let _ = a.verify();
    }
});
