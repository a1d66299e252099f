//! `kpack split ARTIFACT_DIR... -o OUT`: split TheRock build artifacts into
//! `<component>_generic/` and `<component>_<arch>/` artifacts (see
//! `kpack-split`'s docs for the naming scheme). `--batch` takes shard
//! directories full of artifacts instead.

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::{
    ArtifactInput, Progress, SplitOptions, batch_inputs, component_from_dir_name, split_artifacts,
};

use crate::archive_args::ArchiveArgs;
use crate::exit::CliResult;
use crate::handlers::HandlerArgs;
use crate::target_args::TargetArgs;

/// Arguments of `kpack split`.
#[derive(clap::Args)]
#[command(after_long_help = crate::amd_compat::SPLIT_HELP)]
pub struct Args {
    /// Artifact directories (each with artifact_manifest.txt) or TheRock
    /// artifact archives (`.tar.zst`, `.tar.xz`, `.tar.gz`, read
    /// streaming), or with --batch, shard directories holding either.
    /// Never modified.
    #[arg(required_unless_present_any = ["artifact_dir", "batch_artifact_parent_dir"])]
    inputs: Vec<PathBuf>,
    /// Output directory (created). An output artifact that exists with the
    /// same contents is left alone (a parallel shard wrote it); one with
    /// other contents is an error naming the first differing file.
    #[arg(short, long, alias = "output-dir")]
    output: PathBuf,
    /// Replace output artifacts that exist with other contents
    /// (`--replace` is the same flag).
    #[arg(long, alias = "replace")]
    force: bool,
    /// Inputs are shard directories: split every `<component>_<family>` artifact in them.
    #[arg(long)]
    batch: bool,
    /// Component name [default: the artifact directory's name without its last `_` part].
    #[arg(long, alias = "artifact-prefix")]
    component: Option<String>,
    /// AMD's single-artifact input (with --artifact-prefix): one more input.
    #[arg(
        long,
        value_name = "DIR",
        hide = true,
        conflicts_with = "batch_artifact_parent_dir"
    )]
    artifact_dir: Option<PathBuf>,
    /// AMD's --batch: one more shard directory, and --batch.
    #[arg(long, value_name = "DIR", hide = true)]
    batch_artifact_parent_dir: Option<PathBuf>,
    #[command(flatten)]
    amd: crate::amd_compat::Ignored,
    /// Archive directory inside each prefix.
    #[arg(long, default_value = "lib/.kpack")]
    archive_dir: String,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    /// Output artifacts as directories, or as TheRock artifact archives
    /// (`<component>_<arch>.tar.zst`, reproducible: mtime from
    /// SOURCE_DATE_EPOCH or 0) each with a sha256 manifest beside it
    /// (`<name>.artifact_equivalence.json`).
    #[arg(long, value_enum, default_value = "dir")]
    output_format: OutputFormatArg,
    /// One archive per binary and processor (`<component>.<path>_<proc>.kpack`),
    /// or per artifact and target, AMD's names (`<component>_<target>.kpack`,
    /// e.g. `rand_lib_gfx942.kpack` for every binary of the prefix);
    /// markers name the archives either way.
    #[arg(long, value_enum, default_value = "binary")]
    archive_per: ArchivePerArg,
    /// Most bytes an artifact archive input may inflate to (suffixes K, M,
    /// G, T; default 50 times the archive's size, at least 64M, at most
    /// 64G). The zstd window an archive may ask for is half of
    /// --max-memory (128 MiB by default).
    #[arg(long, value_name = "BYTES", value_parser = kpack_bundle::parse_size)]
    max_unpacked_size: Option<u64>,
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    handlers: HandlerArgs,
    #[command(flatten)]
    targets: TargetArgs,
}

/// `--archive-per` values.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ArchivePerArg {
    Binary,
    Artifact,
}

/// `SOURCE_DATE_EPOCH` as seconds, `unset` when it is unset or empty; a
/// malformed value is an error (the reproducible-builds spec asks for that).
pub(crate) fn source_date_epoch(unset: u64) -> anyhow::Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<u64>()
            .with_context(|| format!("SOURCE_DATE_EPOCH={v:?} is not a number of seconds")),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(unset),
        Err(e) => anyhow::bail!("SOURCE_DATE_EPOCH: {e}"),
    }
}

/// `--output-format` values (`split`, `recombine`).
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum OutputFormatArg {
    Dir,
    #[value(name = "tar.zst")]
    TarZst,
}

impl OutputFormatArg {
    /// The library's value.
    pub(crate) fn format(self) -> kpack_split::OutputFormat {
        match self {
            OutputFormatArg::Dir => kpack_split::OutputFormat::Dir,
            OutputFormatArg::TarZst => kpack_split::OutputFormat::TarZst,
        }
    }
}

/// Run `kpack split`.
pub fn run(mut args: Args) -> CliResult {
    let targets = args.targets.filter()?;
    args.amd.note();
    // AMD's spellings become ours before anything else looks at the flags.
    if let Some(d) = args.artifact_dir.take() {
        args.inputs.push(d);
    }
    if let Some(d) = args.batch_artifact_parent_dir.take() {
        args.inputs.push(d);
        args.batch = true;
    }
    let inputs = if args.batch {
        batch_artifacts(&args)?
    } else {
        named_artifacts(&args)?
    };
    check_paths(&args, &inputs)?;
    let handlers = args.handlers.databases()?;
    // Split's own bar shows its events. Shards write one location alike:
    // an identical output is left alone, a differing one replaced only
    // with --force.
    let job = args
        .archive
        .job(kpack_fsafe::Existing::keeping_identical(args.force), false)?;
    let mut opts = split_options(&args, &job.job, targets)?;
    opts.databases = handlers.as_deref();

    let bar = crate::ui::progress(0, crate::ui::Unit::Bytes);
    let progress = |p: Progress<'_>| show_progress(bar.as_ref(), p);
    opts.progress = Some(&progress);

    let start = std::time::Instant::now();
    // A run that fails leaves no empty output directory behind (only empty
    // ones go: artifacts other inputs completed stay).
    let created = crate::safety::CreatedDir::create(&args.output)?;
    let reports = job
        .job
        .install(|| split_artifacts(&inputs, &args.output, &opts))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let failed = reports.iter().filter(|r| !r.errors.is_empty()).count();
    for r in &reports {
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        for e in &r.errors {
            eprintln!("error: {e}");
        }
    }
    if args.json {
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a, R> {
            artifacts: &'a [R],
        }
        crate::json::print(&Document {
            artifacts: &reports,
        })?;
    } else {
        reports.iter().for_each(|r| print!("{}", r.text()));
        if failed == 0 {
            args.archive.say_readers(args.archive.archive_group());
        }
        crate::ui::status(format_args!("done in {:.2?}", start.elapsed()));
    }
    if failed == 0 {
        created.keep();
    }
    if failed > 0 {
        return Err(crate::exit::failed_after_document(anyhow::anyhow!(
            "{failed} of {} artifacts failed",
            reports.len()
        )));
    }
    Ok(())
}

/// The options the flags name, before the handlers and progress are
/// attached; an archive per artifact with archive groups is refused.
fn split_options<'a>(
    args: &Args,
    job: &'a kpack_job::Job,
    targets: kpack_amdgpu::TargetFilter,
) -> anyhow::Result<SplitOptions<'a>> {
    let mut opts = SplitOptions::new("", job);
    opts.archive_dir = args.archive_dir.trim_matches('/').to_string();
    opts.targets = targets;
    opts.verify_hash = args.archive.verify_hash();
    opts.compression = args.archive.compression();
    opts.archive_group = args.archive.archive_group();
    if let Some(max) = args.max_unpacked_size {
        opts.archive_limits = opts.archive_limits.with_max_unpacked_size(max);
    }
    opts.output_format = args.output_format.format();
    opts.mtime = source_date_epoch(0)?;
    opts.archive_per_artifact = args.archive_per == ArchivePerArg::Artifact;
    if opts.archive_per_artifact && opts.archive_group != kpack_amdgpu::Level::Target {
        anyhow::bail!(
            "--archive-per artifact writes one archive per target id (AMD's names); it cannot be combined with archive groups ({})",
            args.archive.group_flag()
        );
    }
    Ok(opts)
}

/// The component name, the output and the archive directory are usable.
fn check_paths(args: &Args, inputs: &[ArtifactInput]) -> anyhow::Result<()> {
    if let Some(c) = &args.component
        && (!kpack_fsafe::is_plain_name(c) || c.contains(':'))
    {
        anyhow::bail!("--component {c:?}: must be a plain name");
    }
    crate::safety::not_stdout(&args.output, "split")?;
    crate::safety::inside_root("--archive-dir", args.archive_dir.trim_matches('/'))?;
    // Splitting into an input would read its own output (and capture its
    // own staging directory); an input inside the output could be replaced.
    for i in inputs {
        crate::safety::not_nested(&i.dir, &args.output)?;
    }
    Ok(())
}

/// `--batch`: every `<component>_<family>` artifact of each shard directory.
fn batch_artifacts(args: &Args) -> anyhow::Result<Vec<ArtifactInput>> {
    if args.component.is_some() {
        anyhow::bail!("--component cannot be used with --batch");
    }
    let mut inputs = Vec::new();
    for shard in &args.inputs {
        let (found, skipped) = batch_inputs(shard)?;
        for s in skipped {
            crate::ui::note(format_args!("{}: skipped {s}", shard.display()));
        }
        inputs.extend(found);
    }
    Ok(inputs)
}

/// Artifact directories named on the command line, each with its component
/// (`--component`, else from the directory's name).
fn named_artifacts(args: &Args) -> anyhow::Result<Vec<ArtifactInput>> {
    if args.component.is_some() && args.inputs.len() > 1 {
        anyhow::bail!("--component needs exactly one input");
    }
    let mut inputs = Vec::new();
    for dir in &args.inputs {
        let name = dir
            .canonicalize()
            .with_context(|| dir.display().to_string())?;
        let name = name
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let component = match &args.component {
            Some(c) => c.clone(),
            None => component_from_dir_name(&name).with_context(|| {
                format!(
                    "{}: cannot tell the component from the name; pass --component",
                    dir.display()
                )
            })?,
        };
        inputs.push(ArtifactInput {
            dir: dir.clone(),
            component,
        });
    }
    Ok(inputs)
}

/// Progress lines above the bar, and the bar itself.
fn show_progress(bar: Option<&indicatif::ProgressBar>, p: Progress<'_>) {
    match p {
        Progress::Walked {
            prefix,
            files,
            bytes,
        } => {
            crate::ui::info_above(bar, format_args!("{prefix}: {files} files, {bytes} bytes"));
            if let Some(b) = bar {
                b.inc_length(bytes);
                b.set_message(prefix.to_string());
            }
        }
        Progress::File { path, bytes } => {
            crate::ui::info_above(bar, format_args!("done {path} ({bytes} bytes)"));
            if let Some(b) = bar {
                b.inc(bytes);
            }
        }
    }
}
