//! A wheel's metadata files as arbitrary text: `WHEEL` and `METADATA`
//! (`Headers::parse`), `RECORD` (`parse_record`) and the file name
//! (`WheelName::parse`). Nothing may panic; an error message stays short
//! whatever the input (it quotes at most a prefix of it).
#![no_main]

use kpack_wheel::{Headers, WheelName, parse_record};
use libfuzzer_sys::fuzz_target;

/// Longest error message accepted for any input.
const MAX_MESSAGE: usize = 4096;

fn short(message: String) {
    assert!(
        message.len() <= MAX_MESSAGE,
        "a {}-byte error message: {}…",
        message.len(),
        message.chars().take(120).collect::<String>()
    );
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Headers::parse(&text) {
        Ok(h) => drop(h),
        Err(e) => short(e.to_string()),
    }
    match parse_record(&text) {
        Ok(rows) => drop(rows),
        Err(e) => short(e.to_string()),
    }
    let first = text.lines().next().unwrap_or("");
    match WheelName::parse(first) {
        Ok(n) => drop(n),
        Err(e) => short(e.to_string()),
    }
});
