//! The HIP fat-binary wrapper (`__CudaFatBinaryWrapper`) and the offload
//! layout every host format shares: the host binary's reader (ELF, PE)
//! finds the sections and resolves each wrapper's pointer its own way, and
//! hands back these types, so callers treat every format alike.

use crate::source::SizedFile;
use crate::walk::Item;

/// Wrapper magic of an untouched fat binary (`HIPF`; file bytes `FPIH`).
pub const HIPF: u32 = 0x4849_5046;
/// Wrapper magic after kpack (`HIPK`; file bytes `HIPK`).
pub const HIPK: u32 = 0x4B50_4948;
/// Size of one wrapper on 64-bit targets.
pub const WRAPPER_SIZE: u64 = 24;

/// Wrapper magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Magic {
    /// An untouched wrapper.
    #[serde(rename = "HIPF")]
    Hipf,
    /// A wrapper kpack redirected to its marker.
    #[serde(rename = "HIPK")]
    Hipk,
    /// Anything else.
    #[serde(rename = "other")]
    Other(u32),
}

impl Magic {
    /// The magic of the first word of a wrapper.
    pub fn from_word(word: u32) -> Magic {
        match word {
            HIPF => Magic::Hipf,
            HIPK => Magic::Hipk,
            other => Magic::Other(other),
        }
    }
}

/// The four little-endian fields of one 24-byte wrapper, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrapperFields {
    /// Magic.
    pub magic: Magic,
    /// Version (1 for HIP).
    pub version: u32,
    /// The value stored in the pointer slot.
    pub pointer: u64,
    /// The `reserved1` field.
    pub reserved: u64,
}

impl WrapperFields {
    /// Decode one wrapper; `bytes` shorter than [`WRAPPER_SIZE`] reads
    /// as zeros where it ends.
    pub fn parse(bytes: &[u8]) -> WrapperFields {
        let mut w = [0u8; WRAPPER_SIZE as usize];
        let n = bytes.len().min(w.len());
        w[..n].copy_from_slice(&bytes[..n]);
        let word = |k: usize| u32::from_le_bytes([w[k], w[k + 1], w[k + 2], w[k + 3]]);
        let quad = |k: usize| u64::from(word(k)) | (u64::from(word(k + 4)) << 32);
        WrapperFields {
            magic: Magic::from_word(word(0)),
            version: word(4),
            pointer: quad(8),
            reserved: quad(16),
        }
    }
}

/// How a wrapper's pointer gets its run-time value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum PointerVia {
    /// The value stored in the file is used as is (an ELF `ET_EXEC`, a PE
    /// `/fixed` image or a slot without a base relocation).
    Inline,
    /// An ELF `R_X86_64_RELATIVE` / `R_AARCH64_RELATIVE` dynamic
    /// relocation; the addend is the target.
    Relative {
        /// File offset of the relocation entry.
        rela_entry: u64,
    },
    /// An ELF `R_X86_64_64` / `R_AARCH64_ABS64` relocation against a
    /// symbol (`-fgpu-rdc` builds).
    Symbol {
        /// File offset of the relocation entry.
        rela_entry: u64,
        /// The symbol, e.g. `__hip_fatbin`.
        symbol: String,
        /// The addend.
        addend: i64,
    },
    /// A PE `IMAGE_REL_BASED_DIR64` base relocation adds the load delta.
    BaseReloc,
}

impl PointerVia {
    /// How `kpack inspect` names it.
    pub fn describe(&self) -> String {
        match self {
            PointerVia::Inline => "inline".into(),
            PointerVia::Relative { .. } => "R_X86_64_RELATIVE".into(),
            PointerVia::Symbol { symbol, addend, .. } => format!("R_X86_64_64 {symbol}+{addend}"),
            PointerVia::BaseReloc => "IMAGE_REL_BASED_DIR64".into(),
        }
    }

    /// File offset of the ELF relocation entry that fills the slot.
    pub fn rela_entry(&self) -> Option<u64> {
        match self {
            PointerVia::Relative { rela_entry } | PointerVia::Symbol { rela_entry, .. } => {
                Some(*rela_entry)
            }
            PointerVia::Inline | PointerVia::BaseReloc => None,
        }
    }
}

/// One 24-byte `__CudaFatBinaryWrapper`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Wrapper {
    /// Position in the wrapper section.
    pub index: usize,
    /// Virtual address of the wrapper (section offset in an ELF `ET_REL`;
    /// at the preferred image base in a PE image).
    pub addr: u64,
    /// File offset of the wrapper.
    pub file_offset: u64,
    /// Magic.
    pub magic: Magic,
    /// Version (1 for HIP).
    pub version: u32,
    /// The value stored in the file's pointer slot.
    pub stored_pointer: u64,
    /// The address the pointer has at run time (at the preferred image
    /// base in a PE image: base relocations only add the load delta).
    pub pointer: u64,
    /// How the pointer gets that value.
    pub via: PointerVia,
    /// The `reserved1` field (kpack's co_index once transformed).
    pub reserved: u64,
    /// Index of the bundle in the device-code section the pointer lands on.
    pub bundle: Option<usize>,
}

/// Where a section is.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SectionInfo {
    /// Index in the section (header) table.
    pub index: usize,
    /// `sh_addr`; in a PE image the virtual address at the preferred image
    /// base (`ImageBase + RVA`).
    pub addr: u64,
    /// PE only: `VirtualAddress` (RVA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rva: Option<u32>,
    /// `sh_offset`, or PE `PointerToRawData`.
    pub offset: u64,
    /// `sh_size`, or PE `VirtualSize`.
    pub size: u64,
    /// PE only: `SizeOfRawData`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_size: Option<u32>,
    /// `false` when not all its bytes are in the file (ELF `SHT_NOBITS`;
    /// PE `SizeOfRawData < VirtualSize`, the rest zero-filled).
    pub in_file: bool,
}

/// What went wrong reading or rewriting a host binary, whatever its
/// format, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// The file is not a host binary kpack handles (ELF: 32-bit,
    /// big-endian, another machine; PE: PE32, not x86-64, ...).
    Unsupported,
    /// The ELF or PE structure is corrupt or inconsistent.
    Malformed,
    /// The offload data (wrappers, bundles) is corrupt or inconsistent.
    Offload,
    /// The file was already transformed by kpack.
    AlreadyTransformed,
    /// The transform cannot be done for this layout.
    Layout,
}

/// The device target ids of `bundles`, sorted, each once.
pub fn targets_of(bundles: &[Item]) -> Vec<String> {
    let mut t: Vec<String> = bundles
        .iter()
        .flat_map(|b| b.entries.iter())
        .filter(|e| !e.id.is_host())
        .filter_map(|e| e.id.target().map(|t| t.to_string()))
        .collect();
    t.sort();
    t.dedup();
    t
}

/// The offload layout of a host binary, whatever its format: what
/// inspect, offload, prune and verify ask of it.
pub trait HostLayout {
    /// The device-code section (`.hip_fatbin`, `.hip_fat`), if present.
    fn fatbin(&self) -> Option<&SectionInfo>;
    /// The marker section kpack adds, if present.
    fn marker(&self) -> Option<&SectionInfo>;
    /// Wrappers in section order.
    fn wrappers(&self) -> &[Wrapper];
    /// Bundles in the device-code section, in order; a bundle's index is
    /// its co_index.
    fn bundles(&self) -> &[Item];
    /// The file, for reading entries of [`HostLayout::bundles`].
    fn source(&self) -> &SizedFile;

    /// `true` when there is no device code and no marker.
    fn is_host_only(&self) -> bool {
        self.fatbin().is_none() && self.wrappers().is_empty() && self.marker().is_none()
    }

    /// The device target ids present, sorted, each once.
    fn targets(&self) -> Vec<String> {
        targets_of(self.bundles())
    }

    /// `true` when every wrapper is HIPK (the file was transformed).
    fn is_transformed(&self) -> bool {
        let w = self.wrappers();
        !w.is_empty() && w.iter().all(|w| w.magic == Magic::Hipk)
    }

    /// Why the binary cannot be offloaded again, if kpack already did:
    /// every wrapper is HIPK, or it has a marker section
    /// (`marker_section` names it in the message).
    fn already_offloaded(&self, marker_section: &str) -> Option<String> {
        if self.is_transformed() {
            Some("already transformed by kpack (every wrapper is HIPK)".into())
        } else if self.marker().is_some() {
            Some(format!("already has a {marker_section} section"))
        } else {
            None
        }
    }

    /// Some wrapper is still HIPF (its device code in the file).
    fn has_pending_wrappers(&self) -> bool {
        self.wrappers().iter().any(|w| w.magic == Magic::Hipf)
    }

    /// The code-object index each wrapper's reserved word names (the
    /// `#<index>` of its TOC keys once offloaded).
    fn wrapper_indices(&self) -> Vec<u32> {
        // The low 32 bits are the index; the truncation is the format's.
        self.wrappers()
            .iter()
            .map(|w| (w.reserved & 0xffff_ffff) as u32)
            .collect()
    }
}

/// Implement [`HostLayout`] for a format's fat-binary type from its fields
/// `fatbin`, `marker`, `wrappers`, `bundles` and `source`, with inherent
/// `is_host_only`, `targets` and `is_transformed` so callers need not
/// import the trait.
#[macro_export]
macro_rules! impl_host_layout {
    ($t:ty) => {
        impl $crate::HostLayout for $t {
            fn fatbin(&self) -> Option<&$crate::SectionInfo> {
                self.fatbin.as_ref()
            }
            fn marker(&self) -> Option<&$crate::SectionInfo> {
                self.marker.as_ref()
            }
            fn wrappers(&self) -> &[$crate::Wrapper] {
                &self.wrappers
            }
            fn bundles(&self) -> &[$crate::Item] {
                &self.bundles
            }
            fn source(&self) -> &$crate::SizedFile {
                &self.source
            }
        }

        impl $t {
            /// `true` when there is no device code and no marker.
            pub fn is_host_only(&self) -> bool {
                $crate::HostLayout::is_host_only(self)
            }

            /// The device target ids present, sorted, each once.
            pub fn targets(&self) -> Vec<String> {
                $crate::HostLayout::targets(self)
            }

            /// `true` when every wrapper is HIPK (the file was transformed).
            pub fn is_transformed(&self) -> bool {
                $crate::HostLayout::is_transformed(self)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_four_fields_little_endian() {
        let mut w = Vec::new();
        w.extend_from_slice(&HIPF.to_le_bytes());
        w.extend_from_slice(&1u32.to_le_bytes());
        w.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        w.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(&w[..4], b"FPIH");
        let f = WrapperFields::parse(&w);
        assert_eq!(f.magic, Magic::Hipf);
        assert_eq!(f.version, 1);
        assert_eq!(f.pointer, 0x1122_3344_5566_7788);
        assert_eq!(f.reserved, 7);
        assert_eq!(WrapperFields::parse(b"HIPK").magic, Magic::Hipk);
        assert_eq!(WrapperFields::parse(&[]).magic, Magic::Other(0));
    }

    struct Layout {
        fatbin: Option<SectionInfo>,
        marker: Option<SectionInfo>,
        wrappers: Vec<Wrapper>,
        bundles: Vec<Item>,
        source: SizedFile,
    }
    crate::impl_host_layout!(Layout);

    fn wrapper(magic: Magic, reserved: u64) -> Wrapper {
        Wrapper {
            index: 0,
            addr: 0,
            file_offset: 0,
            magic,
            version: 1,
            stored_pointer: 0,
            pointer: 0,
            via: PointerVia::Inline,
            reserved,
            bundle: None,
        }
    }

    #[test]
    fn layout_tells_offloaded_from_pending_by_the_wrappers_and_the_marker() {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let mut l = Layout {
            fatbin: None,
            marker: None,
            wrappers: Vec::new(),
            bundles: Vec::new(),
            source: SizedFile::open(&manifest).unwrap(),
        };
        assert!(l.is_host_only());
        assert!(!l.is_transformed(), "no wrapper is not transformed");
        assert_eq!(l.already_offloaded(".m"), None);
        l.wrappers = vec![wrapper(Magic::Hipk, 0x1_0000_0003), wrapper(Magic::Hipf, 4)];
        assert!(!l.is_host_only());
        assert!(!l.is_transformed());
        assert!(l.has_pending_wrappers());
        assert_eq!(l.wrapper_indices(), vec![3, 4]);
        l.wrappers[1].magic = Magic::Hipk;
        assert!(l.is_transformed());
        assert!(!l.has_pending_wrappers());
        assert!(
            l.already_offloaded(".m")
                .unwrap()
                .contains("every wrapper is HIPK")
        );
        l.wrappers[1].magic = Magic::Hipf;
        l.marker = Some(SectionInfo {
            index: 1,
            addr: 0,
            rva: None,
            offset: 0,
            size: 1,
            raw_size: None,
            in_file: true,
        });
        assert_eq!(
            l.already_offloaded(".m").as_deref(),
            Some("already has a .m section")
        );
        assert!(l.targets().is_empty());
        assert!(crate::ReadAt::size(HostLayout::source(&l)) > 0);
    }

    #[test]
    fn section_info_names_pe_fields_only_when_present() {
        let elf = SectionInfo {
            index: 1,
            addr: 2,
            rva: None,
            offset: 3,
            size: 4,
            raw_size: None,
            in_file: true,
        };
        let json = serde_json::to_string(&elf).unwrap();
        assert_eq!(
            json,
            r#"{"index":1,"addr":2,"offset":3,"size":4,"in_file":true}"#
        );
        let pe = SectionInfo {
            rva: Some(5),
            raw_size: Some(6),
            ..elf
        };
        assert_eq!(
            serde_json::to_string(&pe).unwrap(),
            r#"{"index":1,"addr":2,"rva":5,"offset":3,"size":4,"raw_size":6,"in_file":true}"#
        );
    }
}
