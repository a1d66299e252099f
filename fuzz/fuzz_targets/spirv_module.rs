//! A portable SPIR-V bundle entry as arbitrary bytes: the module header
//! (`kpack_amdgpu::SpirvHeader::parse`) and what `inspect` reports of the
//! entry (`kpack_bundle::inspect_spirv`). Nothing may panic; a header that
//! parses agrees with the bytes it came from.
#![no_main]

use kpack_bundle::{EntryId, inspect_spirv};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let is = kpack_amdgpu::SpirvHeader::is_spirv(data);
    if let Ok(h) = kpack_amdgpu::SpirvHeader::parse(data, len) {
        assert!(is, "a header parsed from bytes without the magic");
        assert_eq!(h.words * 4, len);
        assert_eq!(h.major, 1);
    }
    let id = EntryId::parse("hipv4-spirv64-amd-amdhsa--amdgcnspirv").expect("a valid entry id");
    let src: &[u8] = data;
    match inspect_spirv(&id, &src, 0, len) {
        Some(Ok(info)) => assert_eq!(info.words * 4, len),
        Some(Err(e)) => drop(e.to_string()),
        None => panic!("a SPIR-V entry was not inspected as SPIR-V"),
    }
});
