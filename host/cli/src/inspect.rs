//! `kpack inspect FILE... [--json] [--strict]`: wrappers, bundles and code
//! objects of fat binaries and bundle files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kpack_binary::inspect::{ArchTotal, BundleReport, ElfReport, PeReport};
use kpack_binary::{FileKind, Inspected};
use kpack_bundle::{Format, WalkOptions};
use kpack_elf::ElfKind;
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
    /// Of a host-only (offloaded) binary, list only what this GPU would
    /// load: the device's target and the one generic target the HIP
    /// runtime asks for with it (e.g. gfx1100, gfx90a:xnack+).
    #[arg(long, value_name = "TARGET")]
    gpu: Option<String>,
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

/// A host binary (ELF or PE, the library's own document) or an archive /
/// new-driver object (`format: "ar"|"elf"`).
#[derive(Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "one short-lived document per input file; boxing would only add an allocation"
)]
enum AnyReport {
    Host(HostReport),
    Offloading(kpack_llvm_offload::Listing),
}

/// A host binary's document and, for a host-only one, what its marker
/// leads to (`through_marker`: the archives the loader finds and the code
/// objects it would load from them).
#[derive(Serialize)]
struct HostReport {
    #[serde(flatten)]
    inspected: Inspected,
    #[serde(skip_serializing_if = "Option::is_none")]
    through_marker: Option<kpack_split::MarkerLoads>,
}

/// Run `kpack inspect`.
pub fn run(args: Args) -> CliResult {
    let budget = args.memory.budget(kpack_bundle::DEFAULT_READ_MEMORY_LIMIT);
    let opts = WalkOptions {
        verify_hash: !args.no_verify_hash,
    };
    if let Some(gpu) = &args.gpu {
        kpack_amdgpu::TargetId::parse_qualified(gpu)?;
    }
    let mut files = Vec::new();
    let mut warned = false;
    let mut found = false;
    // A file that cannot be read is reported and the rest still inspected;
    // the run then exits 2 (and `--json` lists it under `errors`).
    let mut errors = Vec::new();
    for path in &args.files {
        match inspect_one(path, &opts, &budget, &args, &mut warned) {
            Ok(report) => {
                if let AnyReport::Host(HostReport {
                    through_marker: Some(m),
                    ..
                }) = &report
                {
                    found |= !m.findings.is_empty();
                }
                files.push(report);
            }
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
                AnyReport::Host(h) => {
                    match &h.inspected {
                        Inspected::Elf(f) => print_text(f, args.kernels),
                        Inspected::Pe(f) => print_pe_text(f, args.kernels),
                    }
                    if let Some(m) = &h.through_marker {
                        print_marker_loads(m, args.kernels);
                    }
                }
                AnyReport::Offloading(r) => crate::offloading::print_text(r),
            }
        }
    }
    if !errors.is_empty() {
        return Err(CliError::Reported);
    }
    if found || (warned && args.strict) {
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
    budget: &kpack_bundle::MemoryBudget,
    args: &Args,
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
    let report = kpack_binary::inspect(path, *opts, args.kernels, budget)?;
    *warned |= warn(path, &report);
    let host_only = match &report {
        Inspected::Elf(r) => r.transformed && r.bundles.is_empty(),
        Inspected::Pe(r) => r.transformed && r.bundles.is_empty(),
    };
    let through_marker = if host_only {
        marker_loads(path, *opts, args.gpu.as_deref(), args.kernels)?
    } else {
        None
    };
    Ok(AnyReport::Host(HostReport {
        inspected: report,
        through_marker,
    }))
}

/// For a host-only binary with a marker: what the loader finds through
/// it (for `gpu` only, when given). `None` for anything else.
fn marker_loads(
    path: &std::path::Path,
    opts: WalkOptions,
    gpu: Option<&str>,
    kernels: bool,
) -> anyhow::Result<Option<kpack_split::MarkerLoads>> {
    Ok(
        host_only_marker(path, opts)?.map(|(real, marker, indices)| {
            kpack_split::marker_loads(&real, &marker, &indices, gpu, kernels)
        }),
    )
}

/// Of a host-only binary with a marker: its real path (the file a process
/// maps, which the loader is handed), its marker and the code-object
/// indices its wrappers name, sorted. `None` for anything else.
pub(crate) fn host_only_marker(
    path: &std::path::Path,
    opts: WalkOptions,
) -> anyhow::Result<Option<(PathBuf, kpack_format::Marker, Vec<u32>)>> {
    let bin = kpack_binary::HostBinary::read(path, opts)?;
    if !bin.is_transformed() || !bin.bundles().is_empty() {
        return Ok(None);
    }
    let Some(bytes) = bin.read_marker() else {
        return Ok(None);
    };
    let bytes =
        bytes.map_err(|e| anyhow::anyhow!("{}: cannot read the marker: {e}", path.display()))?;
    let marker = kpack_format::Marker::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: unreadable marker: {e}", path.display()))?;
    let mut indices = bin.wrapper_indices();
    indices.sort_unstable();
    indices.dedup();
    let real = std::fs::canonicalize(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot resolve: {e}", path.display()))?;
    Ok(Some((real, marker, indices)))
}

/// `path` relative to the current directory when it lies under it.
fn shown(path: &std::path::Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .and_then(|d| path.strip_prefix(d).ok().map(|r| r.display().to_string()))
        .unwrap_or_else(|| path.display().to_string())
}

/// The text listing of what the marker leads to, shaped like the fat
/// binary's bundle listing (entries per code-object index, totals per
/// target) so that a `diff` of the two shows what moved.
fn print_marker_loads(m: &kpack_split::MarkerLoads, with_names: bool) {
    match (&m.gpu, &m.arch_list) {
        (Some(gpu), Some(list)) => println!(
            "  through the marker, for {gpu} (the loader is asked for {}):",
            list.join(", ")
        ),
        _ => println!("  through the marker (every archive it names):"),
    }
    for a in &m.archives {
        let what = match &a.error {
            None => format!("arches {}", a.arches.join(", ")),
            Some(e) => e.clone(),
        };
        println!("    archive {}: {what} ({})", shown(&a.path), a.origin);
    }
    let mut totals: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut last = None;
    for co in &m.code_objects {
        if last != Some(co.bundle) {
            println!("  bundle {} from key {:?}", co.bundle, co.key);
            last = Some(co.bundle);
        }
        let desc = co.code_object.as_ref().map_or_else(
            || "not a code object".to_owned(),
            |c| {
                format!(
                    "code object v{}, {} kernel{}",
                    c.code_object_version.map_or("?".into(), |v| v.to_string()),
                    co.kernel_count,
                    if co.kernel_count == 1 { "" } else { "s" }
                )
            },
        );
        println!(
            "    {:<44} {:>10} bytes  {desc}  in {}",
            co.target,
            co.size,
            shown(&co.archive)
        );
        if with_names {
            for k in co.code_object.iter().flat_map(|c| &c.kernels) {
                println!("      {k}");
            }
        }
        let t = totals.entry(&co.target).or_default();
        t.0 += 1;
        t.1 += co.size;
    }
    if !totals.is_empty() {
        println!("  totals per target:");
        for (arch, (n, bytes)) in totals {
            println!("    {arch:<28} {n:>4} code objects {bytes:>12} bytes");
        }
    }
    for f in &m.findings {
        println!("  problem: {f}");
    }
}

/// Whether `path` is a `.kpack` archive ([`FileKind::Kpack`]).
fn is_kpack_archive(path: &std::path::Path) -> bool {
    matches!(FileKind::of_path(path), Ok(FileKind::Kpack))
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

/// Print the code-object warnings of `report`; `true` if there were any.
fn warn(path: &std::path::Path, report: &Inspected) -> bool {
    let mut warned = false;
    for (bundle, id, w) in report.warnings() {
        warned = true;
        eprintln!(
            "warning: {}: bundle {bundle} entry {id}: {w}",
            path.display()
        );
    }
    warned
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

fn print_text(f: &ElfReport, with_names: bool) {
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
