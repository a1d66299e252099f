//! Device code the way the **new offload driver** leaves it in relocatable
//! objects and static archives: LLVM `OffloadBinary` (magic `0x10FF10AD`)
//! in `.llvm.offloading` sections, plus the old driver's `.hip_fatbin`
//! bundles when an object has them.
//!
//! Layers, bottom up:
//! - [`Reader`] / [`Binaries`]: the binaries of one `.llvm.offloading`
//!   section (versions 1 to 3, concatenated, 8-aligned, v3 compressed with
//!   zstd or zlib); every offset and size is checked against the buffer and
//!   nothing is allocated from an untrusted count;
//! - [`Writer`] / [`write_binary`]: the same format, laid out as LLVM does,
//!   so rewriting an unmodified binary gives identical bytes;
//! - [`DeviceCode`]: an ELF file's `SHT_LLVM_OFFLOADING` sections and
//!   `.hip_fatbin` bundles (through `kpack-bundle`'s walker);
//! - [`Archive`]: a static archive's members and symbol table (GNU, BSD,
//!   thin) through `object`'s archive reader;
//! - [`prune_object`] / [`prune_archive`]: the same files keeping only
//!   chosen GPU targets (`kpack prune` for link inputs).
//!
//! ```
//! use kpack_llvm_offload::{Image, ImageKind, OffloadKind, Reader, WriteOptions, Writer};
//! let image = Image {
//!     image_kind: ImageKind::BITCODE,
//!     offload_kind: OffloadKind::HIP_V1,
//!     flags: 0,
//!     strings: vec![
//!         (b"triple".to_vec(), b"amdgcn-amd-amdhsa".to_vec()),
//!         (b"arch".to_vec(), b"gfx1100".to_vec()),
//!     ],
//!     image: b"BC\xc0\xde".to_vec(),
//! };
//! let mut section = Writer::new();
//! section.push(&[image.clone()], &WriteOptions::default())?;
//! let bytes = section.finish();
//! let binaries = Reader::new(&bytes).read_all()?;
//! let entry = &binaries[0].entries()[0];
//! assert_eq!((entry.arch(), entry.image_kind().name().as_ref()), (Some("gfx1100"), "bitcode"));
//! assert_eq!(entry.to_image(), image);
//! # Ok::<(), kpack_llvm_offload::Error>(())
//! ```
#![forbid(unsafe_code)]

mod archive;
mod binary;
mod elf;
mod error;
mod listing;
mod prune;
mod text;
mod write;

pub use archive::{
    AR_MAGIC, Archive, ArchiveFormat, Member, MemberKind, Symbol, THIN_MAGIC, is_archive,
};
pub use binary::{
    ALIGNMENT, Binaries, Binary, CompressionFormat, Entry, ImageKind, LATEST_VERSION, MAGIC,
    OffloadKind, ReadOptions, Reader, SECTION_NAME, SHT_LLVM_OFFLOADING,
};
pub use elf::{
    DeviceCode, FATBIN_SECTION, FatbinSection, OffloadingSection, has_offloading_section,
};
pub use error::{Error, ErrorKind};
pub use listing::{
    BundleEntryListing, Container, EntryListing, ListedImage, Listing, MemberListing, Total, list,
    list_with_images,
};
pub use prune::{PruneReport, device_targets, prune_archive, prune_object, targets};
pub use write::{Compression, Image, WriteOptions, Writer, write_binary};
