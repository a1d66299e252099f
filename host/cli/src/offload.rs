//! `kpack offload INPUT -o OUTPUT --archives DIR`: move a fat binary's
//! device code into per-arch archives and write a host-only binary.

use std::path::{Path, PathBuf};

use kpack_format::WriterOptions;
use kpack_fsafe::{Existing, Order, Outputs};
use kpack_offload::{ArchiveSet, Offload, OffloadOptions, OffloadReport, Outcome, offload};

use crate::archive_args::ArchiveArgs;
use crate::exit::CliResult;
use crate::safety;
use crate::target_args::TargetArgs;

/// Arguments of `kpack offload`.
#[derive(clap::Args)]
pub struct Args {
    /// ELF executable or shared library with device code (never modified).
    input: PathBuf,
    /// Host-only binary to write.
    #[arg(short, long)]
    output: PathBuf,
    /// Directory for the archives `<NAME>_<processor>.kpack`.
    #[arg(long)]
    archives: PathBuf,
    /// Archive name prefix [default: the input's name up to its first '.'].
    #[arg(long)]
    name: Option<String>,
    /// TOC key prefix stored in the marker [default: the output's file name].
    #[arg(long)]
    key: Option<String>,
    /// Marker search path (repeatable) [default: the archives directory
    /// relative to the output's directory, `<NAME>_@GFXARCH@.kpack`].
    #[arg(long = "search-path")]
    search_paths: Vec<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Replace an existing OUTPUT and existing archives.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    targets: TargetArgs,
}

/// Run `kpack offload`.
pub fn run(args: Args) -> CliResult {
    let filter = args.targets.filter()?;
    safety::regular_file(&args.input)?;
    if let Some(n) = &args.name {
        safety::plain_name("--name", n)?;
    }
    safety::not_stdout(&args.output, "offload")?;
    // Archives and host binary are staged, then committed as one: archives
    // first (inert without their binary), the host binary last; a failure
    // anywhere undoes every move. Two offloads into one archive directory
    // take turns (its lock), so a host binary never ends up beside the
    // other run's archives; a host-only input leaves no archive directory.
    let existing = Existing::from_force(args.force);
    let mut archive_out = safety::create_outputs(
        Outputs::builder(&args.archives, "offload", existing)
            .lock(safety::lock_message(&args.archives)),
    )?;
    let (out_dir, out_name) = split_output(&args.output)?;
    let mut host_out = safety::create_outputs(
        Outputs::builder(&out_dir, "offload", existing).inputs(&[&args.input]),
    )?;
    let staged_host = host_out.plan(&out_name, Order::Last)?;
    safety::not_existing(&args.output, args.force)?;
    // Offload shows its own spinner: the job draws no bar.
    let run = args.archive.job(existing, false)?;
    let (mut archives, opts) = plan(&args, &run.job);
    archives.set_stage(archive_out.tree());
    // Checked against the final paths: no archive may land on the output.
    archives.protect(&args.output);
    let spinner = crate::ui::spinner(format!("offloading {}", args.input.display()));
    let done = run
        .job
        .install(|| offload(&args.input, &staged_host, &opts, &filter, archives));
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let Offload {
        outcome,
        archives: mut written,
    } = done?;
    for (_, w) in &mut written {
        let name = w.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        archive_out.plan(name, Order::First)?;
        w.path = args.archives.join(name);
    }
    kpack_fsafe::commit_all(vec![archive_out, host_out])?;
    for (processor, w) in &written {
        if let Some(why) = kpack_runtime::unasked_generic(processor) {
            eprintln!("warning: {}: {why}", w.path.display());
        }
    }
    if let Outcome::Offloaded { targets, .. } = &outcome {
        for why in kpack_amdgpu::generic_only_warnings(targets.iter().map(String::as_str)) {
            eprintln!("warning: {}: {why}", args.input.display());
        }
    }
    let report = OffloadReport::new(&args.input, &args.output, &opts, outcome, &written);
    if args.json {
        crate::json::print(&report)?;
    } else {
        let cwd = std::env::current_dir().unwrap_or_default();
        eprint!("{}", report.notes());
        print!("{}", report.text(&cwd));
        if let Outcome::Offloaded { .. } = report.result {
            args.archive.say_readers(args.archive.archive_group());
        }
    }
    Ok(())
}

/// The directory `output` goes in and its file name.
pub(crate) fn split_output(output: &Path) -> anyhow::Result<(PathBuf, String)> {
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow::anyhow!("{}: not a file name", output.display()))?;
    Ok((dir, name.to_owned()))
}

/// The archive set and the offload options the flags ask for (archive
/// name, marker key and search paths defaulted from the file names).
fn plan(args: &Args, job: &kpack_job::Job) -> (ArchiveSet, OffloadOptions) {
    let file_name = |p: &PathBuf| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = args.name.clone().unwrap_or_else(|| {
        let n = file_name(&args.input);
        n.split('.').next().unwrap_or(&n).to_string()
    });
    let key = args.key.clone().unwrap_or_else(|| file_name(&args.output));
    let compression = args.archive.compression();
    let mut archives = ArchiveSet::new(
        args.archives.clone(),
        name.clone(),
        WriterOptions {
            compression,
            delta_plan: delta_plan(),
            ..Default::default()
        },
        job.budget().clone(),
    );
    archives.set_no_clobber(!args.force);
    archives.set_group(args.archive.archive_group());
    let out_dir = args.output.parent().map(PathBuf::from).unwrap_or_default();
    let search_paths = if args.search_paths.is_empty() {
        vec![archives.search_path_from(&out_dir)]
    } else {
        args.search_paths.clone()
    };
    crate::ui::info(format_args!(
        "{} -> {}, archives in {} (name {name}, key {key})",
        args.input.display(),
        args.output.display(),
        args.archives.display()
    ));
    let opts = OffloadOptions {
        kernel_name: key,
        search_paths,
        verify_hash: args.archive.verify_hash(),
    };
    (archives, opts)
}

/// `KPACK_BENCH_EXHAUSTIVE_DELTA` set (to anything): a `zstd-delta`
/// archive's bases are chosen from every pair measured, which
/// `bench/family.sh` uses to price the estimate; not a supported option.
fn delta_plan() -> kpack_format::DeltaPlan {
    match std::env::var_os("KPACK_BENCH_EXHAUSTIVE_DELTA") {
        Some(_) => kpack_format::DeltaPlan::Exhaustive,
        None => kpack_format::DeltaPlan::Estimated,
    }
}
