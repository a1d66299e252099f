//! `kpack wheel split FAT.whl -o OUTDIR`: split a fat Python wheel into a
//! host wheel and one device wheel per GPU processor (see `kpack-wheel`'s
//! docs for the layout). `kpack wheel prune FAT.whl --keep T -o OUTDIR`:
//! one fat wheel with only the chosen targets. Timestamps come from `SOURCE_DATE_EPOCH` when set,
//! so two runs on the same input give byte-identical wheels.

use std::path::PathBuf;

use anyhow::{Context, bail};
use kpack_wheel::{PruneOptions, WheelOptions, WheelReport, ZIP_EPOCH, prune_wheel, split_wheel};

use crate::archive_args::ArchiveArgs;
use crate::exit::CliResult;
use crate::handlers::HandlerArgs;
use crate::target_args::TargetArgs;

/// Arguments of `kpack wheel`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: WheelCommand,
}

#[derive(clap::Subcommand)]
enum WheelCommand {
    /// Split a fat wheel into a host wheel and per-arch device wheels.
    #[command(after_long_help = crate::amd_compat::WHEEL_SPLIT_HELP)]
    Split(Box<SplitArgs>),
    /// Keep only chosen GPU targets in a fat wheel (any HIP runtime loads it).
    Prune(Box<PruneArgs>),
}

#[derive(clap::Args)]
struct PruneArgs {
    /// The fat wheel (never modified).
    input: PathBuf,
    /// Output directory (created; must not be the input's directory: the
    /// pruned wheel has the input's name).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    keep: crate::prune::KeepArgs,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
    /// Do not check the MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// Replace the pruned wheel if it already exists.
    #[arg(long)]
    force: bool,
    /// Most bytes the wheel may inflate to (suffixes K, M, G, T; default
    /// 50 times the wheel's size, at least 64M, at most 64G).
    #[arg(long, value_name = "BYTES", value_parser = kpack_bundle::parse_size)]
    max_unpacked_size: Option<u64>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    handlers: HandlerArgs,
}

#[derive(clap::Args)]
struct SplitArgs {
    /// The fat wheel (never modified), or an unpacked wheel directory.
    #[arg(required_unless_present = "amd_input", conflicts_with = "amd_input")]
    input: Option<PathBuf>,
    /// Output directory (created; must not be the input's directory).
    #[arg(short, long, alias = "output-dir")]
    output: PathBuf,
    /// Device wheels are named `<NAME>-<arch>` [default: `<distribution>-device`].
    #[arg(long, value_name = "NAME", alias = "device-package-prefix")]
    device_prefix: Option<String>,
    /// Archive directory relative to site-packages [default: `_<distribution>_kpack`].
    #[arg(long, value_name = "DIR", conflicts_with = "overlay_root")]
    archive_dir: Option<String>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    archive: ArchiveArgs,
    /// Split in a staging directory and report, but write no wheel.
    #[arg(long)]
    dry_run: bool,
    /// Replace wheels that already exist in the output directory.
    #[arg(long)]
    force: bool,
    /// Most bytes the wheel may inflate to (suffixes K, M, G, T; default
    /// 50 times the wheel's size, at least 64M, at most 64G); entries over
    /// 16 MiB that inflate more than 200x are refused too. Given, it
    /// replaces both ratio guards.
    #[arg(long, value_name = "BYTES", value_parser = kpack_bundle::parse_size)]
    max_unpacked_size: Option<u64>,
    #[command(flatten)]
    handlers: HandlerArgs,
    #[command(flatten)]
    targets: TargetArgs,
    /// Group device wheels by ROCm's packaging hierarchy (rocm-bootstrap
    /// 0.3.0): `<prefix>-gfx1151`, `<prefix>-gfx115x` or `<prefix>-gfx11`;
    /// the host wheel gets `device-<group>` and `device-all` extras.
    /// Without it: by target (the output says so), with the extras.
    #[arg(
        long,
        value_enum,
        value_name = "LEVEL",
        conflicts_with = "overlay_root"
    )]
    group: Option<Group>,
    /// Experimental: also write variant wheels (PEP 825/850 drafts), one
    /// per device wheel, `<host stem>-<key>.whl`, each with a
    /// `variant.json` holding its own variant, and
    /// `<name>-<version>-variants.json` beside them (uv 0.13's preview reads
    /// them; pip skips them). Extras remain the route that selects device
    /// code in every installer.
    #[arg(long, conflicts_with = "overlay_root")]
    variant_wheel: bool,
    /// The provider the variant wheels name: kpack's
    /// (`kpack-variant-provider`) or AMD's (`rocm-bootstrap >= 0.3.0`);
    /// both answer alike. With --variant-wheel [default: kpack]; with
    /// --generate-variant-wheel, the PEP 850 layout instead of AMD's bytes.
    #[arg(long, value_enum)]
    provider: Option<VariantProviderArg>,
    #[command(flatten)]
    amd: crate::amd_compat::WheelArgs,
}

/// `--provider` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum VariantProviderArg {
    /// kpack-variant-provider (`python/variant-provider`).
    Kpack,
    /// rocm-bootstrap 0.3.0's `AMDVariantPlugin`.
    RocmBootstrap,
}

/// `--group` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Group {
    Target,
    SubFamily,
    Family,
}

impl From<Group> for kpack_amdgpu::Level {
    fn from(g: Group) -> Self {
        match g {
            Group::Target => kpack_amdgpu::Level::Target,
            Group::SubFamily => kpack_amdgpu::Level::SubFamily,
            Group::Family => kpack_amdgpu::Level::Family,
        }
    }
}

/// Run `kpack wheel`.
pub fn run(args: Args) -> CliResult {
    match args.command {
        WheelCommand::Split(a) => split(*a),
        WheelCommand::Prune(a) => prune(*a),
    }
}

fn prune(args: PruneArgs) -> CliResult {
    let keep = args.keep.list()?;
    crate::safety::regular_file(&args.input)?;
    crate::safety::not_stdout(&args.output, "wheel prune")?;
    let handlers = args.handlers.databases()?;
    let mut opts = PruneOptions::new(keep);
    opts.strict = args.keep.strict;
    opts.verify_hash = !args.no_verify_hash;
    opts.databases = handlers.as_deref();
    opts.mtime = crate::split::source_date_epoch(ZIP_EPOCH)?;
    set_limits(&mut opts.limits, args.max_unpacked_size);
    // The output directory appears with the pruned wheel, or not at all.
    crate::safety::clean_stale_temps(&args.output);
    let start = std::time::Instant::now();
    let budget = args.memory.budget(kpack_bundle::DEFAULT_MEMORY_LIMIT);
    let run = crate::job::build(
        budget,
        None,
        kpack_fsafe::Existing::from_force(args.force),
        true,
    )?;
    let report = prune_wheel(&run.job, &args.input, &args.output, &opts);
    drop(run);
    let report = report?;
    for w in &report.warnings {
        eprintln!("warning: {}: {w}", args.input.display());
    }
    if args.json {
        let v = crate::json::envelope(serde_json::to_value(&report).context("json")?);
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
        return Ok(());
    }
    print!("{}", report.text());
    // A wheel copied unchanged gets no timing line.
    if report.device_code {
        crate::ui::status(format_args!("done in {:.2?}", start.elapsed()));
    }
    Ok(())
}

/// `--max-unpacked-size`: raising the total is how a user says "this wheel
/// is really that big", so the ratio guard follows it.
fn set_limits(limits: &mut kpack_wheel::Limits, max_unpacked_size: Option<u64>) {
    if let Some(max) = max_unpacked_size {
        limits.max_unpacked_size = max;
        limits.max_ratio = u64::MAX;
        limits.max_wheel_ratio = u64::MAX;
    }
}

fn split(mut args: SplitArgs) -> CliResult {
    let targets = args.targets.filter()?;
    let amd = amd_layout(&mut args)?;
    let Some(input) = args.input.clone().or_else(|| args.amd.input.clone()) else {
        return Err(anyhow::anyhow!("no input wheel").into());
    };
    if !input.is_dir() {
        crate::safety::regular_file(&input)?;
    }
    crate::safety::not_stdout(&args.output, "wheel split")?;
    let handlers = args.handlers.databases()?;
    let mut opts = WheelOptions::new();
    opts.device_prefix = args.device_prefix.clone();
    opts.archive_dir = args
        .archive_dir
        .as_ref()
        .map(|d| d.trim_matches('/').to_string());
    opts.verify_hash = args.archive.verify_hash();
    opts.compression = args.archive.compression();
    opts.databases = handlers.as_deref();
    opts.mtime = crate::split::source_date_epoch(ZIP_EPOCH)?;
    opts.dry_run = args.dry_run;
    let (default_group, amd) = grouping_and_variants(&args, amd, &mut opts)?;
    opts.archive_group = args
        .archive
        .archive_group_at_most(opts.group.unwrap_or(kpack_amdgpu::Level::Target));
    // Before the output directory is created: nothing written.
    opts.amd = amd;
    kpack_wheel::check_archive_group(&input, &opts)?;
    // The output directory appears with the wheels, or not at all.
    if !args.dry_run {
        crate::safety::clean_stale_temps(&args.output);
    }
    set_limits(&mut opts.limits, args.max_unpacked_size);
    opts.targets = targets;
    // AMD's unpacked-wheel input: zipped first, beside the outputs.
    let packed = packed_input(&input, &args.output, args.dry_run)?;
    let input = packed.as_ref().map_or(input, |(_, w)| w.clone());

    let start = std::time::Instant::now();
    let run = args
        .archive
        .job(kpack_fsafe::Existing::from_force(args.force), true)?;
    crate::ui::info(format_args!(
        "splitting {} into {} ({} threads)",
        input.display(),
        args.output.display(),
        run.job.threads()
    ));
    let report = split_wheel(&run.job, &input, &args.output, &opts);
    drop(run);
    let report = report?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }

    if args.json {
        let v = crate::json::envelope(serde_json::to_value(&report).context("json")?);
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
    } else {
        print_text(&args, &report, default_group, opts.archive_group);
        crate::ui::status(format_args!("done in {:.2?}", start.elapsed()));
    }
    Ok(())
}

/// The text report of a split: the table, what was left alone, and how
/// the archives are read.
fn print_text(
    args: &SplitArgs,
    report: &WheelReport,
    default_group: bool,
    archive_group: kpack_amdgpu::Level,
) {
    print!("{}", report.table());
    if default_group && report.device_code {
        println!(
            "grouping: target (the default; --group sub-family or --group family for fewer, larger device wheels)"
        );
    }
    // As `kpack split` says it: a rerun over its own output is no error.
    for f in &report.identical {
        println!("  {f}: identical to the existing output, left alone");
    }
    if args.dry_run {
        eprintln!("dry run: nothing written to {}", args.output.display());
    }
    // No archive was written for a wheel without device code.
    if report.device_code {
        args.archive.say_readers(archive_group);
    }
}

/// `--group` (kpack's layout without it: one wheel per target with a
/// `device-<target>` extra each, said in the output, so the host always
/// names the extras that install device code; whether that default was
/// taken is returned) and the variant wheels' label and provider, into
/// `opts` and AMD's layout `amd`.
fn grouping_and_variants(
    args: &SplitArgs,
    mut amd: Option<kpack_wheel::AmdLayout>,
    opts: &mut WheelOptions<'_>,
) -> anyhow::Result<(bool, Option<kpack_wheel::AmdLayout>)> {
    let default_group = args.group.is_none() && amd.is_none();
    opts.group = match (args.group, &amd) {
        (Some(g), _) => Some(g.into()),
        (None, None) => Some(kpack_amdgpu::Level::Target),
        (None, Some(_)) => None,
    };
    opts.variant_label = args.variant_wheel.then(|| {
        args.amd
            .variant_label
            .clone()
            .unwrap_or_else(|| kpack_wheel::DEFAULT_VARIANT_LABEL.to_string())
    });
    let provider = args.provider.map(|p| match p {
        VariantProviderArg::Kpack => kpack_wheel::VariantProvider::Kpack,
        VariantProviderArg::RocmBootstrap => kpack_wheel::VariantProvider::RocmBootstrap,
    });
    if provider.is_some() && !args.variant_wheel && !args.amd.generate_variant_wheel {
        anyhow::bail!(
            "--provider names the provider of variant wheels: give --variant-wheel (or --generate-variant-wheel with --overlay-root)"
        );
    }
    opts.variant_provider = provider.unwrap_or(kpack_wheel::VariantProvider::Kpack);
    if let (Some(a), Some(p)) = (amd.as_mut(), provider) {
        a.variant_provider = p;
    }
    Ok((default_group, amd))
}

/// An unpacked wheel directory (AMD's `--input DIR`) zipped into a wheel
/// in a temporary directory inside `out` (the system's for a dry run);
/// `None` for a wheel file.
fn packed_input(
    input: &std::path::Path,
    out: &std::path::Path,
    dry_run: bool,
) -> anyhow::Result<Option<(tempfile::TempDir, PathBuf)>> {
    if !input.is_dir() {
        return Ok(None);
    }
    // Beside the output directory (which appears only with the wheels),
    // on its file system when its parent exists; else the temp directory.
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
    let within = match parent {
        Some(p) if !dry_run && p.is_dir() => p.to_path_buf(),
        None if !dry_run => PathBuf::from("."),
        _ => std::env::temp_dir(),
    };
    let dir = kpack_fsafe::temp_dir_in(&within, "wheel-input")
        .with_context(|| format!("{}: cannot create a temporary directory", within.display()))?;
    let (wheel, warnings) = kpack_wheel::wheel_from_directory(input, dir.path())?;
    for w in warnings {
        eprintln!("warning: {}: {w}", input.display());
    }
    Ok(Some((dir, wheel)))
}

/// AMD's flags: the database handlers they name join `--split-databases`,
/// the ignored ones are said out loud, and the layout they ask for comes
/// back. Flags of kpack's layout that contradict AMD's are refused.
fn amd_layout(args: &mut SplitArgs) -> anyhow::Result<Option<kpack_wheel::AmdLayout>> {
    args.amd.ignored.note();
    if args.handlers.split_databases.is_empty()
        && let Some(d) = args.amd.databases()
    {
        args.handlers.split_databases = d;
    }
    let layout = args.amd.layout()?;
    if layout.is_some() {
        if args.archive.archive_group() != kpack_amdgpu::Level::Target {
            bail!(
                "{} does not apply to AMD's layout (--overlay-root): it has one archive per target id",
                args.archive.group_flag()
            );
        }
        if matches!(
            args.archive.compression(),
            kpack_format::Compression::ZstdDelta { .. }
        ) {
            bail!(
                "{} (zstd-delta) does not apply to AMD's layout (--overlay-root): AMD's loader reads none and zstd only",
                args.archive.compression_flag()
            );
        }
    }
    Ok(layout)
}
