//! `kpack plugins add NAME[@REQ] --registry DIR`: resolve the newest
//! non-yanked version matching REQ, verify its checksum, check that it loads
//! as a compatible handler, and install it as `NAME-VERSION.wasm` in the
//! install directory (or `--plugin-dir`).

use std::path::PathBuf;

use anyhow::Context;
use kpack_plugin_host::{HandlerSpec, LoadOptions, Registry};
use semver::VersionReq;

use crate::exit::CliResult;

/// Arguments of `kpack plugins add`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// `NAME` or `NAME@REQ` (semver requirement, e.g. `rocblas@^1.2`).
    spec: String,
    /// Registry: a directory, a file:// URL or an http(s):// sparse-index URL.
    #[arg(long)]
    registry: String,
    /// Install here instead of `$XDG_DATA_HOME/kpack/plugins`.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    plugin_dir: Option<PathBuf>,
}

/// Run `kpack plugins add`.
pub fn run(args: Args) -> CliResult {
    let HandlerSpec::Name { name, req } = HandlerSpec::parse(&args.spec)? else {
        return Err(
            anyhow::anyhow!("`plugins add` takes NAME[@REQ], not a file: {}", args.spec).into(),
        );
    };
    let registry = Registry::new(&args.registry)?;
    let dest = args
        .plugin_dir
        .or_else(|| crate::environment::handler_places().install_dir())
        .context("no install directory: set XDG_DATA_HOME or HOME")?;
    let req = req.unwrap_or(VersionReq::STAR);
    let entry = registry.resolve(&name, &req)?;
    // Check it loads before installing: a blob that fails must not shadow a working one.
    // Staged under kpack's temp name (a run that dies leaves a name the
    // next run can tell), removed on SIGINT/SIGTERM too.
    let staged = kpack_fsafe::temp_dir_in(&std::env::temp_dir(), "plugin")?;
    let _interrupt = kpack_fsafe::remove_on_interrupt(staged.path());
    let path = registry.install_entry(&entry, staged.path())?;
    let set = crate::handlers::load(
        &[HandlerSpec::File(path.clone())],
        &LoadOptions::standard(&[], &crate::environment::handler_places()),
    )?;
    let meta = set.handlers().next().context("no handler loaded")?;
    if meta.name != entry.name || meta.version.to_string() != entry.vers {
        return Err(anyhow::anyhow!(
            "registry entry {} {} contains handler {} {}",
            entry.name,
            entry.vers,
            meta.name,
            meta.version
        )
        .into());
    }
    // The entry checked above, not a second resolution (the index may have moved on).
    let installed = registry.install_entry(&entry, &dest)?;
    println!(
        "installed {} {} (kpack:handler@{}) to {}",
        entry.name,
        entry.vers,
        entry.wit,
        installed.display()
    );
    Ok(())
}
