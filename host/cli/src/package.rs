//! `kpack deb split PKG.deb... -o DIR` and `kpack rpm split PKG.rpm... -o
//! DIR`: split fat
//! native packages into a host package and per-GPU device packages (see
//! `kpack-package`). Outputs are unsigned; member timestamps come from
//! `SOURCE_DATE_EPOCH` when set, so two runs give byte-identical packages.

use std::path::PathBuf;

use anyhow::Context;
use kpack_package::PackageOptions;

use crate::exit::CliResult;
use crate::handlers::HandlerArgs;
use crate::target_args::TargetArgs;

/// Arguments of `kpack deb`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: PackageCommand,
}

#[derive(clap::Subcommand)]
enum PackageCommand {
    /// Split fat packages into a host package, `<name>-<gpu>` device packages and `<name>-gfx-all`.
    Split(Box<SplitArgs>),
}

#[derive(clap::Args)]
struct SplitArgs {
    /// The fat packages (never modified).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Output directory (created; must not be an input's directory: the
    /// host package has the input's file name).
    #[arg(short, long)]
    output: PathBuf,
    /// One device package per target, sub-family (`gfx110x`) or family
    /// (`gfx11`), named as `kpack wheel split --group` names device wheels.
    #[arg(long, value_enum, default_value = "target", value_name = "LEVEL")]
    group: Group,
    /// Keep the host binaries as they are (any HIP runtime) and move only
    /// the per-GPU database files the handlers claim.
    #[arg(long)]
    databases_only: bool,
    /// The package that ships librocm_kpack; the host package depends on it
    /// [default: librocm-kpack0 for deb, rocm-kpack for rpm].
    #[arg(long, value_name = "NAME")]
    loader_package: Option<String>,
    /// Archive directory in the package tree [default: usr/lib/kpack/<name>].
    #[arg(long, value_name = "DIR")]
    archive_dir: Option<String>,
    /// How archives are stored: `zstd` (level 3; smaller on disk once
    /// installed) or `none` (the package's own xz then compresses across
    /// targets: smaller downloads for a family's device package).
    #[arg(long, value_enum, default_value = "zstd", value_name = "HOW")]
    compression: Storage,
    /// Replace packages that already exist in the output directory.
    #[arg(long)]
    force: bool,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    handlers: HandlerArgs,
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

/// `--compression` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Storage {
    Zstd,
    None,
}

/// `--group` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Group {
    Target,
    SubFamily,
    Family,
}

/// Which package format a command splits.
#[derive(Clone, Copy)]
enum Format {
    Deb,
    Rpm,
}

/// Run `kpack deb`.
pub fn run(args: Args) -> CliResult {
    match args.command {
        PackageCommand::Split(a) => split(*a, Format::Deb),
    }
}

/// Run `kpack rpm`.
pub fn run_rpm(args: Args) -> CliResult {
    match args.command {
        PackageCommand::Split(a) => split(*a, Format::Rpm),
    }
}

fn split(args: SplitArgs, format: Format) -> CliResult {
    crate::safety::not_stdout(&args.output, "package split")?;
    let handlers = args.handlers.databases()?;
    let loader = args.loader_package.clone().unwrap_or_else(|| {
        match format {
            Format::Deb => "librocm-kpack0",
            Format::Rpm => "rocm-kpack",
        }
        .to_string()
    });
    let budget = args.memory.budget(kpack_bundle::DEFAULT_MEMORY_LIMIT);
    let mut opts = PackageOptions::new(loader);
    opts.group = match args.group {
        Group::Target => kpack_amdgpu::Level::Target,
        Group::SubFamily => kpack_amdgpu::Level::SubFamily,
        Group::Family => kpack_amdgpu::Level::Family,
    };
    opts.databases = handlers.as_deref();
    opts.databases_only = args.databases_only;
    opts.archive_dir = args.archive_dir.clone();
    opts.compression = match args.compression {
        Storage::Zstd => kpack_format::Compression::default(),
        Storage::None => kpack_format::Compression::None,
    };
    opts.targets = args.targets.filter()?;
    opts.mtime = crate::split::source_date_epoch(0)?;
    let run = crate::job::build(
        budget,
        None,
        kpack_fsafe::Existing::from_force(args.force),
        false,
    )?;
    let mut reports = Vec::new();
    for input in &args.inputs {
        let report = match format {
            Format::Deb => kpack_package::split_deb(&run.job, input, &args.output, &opts),
            Format::Rpm => kpack_package::split_rpm(&run.job, input, &args.output, &opts),
        }
        .with_context(|| format!("splitting {}", input.display()))?;
        for w in &report.warnings {
            eprintln!("warning: {}: {w}", input.display());
        }
        if !args.json {
            print!("{}", report.text());
        }
        reports.push(report);
    }
    if args.json {
        crate::json::print(&PackagesDocument { packages: &reports })?;
    }
    Ok(())
}

/// `kpack deb|rpm split --json`.
#[derive(serde::Serialize)]
struct PackagesDocument<'a, R: serde::Serialize> {
    packages: &'a [R],
}
