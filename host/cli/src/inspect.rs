//! `kpack inspect FILE... [--json] [--strict]`: wrappers, bundles and code
//! objects of fat binaries and bundle files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kpack_binary::HostBinary;
use kpack_bundle::{CodeObjectInfo, Entry, Format, Item, ReadAt, WalkOptions};
use kpack_elf::{ElfKind, FatBinary, Wrapper};
use rayon::prelude::*;
use serde::Serialize;

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// ELF executables, shared libraries, objects, bundle files (.co, .hsaco),
    /// or Windows PE images (DLL, EXE; detected by magic).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// Treat a code object that disagrees with its bundle id as an error (exit 1).
    #[arg(long)]
    strict: bool,
    /// Do not check the MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// List every kernel name, not only the count.
    #[arg(long)]
    kernels: bool,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

#[derive(Serialize)]
struct Report<'a> {
    schema_version: u32,
    files: Vec<AnyReport>,
    /// Files that could not be inspected; absent when every file was, so
    /// a successful run's document is unchanged.
    #[serde(skip_serializing_if = "<[FileError]>::is_empty")]
    errors: &'a [FileError],
}

/// A fat binary, a PE image (`format: "pe"`), or an archive / new-driver
/// object (`format: "ar"|"elf"`).
#[derive(Serialize)]
#[serde(untagged)]
enum AnyReport {
    Fat(FileReport),
    Pe(PeReport),
    Offloading(crate::offloading::Report),
}

/// A Windows PE image (DLL, EXE): the same shape as [`FileReport`] with
/// PE's sections (RVA, raw size) and wrappers (base relocations), plus
/// `format: "pe"` so consumers tell the two apart.
#[derive(Serialize)]
struct PeReport {
    path: PathBuf,
    format: &'static str,
    kind: kpack_pe::PeKind,
    image_base: u64,
    device_code: bool,
    transformed: bool,
    /// A certificate table is present: any rewrite invalidates the signature.
    signed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    fatbin: Option<kpack_pe::SectionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    segment: Option<kpack_pe::SectionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    marker: Option<kpack_pe::SectionInfo>,
    wrappers: Vec<kpack_pe::Wrapper>,
    bundles: Vec<BundleReport>,
    totals: BTreeMap<String, ArchTotal>,
}

#[derive(Serialize)]
struct FileReport {
    path: PathBuf,
    kind: ElfKind,
    device_code: bool,
    transformed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    fatbin: Option<kpack_elf::SectionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    marker: Option<kpack_elf::SectionInfo>,
    wrappers: Vec<Wrapper>,
    bundles: Vec<BundleReport>,
    totals: BTreeMap<String, ArchTotal>,
}

#[derive(Serialize)]
struct BundleReport {
    index: usize,
    offset: u64,
    len: u64,
    #[serde(flatten)]
    format: Format,
    entries: Vec<EntryReport>,
}

#[derive(Serialize)]
struct EntryReport {
    #[serde(flatten)]
    entry: Entry,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code_object: Option<CodeObjectInfo>,
    /// A portable SPIR-V entry's module header.
    #[serde(skip_serializing_if = "Option::is_none")]
    spirv: Option<kpack_bundle::SpirvInfo>,
    kernel_count: usize,
    warnings: Vec<String>,
}

#[derive(Serialize, Default)]
struct ArchTotal {
    code_objects: usize,
    bytes: u64,
}

/// Run `kpack inspect`.
pub fn run(args: Args) -> CliResult {
    args.memory.install(kpack_bundle::DEFAULT_READ_MEMORY_LIMIT);
    let opts = WalkOptions {
        verify_hash: !args.no_verify_hash,
    };
    let mut files = Vec::new();
    let mut warned = false;
    // A file that cannot be read is reported and the rest still inspected;
    // the run then exits 2 (and `--json` lists it under `errors`).
    let mut errors = Vec::new();
    for path in &args.files {
        match inspect_one(path, &opts, args.kernels, &mut warned) {
            Ok(report) => files.push(report),
            Err(e) => {
                eprint!("{}", crate::exit::report(&e));
                errors.push(FileError {
                    path: path.clone(),
                    message: e.to_string(),
                    causes: e.chain().skip(1).map(|c| c.to_string()).collect(),
                });
            }
        }
    }
    if args.json {
        let report = Report {
            schema_version: crate::json::SCHEMA_VERSION,
            files,
            errors: &errors,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for f in &files {
            match f {
                AnyReport::Fat(f) => print_text(f, args.kernels),
                AnyReport::Pe(f) => print_pe_text(f, args.kernels),
                AnyReport::Offloading(r) => r.print_text(),
            }
        }
    }
    if !errors.is_empty() {
        return Err(CliError::Reported);
    }
    if warned && args.strict {
        return Err(CliError::Findings);
    }
    Ok(())
}

/// One file that could not be inspected, in the `--json` report.
#[derive(Serialize)]
struct FileError {
    path: PathBuf,
    message: String,
    causes: Vec<String>,
}

/// Inspect one file; warnings about its code objects go to stderr (and set
/// `warned`).
fn inspect_one(
    path: &std::path::Path,
    opts: &WalkOptions,
    kernels: bool,
    warned: &mut bool,
) -> anyhow::Result<AnyReport> {
    // Checked before reading: a FIFO among the inputs would block the run.
    crate::safety::regular_file(path)?;
    if is_kpack_archive(path) {
        anyhow::bail!(
            "{}: a .kpack archive, not a binary; list it with `kpack archive list {}`",
            path.display(),
            path.display()
        );
    }
    if let Some(input) = crate::offloading::detect(path)? {
        return Ok(AnyReport::Offloading(crate::offloading::inspect(
            path,
            input,
            opts.verify_hash,
        )?));
    }
    let fat = match HostBinary::read(path, *opts)? {
        HostBinary::Elf(fat) => fat,
        HostBinary::Pe(fat) => {
            let (bundles, totals) = bundle_reports(path, &fat.bundles, &fat.source, kernels)?;
            *warned |= warn(path, &bundles);
            return Ok(AnyReport::Pe(PeReport {
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
            }));
        }
    };
    let report = file_report(path, &fat, kernels)?;
    *warned |= warn(path, &report.bundles);
    Ok(AnyReport::Fat(report))
}

/// Whether `path` starts with the KPAK magic of a `.kpack` archive.
fn is_kpack_archive(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|f| f.take(4).read_exact(&mut head))
        .is_ok_and(|()| head == kpack_format::MAGIC)
}

/// Largest marker section decoded for the text report (markers are a
/// few hundred bytes).
const MAX_MARKER_SHOWN: u64 = 1 << 20;

/// Print the marker at `offset`+`len` of `path`: its key (kernel name) and
/// search paths, or why it cannot be shown.
fn print_marker(path: &std::path::Path, offset: u64, len: u64) {
    use std::io::{Read, Seek};
    if len > MAX_MARKER_SHOWN {
        println!("  marker: {len} bytes, too large to show");
        return;
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|mut f| {
        f.seek(std::io::SeekFrom::Start(offset))?;
        f.take(len).read_to_end(&mut bytes)
    });
    match read
        .map_err(anyhow::Error::from)
        .and_then(|_| kpack_format::Marker::parse(&bytes).map_err(anyhow::Error::from))
    {
        Ok(m) => {
            println!("  marker: kernel name {:?}", m.kernel_name);
            for p in &m.search_paths {
                println!("    search path {p}");
            }
        }
        Err(e) => println!("  marker: unreadable ({e})"),
    }
}

/// Print the code-object warnings of `bundles`; `true` if there were any.
fn warn(path: &std::path::Path, bundles: &[BundleReport]) -> bool {
    let mut warned = false;
    for b in bundles {
        for e in &b.entries {
            for w in &e.warnings {
                warned = true;
                eprintln!(
                    "warning: {}: bundle {} entry {}: {w}",
                    path.display(),
                    b.index,
                    e.entry.id
                );
            }
        }
    }
    warned
}

fn file_report(
    path: &std::path::Path,
    fat: &FatBinary,
    with_names: bool,
) -> anyhow::Result<FileReport> {
    let (bundles, totals) = bundle_reports(path, &fat.bundles, &fat.source, with_names)?;
    Ok(FileReport {
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

/// The bundles of a fat binary (ELF or PE alike) and its totals per target.
/// Bundles are read in parallel, each once as a stream (a compressed one
/// inflated and hash-checked on the way); each code object's headers and
/// note are decoded from its buffer, which is then dropped.
fn bundle_reports(
    path: &std::path::Path,
    items: &[Item],
    source: &dyn ReadAt,
    with_names: bool,
) -> anyhow::Result<(Vec<BundleReport>, BTreeMap<String, ArchTotal>)> {
    let budget = kpack_bundle::MemoryBudget::process();
    for (index, item) in items.iter().enumerate() {
        item.check_fits(budget).map_err(|e| {
            anyhow::Error::new(e).context(format!("{}: bundle {index}", path.display()))
        })?;
    }
    let infos: Vec<Vec<Option<CodeObjectResult>>> = items
        .par_iter()
        .enumerate()
        .map(|(index, item)| {
            let mut infos: Vec<Option<CodeObjectResult>> = vec![None; item.entries.len()];
            item.stream_entries(source, budget, |i, entry, bytes| {
                if !entry.id.is_host() && entry.size > 0 {
                    if let Some(r) = kpack_bundle::inspect_spirv(&entry.id, &bytes, 0, entry.size) {
                        infos[i] = Some(
                            r.map(|s| (Image::Spirv(s), 0))
                                .map_err(|e| format!("not a valid SPIR-V module: {e}")),
                        );
                        return Ok(());
                    }
                    let r = kpack_bundle::inspect_code_object(&bytes, 0, entry.size);
                    // Kernel names are dropped here unless shown: a big
                    // library's names add up to far more than its headers.
                    let r = r.map(|mut info| {
                        let count = info.kernels.len();
                        if !with_names {
                            info.kernels = Vec::new();
                        }
                        (Image::CodeObject(info), count)
                    });
                    infos[i] = Some(r.map_err(|e| format!("not a valid AMDGPU code object: {e}")));
                }
                Ok::<(), kpack_bundle::Error>(())
            })
            .map_err(|e| {
                anyhow::Error::new(e).context(format!("{}: bundle {index}", path.display()))
            })?;
            Ok(infos)
        })
        .collect::<anyhow::Result<_>>()?;
    let mut totals: BTreeMap<String, ArchTotal> = BTreeMap::new();
    let mut bundles = Vec::new();
    for ((index, item), mut infos) in items.iter().enumerate().zip(infos) {
        let mut entries = Vec::new();
        for (i, entry) in item.entries.iter().enumerate() {
            let mut warnings = Vec::new();
            let mut code_object = None;
            let mut spirv = None;
            let mut kernel_count = 0;
            if !entry.id.is_host() && entry.size > 0 {
                match infos[i].take() {
                    Some(Ok((Image::CodeObject(info), count))) => {
                        warnings.extend(info.mismatches(&entry.id));
                        kernel_count = count;
                        code_object = Some(info);
                    }
                    Some(Ok((Image::Spirv(info), _))) => spirv = Some(info),
                    Some(Err(e)) => warnings.push(e),
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
            entries.push(EntryReport {
                entry: entry.clone(),
                target: entry.id.target().map(|t| t.to_string()),
                code_object,
                spirv,
                kernel_count,
                warnings,
            });
        }
        bundles.push(BundleReport {
            index,
            offset: item.offset,
            len: item.len,
            format: item.format.clone(),
            entries,
        });
    }
    Ok((bundles, totals))
}

/// What decoding one code object gave, with its kernel count (the error
/// as text: the report shows it as a warning).
type CodeObjectResult = Result<(Image, usize), String>;

/// What a device entry holds.
#[derive(Clone)]
enum Image {
    CodeObject(CodeObjectInfo),
    Spirv(kpack_bundle::SpirvInfo),
}

fn print_pe_text(f: &PeReport, with_names: bool) {
    let kind = match f.kind {
        kpack_pe::PeKind::Dll => "PE32+ DLL",
        kpack_pe::PeKind::Exe => "PE32+ executable",
    };
    println!(
        "{}: {kind}, image base {:#x}",
        f.path.display(),
        f.image_base
    );
    if f.signed {
        println!("  certificate table present (signed: a rewrite invalidates the signature)");
    }
    if !f.device_code {
        if f.transformed {
            println!(
                "  device code offloaded by kpack (all {} wrappers HIPK)",
                f.wrappers.len()
            );
        } else {
            println!("  no device code");
        }
    }
    if let Some(m) = f.marker.as_ref().filter(|m| m.in_file) {
        print_marker(
            &f.path,
            m.offset,
            m.size.min(m.raw_size.map_or(m.size, u64::from)),
        );
    }
    for (name, s) in [
        (kpack_pe::FATBIN_SECTION, &f.fatbin),
        (kpack_pe::SEGMENT_SECTION, &f.segment),
        (kpack_pe::MARKER_SECTION, &f.marker),
    ] {
        if let Some(s) = s {
            println!(
                "  {name:<10} rva {:#x}  raw {:#x}+{:#x}  virtual size {} bytes{}",
                s.rva.unwrap_or_default(),
                s.offset,
                s.raw_size.unwrap_or_default(),
                s.size,
                if s.in_file {
                    ""
                } else {
                    " (not all in the file)"
                }
            );
        }
    }
    for w in &f.wrappers {
        let target = match w.bundle {
            Some(b) => format!("bundle {b}"),
            None => "no bundle".into(),
        };
        let via = w.via.describe();
        println!(
            "  wrapper {} at {:#x}: {:?} v{} -> {:#x} ({via}) {target}, reserved {}",
            w.index, w.addr, w.magic, w.version, w.pointer, w.reserved
        );
    }
    print_bundles(&f.bundles, &f.totals, with_names);
}

fn print_text(f: &FileReport, with_names: bool) {
    println!("{}: {}", f.path.display(), kind_name(f.kind));
    if !f.device_code {
        if f.transformed {
            println!(
                "  device code offloaded by kpack (all {} wrappers HIPK)",
                f.wrappers.len()
            );
        } else {
            println!("  no device code");
        }
    }
    if let Some(m) = f.marker.as_ref().filter(|m| m.in_file) {
        print_marker(&f.path, m.offset, m.size);
    }
    if let Some(fb) = &f.fatbin {
        println!(
            "  .hip_fatbin  offset {:#x}  addr {:#x}  size {} bytes{}",
            fb.offset,
            fb.addr,
            fb.size,
            if fb.in_file { "" } else { " (no file bytes)" }
        );
    }
    for w in &f.wrappers {
        let target = match w.bundle {
            Some(b) => format!("bundle {b}"),
            None => "no bundle".into(),
        };
        println!(
            "  wrapper {} at {:#x}: {:?} v{} -> {:#x} ({}) {target}, reserved {}",
            w.index,
            w.addr,
            w.magic,
            w.version,
            w.pointer,
            w.via.describe(),
            w.reserved
        );
    }
    print_bundles(&f.bundles, &f.totals, with_names);
}

fn print_bundles(bundles: &[BundleReport], totals: &BTreeMap<String, ArchTotal>, with_names: bool) {
    for b in bundles {
        let fmt = match &b.format {
            Format::Plain => "uncompressed".to_string(),
            Format::Compressed(h) => format!(
                "CCOB v{} {:?}, {} bytes inflated",
                h.version, h.method, h.uncompressed_size
            ),
            Format::Elf => "bare code object".to_string(),
        };
        println!(
            "  bundle {} at +{:#x}, {} bytes, {fmt}",
            b.index, b.offset, b.len
        );
        for e in &b.entries {
            if e.entry.id.is_host() {
                println!("    {:<44} (host)", e.entry.id.raw());
                continue;
            }
            let co = e
                .code_object
                .as_ref()
                .map(|c| {
                    format!(
                        "code object v{}, {} kernel{}",
                        c.code_object_version.map_or("?".into(), |v| v.to_string()),
                        e.kernel_count,
                        if e.kernel_count == 1 { "" } else { "s" }
                    )
                })
                .or_else(|| {
                    e.spirv
                        .as_ref()
                        .map(|s| format!("SPIR-V {} module, {} words", s.version, s.words))
                })
                .unwrap_or_else(|| "not a code object".into());
            println!(
                "    {:<44} {:>10} bytes  {co}",
                e.entry.id.raw(),
                e.entry.size
            );
            if with_names {
                for k in e.code_object.iter().flat_map(|c| &c.kernels) {
                    println!("      {k}");
                }
            }
        }
    }
    if !totals.is_empty() {
        println!("  totals per target:");
        for (arch, t) in totals {
            println!(
                "    {arch:<28} {:>4} code objects {:>12} bytes",
                t.code_objects, t.bytes
            );
        }
    }
}

fn kind_name(k: ElfKind) -> &'static str {
    match k {
        ElfKind::Exec => "ELF executable",
        ElfKind::Dyn => "ELF shared object (library or PIE executable)",
        ElfKind::Rel => "ELF relocatable object",
        ElfKind::BundleFile => "offload bundle / code object file",
    }
}
