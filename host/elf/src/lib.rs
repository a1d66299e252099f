//! HIP fat binaries in ELF files.
//!
//! - [`read_fat_binary`]: find `.hip_fatbin` and `.hipFatBinSegment`,
//!   decode every wrapper, resolve its pointer through the relocations
//!   (`R_X86_64_RELATIVE` / `R_AARCH64_RELATIVE`, or `R_X86_64_64` /
//!   `R_AARCH64_ABS64` against `__hip_fatbin` in `-fgpu-rdc` builds, or the
//!   section relocations of an object file; see [`Machine`]) and
//!   match it to the bundle it lands on;
//! - [`transform`]: the host-only image (device pages removed, marker and
//!   program headers in a kpack page, wrappers HIPK), planned in one pass;
//! - [`prune`]: the same file with fewer device targets in every bundle,
//!   each bundle at its address, freed whole pages out of the file;
//! - [`verify_image`]: the structural checks every output must pass.
//!
//! ```no_run
//! let fat = kpack_elf::read_fat_binary("libfoo.so".as_ref(), Default::default()).unwrap();
//! for w in &fat.wrappers {
//!     println!("wrapper {} -> bundle {:?}", w.index, w.bundle);
//! }
//! ```
#![forbid(unsafe_code)]

mod error;
mod machine;
mod read;
mod transform;
mod verify;

pub use error::{Error, ErrorKind};
pub use machine::Machine;
pub use read::{
    ElfKind, FATBIN_SECTION, FatBinary, HIPF, HIPK, MARKER_SECTION, Magic, PointerVia,
    SEGMENT_SECTION, SectionInfo, WRAPPER_SIZE, Wrapper, looks_like_elf, read_fat_binary,
};
pub use transform::{
    Layout, PruneLayout, PruneReport, TransformReport, prune, prune_to, transform, transform_to,
};
pub use verify::{NotElf, verify_image, verify_pruned_image};
