//! Clang offload bundles, natively: no clang-offload-bundler at run time.
//!
//! Layers, bottom up:
//! - [`ReadAt`]: positioned reads over a file or memory, so a 1 GB section
//!   is never loaded whole;
//! - [`EntryId`]: bundle-entry ids per LLVM's grammar (their target ids
//!   are [`kpack_amdgpu::TargetId`]);
//! - plain bundles ([`parse_bundle`], [`write_bundle`]) and compressed
//!   `CCOB` v1/v2/v3 with zlib or zstd ([`inflate`], [`deflate`]), MD5 checked;
//! - [`prune_item`]: one bundle rewritten with fewer entries (`kpack prune`);
//! - [`walk`]: every bundle, compressed bundle and bare AMDGPU ELF in a
//!   region, zero padding skipped, nothing deduplicated; headers only (a
//!   CCOB is inflated just past its inner bundle header);
//! - [`Item::stream_entries`]: every code object of one item in one pass,
//!   a CCOB inflated as a stream with its MD5 computed on the way, each
//!   buffer held against a shared [`MemoryBudget`];
//! - [`CodeObjectInfo`]: what an AMDGPU code object says about itself (its
//!   header decoded by [`kpack_amdgpu::Header`], its metadata note), and
//!   where that disagrees with its bundle id;
//! - [`Wrapper`], [`HostLayout`]: the HIP fat-binary wrapper that points at
//!   a bundle, and the offload layout every host format's reader returns.
//!
//! ```
//! use kpack_bundle::{walk, write_bundle, WalkOptions};
//! let bytes = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"code")], 4096);
//! let items: Vec<_> = walk(&bytes, 0, bytes.len() as u64, WalkOptions::default())
//!     .collect::<Result<_, _>>().unwrap();
//! assert_eq!(items[0].entries[0].id.target().unwrap().to_string(), "gfx90a:xnack+");
//! assert_eq!(items[0].read_entry(&bytes, 0).unwrap(), b"code");
//! ```
#![forbid(unsafe_code)]

mod budget;
mod bundle;
mod ccob;
mod codeobject;
mod error;
mod prune;
mod source;
mod stream;
mod target;
mod walk;
mod wrapper;

pub use budget::{
    DEFAULT_MEMORY_LIMIT, DEFAULT_READ_MEMORY_LIMIT, MemoryBudget, Reservation, SizeError,
    StreamKit, ZstdDecoder, parse_size,
};
pub use bundle::{
    BUNDLE_MAGIC, BundleHeader, BundleLayout, Entry, bundle_layout, parse_bundle, write_bundle,
};
pub use ccob::{CCOB_MAGIC, CcobHeader, Inflated, Method, deflate, inflate, md5_low, parse_header};
pub use codeobject::{CodeObjectInfo, SpirvInfo, inspect as inspect_code_object, inspect_spirv};
pub use error::{Error, ErrorKind};
pub use prune::{PlainPrune, PrunedItem, prune_item, prune_item_streamed};
pub use source::{ReadAt, SizedFile};
pub use target::{EntryId, OffloadKind};
pub use walk::{Format, Item, WalkOptions, Walker, walk};
pub use wrapper::{
    HIPF, HIPK, HostErrorKind, HostLayout, Magic, PointerVia, SectionInfo, WRAPPER_SIZE, Wrapper,
    WrapperFields, targets_of,
};
