//! Arbitrary bytes as a KPAK archive: open, list, decode every entry, dump.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = kpack_format::Archive::from_bytes(data.to_vec()) {
        let _ = a.binaries().count();
        for e in a.entries() {
            if let Ok(bytes) = a.read(e) {
                assert_eq!(bytes.len() as u64, e.original_size());
            }
        }
        let _ = a.get("lib/libtest.so#0", "gfx900");
        let _ = a.dump();
    }
});
