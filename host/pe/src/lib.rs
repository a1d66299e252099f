//! HIP fat binaries in Windows PE32+ images (DLLs and EXEs).
//!
//! The Windows counterpart of `kpack-elf`: both return the wrapper and
//! section types of `kpack-bundle` and implement its `HostLayout`, so
//! callers treat both alike. Layers, bottom up:
//! - [`looks_like_pe`] / [`is_pe_file`]: detection by magic (`MZ`, then
//!   `PE\0\0` at `e_lfanew`), never by file name;
//! - [`read_fat_binary`]: headers, sections and base relocations through
//!   `object::read::pe`; `.hip_fat` walked with `kpack-bundle`; every
//!   wrapper in `.hipFatB` decoded, its pointer (a VA, rebased by an
//!   `IMAGE_REL_BASED_DIR64` base relocation) matched to its bundle;
//! - [`transform`]: the host-only image, planned then written: device code
//!   out of the file (`SizeOfRawData` 0, no RVA changes), a `.kpackrf`
//!   marker section, wrappers HIPK, every file-offset field (raw pointers,
//!   symbol table, debug directory, certificate table) moved consistently,
//!   `CheckSum` recomputed when it was set;
//! - [`verify_image`]: the structural checks every output must pass.
//!
//! ```no_run
//! let path = std::path::Path::new("foo.dll");
//! let fat = kpack_pe::read_fat_binary(path, Default::default()).unwrap();
//! for w in &fat.wrappers {
//!     println!("wrapper {} -> bundle {:?}", w.index, w.bundle);
//! }
//! let marker = kpack_format::Marker {
//!     kernel_name: "bin/foo.dll".into(),
//!     search_paths: vec![".kpack/foo_@GFXARCH@.kpack".into()],
//! };
//! let (image, report) = kpack_pe::transform(path, &fat, &marker.to_bytes()).unwrap();
//! assert!(kpack_pe::verify_image(&image).is_empty());
//! println!("{} bytes of device code removed", report.bytes_removed);
//! ```
#![forbid(unsafe_code)]

mod error;
mod image;
mod read;
mod transform;
mod verify;

pub use error::{Error, ErrorKind};
pub use image::{checksum, looks_like_pe};
pub use read::{
    FATBIN_SECTION, FatBinary, MARKER_CHARACTERISTICS, MARKER_SECTION, Magic, PeKind, PointerVia,
    SEGMENT_SECTION, SectionInfo, Wrapper, is_pe_file, read_fat_binary,
};
pub use transform::{TransformReport, transform};
pub use verify::verify_image;
