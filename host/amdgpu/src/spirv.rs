//! Portable SPIR-V (`amdgcnspirv`): the target clang builds with
//! `-use-spirv-backend --offload-arch=amdgcnspirv`, whose bundle entries
//! (`hip[v4]-spirv64-amd-amdhsa--amdgcnspirv`) hold a SPIR-V module that
//! the HIP runtime lowers for whatever GPU it runs on. It is a target of
//! its own everywhere (archive `<name>_amdgcnspirv.kpack`, its own device
//! wheel), and a loader tries it only when the caller's arch list names
//! it, after every native and generic target.

use crate::target::SPIRV_TARGET;

/// The SPIR-V magic number, first word of every module (little-endian in
/// the bundles clang writes).
pub const SPIRV_MAGIC: u32 = 0x0723_0203;

/// Whether `target` (a target id, any [`crate::QualifiedTarget`] spelling)
/// is portable SPIR-V.
///
/// ```
/// use kpack_amdgpu::is_spirv_target;
/// assert!(is_spirv_target("amdgcnspirv"));
/// assert!(is_spirv_target("hip-spirv64-amd-amdhsa--amdgcnspirv"));
/// assert!(!is_spirv_target("gfx942"));
/// ```
pub fn is_spirv_target(target: &str) -> bool {
    crate::strip_target_prefix(target.trim()) == SPIRV_TARGET
}

/// Whether `name` may name an arch artifact, archive group or device
/// wheel's target: a `gfx…` processor or group (`gfx942`, `gfx110x`,
/// `gfx94X`), or portable SPIR-V.
///
/// ```
/// use kpack_amdgpu::is_device_arch_name;
/// assert!(is_device_arch_name("gfx94X") && is_device_arch_name("amdgcnspirv"));
/// assert!(!is_device_arch_name("generic") && !is_device_arch_name("lib"));
/// ```
pub fn is_device_arch_name(name: &str) -> bool {
    name.starts_with("gfx") || name == SPIRV_TARGET
}

/// `arches` as a loader tries them: every native and generic target in the
/// caller's order, then portable SPIR-V (only when named: it is JIT-lowered,
/// so slower to load than any code object built for the GPU).
///
/// ```
/// use kpack_amdgpu::loader_order;
/// assert_eq!(
///     loader_order(&["amdgcnspirv", "gfx1201", "gfx12-generic"]),
///     ["gfx1201", "gfx12-generic", "amdgcnspirv"]
/// );
/// ```
pub fn loader_order<'a>(arches: &[&'a str]) -> Vec<&'a str> {
    let (spirv, native): (Vec<&str>, Vec<&str>) = arches.iter().partition(|a| is_spirv_target(a));
    native.into_iter().chain(spirv).collect()
}

/// What is wrong with a SPIR-V module's header, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpirvError {
    /// Fewer than the five header words.
    Truncated,
    /// The length is not a whole number of 32-bit words.
    NotWords,
    /// The first word is not [`SPIRV_MAGIC`] (in either byte order).
    BadMagic,
    /// The version word is not `0x00MMmm00` with major 1.
    BadVersion(u32),
}

impl std::fmt::Display for SpirvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpirvError::Truncated => f.write_str("shorter than the 20-byte SPIR-V header"),
            SpirvError::NotWords => f.write_str("length is not a whole number of 32-bit words"),
            SpirvError::BadMagic => f.write_str("no SPIR-V magic number"),
            SpirvError::BadVersion(v) => write!(f, "SPIR-V version word {v:#010x} is not 1.x"),
        }
    }
}

impl std::error::Error for SpirvError {}

/// A SPIR-V module's header: version and word count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpirvHeader {
    /// Major version (1).
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// The module's length in 32-bit words.
    pub words: u64,
}

impl SpirvHeader {
    /// Check the header of a `len`-byte module whose first bytes are
    /// `head` (at least 8 needed): magic, version, and a length that is
    /// whole words and holds the five header words.
    ///
    /// ```
    /// use kpack_amdgpu::SpirvHeader;
    /// let mut m = vec![0u8; 20];
    /// m[..4].copy_from_slice(&0x0723_0203u32.to_le_bytes());
    /// m[4..8].copy_from_slice(&0x0001_0600u32.to_le_bytes());
    /// let h = SpirvHeader::parse(&m, 20).unwrap();
    /// assert_eq!((h.major, h.minor, h.words), (1, 6, 5));
    /// assert!(SpirvHeader::parse(&m, 22).is_err());
    /// ```
    pub fn parse(head: &[u8], len: u64) -> Result<SpirvHeader, SpirvError> {
        let word = |at: usize| {
            head.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let (Some(magic), Some(version)) = (word(0), word(4)) else {
            return Err(SpirvError::Truncated);
        };
        let version = match magic {
            SPIRV_MAGIC => version,
            m if m.swap_bytes() == SPIRV_MAGIC => version.swap_bytes(),
            _ => return Err(SpirvError::BadMagic),
        };
        if len < 20 {
            return Err(SpirvError::Truncated);
        }
        if !len.is_multiple_of(4) {
            return Err(SpirvError::NotWords);
        }
        let [low, minor, major, high] = version.to_le_bytes();
        if major != 1 || low != 0 || high != 0 {
            return Err(SpirvError::BadVersion(version));
        }
        Ok(SpirvHeader {
            major,
            minor,
            words: len / 4,
        })
    }

    /// Whether `head` starts with the SPIR-V magic number.
    pub fn is_spirv(head: &[u8]) -> bool {
        head.get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .is_some_and(|m| m == SPIRV_MAGIC || m.swap_bytes() == SPIRV_MAGIC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(version: u32, len: usize) -> Vec<u8> {
        let mut m = vec![0u8; len];
        m[..4].copy_from_slice(&SPIRV_MAGIC.to_le_bytes());
        m[4..8].copy_from_slice(&version.to_le_bytes());
        m
    }

    #[test]
    fn validates_magic_version_and_word_count() {
        assert_eq!(
            SpirvHeader::parse(&module(0x0001_0400, 24), 24),
            Ok(SpirvHeader {
                major: 1,
                minor: 4,
                words: 6
            })
        );
        assert_eq!(
            SpirvHeader::parse(&module(0x0001_0400, 8), 8),
            Err(SpirvError::Truncated)
        );
        assert_eq!(
            SpirvHeader::parse(&module(0x0001_0400, 24), 26),
            Err(SpirvError::NotWords)
        );
        assert_eq!(
            SpirvHeader::parse(&module(0x0002_0000, 24), 24),
            Err(SpirvError::BadVersion(0x0002_0000))
        );
        assert_eq!(
            SpirvHeader::parse(b"\x7fELF\x02\x01\x01\x40", 64),
            Err(SpirvError::BadMagic)
        );
        let mut big = module(0, 20);
        big[..4].copy_from_slice(&SPIRV_MAGIC.to_be_bytes());
        big[4..8].copy_from_slice(&0x0001_0000u32.to_be_bytes());
        assert_eq!(SpirvHeader::parse(&big, 20).map(|h| h.minor), Ok(0));
        assert!(SpirvHeader::is_spirv(&big) && !SpirvHeader::is_spirv(b"\x7fELF"));
    }

    #[test]
    fn spirv_goes_after_every_native_and_generic_target() {
        assert_eq!(loader_order(&["gfx942"]), ["gfx942"]);
        assert_eq!(
            loader_order(&["amdgcn-amd-amdhsa--gfx1201", "amdgcnspirv", "gfx12-generic"]),
            ["amdgcn-amd-amdhsa--gfx1201", "gfx12-generic", "amdgcnspirv"]
        );
        assert!(is_spirv_target(" amdgcnspirv "));
    }
}
