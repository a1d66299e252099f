//! Arbitrary bytes as a static archive (GNU, BSD, thin) and as an ELF
//! object: members, symbol table, and every member's device code
//! (`.llvm.offloading` binaries, `.hip_fatbin` bundles and their entries).
//! Thin members are not followed (no files are read). Nothing may panic.
#![no_main]

use kpack_llvm_offload::{Archive, DeviceCode, MemberKind, ReadOptions};
use libfuzzer_sys::fuzz_target;

fn options() -> ReadOptions {
    ReadOptions {
        max_inflated_size: 1 << 22,
        verify_hash: false,
    }
}

fn device_code(data: &[u8]) {
    let Ok(code) = DeviceCode::parse(data, &options()) else {
        return;
    };
    for s in &code.offloading {
        for b in &s.binaries {
            for e in b.entries() {
                let _ = (e.arch(), e.image().len());
            }
        }
    }
    if let Some(fb) = &code.fatbin {
        for (b, item) in fb.bundles.iter().enumerate() {
            for i in 0..item.entries.len() {
                let _ = fb.read_entry(b, i);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    device_code(data);
    let Ok(ar) = Archive::parse(data) else {
        return;
    };
    if let Ok(symbols) = ar.symbols() {
        for s in symbols {
            if let Some(i) = s.member {
                assert_eq!(ar.members()[i].header_offset(), s.header_offset);
            }
        }
    }
    for m in ar.members() {
        let _ = m.name();
        if !m.is_thin() && MemberKind::of(m.data()) == MemberKind::Elf {
            device_code(m.data());
        }
    }
});
