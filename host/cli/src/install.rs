//! `kpack install PKG`: install a split package with the device wheels of
//! this machine's GPUs, through pip or uv. Detection, then the extras the
//! package's host wheel provides for those GPUs at whatever grouping it was
//! split (`kpack_wheel::choose`, shared with `kpack detect --format extras --for`),
//! then the installer with `PKG[extras]`; the command is printed first.
//!
//! The extras route is the one every installer reads today: pip (any
//! version) and uv select device code through `PKG[device-…]`, while
//! variant wheels are read only by uv's preview, with vendored providers.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use kpack_detect::detect;
use kpack_wheel::{Resolved, choose, host_extras};

use crate::exit::{CliError, CliResult};

/// The installer `kpack install` runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Installer {
    /// `python -m pip install` (the `python3` on PATH, or `$PYTHON`).
    Pip,
    /// `uv pip install`.
    Uv,
}

/// Arguments of `kpack install`.
#[derive(clap::Args)]
pub struct Args {
    /// The package: a name (looked up in --index), a host wheel file, or a
    /// folder of split output.
    package: String,
    /// Where the package is: a simple-index URL (`https://…/simple`) or a
    /// folder of wheels (pip's --find-links).
    #[arg(long, value_name = "URL|DIR")]
    index: Option<String>,
    /// Which installer to run.
    #[arg(long, value_enum, default_value = "pip")]
    installer: Installer,
    /// The sysfs mount to read (`/sys`; for containers and tests).
    #[arg(long, value_name = "DIR")]
    sysfs_root: Option<PathBuf>,
    /// Print the command without running it.
    #[arg(long)]
    dry_run: bool,
    /// More arguments for the installer (after `--`).
    #[arg(last = true)]
    installer_args: Vec<OsString>,
}

/// Say on stderr which GPUs `r` does not serve; whether there were any.
pub fn report_unserved(r: &Resolved) -> bool {
    for line in r.unserved_lines() {
        crate::ui::warn_above(None, line);
    }
    !r.unserved.is_empty()
}

/// Run `kpack install`.
pub fn run(args: Args) -> CliResult {
    let det = detect(&crate::environment::detect_options(args.sysfs_root.clone()))?;
    if det.gpus.is_empty() {
        eprintln!("note: {}", det.source.describe());
    }
    let host = host_extras(&args.package, args.index.as_deref())?;
    let r = choose(host, &det);
    report_unserved(&r);
    let installer = match args.installer {
        Installer::Pip => kpack_wheel::Installer::Pip {
            python: std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()),
        },
        Installer::Uv => kpack_wheel::Installer::Uv,
    };
    let mut cmd = r.install_command(&args.package, args.index.as_deref(), &installer);
    cmd.args(&args.installer_args);
    let shown: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("+ {}", shown.join(" "));
    if args.dry_run {
        return Ok(());
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", shown[0]))?;
    if status.success() {
        Ok(())
    } else {
        eprintln!("error: {} exited with {status}", shown[0]);
        Err(CliError::Reported)
    }
}
