//! Recognise device code from a file's first bytes: an AMDGPU ELF code
//! object (and its target, from `e_flags`), an uncompressed clang offload
//! bundle (and its device targets, from the entry ids), or a compressed
//! `CCOB` bundle. What an ELF header means is `kpack_amdgpu`'s.

use kpack_amdgpu::{Header, HeaderError};

use crate::Target;

/// How many leading bytes a handler should ask for to make [`sniff`] useful:
/// the ELF header, or a bundle header with a few entry ids.
pub const SNIFF_BYTES: u32 = 512;

/// What the leading bytes of a file are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// An AMDGPU ELF code object (`e_machine` = `EM_AMDGPU` = 224); the target
    /// when the `EF_AMDGPU_MACH` value is known.
    AmdgpuElf(Option<Target>),
    /// A `__CLANG_OFFLOAD_BUNDLE__` with these device targets (host entries
    /// left out), as far as the prefix reaches.
    OffloadBundle(Vec<Target>),
    /// A compressed bundle (`CCOB`): device code, targets not visible.
    CompressedBundle,
    /// Anything else.
    Other,
}

impl Content {
    /// Whether the bytes are device code of any kind.
    pub fn is_device_code(&self) -> bool {
        !matches!(self, Content::Other)
    }

    /// The single target the content is for, if exactly one is visible.
    pub fn single_target(&self) -> Option<&Target> {
        match self {
            Content::AmdgpuElf(t) => t.as_ref(),
            Content::OffloadBundle(ts) => match ts.as_slice() {
                [one] => Some(one),
                [first, rest @ ..] if rest.iter().all(|t| t == first) => Some(first),
                _ => None,
            },
            _ => None,
        }
    }
}

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Classify the first bytes of a file. Never panics, whatever the bytes.
///
/// ```
/// use kpack_sdk::{sniff, Content};
/// assert_eq!(sniff(b"CCOB\x03\x00"), Content::CompressedBundle);
/// assert_eq!(sniff(b"hello"), Content::Other);
/// ```
pub fn sniff(prefix: &[u8]) -> Content {
    if prefix.starts_with(b"\x7fELF") {
        return sniff_elf(prefix);
    }
    if prefix.starts_with(BUNDLE_MAGIC) {
        return Content::OffloadBundle(bundle_targets(prefix));
    }
    if prefix.starts_with(b"CCOB") {
        return Content::CompressedBundle;
    }
    Content::Other
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn sniff_elf(b: &[u8]) -> Content {
    match Header::parse(b) {
        Ok(h) => Content::AmdgpuElf(h.target_id()),
        // Magic, class, byte order and e_machine sit in the first 20 bytes
        // and passed; only e_flags is cut off: device code, target unknown.
        Err(HeaderError::Truncated) if b.len() >= 20 => Content::AmdgpuElf(None),
        Err(_) => Content::Other,
    }
}

fn bundle_targets(b: &[u8]) -> Vec<Target> {
    let mut out = Vec::new();
    let Some(n) = u64_at(b, 24) else { return out };
    let mut at = 32usize;
    // Each entry header is at least 24 bytes, so the prefix bounds the loop.
    for _ in 0..n.min(b.len() as u64 / 24) {
        let Some(id_len) = u64_at(b, at + 16).and_then(|l| usize::try_from(l).ok()) else {
            break;
        };
        let Some(id) = at
            .checked_add(24)
            .and_then(|s| b.get(s..s.checked_add(id_len)?))
        else {
            break;
        };
        at += 24 + id_len;
        let Ok(id) = std::str::from_utf8(id) else {
            continue;
        };
        if let Some((_, target)) = id.split_once("amdgcn-amd-amdhsa-") {
            let target = target.trim_start_matches('-');
            if let Some(t) = crate::find_target(target) {
                out.push(t);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kpack_amdgpu::EM_AMDGPU;

    fn elf(abi: u8, flags: u32, machine: u16) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[7] = 64;
        b[8] = abi;
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[48..52].copy_from_slice(&flags.to_le_bytes());
        b
    }

    fn bundle(ids: &[&str]) -> Vec<u8> {
        let mut b = BUNDLE_MAGIC.to_vec();
        b.extend((ids.len() as u64).to_le_bytes());
        for id in ids {
            b.extend(0u64.to_le_bytes());
            b.extend(0u64.to_le_bytes());
            b.extend((id.len() as u64).to_le_bytes());
            b.extend(id.as_bytes());
        }
        b
    }

    #[test]
    fn reads_target_from_elf_flags() {
        let c = sniff(&elf(3, 0x04c | 0x300 | 0x800, EM_AMDGPU));
        assert_eq!(
            c.single_target().map(|t| t.to_string()).as_deref(),
            Some("gfx942:sramecc-:xnack+")
        );
        let c = sniff(&elf(1, 0x03f | 0x100, EM_AMDGPU));
        assert_eq!(
            c.single_target().map(|t| t.to_string()).as_deref(),
            Some("gfx90a:xnack+")
        );
    }

    #[test]
    fn names_gfx803() {
        // The SDK's own table used to stop at gfx900.
        let c = sniff(&elf(2, 0x02a, EM_AMDGPU));
        assert_eq!(
            c.single_target().map(|t| t.to_string()).as_deref(),
            Some("gfx803")
        );
    }

    #[test]
    fn elf_cut_before_e_flags_is_device_code_of_unknown_target() {
        let e = elf(3, 0x04c, EM_AMDGPU);
        assert_eq!(sniff(&e[..30]), Content::AmdgpuElf(None));
        assert_eq!(sniff(&e[..19]), Content::Other);
    }

    #[test]
    fn unknown_mach_is_still_device_code() {
        let c = sniff(&elf(3, 0xfe, EM_AMDGPU));
        assert_eq!(c, Content::AmdgpuElf(None));
        assert!(c.is_device_code());
    }

    #[test]
    fn host_elf_is_other() {
        assert_eq!(sniff(&elf(0, 0, 62)), Content::Other);
    }

    #[test]
    fn reads_bundle_device_targets() {
        let b = bundle(&[
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
        ]);
        assert_eq!(
            sniff(&b).single_target().map(|t| t.to_string()).as_deref(),
            Some("gfx1100")
        );
        let b = bundle(&[
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx942",
        ]);
        assert_eq!(sniff(&b).single_target(), None);
        assert!(sniff(&b).is_device_code());
    }

    #[test]
    fn truncated_and_hostile_prefixes_do_not_panic() {
        let b = bundle(&["hipv4-amdgcn-amd-amdhsa--gfx1100"]);
        for n in 0..b.len() {
            let _ = sniff(&b[..n]);
        }
        let mut evil = BUNDLE_MAGIC.to_vec();
        evil.extend(u64::MAX.to_le_bytes());
        evil.extend([0xff; 64]);
        assert_eq!(sniff(&evil), Content::OffloadBundle(vec![]));
        let e = elf(3, 0x04c, EM_AMDGPU);
        for n in 0..e.len() {
            let _ = sniff(&e[..n]);
        }
    }
}
