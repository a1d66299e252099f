//! What `kpack inspect` reports of a host binary or bundle file: its
//! wrappers, bundles and code objects, as a [`serde::Serialize`] document
//! built by [`inspect`], and its text form ([`Inspected::text`]). The CLI
//! prints one or the other and adds nothing of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_bundle::{CodeObjectInfo, Entry, Format, Item, ReadAt, SpirvInfo, WalkOptions};
use kpack_elf::{ElfKind, Wrapper};
use kpack_format::{Finding, error_chain};
use rayon::prelude::*;
use serde::Serialize;

use crate::host::{Error, HostBinary};

mod text;

pub use text::{Text, code_object_summary};

/// The report of one host binary: an ELF file (or bundle file), or a PE
/// image. Serialized as the variant's own document (untagged).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Inspected {
    /// An ELF executable, shared library, object, or a bare bundle file.
    Elf(ElfReport),
    /// A Windows PE image (DLL, EXE).
    Pe(PeReport),
}

impl Inspected {
    /// The code-object warnings of every entry, each with its bundle index
    /// and entry id, in document order.
    pub fn warnings(&self) -> impl Iterator<Item = (usize, &str, &Finding)> {
        let bundles = match self {
            Inspected::Elf(r) => &r.bundles,
            Inspected::Pe(r) => &r.bundles,
        };
        bundles.iter().flat_map(|b| {
            b.entries.iter().flat_map(move |e| {
                e.warnings
                    .iter()
                    .map(move |w| (b.index, e.entry.id.raw(), w))
            })
        })
    }
}

/// An ELF file's report.
#[derive(Debug, Serialize)]
pub struct ElfReport {
    /// The file.
    pub path: PathBuf,
    /// Executable, shared object, relocatable object or bundle file.
    pub kind: ElfKind,
    /// Whether it holds device code.
    pub device_code: bool,
    /// Whether kpack offloaded it (every wrapper HIPK).
    pub transformed: bool,
    /// `.hip_fatbin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatbin: Option<kpack_elf::SectionInfo>,
    /// `.rocm_kpack_ref`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<kpack_elf::SectionInfo>,
    /// The HIP fat-binary wrappers.
    pub wrappers: Vec<Wrapper>,
    /// The bundles, each with its entries.
    pub bundles: Vec<BundleReport>,
    /// Code objects and bytes per target.
    pub totals: BTreeMap<String, ArchTotal>,
}

/// A Windows PE image (DLL, EXE): the same shape as [`ElfReport`] with
/// PE's sections (RVA, raw size) and wrappers (base relocations), plus
/// `format: "pe"` so consumers tell the two apart.
#[derive(Debug, Serialize)]
pub struct PeReport {
    /// The file.
    pub path: PathBuf,
    /// Always `pe`.
    pub format: &'static str,
    /// DLL or executable.
    pub kind: kpack_pe::PeKind,
    /// The preferred load address.
    pub image_base: u64,
    /// Whether it holds device code.
    pub device_code: bool,
    /// Whether kpack offloaded it (every wrapper HIPK).
    pub transformed: bool,
    /// A certificate table is present: any rewrite invalidates the signature.
    pub signed: bool,
    /// `.hip_fat`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatbin: Option<kpack_pe::SectionInfo>,
    /// `.hipFatB`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment: Option<kpack_pe::SectionInfo>,
    /// The marker section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<kpack_pe::SectionInfo>,
    /// The HIP fat-binary wrappers.
    pub wrappers: Vec<kpack_pe::Wrapper>,
    /// The bundles, each with its entries.
    pub bundles: Vec<BundleReport>,
    /// Code objects and bytes per target.
    pub totals: BTreeMap<String, ArchTotal>,
}

/// One bundle.
#[derive(Debug, Serialize)]
pub struct BundleReport {
    /// Its position in the file's bundle list.
    pub index: usize,
    /// Its offset in the fat-binary section.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Plain, compressed (with the CCOB header) or a bare code object.
    #[serde(flatten)]
    pub format: Format,
    /// Its entries.
    pub entries: Vec<EntryReport>,
}

/// One bundle entry.
#[derive(Debug, Serialize)]
pub struct EntryReport {
    /// The entry as the bundle lists it.
    #[serde(flatten)]
    pub entry: Entry,
    /// Its target id, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A code object's headers and metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_object: Option<CodeObjectInfo>,
    /// A portable SPIR-V entry's module header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spirv: Option<SpirvInfo>,
    /// Kernels in the code object.
    pub kernel_count: usize,
    /// sha256 of a device entry's bytes (lower-case hex): what `kpack
    /// inspect` of the offloaded binary lists for the same code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Code-object problems (check `code-object`, warnings): a code object
    /// that disagrees with its bundle id, or that does not decode.
    /// Serialized as their messages.
    #[serde(serialize_with = "Finding::serialize_messages")]
    pub warnings: Vec<Finding>,
}

/// Code objects and bytes of one target.
#[derive(Debug, Serialize, Default)]
pub struct ArchTotal {
    /// Device entries.
    pub code_objects: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Inspect the host binary or bundle file at `path`: read it (PE by magic,
/// anything else through the ELF reader), then every bundle once, in
/// parallel, as a stream under `budget` (the caller's: bundles of several
/// files read at once share it). Kernel names are kept only with `kernels`.
pub fn inspect(
    path: &Path,
    opts: WalkOptions,
    kernels: bool,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<Inspected, Error> {
    Ok(match HostBinary::read(path, opts)? {
        HostBinary::Elf(fat) => {
            let (bundles, totals) =
                bundle_reports(path, &fat.bundles, &fat.source, kernels, budget)?;
            Inspected::Elf(ElfReport {
                path: path.to_path_buf(),
                kind: fat.kind,
                device_code: !fat.bundles.is_empty(),
                transformed: fat.is_transformed(),
                fatbin: fat.fatbin,
                marker: fat.marker,
                wrappers: fat.wrappers.clone(),
                bundles,
                totals,
            })
        }
        HostBinary::Pe(fat) => {
            let (bundles, totals) =
                bundle_reports(path, &fat.bundles, &fat.source, kernels, budget)?;
            Inspected::Pe(PeReport {
                path: path.to_path_buf(),
                format: "pe",
                kind: fat.kind,
                image_base: fat.image_base,
                device_code: !fat.bundles.is_empty(),
                transformed: fat.is_transformed(),
                signed: fat.signed,
                fatbin: fat.fatbin,
                segment: fat.segment,
                marker: fat.marker,
                wrappers: fat.wrappers.clone(),
                bundles,
                totals,
            })
        }
    })
}

/// What decoding one code object gave, with its kernel count (the error
/// as a warning).
type CodeObjectResult = Result<(Image, usize), Finding>;

/// One device entry's decoded image and the sha256 of its bytes.
type Decoded = (CodeObjectResult, String);

/// What a device entry holds.
#[derive(Clone)]
enum Image {
    CodeObject(CodeObjectInfo),
    Spirv(SpirvInfo),
}

/// The bundles of a fat binary (ELF or PE alike) and its totals per target.
/// Bundles are read in parallel, each once as a stream (a compressed one
/// inflated and hash-checked on the way); each code object's headers and
/// note are decoded from its buffer, which is then dropped.
fn bundle_reports(
    path: &Path,
    items: &[Item],
    source: &dyn ReadAt,
    with_names: bool,
    budget: &kpack_bundle::MemoryBudget,
) -> Result<(Vec<BundleReport>, BTreeMap<String, ArchTotal>), Error> {
    let bundle_error = |index: usize| {
        move |source| Error::Bundle {
            path: path.to_path_buf(),
            index,
            source,
        }
    };
    for (index, item) in items.iter().enumerate() {
        item.check_fits(budget).map_err(bundle_error(index))?;
    }
    let infos: Vec<Vec<Option<Decoded>>> = items
        .par_iter()
        .enumerate()
        .map(|(index, item)| {
            let mut infos: Vec<Option<Decoded>> = vec![None; item.entries.len()];
            item.stream_entries(source, budget, |i, entry, bytes| {
                if !entry.id.is_host() && entry.size > 0 {
                    infos[i] = Some((decode_image(entry, bytes, with_names), sha256_hex(bytes)));
                }
                Ok::<(), kpack_bundle::Error>(())
            })
            .map_err(bundle_error(index))?;
            Ok(infos)
        })
        .collect::<Result<_, Error>>()?;
    Ok(assemble(items, infos))
}

/// Decode one device entry's `bytes`: a SPIR-V module's header or a code
/// object's headers and note (kernel names dropped unless `with_names`: a
/// big library's names add up to far more than its headers).
fn decode_image(entry: &Entry, bytes: &[u8], with_names: bool) -> CodeObjectResult {
    let warning = |what: &str, e: kpack_bundle::Error| {
        Finding::warning("code-object", format!("{what}: {}", error_chain(&e)))
    };
    if let Some(r) = kpack_bundle::inspect_spirv(&entry.id, &bytes, 0, entry.size) {
        return r
            .map(|s| (Image::Spirv(s), 0))
            .map_err(|e| warning("not a valid SPIR-V module", e));
    }
    kpack_bundle::inspect_code_object(&bytes, 0, entry.size)
        .map(|mut info| {
            let count = info.kernels.len();
            if !with_names {
                info.kernels = Vec::new();
            }
            (Image::CodeObject(info), count)
        })
        .map_err(|e| warning("not a valid AMDGPU code object", e))
}

/// Lower-case hex sha256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bundle reports and per-target totals from each entry's decoded image.
fn assemble(
    items: &[Item],
    infos: Vec<Vec<Option<Decoded>>>,
) -> (Vec<BundleReport>, BTreeMap<String, ArchTotal>) {
    let mut totals: BTreeMap<String, ArchTotal> = BTreeMap::new();
    let mut bundles = Vec::new();
    for ((index, item), mut infos) in items.iter().enumerate().zip(infos) {
        let mut entries = Vec::new();
        for (i, entry) in item.entries.iter().enumerate() {
            let mut report = EntryReport {
                entry: entry.clone(),
                target: entry.id.target().map(|t| t.to_string()),
                code_object: None,
                spirv: None,
                kernel_count: 0,
                sha256: None,
                warnings: Vec::new(),
            };
            if !entry.id.is_host() && entry.size > 0 {
                let decoded = infos[i].take().map(|(image, sha256)| {
                    report.sha256 = Some(sha256);
                    image
                });
                match decoded {
                    Some(Ok((Image::CodeObject(info), count))) => {
                        report.warnings.extend(
                            info.mismatches(&entry.id)
                                .into_iter()
                                .map(|m| Finding::warning("code-object", m)),
                        );
                        report.kernel_count = count;
                        report.code_object = Some(info);
                    }
                    Some(Ok((Image::Spirv(info), _))) => report.spirv = Some(info),
                    Some(Err(w)) => report.warnings.push(w),
                    None => {}
                }
                let arch = entry
                    .id
                    .target()
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| entry.id.raw().to_string());
                let t = totals.entry(arch).or_default();
                t.code_objects += 1;
                t.bytes += entry.size;
            }
            entries.push(report);
        }
        bundles.push(BundleReport {
            index,
            offset: item.offset,
            len: item.len,
            format: item.format.clone(),
            entries,
        });
    }
    (bundles, totals)
}
