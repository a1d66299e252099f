//! AMDGPU facts, each written once: every other kpack crate and the wasm
//! handler SDK depend on this crate instead of keeping a copy.
//!
//! No dependencies and no `unsafe`, so it builds for the host and for
//! `wasm32-wasip2` alike. Modules:
//! - [`mach`](MACH_TABLE): the `EF_AMDGPU_MACH` value of every processor;
//! - [`generic`](GENERIC_TABLE): LLVM's generic processors and the
//!   processors each one's code runs on;
//! - [`target`](TargetId): target ids per LLVM's grammar, `-strict`
//!   variants, the processor grammar ([`split_processor`]);
//! - [`name`](find_target): target ids as spelled in file names (Tensile's
//!   `gfx90a-xnack+`, CK's sanitized `gfx950_xnackp`, AMD's `gfx` tokens);
//! - [`family`](bundle_key): ROCm's packaging hierarchy, target →
//!   sub-family → family (rocm-bootstrap 0.3.0), and its dist names;
//! - [`filter`](TargetFilter): which targets `--gpu-targets` and
//!   `--exclude-arch` keep;
//! - [`spirv`](SPIRV_TARGET): portable SPIR-V (`amdgcnspirv`), its
//!   module header and where a loader tries it;
//! - [`code_object`](Header): what a code object's ELF header says, from
//!   its first 52 bytes.
//!
//! ```
//! use kpack_amdgpu::{Header, TargetId, generic_for, processor_for_mach};
//!
//! let t = TargetId::parse("gfx1101:xnack-").unwrap();
//! assert_eq!(generic_for(t.processor()), Some("gfx11-generic"));
//! assert_eq!(processor_for_mach(0x02a), Some("gfx803"));
//!
//! // A code-object v5 header for gfx942 with sramecc+ (e_flags 0xc4c).
//! let mut head = [0u8; 64];
//! head[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x40");
//! head[8] = 3;
//! head[18..20].copy_from_slice(&224u16.to_le_bytes());
//! head[48..52].copy_from_slice(&0xc4cu32.to_le_bytes());
//! let h = Header::parse(&head).unwrap();
//! assert_eq!(h.code_object_version, Some(5));
//! assert_eq!(h.target_id().unwrap().to_string(), "gfx942:sramecc+");
//! ```
#![forbid(unsafe_code)]

mod code_object;
mod family;
mod filter;
mod generic;
mod mach;
mod name;
mod spirv;
mod target;

pub use code_object::{
    EF_AMDGPU_GENERIC_VERSION, EF_AMDGPU_GENERIC_VERSION_OFFSET, ELFOSABI_AMDGPU_HSA, EM_AMDGPU,
    FeatureState, HEADER_BYTES, Header, HeaderError, is_amdgpu_elf,
};
pub use family::{
    FAMILIES, Family, Level, SUB_FAMILIES, SubFamily, archive_group, archive_group_holds,
    archive_group_level, bundle_key, display_name, dist_name, family, key_level, sub_family,
    wildcard_key,
};
pub use filter::{TargetFilter, TargetPattern};
pub use generic::{
    GENERIC_REJECTED_BY_STEPPINGS, GENERIC_TABLE, covered_by, generic_for, generic_only_warning,
    generic_only_warnings, is_generic,
};
pub use mach::{EF_AMDGPU_MACH, MACH_TABLE, mach_for_processor, processor_for_mach};
pub use name::{find_target, gfx_tokens, parse_sanitized_target, parse_target};
pub use spirv::{
    SPIRV_MAGIC, SpirvError, SpirvHeader, is_device_arch_name, is_spirv_target, loader_order,
};
pub use target::{
    Feature, QualifiedTarget, SPIRV_ARCH, SPIRV_TARGET, TARGET_PREFIX, TARGET_TRIPLE, TargetId,
    TargetIdError, features_of, is_known_target, processor_of, split_processor, split_target,
    strip_target_prefix,
};
