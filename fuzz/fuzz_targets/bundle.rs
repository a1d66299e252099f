//! Arbitrary bytes as a `.hip_fatbin` region: walk every item (plain
//! bundle, CCOB v1/v2/v3, bare AMDGPU ELF), read and inspect every entry,
//! stream every item's entries;
//! and any UTF-8 prefix as a bundle-entry id and a target id. Errors must
//! name an offset.
#![no_main]

use kpack_amdgpu::TargetId;
use kpack_bundle::{EntryId, MemoryBudget, WalkOptions, walk};
use libfuzzer_sys::fuzz_target;

fn walk_all(data: &Vec<u8>, verify_hash: bool) {
    for item in walk(data, 0, data.len() as u64, WalkOptions { verify_hash }) {
        let item = match item {
            Ok(item) => item,
            Err(e) => {
                assert!(e.offset().is_some(), "walk error without an offset: {e}");
                break;
            }
        };
        for (i, entry) in item.entries.iter().enumerate() {
            if let Err(e) = item.read_entry(data, i) {
                assert!(
                    e.offset().is_some(),
                    "read_entry error without an offset: {e}"
                );
            }
            match item.code_object(data, i) {
                Ok(info) => {
                    let _ = info.mismatches(&entry.id);
                    let _ = info.target_id().to_string();
                }
                Err(e) => assert!(
                    e.offset().is_some(),
                    "code_object error without an offset: {e}"
                ),
            }
        }
        // The one-pass streaming read, under a small ceiling.
        let budget = MemoryBudget::new(1 << 20);
        let streamed = item.stream_entries(data, &budget, |_, e, bytes| {
            assert_eq!(bytes.len() as u64, e.size);
            Ok::<(), kpack_bundle::Error>(())
        });
        if let Err(e) = streamed {
            assert!(
                e.offset().is_some(),
                "stream_entries error without an offset: {e}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let owned = data.to_vec();
    // Without the MD5 check, mutated CCOB payloads get past the hash and
    // exercise the bundle parser inside; with it, the check itself runs.
    walk_all(&owned, false);
    walk_all(&owned, true);

    let text = match std::str::from_utf8(data) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or_default(),
    };
    if let Ok(id) = EntryId::parse(text) {
        let _ = id.target().map(|t| t.to_string());
    }
    if let Ok(t) = TargetId::parse(text) {
        let again = TargetId::parse(&t.to_string()).expect("a printed target id parses");
        assert_eq!(again, t);
    }
});
