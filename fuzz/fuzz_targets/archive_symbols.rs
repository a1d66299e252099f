//! The static-archive shape that made symbol lookup quadratic: a GNU
//! archive built from the input with many members and a symbol table
//! whose entries name member headers, real or not. Every symbol that
//! names a member must name the member starting at its offset, and one
//! that names none must have no member; nothing may panic.
#![no_main]

use kpack_llvm_offload::Archive;
use libfuzzer_sys::fuzz_target;

fn header(name: &str, size: usize) -> String {
    format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644)
}

/// Input: `[members u16][then u16 per symbol: member index, or any
/// other value for a made-up offset]`.
fn build(data: &[u8]) -> Option<Vec<u8>> {
    let members = usize::from(u16::from_le_bytes([*data.first()?, *data.get(1)?]) % 4096);
    let picks: Vec<u16> = data[2..]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let names: Vec<String> = (0..picks.len()).map(|i| format!("s{i}")).collect();
    let mut table_len = 4 + 4 * picks.len() + names.iter().map(|s| s.len() + 1).sum::<usize>();
    table_len += table_len % 2;
    let first = 8 + 60 + table_len;
    let mut out = b"!<arch>\n".to_vec();
    out.extend(header("/", table_len).as_bytes());
    out.extend((picks.len() as u32).to_be_bytes());
    for &p in &picks {
        let at = if usize::from(p) < members {
            first + usize::from(p) * 62
        } else {
            usize::from(p) * 7
        };
        out.extend((at as u32).to_be_bytes());
    }
    for s in &names {
        out.extend(s.as_bytes());
        out.push(0);
    }
    out.resize(first, 0);
    for i in 0..members {
        out.extend(header(&format!("m{i}.o/"), 2).as_bytes());
        out.extend(b"xx");
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = build(data) else {
        return;
    };
    let Ok(ar) = Archive::parse(&bytes) else {
        return;
    };
    let Ok(symbols) = ar.symbols() else {
        return;
    };
    for s in symbols {
        let at = ar
            .members()
            .iter()
            .position(|m| m.header_offset() == s.header_offset);
        assert_eq!(s.member, at, "symbol {} at {:#x}", s.name, s.header_offset);
    }
});
