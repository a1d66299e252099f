//! `kpack extract FILE (--all | --target T ...) -o DIR`: write device code
//! objects out of a fat binary or bundle file, one file per (bundle, target),
//! named `bundle<N>-<target>.hsaco` (`:` in a target id becomes `_`; a second
//! entry with the same target in one bundle gets `.<k>` before `.hsaco`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use kpack_amdgpu::TargetId;
use kpack_binary::{ExtractEvent, ExtractFile, HostBinary};
use kpack_bundle::WalkOptions;
use kpack_fsafe::{Existing, Order, Outputs};

use crate::exit::CliResult;

/// Arguments of `kpack extract`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("select").args(["all", "target"]).required(true)))]
pub struct Args {
    /// Fat binary or bundle file.
    file: PathBuf,
    /// Extract every device code object.
    #[arg(long, conflicts_with = "target")]
    all: bool,
    /// Extract only this target id (e.g. gfx90a:xnack+); repeatable.
    #[arg(long, short)]
    target: Vec<String>,
    /// Output directory (created); `-` writes the one code object that
    /// --target selects to stdout.
    #[arg(long, short)]
    output: PathBuf,
    /// Do not check the MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// Replace existing files in the output directory.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

/// Run `kpack extract`.
pub fn run(args: Args) -> CliResult {
    let wanted: Vec<TargetId> = args
        .target
        .iter()
        .map(|t| TargetId::parse_qualified(t))
        .collect::<Result<_, _>>()?;
    crate::safety::regular_file(&args.file)?;
    if args.all {
        crate::safety::not_stdout(&args.output, "extract --all")?;
    }
    if let Some(input) = crate::offloading::detect(&args.file)? {
        crate::safety::not_stdout(&args.output, "extract of a new-driver object or archive")?;
        return crate::offloading::extract(
            &args.file,
            input,
            args.all,
            &wanted,
            &args.output,
            !args.no_verify_hash,
            args.force,
        );
    }
    let walk = WalkOptions {
        verify_hash: !args.no_verify_hash,
    };
    let bin = HostBinary::read(&args.file, walk)?;
    if bin.is_transformed() && bin.bundles().is_empty() {
        return through_marker(&args, walk, &wanted);
    }
    let plan = bin.extract_plan(args.all, &wanted);
    if let Some(t) = plan.missing(&wanted) {
        return Err(anyhow::anyhow!(
            "{}: no code object for target {t}; present: {}",
            args.file.display(),
            plan.found.iter().cloned().collect::<Vec<_>>().join(", ")
        )
        .into());
    }
    let jobs = &plan.files[..];
    if bin.bundles().is_empty() {
        return Err(anyhow::anyhow!("{}: no device code", args.file.display()).into());
    }
    if crate::safety::is_stdout(&args.output) {
        let budget = args.memory.budget(kpack_bundle::DEFAULT_READ_MEMORY_LIMIT);
        return to_stdout(&args.file, &bin, jobs, &budget);
    }
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    let broken = write_outputs(&args, &names, |stage| {
        write_staged(&args, &bin, jobs, stage)
    })?;
    // Written as they are (extract hands out what the binary holds), but
    // not as if they were fine.
    if broken > 0 {
        return Err(crate::exit::CliError::Findings);
    }
    Ok(())
}

/// Stage the files `names` into the output directory with `write` (given
/// the staging tree; it returns how many are broken), every path planned
/// and checked before the first byte: then commit them whole (a new
/// output directory appears complete or not at all) and print each with
/// its size.
fn write_outputs(
    args: &Args,
    names: &[&str],
    write: impl FnOnce(&Path) -> anyhow::Result<usize>,
) -> anyhow::Result<usize> {
    let force = Existing::from_force(args.force);
    let mut outputs = crate::safety::create_outputs(
        Outputs::builder(&args.output, "extract", force).inputs(&[&args.file]),
    )?;
    for name in names {
        outputs.plan(name, Order::First)?;
    }
    outputs.check_existing()?;
    let broken = write(&outputs.tree())?;
    for dest in outputs.commit()? {
        let size = std::fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
        println!("{}\t{size}", display(&dest));
    }
    Ok(broken)
}

/// `-o -`: the one code object to stdout, for pipes (`| llvm-readelf`).
fn to_stdout(
    file: &Path,
    bin: &HostBinary,
    jobs: &[ExtractFile],
    budget: &kpack_bundle::MemoryBudget,
) -> CliResult {
    let [job] = jobs else {
        return Err(anyhow::anyhow!(
            "-o -: {}: --target matched {} code objects; stdout takes exactly one",
            file.display(),
            jobs.len()
        )
        .into());
    };
    // The whole bundle is streamed so a compressed one is hash-checked
    // before anything is written.
    let mut bytes = Vec::new();
    bin.bundles()[job.bundle]
        .stream_entries(bin.source(), budget, |i, _, data| {
            if i == job.entry {
                bytes = data.to_vec();
            }
            Ok::<(), kpack_bundle::Error>(())
        })
        .with_context(|| format!("{}: bundle {}", file.display(), job.bundle))?;
    crate::safety::write_stdout(&bytes)?;
    Ok(())
}

/// Write every job's code object into `stage` ([`HostBinary::write_extract`]),
/// with progress; returns how many are broken SPIR-V modules (each warned
/// about).
fn write_staged(
    args: &Args,
    bin: &HostBinary,
    jobs: &[ExtractFile],
    stage: &Path,
) -> anyhow::Result<usize> {
    let budget = args.memory.budget(kpack_bundle::DEFAULT_READ_MEMORY_LIMIT);
    let bar = crate::ui::progress(jobs.len() as u64, crate::ui::Unit::Items);
    let broken = bin.write_extract(&args.file, jobs, stage, &budget, &|event| match event {
        ExtractEvent::InvalidSpirv { file, entry, error } => crate::ui::warn_above(
            bar.as_ref(),
            format_args!(
                "{}: bundle {}: entry {entry} is no valid SPIR-V module ({error}); written as it is",
                args.file.display(),
                file.bundle
            ),
        ),
        ExtractEvent::Written { file, bytes } => {
            // Named by where it ends up: the staging directory is
            // renamed into place once every object is written.
            crate::ui::info_above(
                bar.as_ref(),
                format_args!(
                    "wrote {} ({}, {bytes} bytes)",
                    display(&args.output.join(&file.name)),
                    file.target
                ),
            );
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    Ok(broken)
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `kpack extract` of a host-only binary: the code objects its marker
/// leads to, read from the archives through the loader, under the names
/// extracting the fat original gives (`bundle<index>-<target>.hsaco`; the
/// code-object index is the original's bundle index). A missing archive
/// is reported and what can be read is still written (exit 1).
fn through_marker(args: &Args, walk: WalkOptions, wanted: &[TargetId]) -> CliResult {
    let Some((real, marker, indices)) = crate::inspect::host_only_marker(&args.file, walk)? else {
        return Err(anyhow::anyhow!("{}: no device code", args.file.display()).into());
    };
    let mut files: Vec<(String, String, Vec<u8>)> = Vec::new();
    let loads =
        kpack_split::marker_loads_with(&real, &marker, &indices, None, false, &mut |co, bytes| {
            if args.all || wanted.iter().any(|t| t.to_string() == co.target) {
                let name = TargetId::parse(&co.target)
                    .map(|t| t.file_name())
                    .unwrap_or_else(|_| co.target.replace(':', "_"));
                files.push((
                    format!("bundle{}-{name}.hsaco", co.bundle),
                    co.target.clone(),
                    bytes.to_vec(),
                ));
            }
        });
    let found: std::collections::BTreeSet<&str> = loads
        .code_objects
        .iter()
        .map(|c| c.target.as_str())
        .collect();
    if let Some(t) = wanted
        .iter()
        .find(|t| !found.contains(t.to_string().as_str()))
    {
        for f in &loads.findings {
            eprintln!("warning: {}: {f}", args.file.display());
        }
        return Err(anyhow::anyhow!(
            "{}: no code object for target {t} through its marker; present: {}",
            args.file.display(),
            found.iter().copied().collect::<Vec<_>>().join(", ")
        )
        .into());
    }
    for f in &loads.findings {
        eprintln!("warning: {}: {f}", args.file.display());
    }
    if files.is_empty() {
        return Err(anyhow::anyhow!(
            "{}: no code object found through its marker",
            args.file.display()
        )
        .into());
    }
    if crate::safety::is_stdout(&args.output) {
        let [(_, _, bytes)] = &files[..] else {
            return Err(anyhow::anyhow!(
                "-o -: {}: --target matched {} code objects; stdout takes exactly one",
                args.file.display(),
                files.len()
            )
            .into());
        };
        crate::safety::write_stdout(bytes)?;
        return Ok(());
    }
    let names: Vec<&str> = files.iter().map(|(n, _, _)| n.as_str()).collect();
    write_outputs(args, &names, |stage| {
        for (name, _, bytes) in &files {
            let path = stage.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(0)
    })?;
    if loads.findings.is_empty() {
        Ok(())
    } else {
        Err(crate::exit::CliError::Findings)
    }
}
