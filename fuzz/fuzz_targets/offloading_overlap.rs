//! The OffloadBinary-amplification shape: a compressed v3 binary whose
//! entries' image ranges come from the input, so they can overlap, repeat
//! and span one large zero-filled body. A binary that reads must hold no
//! more image bytes than it inflated to (entries are ranges into one
//! buffer; overlapping ones are refused), and nothing may panic.
#![no_main]

use kpack_llvm_offload::{MAGIC, ReadOptions, Reader};
use libfuzzer_sys::fuzz_target;

/// Input: `[n][body_kib][n × (offset u16, len u16)]`; offsets and lengths
/// count 256-byte units from the end of the entry table.
fn build(data: &[u8]) -> Option<Vec<u8>> {
    let (&n, rest) = data.split_first()?;
    let (&kib, rest) = rest.split_first()?;
    let n = usize::from(n % 64);
    let table = 40 + 40 * n;
    let body = usize::from(kib) * 1024;
    let mut bin = vec![0u8; table + body];
    bin[..4].copy_from_slice(&MAGIC);
    bin[4..8].copy_from_slice(&3u32.to_le_bytes());
    bin[16..24].copy_from_slice(&40u64.to_le_bytes());
    bin[24..32].copy_from_slice(&(n as u64).to_le_bytes());
    for i in 0..n {
        let f = rest.get(i * 4..i * 4 + 4).unwrap_or(&[0; 4]);
        let off = table as u64 + u64::from(u16::from_le_bytes([f[0], f[1]])) * 256;
        let len = u64::from(u16::from_le_bytes([f[2], f[3]])) * 256;
        let rec = &mut bin[40 + i * 40..80 + i * 40];
        rec[..2].copy_from_slice(&1u16.to_le_bytes());
        rec[2..4].copy_from_slice(&4u16.to_le_bytes());
        rec[8..16].copy_from_slice(&(table as u64).to_le_bytes());
        rec[24..32].copy_from_slice(&off.to_le_bytes());
        rec[32..40].copy_from_slice(&len.to_le_bytes());
    }
    let inflated = bin.len() as u64;
    let mut out = bin[..40].to_vec();
    out.extend(zstd::bulk::compress(&bin[40..], 1).ok()?);
    let size = out.len() as u64;
    out[8..16].copy_from_slice(&size.to_le_bytes());
    out[32..40].copy_from_slice(&inflated.to_le_bytes());
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some(section) = build(data) else {
        return;
    };
    let options = ReadOptions {
        max_inflated_size: 1 << 20,
        verify_hash: true,
    };
    for binary in Reader::with_options(&section, options).binaries() {
        let Ok(binary) = binary else {
            break;
        };
        let images: u64 = binary.entries().iter().map(|e| e.image().len() as u64).sum();
        assert!(
            images <= binary.inflated_size(),
            "{images} image bytes from a binary of {}",
            binary.inflated_size()
        );
    }
});
