//! A KFD topology node's `properties` file as arbitrary bytes
//! (`kpack_detect::target_of_properties`, the parser `detect` and
//! `--gpu auto` use): nothing may panic; a target it names parses as a
//! target id; an error message stays short.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match kpack_detect::target_of_properties(data) {
        Ok(Some(target)) => {
            assert!(
                kpack_amdgpu::TargetId::parse(&target).is_ok(),
                "{target:?} is not a target id"
            );
        }
        Ok(None) => {}
        Err(e) => {
            let e = e.to_string();
            assert!(e.len() < 256, "a {}-byte message", e.len());
        }
    }
});
