//! `kpack inspect FILE... [--json] [--strict]`: wrappers, bundles and code
//! objects of fat binaries and bundle files.

use std::path::PathBuf;

use kpack_binary::{FileKind, Inspected};
use kpack_bundle::WalkOptions;
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
        let cwd = std::env::current_dir().and_then(std::fs::canonicalize).ok();
        for f in &files {
            match f {
                AnyReport::Host(h) => {
                    print!("{}", h.inspected.text(args.kernels));
                    if let Some(m) = &h.through_marker {
                        print!("{}", m.text(args.kernels, cwd.as_deref()));
                    }
                }
                AnyReport::Offloading(r) => print!("{}", r.text()),
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

/// Of a host-only binary with a marker: its real path, its marker and
/// the code-object indices its wrappers name
/// ([`kpack_binary::HostBinary::host_only_marker`]).
pub(crate) fn host_only_marker(
    path: &std::path::Path,
    opts: WalkOptions,
) -> anyhow::Result<Option<(PathBuf, kpack_format::Marker, Vec<u32>)>> {
    let bin = kpack_binary::HostBinary::read(path, opts)?;
    Ok(bin
        .host_only_marker(path)?
        .map(|h| (h.real, h.marker, h.indices)))
}

/// Whether `path` is a `.kpack` archive ([`FileKind::Kpack`]).
fn is_kpack_archive(path: &std::path::Path) -> bool {
    matches!(FileKind::of_path(path), Ok(FileKind::Kpack))
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
