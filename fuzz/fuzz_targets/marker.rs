//! Arbitrary bytes as a `.rocm_kpack_ref` marker: parse, and re-encoding a
//! parsed marker must parse back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = kpack_format::Marker::parse(data) {
        let again = kpack_format::Marker::parse(&m.to_bytes()).expect("re-encoded marker parses");
        assert_eq!(again, m);
    }
});
