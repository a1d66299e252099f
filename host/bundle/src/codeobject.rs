//! AMDGPU code objects: read the ELF header and metadata note (through
//! `object`'s ELF definitions, a few small reads, never the whole image) and
//! cross-check them against the bundle entry id. What the header's bytes
//! mean (mach table, feature bits, versions) is `kpack_amdgpu`'s.

use kpack_amdgpu::{ELFOSABI_AMDGPU_HSA, EM_AMDGPU, FeatureState, TARGET_PREFIX, TargetId};
use object::LittleEndian as LE;
use object::elf::{FileHeader64, SectionHeader64};
use object::read::elf::{FileHeader as _, NoteIterator, SectionHeader as _};

use crate::bundle::Entry;
use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, read_vec};
use crate::target::EntryId;

const NT_AMDGPU_METADATA: u32 = 32;
/// Metadata notes larger than this are not read (real ones are a few MB at most).
const MAX_NOTE_SECTION: u64 = 256 << 20;

/// `FeatureState` as JSON: its lowercase name (`"on"`, `"any"`).
fn feature_state<S: serde::Serializer>(state: &FeatureState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.as_str())
}

/// What a code object says about itself.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CodeObjectInfo {
    /// `EI_OSABI` (64 for HSA).
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abi_version: u8,
    /// Code-object version (2..6) from the ABI version, if known.
    pub code_object_version: Option<u8>,
    /// `e_flags`.
    pub e_flags: u32,
    /// The processor named by `EF_AMDGPU_MACH`, or `"unknown"`.
    pub processor: String,
    /// xnack as recorded in `e_flags`.
    #[serde(serialize_with = "feature_state")]
    pub xnack: FeatureState,
    /// sramecc as recorded in `e_flags`.
    #[serde(serialize_with = "feature_state")]
    pub sramecc: FeatureState,
    /// Generic version (bits 24..31), for code-object v6 and later.
    pub generic_version: Option<u8>,
    /// `amdhsa.target` from the metadata note.
    pub metadata_target: Option<String>,
    /// Kernel names (`.name`) from the metadata note, in note order.
    pub kernels: Vec<String>,
}

impl CodeObjectInfo {
    /// The target id the header describes (`gfx90a:xnack+`): the processor
    /// and every feature that is on or off.
    pub fn target_id(&self) -> TargetId {
        TargetId::bare(self.processor.clone())
            .with_sramecc(self.sramecc.requested())
            .with_xnack(self.xnack.requested())
    }

    /// Differences between this code object and the target its bundle
    /// entry names: each a sentence; empty when they agree.
    pub fn mismatches(&self, entry: &EntryId) -> Vec<String> {
        let mut out = Vec::new();
        if self.osabi != ELFOSABI_AMDGPU_HSA {
            out.push(format!(
                "OSABI is {} (expected {ELFOSABI_AMDGPU_HSA}, HSA)",
                self.osabi
            ));
        }
        let Some(target) = entry.target() else {
            return out;
        };
        let ours = self.target_id();
        // `-strict` is not in e_flags: a `gfx1250-strict` object carries
        // gfx1250's mach value, and the bundle id alone keeps it distinct.
        if target.base_processor() != ours.processor() {
            out.push(format!(
                "e_flags name processor {}, the bundle id says {}",
                ours.processor(),
                target.processor()
            ));
        }
        out.extend(self.generic_mismatch());
        for name in ["sramecc", "xnack"] {
            let state = if name == "xnack" {
                self.xnack
            } else {
                self.sramecc
            };
            let ok = match target.feature(name) {
                Some(true) => state == FeatureState::On,
                Some(false) => state == FeatureState::Off,
                None => matches!(state, FeatureState::Any | FeatureState::Unsupported),
            };
            if !ok {
                out.push(format!(
                    "{name} is {state:?} in e_flags, the bundle id says {}",
                    describe(target.feature(name))
                ));
            }
        }
        if let Some(md) = &self.metadata_target {
            let md_target = kpack_amdgpu::strip_target_prefix(md);
            // Whether a strict object's metadata names the `-strict`
            // variant is the compiler's business; either spelling agrees.
            if TargetId::parse(md_target)
                .map(|t| t != *target && t != target.clone().with_strict(false))
                .unwrap_or(true)
            {
                out.push(format!(
                    "amdhsa.target is {md}, the bundle id says {target}"
                ));
            }
        }
        out
    }
}

impl CodeObjectInfo {
    /// The generic-version rule (LLVM AMDGPUUsage, code object v6): a
    /// generic processor's object carries a non-zero
    /// `EF_AMDGPU_GENERIC_VERSION`, and only such objects do. A loader
    /// refuses a generic object without one, so it is worth a warning.
    fn generic_mismatch(&self) -> Option<String> {
        let generic = kpack_amdgpu::is_generic(&self.processor);
        let flag = (self.e_flags & kpack_amdgpu::EF_AMDGPU_GENERIC_VERSION)
            >> kpack_amdgpu::EF_AMDGPU_GENERIC_VERSION_OFFSET;
        match (generic, self.code_object_version) {
            (true, Some(v)) if v < 6 => Some(format!(
                "{} is a generic target, which needs code object v6 or later (this is v{v})",
                self.processor
            )),
            (true, _) if self.generic_version.is_none() => Some(format!(
                "{} is a generic target but EF_AMDGPU_GENERIC_VERSION (e_flags bits 24..31) is 0",
                self.processor
            )),
            (false, Some(v)) if v >= 6 && flag != 0 => Some(format!(
                "EF_AMDGPU_GENERIC_VERSION is {flag} on {}, which is not a generic target",
                self.processor
            )),
            _ => None,
        }
    }
}

fn describe(f: Option<bool>) -> &'static str {
    match f {
        Some(true) => "on",
        Some(false) => "off",
        None => "any",
    }
}

struct Header {
    hdr: FileHeader64<LE>,
    amdgpu: kpack_amdgpu::Header,
}

fn read_header(src: &dyn ReadAt, base: u64, len: u64) -> Result<Header, Error> {
    let bytes = read_vec(src, base, 64.min(len))?;
    let hdr = FileHeader64::<LE>::parse(&bytes[..]).map_err(|e| {
        Error::at(
            ErrorKind::NotCodeObject,
            base,
            "not a 64-bit little-endian ELF",
        )
        .with_source(e)
    })?;
    if hdr.e_machine(LE) != EM_AMDGPU {
        return Err(Error::at(
            ErrorKind::NotCodeObject,
            base,
            format!(
                "e_machine is {}, not AMDGPU ({EM_AMDGPU})",
                hdr.e_machine(LE)
            ),
        ));
    }
    // `object` checked magic, class and byte order, and e_machine is
    // AMDGPU, so this cannot fail; map the error anyway rather than unwrap.
    let amdgpu = kpack_amdgpu::Header::parse(&bytes)
        .map_err(|e| Error::at(ErrorKind::NotCodeObject, base, e.to_string()))?;
    Ok(Header { hdr: *hdr, amdgpu })
}

fn section_headers(
    src: &dyn ReadAt,
    base: u64,
    len: u64,
    h: &Header,
) -> Result<Vec<SectionHeader64<LE>>, Error> {
    let shoff = h.hdr.e_shoff.get(LE);
    let shnum = u64::from(h.hdr.e_shnum.get(LE));
    if shnum == 0 {
        return Ok(Vec::new());
    }
    if u64::from(h.hdr.e_shentsize.get(LE)) != 64
        || shoff.checked_add(shnum * 64).is_none_or(|e| e > len)
    {
        return Err(Error::at(
            ErrorKind::BadRange,
            base,
            "code object section header table is out of range",
        ));
    }
    let bytes = read_vec(src, base + shoff, shnum * 64)?;
    let headers: &[SectionHeader64<LE>] =
        object::pod::slice_from_all_bytes(&bytes).map_err(|()| {
            Error::at(
                ErrorKind::BadRange,
                base + shoff,
                "bad section header table",
            )
        })?;
    Ok(headers.to_vec())
}

/// Inspect the code object at `[base, base+len)` of `src`.
pub fn inspect(src: &dyn ReadAt, base: u64, len: u64) -> Result<CodeObjectInfo, Error> {
    let h = read_header(src, base, len)?;
    let a = h.amdgpu;
    let mut info = CodeObjectInfo {
        osabi: a.osabi,
        abi_version: a.abi_version,
        code_object_version: a.code_object_version,
        e_flags: a.e_flags,
        processor: a.processor().unwrap_or("unknown").to_string(),
        xnack: a.xnack,
        sramecc: a.sramecc,
        generic_version: a.generic_version,
        metadata_target: None,
        kernels: Vec::new(),
    };
    for sh in section_headers(src, base, len, &h)? {
        if sh.sh_type(LE) != object::elf::SHT_NOTE {
            continue;
        }
        let (off, size) = (sh.sh_offset(LE), sh.sh_size(LE));
        if size > MAX_NOTE_SECTION || off.checked_add(size).is_none_or(|e| e > len) {
            return Err(Error::at(
                ErrorKind::BadRange,
                base + off,
                "note section out of range",
            ));
        }
        let data = read_vec(src, base + off, size)?;
        let align = sh.sh_addralign(LE).max(4);
        let mut notes =
            NoteIterator::<FileHeader64<LE>>::new(LE, align, &data[..]).map_err(|e| {
                Error::at(ErrorKind::BadRange, base + off, "bad note section").with_source(e)
            })?;
        while let Some(note) = notes
            .next()
            .map_err(|e| Error::at(ErrorKind::BadRange, base + off, "bad note").with_source(e))?
        {
            if note.name() == b"AMDGPU" && note.n_type(LE) == NT_AMDGPU_METADATA {
                read_metadata(note.desc(), &mut info);
            }
        }
    }
    Ok(info)
}

/// A portable SPIR-V entry's module header, as `inspect` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpirvInfo {
    /// `1.<minor>`.
    pub version: String,
    /// The module's length in 32-bit words.
    pub words: u64,
}

/// When entry `id` is portable SPIR-V (a `spirv64` triple or the
/// `amdgcnspirv` target) or its `len` bytes at `base` start with the SPIR-V
/// magic: its header (magic, version, whole words), or why it is no valid
/// module. `None` for anything else (a code object, presumably).
pub fn inspect_spirv(
    id: &EntryId,
    src: &dyn ReadAt,
    base: u64,
    len: u64,
) -> Option<Result<SpirvInfo, Error>> {
    let head = match read_vec(src, base, len.min(8)) {
        Ok(head) => head,
        Err(e) => return Some(Err(e)),
    };
    let named = kpack_amdgpu::QualifiedTarget::split(id.raw()).is_some_and(|q| q.is_spirv())
        || kpack_amdgpu::is_spirv_target(id.raw());
    if !named && !kpack_amdgpu::SpirvHeader::is_spirv(&head) {
        return None;
    }
    Some(
        kpack_amdgpu::SpirvHeader::parse(&head, len)
            .map(|h| SpirvInfo {
                version: format!("{}.{}", h.major, h.minor),
                words: h.words,
            })
            .map_err(|e| Error::at(ErrorKind::BadHeader, base, "SPIR-V module").with_source(e)),
    )
}

/// Pull `amdhsa.target` and kernel names out of the msgpack metadata; a
/// malformed note leaves them empty rather than failing the inspection.
/// Decoded as borrowed values: a big library's notes hold millions of
/// strings (every kernel argument's fields), and owning each one made
/// allocation a large share of `inspect`'s time.
fn read_metadata(mut desc: &[u8], info: &mut CodeObjectInfo) {
    let Ok(rmpv::ValueRef::Map(root)) = rmpv::decode::read_value_ref(&mut desc) else {
        return;
    };
    for (k, v) in &root {
        match (str_of(k), v) {
            (Some("amdhsa.target"), rmpv::ValueRef::String(s)) => {
                info.metadata_target = s.as_str().map(str::to_string)
            }
            (Some("amdhsa.kernels"), rmpv::ValueRef::Array(kernels)) => {
                for kern in kernels {
                    if let rmpv::ValueRef::Map(fields) = kern {
                        let name = fields.iter().find(|(k, _)| str_of(k) == Some(".name"));
                        if let Some((_, rmpv::ValueRef::String(s))) = name {
                            info.kernels
                                .push(s.as_str().unwrap_or_default().to_string());
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// A msgpack string's text (`None` for other values and invalid UTF-8).
fn str_of<'a>(v: &'a rmpv::ValueRef<'_>) -> Option<&'a str> {
    match v {
        rmpv::ValueRef::String(s) => s.as_str(),
        _ => None,
    }
}

/// A bare AMDGPU ELF found in a section: its length (end of the furthest
/// header table or section) and a synthetic entry naming its target.
pub(crate) fn bare_elf_entry(
    src: &dyn ReadAt,
    pos: u64,
    limit: u64,
) -> Result<(u64, Entry), Error> {
    let avail = limit - pos;
    let h = read_header(src, pos, avail)?;
    let mut end = 64u64;
    // Offsets are untrusted: saturate, so a table "past u64::MAX" is
    // reported as running past the region below instead of overflowing.
    let ph_size = u64::from(h.hdr.e_phnum.get(LE)) * u64::from(h.hdr.e_phentsize.get(LE));
    end = end.max(h.hdr.e_phoff.get(LE).saturating_add(ph_size));
    end = end.max(
        h.hdr
            .e_shoff
            .get(LE)
            .saturating_add(u64::from(h.hdr.e_shnum.get(LE)) * 64),
    );
    for sh in section_headers(src, pos, avail, &h)? {
        if sh.sh_type(LE) != object::elf::SHT_NOBITS {
            end = end.max(sh.sh_offset(LE).saturating_add(sh.sh_size(LE)));
        }
    }
    if end > avail {
        return Err(Error::at(
            ErrorKind::BadRange,
            pos,
            format!("bare AMDGPU ELF claims {end:#x} bytes, {avail:#x} left"),
        ));
    }
    let info = inspect(src, pos, end)?;
    let id = EntryId::parse(&format!("hipv4-{TARGET_PREFIX}{}", info.target_id()))?;
    Ok((
        end,
        Entry {
            id,
            offset: 0,
            size: end,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_mach_is_not_an_error() {
        let mut b = bare_header(64);
        b[48..52].copy_from_slice(&0x5feu32.to_le_bytes());
        let info = inspect(&b, 0, 64).unwrap();
        assert_eq!(info.processor, "unknown");
        assert_eq!(info.target_id().to_string(), "unknown");
        let mut b = bare_header(64);
        b[48..52].copy_from_slice(&0x52au32.to_le_bytes());
        assert_eq!(inspect(&b, 0, 64).unwrap().processor, "gfx803");
    }

    /// A bare AMDGPU ELF header (HSA, gfx90a) of `len` bytes, no tables.
    fn bare_header(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // little-endian
        b[6] = 1; // EV_CURRENT
        b[7] = ELFOSABI_AMDGPU_HSA;
        b[8] = 2; // code-object v4
        b[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        b[48..52].copy_from_slice(&0x53fu32.to_le_bytes());
        b[52..54].copy_from_slice(&64u16.to_le_bytes());
        b
    }

    /// `bare_header` as code-object `version` with `e_flags`.
    fn object(version: u8, e_flags: u32) -> CodeObjectInfo {
        let mut b = bare_header(64);
        b[8] = version - 2;
        b[48..52].copy_from_slice(&e_flags.to_le_bytes());
        inspect(&b, 0, 64).unwrap()
    }

    fn id(target: &str) -> EntryId {
        EntryId::parse(&format!("hipv4-{TARGET_PREFIX}{target}")).unwrap()
    }

    #[test]
    fn generic_target_needs_its_generic_version() {
        // gfx11-generic is mach 0x054; clang-19 writes generic version 1.
        let good = object(6, 0x0100_0054);
        assert_eq!(good.mismatches(&id("gfx11-generic")), Vec::<String>::new());
        let zero = object(6, 0x054);
        let m = zero.mismatches(&id("gfx11-generic"));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains("EF_AMDGPU_GENERIC_VERSION"), "{m:?}");
        let v5 = object(5, 0x054);
        let m = v5.mismatches(&id("gfx11-generic"));
        assert!(m[0].contains("needs code object v6"), "{m:?}");
        // A specific processor must not claim a generic version.
        let m = object(6, 0x0200_0041).mismatches(&id("gfx1100"));
        assert!(m[0].contains("not a generic target"), "{m:?}");
        assert!(object(6, 0x041).mismatches(&id("gfx1100")).is_empty());
    }

    #[test]
    fn strict_target_carries_its_base_processors_mach() {
        // gfx1250 is mach 0x049; the bundle id alone says -strict.
        let o = object(6, 0x049);
        assert!(o.mismatches(&id("gfx1250-strict")).is_empty());
        assert!(o.mismatches(&id("gfx1250")).is_empty());
        let m = o.mismatches(&id("gfx1251-strict"));
        assert!(m[0].contains("processor gfx1250"), "{m:?}");
    }

    #[test]
    fn bare_elf_with_header_tables_past_u64_max_is_an_error() {
        // fuzz/artifacts/bundle/crash-3764f5f1: e_phoff + e_phnum * e_phentsize
        // overflowed (a panic in debug builds, a wrong length in release).
        let mut b = bare_header(128);
        b[32..40].copy_from_slice(&u64::MAX.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let e = bare_elf_entry(&b, 0, b.len() as u64).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::BadRange, Some(0)));

        let mut b = bare_header(128);
        b[40..48].copy_from_slice(&(u64::MAX - 10).to_le_bytes()); // e_shoff
        b[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        b[60..62].copy_from_slice(&1u16.to_le_bytes()); // e_shnum
        let e = bare_elf_entry(&b, 0, b.len() as u64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadRange);
        assert_eq!(e.offset(), Some(0));

        // The same header with sane tables is accepted.
        let b = bare_header(128);
        assert_eq!(bare_elf_entry(&b, 0, 128).unwrap().0, 64);
    }
}
