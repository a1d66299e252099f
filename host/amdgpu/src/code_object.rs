//! What an AMDGPU code object's ELF header says: machine, HSA OS ABI,
//! code-object version, processor (through [`crate::MACH_TABLE`]), xnack
//! and sramecc, generic version. Works on the first bytes of a file; no
//! ELF crate, no section reads.

use std::fmt;

use crate::mach::{EF_AMDGPU_MACH, processor_for_mach};
use crate::target::TargetId;

/// `e_machine` of AMDGPU code objects.
pub const EM_AMDGPU: u16 = 224;
/// `EI_OSABI` of HSA code objects (HIP).
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `e_flags` bits holding the generic version (code object v6 and later).
pub const EF_AMDGPU_GENERIC_VERSION: u32 = 0xff00_0000;
/// Shift of [`EF_AMDGPU_GENERIC_VERSION`].
pub const EF_AMDGPU_GENERIC_VERSION_OFFSET: u32 = 24;

/// Bytes [`Header::parse`] needs: `e_ident` through `e_flags`.
pub const HEADER_BYTES: usize = 52;

const ELF_MAGIC: &[u8] = b"\x7fELF";
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
/// Offset of `e_machine` in an ELF header.
const E_MACHINE: usize = 18;
/// Offset of `e_flags` in a 64-bit ELF header.
const E_FLAGS: usize = 48;

/// Whether `head` starts like an AMDGPU ELF: the ELF magic and `e_machine`
/// 224. Class and byte order are not checked (that is [`Header::parse`]'s
/// job), so 20 bytes of a file are enough to route it.
///
/// ```
/// let mut head = [0u8; 24];
/// head[..4].copy_from_slice(b"\x7fELF");
/// head[18] = 224;
/// assert!(kpack_amdgpu::is_amdgpu_elf(&head));
/// assert!(!kpack_amdgpu::is_amdgpu_elf(&head[..19]));
/// ```
pub fn is_amdgpu_elf(head: &[u8]) -> bool {
    head.starts_with(ELF_MAGIC) && u16_at(head, E_MACHINE) == Some(EM_AMDGPU)
}

/// State of a target feature as a code object's `e_flags` record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeatureState {
    /// The processor does not have the feature.
    Unsupported,
    /// Built to run either way.
    Any,
    /// Built for the feature off (`-`).
    Off,
    /// Built for the feature on (`+`).
    On,
}

impl FeatureState {
    /// What a target id says for this state: `Some(true)` for on,
    /// `Some(false)` for off, `None` (no suffix) for any or unsupported.
    pub fn requested(self) -> Option<bool> {
        match self {
            FeatureState::On => Some(true),
            FeatureState::Off => Some(false),
            FeatureState::Any | FeatureState::Unsupported => None,
        }
    }

    /// Lowercase name: `unsupported`, `any`, `off`, `on`.
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureState::Unsupported => "unsupported",
            FeatureState::Any => "any",
            FeatureState::Off => "off",
            FeatureState::On => "on",
        }
    }

    /// The v4+ two-bit field at `shift`: 0 unsupported, 1 any, 2 off, 3 on.
    fn from_v4(flags: u32, shift: u32) -> FeatureState {
        match (flags >> shift) & 3 {
            1 => FeatureState::Any,
            2 => FeatureState::Off,
            3 => FeatureState::On,
            _ => FeatureState::Unsupported,
        }
    }

    /// A v2/v3 single bit: set means on; off is not recorded.
    fn from_bit(flags: u32, bit: u32) -> FeatureState {
        if flags & bit != 0 {
            FeatureState::On
        } else {
            FeatureState::Any
        }
    }
}

/// Why bytes are not an AMDGPU code-object header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The bytes end before the field being checked; every check before
    /// it passed (so 20 or more bytes mean "an AMDGPU ELF, cut short").
    Truncated,
    /// No ELF magic.
    NotElf,
    /// An ELF, but not 64-bit little-endian.
    NotElf64Le,
    /// An ELF whose `e_machine` is not [`EM_AMDGPU`].
    NotAmdgpu {
        /// The `e_machine` found.
        machine: u16,
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Truncated => write!(f, "ELF header shorter than {HEADER_BYTES} bytes"),
            HeaderError::NotElf => f.write_str("no ELF magic"),
            HeaderError::NotElf64Le => f.write_str("not a 64-bit little-endian ELF"),
            HeaderError::NotAmdgpu { machine } => {
                write!(f, "e_machine is {machine}, not AMDGPU ({EM_AMDGPU})")
            }
        }
    }
}

impl std::error::Error for HeaderError {}

/// The AMDGPU facts of a code object's ELF header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `EI_OSABI` ([`ELFOSABI_AMDGPU_HSA`] for HIP).
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abi_version: u8,
    /// Code-object version (2..=6) from the ABI version, for HSA objects
    /// only (other OS ABIs number their versions differently).
    pub code_object_version: Option<u8>,
    /// `e_flags`.
    pub e_flags: u32,
    /// xnack as recorded in `e_flags`.
    pub xnack: FeatureState,
    /// sramecc as recorded in `e_flags`.
    pub sramecc: FeatureState,
    /// Generic version (`e_flags` bits 24..31), for code-object v6 and
    /// later, when not 0.
    pub generic_version: Option<u8>,
}

impl Header {
    /// Read the header from the first [`HEADER_BYTES`] (or more) bytes of
    /// a code object. Checks, in order: ELF magic, 64-bit little-endian,
    /// `e_machine` = [`EM_AMDGPU`]; never panics.
    ///
    /// Feature bits follow the code-object version: v2 has xnack in bit 0
    /// (set = on), v3 has xnack in `0x100` and sramecc in `0x200` (set =
    /// on), v4 and later two-bit fields (`0x300`, `0xc00`: unsupported,
    /// any, off, on). Objects of unknown version are read as v4+.
    pub fn parse(bytes: &[u8]) -> Result<Header, HeaderError> {
        match bytes.get(..ELF_MAGIC.len()) {
            None => return Err(HeaderError::Truncated),
            Some(m) if m != ELF_MAGIC => return Err(HeaderError::NotElf),
            Some(_) => {}
        }
        match (bytes.get(4), bytes.get(5)) {
            (Some(&ELFCLASS64), Some(&ELFDATA2LSB)) => {}
            (Some(_), Some(_)) => return Err(HeaderError::NotElf64Le),
            _ => return Err(HeaderError::Truncated),
        }
        match u16_at(bytes, E_MACHINE) {
            None => return Err(HeaderError::Truncated),
            Some(EM_AMDGPU) => {}
            Some(machine) => return Err(HeaderError::NotAmdgpu { machine }),
        }
        let e_flags = u32_at(bytes, E_FLAGS).ok_or(HeaderError::Truncated)?;
        let (osabi, abi_version) = (bytes[7], bytes[8]);
        let code_object_version = match (osabi, abi_version) {
            (ELFOSABI_AMDGPU_HSA, v @ 0..=4) => Some(v + 2),
            _ => None,
        };
        let (xnack, sramecc) = match code_object_version {
            Some(2) => (
                FeatureState::from_bit(e_flags, 0x1),
                FeatureState::Unsupported,
            ),
            Some(3) => (
                FeatureState::from_bit(e_flags, 0x100),
                FeatureState::from_bit(e_flags, 0x200),
            ),
            _ => (
                FeatureState::from_v4(e_flags, 8),
                FeatureState::from_v4(e_flags, 10),
            ),
        };
        let generic_version = match code_object_version {
            Some(v) if v >= 6 => Some(
                ((e_flags & EF_AMDGPU_GENERIC_VERSION) >> EF_AMDGPU_GENERIC_VERSION_OFFSET) as u8,
            )
            .filter(|&g| g != 0),
            _ => None,
        };
        Ok(Header {
            osabi,
            abi_version,
            code_object_version,
            e_flags,
            xnack,
            sramecc,
            generic_version,
        })
    }

    /// The `EF_AMDGPU_MACH` value (`e_flags & 0xff`).
    pub fn mach(&self) -> u32 {
        self.e_flags & EF_AMDGPU_MACH
    }

    /// The processor the mach value names; `None` when unknown.
    pub fn processor(&self) -> Option<&'static str> {
        processor_for_mach(self.mach())
    }

    /// The target id the header describes (`gfx90a:xnack+`): the processor
    /// and every feature that is on or off; `None` when the mach value is
    /// unknown.
    pub fn target_id(&self) -> Option<TargetId> {
        Some(
            TargetId::bare(self.processor()?)
                .with_sramecc(self.sramecc.requested())
                .with_xnack(self.xnack.requested()),
        )
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-byte AMDGPU ELF header with the given OS ABI, ABI version and flags.
    fn header(osabi: u8, abi: u8, flags: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(ELF_MAGIC);
        b[4] = ELFCLASS64;
        b[5] = ELFDATA2LSB;
        b[6] = 1;
        b[7] = osabi;
        b[8] = abi;
        b[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        b[48..52].copy_from_slice(&flags.to_le_bytes());
        b
    }

    fn target(b: &[u8]) -> Option<String> {
        Header::parse(b).unwrap().target_id().map(|t| t.to_string())
    }

    #[test]
    fn reads_v4_and_later_feature_fields() {
        let hsa = ELFOSABI_AMDGPU_HSA;
        assert_eq!(
            target(&header(hsa, 3, 0x04c | 0x300 | 0x800)).as_deref(),
            Some("gfx942:sramecc-:xnack+")
        );
        assert_eq!(target(&header(hsa, 2, 0x53f)).as_deref(), Some("gfx90a"));
        let h = Header::parse(&header(hsa, 2, 0x23f)).unwrap();
        assert_eq!(
            (h.xnack, h.sramecc),
            (FeatureState::Off, FeatureState::Unsupported)
        );
        let h = Header::parse(&header(hsa, 2, 0x63f)).unwrap();
        assert_eq!((h.xnack, h.sramecc), (FeatureState::Off, FeatureState::Any));
        let h = Header::parse(&header(hsa, 2, 0x036)).unwrap();
        assert_eq!(
            (h.xnack, h.sramecc),
            (FeatureState::Unsupported, FeatureState::Unsupported)
        );
        assert_eq!(h.code_object_version, Some(4));
    }

    #[test]
    fn reads_v3_and_v2_feature_bits() {
        let hsa = ELFOSABI_AMDGPU_HSA;
        assert_eq!(
            target(&header(hsa, 1, 0x03f | 0x100)).as_deref(),
            Some("gfx90a:xnack+")
        );
        assert_eq!(
            target(&header(hsa, 1, 0x02f | 0x300)).as_deref(),
            Some("gfx906:sramecc+:xnack+")
        );
        let h = Header::parse(&header(hsa, 0, 0x02a | 0x1)).unwrap();
        assert_eq!(h.code_object_version, Some(2));
        assert_eq!(
            (h.xnack, h.sramecc),
            (FeatureState::On, FeatureState::Unsupported)
        );
        // Not HSA: no version, features read as v4+.
        let h = Header::parse(&header(65, 1, 0x02f | 0x100)).unwrap();
        assert_eq!(h.code_object_version, None);
        assert_eq!(h.xnack, FeatureState::Any);
    }

    #[test]
    fn names_gfx803_and_unknown_mach() {
        let h = Header::parse(&header(ELFOSABI_AMDGPU_HSA, 2, 0x02a)).unwrap();
        assert_eq!(h.processor(), Some("gfx803"));
        let h = Header::parse(&header(ELFOSABI_AMDGPU_HSA, 2, 0xfe)).unwrap();
        assert_eq!((h.mach(), h.processor(), h.target_id()), (0xfe, None, None));
    }

    #[test]
    fn generic_version_only_from_v6() {
        let flags = 0x0100_0000 | 0x054;
        let v6 = Header::parse(&header(ELFOSABI_AMDGPU_HSA, 4, flags)).unwrap();
        assert_eq!(v6.generic_version, Some(1));
        assert_eq!(v6.processor(), Some("gfx11-generic"));
        let v5 = Header::parse(&header(ELFOSABI_AMDGPU_HSA, 3, flags)).unwrap();
        assert_eq!(v5.generic_version, None);
        let v6 = Header::parse(&header(ELFOSABI_AMDGPU_HSA, 4, 0x054)).unwrap();
        assert_eq!(v6.generic_version, None);
    }

    #[test]
    fn rejects_other_files_saying_why() {
        let mut x86 = header(0, 0, 0);
        x86[18..20].copy_from_slice(&62u16.to_le_bytes());
        assert_eq!(
            Header::parse(&x86),
            Err(HeaderError::NotAmdgpu { machine: 62 })
        );
        let mut elf32 = header(64, 2, 0);
        elf32[4] = 1;
        assert_eq!(Header::parse(&elf32), Err(HeaderError::NotElf64Le));
        assert_eq!(Header::parse(b"hello, world"), Err(HeaderError::NotElf));
        let full = header(ELFOSABI_AMDGPU_HSA, 2, 0x04c);
        for n in 0..HEADER_BYTES {
            assert_eq!(
                Header::parse(&full[..n]),
                Err(HeaderError::Truncated),
                "{n}"
            );
        }
        assert!(Header::parse(&full[..HEADER_BYTES]).is_ok());
        assert!(is_amdgpu_elf(&full[..20]) && !is_amdgpu_elf(&x86));
    }

    /// The entries of a plain clang offload bundle: (id, bytes).
    fn bundle_entries(b: &[u8]) -> Vec<(String, &[u8])> {
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
        assert!(b.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
        let mut at = 32;
        (0..u64_at(24))
            .map(|_| {
                let (off, size, id_len) = (u64_at(at), u64_at(at + 8), u64_at(at + 16));
                let id = String::from_utf8(b[at + 24..at + 24 + id_len].to_vec()).unwrap();
                at += 24 + id_len;
                (id, &b[off..off + size])
            })
            .collect()
    }

    #[test]
    fn header_of_real_code_objects_matches_their_bundle_ids() {
        // Built by hipcc (tests/fixtures/corpus/COMMANDS.log); clang wrote
        // the entry ids, so they are an oracle we did not write.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/corpus/kern_axpy_2arch.co"
        );
        let bytes = std::fs::read(path).unwrap();
        let mut seen = 0;
        for (id, code) in bundle_entries(&bytes) {
            let Some(want) = id.strip_prefix("hipv4-amdgcn-amd-amdhsa--") else {
                assert!(!is_amdgpu_elf(code), "{id}");
                continue;
            };
            assert!(is_amdgpu_elf(code), "{id}");
            let h = Header::parse(code).unwrap();
            assert_eq!(h.osabi, ELFOSABI_AMDGPU_HSA);
            assert!(h.code_object_version.is_some_and(|v| v >= 4), "{id}");
            assert_eq!(h.target_id().unwrap().to_string(), want);
            seen += 1;
        }
        assert_eq!(seen, 2);
    }
}
