//! `kpack detect`: the AMD GPUs of this machine (KFD topology, or
//! rocm-bootstrap's overrides), each with the device packages that hold
//! its code.

use std::path::PathBuf;

use kpack_detect::{Detection, Report, Source, conda, detect, provider};

use crate::exit::CliResult;

/// What `kpack detect` prints.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One block per GPU: target, compute units, integrated or not, the
    /// packages that hold its code, and the HIP device order.
    Human,
    /// The detection as JSON.
    Json,
    /// One target per line (rocm-bootstrap-detect's output).
    Plain,
    /// One line per target: target, sub-family, family
    /// (rocm-bootstrap-detect --hierarchy).
    Chain,
    /// conda's virtual packages: `__amdgpu=0=0`, `__amdgpu_arch=11.0.0=0`.
    Conda,
    /// Wheel-variant properties, most preferred first:
    /// `amd :: gfx_arch :: gfx1100`.
    Variant,
    /// The pip extras to install, on one line joined by commas
    /// (`device-gfx1100,device-gfx942`), for `"PKG[$(kpack detect
    /// --format extras --for PKG)]"`; with --for, those the package provides.
    Extras,
}

/// Arguments of `kpack detect`.
#[derive(clap::Args)]
#[command(after_long_help = "\
Overrides (rocm-bootstrap's, so scripts using either tool agree):
  ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx942,gfx1100   these targets instead of the topology
  ROCM_BOOTSTRAP_DISABLE_DETECTION=1             no GPUs
  KPACK_SYSFS_ROOT=DIR                           sysfs mount (default /sys), as --sysfs-root
conda's, for --format conda:
  CONDA_OVERRIDE_AMDGPU=0|''                     __amdgpu present | absent
  CONDA_OVERRIDE_AMDGPU_ARCH=11.0.0|''           __amdgpu_arch's version | absent

`--gpu auto`, `--keep auto` and `--gpu-targets auto` elsewhere mean what this prints.")]
pub struct Args {
    /// The sysfs mount to read (`/sys`; for containers and tests).
    #[arg(long, value_name = "DIR")]
    sysfs_root: Option<PathBuf>,
    /// What to print.
    #[arg(long, value_enum, default_value = "human", conflicts_with_all = ["json", "plain", "chain"])]
    format: Format,
    /// `--format plain`.
    #[arg(long, conflicts_with_all = ["json", "chain"])]
    plain: bool,
    /// `--format chain`.
    #[arg(long, conflicts_with = "json")]
    chain: bool,
    /// `--format json`.
    #[arg(long)]
    json: bool,
    /// With --format extras: the extras this package provides for these
    /// GPUs, at whatever grouping it was split (a host wheel, a folder of
    /// split output, or a name looked up in --index).
    #[arg(long = "for", value_name = "WHEEL|DIR|NAME")]
    for_package: Option<String>,
    /// Where --for NAME is: a simple-index URL or a folder of wheels.
    #[arg(long, value_name = "URL|DIR", requires = "for_package")]
    index: Option<String>,
}

/// Run `kpack detect`.
pub fn run(args: Args) -> CliResult {
    let det = detect(&crate::environment::detect_options(args.sysfs_root.clone()))?;
    for n in &det.notes {
        eprintln!("warning: {n}");
    }
    if det.gpus.is_empty() || det.source != Source::Kfd {
        eprintln!("note: {}", det.source.describe());
    }
    let format = match (args.json, args.plain, args.chain) {
        (true, _, _) => Format::Json,
        (_, true, _) => Format::Plain,
        (_, _, true) => Format::Chain,
        _ => args.format,
    };
    let env = |k: &str| std::env::var(k).ok();
    let lines = match format {
        Format::Json => return Ok(crate::json::print(&Report::new(&det, &env)?)?),
        Format::Human => {
            print!("{}", det.human());
            return Ok(());
        }
        Format::Extras => return print_extras(&det, &args),
        Format::Plain => det.targets(),
        Format::Chain => det.chain_lines(),
        Format::Conda => conda::conda(&det, &env)?.lines(),
        Format::Variant => provider::supported(&det)
            .iter()
            .map(|p| format!("{} :: {} :: {p}", provider::NAMESPACE, provider::FEATURE))
            .collect(),
    };
    lines.iter().for_each(|l| println!("{l}"));
    Ok(())
}

/// `--format extras`: one line, comma-joined; with `--for`, the package's
/// own extras for these GPUs, and exit 1 when it serves not all of them.
fn print_extras(det: &Detection, args: &Args) -> CliResult {
    let Some(package) = &args.for_package else {
        println!("{}", det.extras().join(","));
        return Ok(());
    };
    let host = kpack_wheel::host_extras(package, args.index.as_deref())?;
    let r = kpack_wheel::choose(host, det);
    println!("{}", r.extras.join(","));
    if crate::install::report_unserved(&r) {
        return Err(crate::exit::CliError::Findings);
    }
    Ok(())
}
