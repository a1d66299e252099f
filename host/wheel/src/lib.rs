//! Split fat Python wheels (`kpack wheel split`): one wheel whose native
//! libraries carry GPU device code becomes a **host wheel** (same name,
//! version and tags; fat binaries offloaded, each with a `.rocm_kpack_ref`
//! marker; database files classified out) plus one **device wheel per GPU
//! processor** (`<prefix>-<arch>`, e.g. `torch_device_gfx90a-…whl`) holding
//! only that processor's `.kpack` archives and database files, at paths that
//! overlay the host package: installing the host wheel and any device wheels
//! gives a working tree, and device wheels never share a file.
//!
//! `kpack wheel prune` ([`prune_wheel`]) instead keeps one fat wheel, with
//! only the chosen GPU targets inside its binaries and without the
//! database files of other targets: same name, version and tags, loadable
//! by any HIP runtime.
//!
//! Layers:
//! - names: [`normalize`] / [`escape`] (PEP 503 / PEP 427), [`WheelName`];
//! - metadata: [`Headers`] (WHEEL and METADATA, a strict parser of the
//!   email-header format), RECORD rows ([`parse_record`], [`write_record`],
//!   [`record_hash`]);
//! - one pipeline (private) for split and prune: read → plan → transform
//!   → write → commit, with an optional [`Progress`] display;
//! - reading (private): the zip is read with the `zip` crate; every path is
//!   checked, every entry's hash and size checked against RECORD, Unix modes
//!   kept; WHEEL and METADATA are read up to 4 MiB, RECORD up to 16 MiB, and
//!   the whole wheel may inflate to 50 times its size (at least 64 MiB,
//!   [`Limits`]); the tree is unpacked per install scheme (the root, `.data/purelib`,
//!   `.data/platlib`; other `.data` schemes and `.dist-info` are kept as is);
//! - auditing: [`audit_wheels`] installs a wheel set into a scratch
//!   directory and reports what the HIP runtime loads per target, with
//!   the holes (an [`Audit`], `Serialize`, with text and Markdown views);
//! - splitting: each scheme tree is one prefix for
//!   [`kpack_split::split_prefix`] (the tree-splitting core shared with
//!   `kpack split`); archives go to `_<name>_kpack/` at the scheme's root by
//!   default, and the markers' search paths are relative to each binary's
//!   directory, so they resolve inside site-packages after `pip install`;
//! - writing (private): reproducible zips: sorted entries with `.dist-info`
//!   last and RECORD last, one timestamp ([`WheelOptions::mtime`], the CLI
//!   passes `SOURCE_DATE_EPOCH`, default 1980-01-01), modes from the input,
//!   no extra fields; RECORD regenerated (sha256, sizes). Entries whose
//!   content is unchanged keep the input's compressed bytes (no second
//!   deflate: the output is still a function of the input alone); new
//!   content is deflated at level 6 (files from 4 MiB on in 1 MiB chunks on
//!   every thread, joined into one stream: the same bytes at any `-j`),
//!   `.kpack` archives stored (they are zstd already). Everything is staged in a temporary directory inside the
//!   output directory and renamed at the end. A wheel without device code is
//!   copied unchanged and reported as such.
//!
//! # Example
//! ```no_run
//! use kpack_wheel::{WheelOptions, split_wheel};
//! use std::path::Path;
//!
//! let job = kpack_job::Job::builder(kpack_bundle::MemoryBudget::new(256 << 20)).build()?;
//! let report = split_wheel(&job, Path::new("torch-2.10.0-cp312-cp312-linux_x86_64.whl"), Path::new("out"), &WheelOptions::new())?;
//! println!("host: {} ({} bytes)", report.host.file, report.host.bytes);
//! for d in &report.devices {
//!     println!("{}: {} ({} bytes)", d.arch, d.wheel.file, d.wheel.bytes);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod amd;
pub mod audit;
mod error;
mod extras;
mod headers;
mod install;
mod installer;
mod job;
mod name;
mod pep508;
mod pipeline;
mod progress;
mod prune;
mod prune_text;
mod reader;
mod record;
mod split;
mod variant;
mod writer;

pub use amd::{AmdLayout, wheel_from_directory};
pub use audit::{Audit, audit_wheels, collect_wheels};
pub use error::{Error, ErrorKind, Result};
pub use extras::{ExtrasError, MAX_HOST_WHEEL_BYTES, Resolved, choose, host_extras};
pub use headers::{HeaderError, Headers};
pub use install::{InstalledWheel, install_wheel};
pub use installer::Installer;
pub use job::WheelFile;
/// AMD's placeholder for a target id (kpack-format's).
pub use kpack_format::GFXARCH;
pub use name::{
    VariantLabelError, WheelName, WheelNameError, check_variant_label, escape, is_valid_name,
    normalize, variant_wheel_file,
};
pub use progress::Progress;
pub use prune::{DroppedFile, PruneOptions, PruneReport, PrunedFile, prune_wheel};
pub use reader::Limits;
pub use record::{RecordEntry, RecordError, parse_record, record_hash, write_record};
pub use split::{
    DeviceWheel, WheelOptions, WheelReport, check_archive_group, human_bytes, split_wheel,
};
pub use variant::{
    DEFAULT_VARIANT_LABEL, HostExtras, LabelWheel, VARIANT_JSON, VARIANT_SCHEMA, VariantProvider,
    VariantWheel, add_variant_markers, label_wheels, variant_json, variant_marker, variant_value,
    variant_wheel, variants_json_file,
};
pub use writer::{ZIP_EPOCH, zip_time};
