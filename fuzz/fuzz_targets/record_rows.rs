//! `RECORD` rows as arbitrary text (`kpack_wheel::parse_record`): nothing
//! may panic, and rows that parse are written back (`write_record`) to
//! text that parses to the same rows (quoting, empty hashes and sizes
//! included).
#![no_main]

use kpack_wheel::{parse_record, write_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(rows) = parse_record(&text) else {
        return;
    };
    let again = parse_record(&write_record(&rows)).expect("written RECORD reads back");
    assert_eq!(rows, again);
});
