//! `kpack plugins publish FILE.wasm --registry DIR`: load the component
//! (which checks it is a compatible handler and reads its name and version),
//! then add it to the registry's index.

use std::path::PathBuf;

use anyhow::Context;
use kpack_plugin_host::{HandlerSpec, LoadOptions, Registry};

use crate::exit::CliResult;

/// Arguments of `kpack plugins publish`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The handler component to publish.
    file: PathBuf,
    /// Registry directory or file:// URL (created if missing).
    #[arg(long)]
    registry: String,
    /// Check everything but write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Run `kpack plugins publish`.
pub fn run(args: Args) -> CliResult {
    let registry = Registry::new(&args.registry)?;
    let set = crate::handlers::load(
        &[HandlerSpec::File(args.file.clone())],
        &LoadOptions::standard(&[], &crate::environment::handler_places()),
    )?;
    let meta = set.handlers().next().context("no handler loaded")?.clone();
    if args.dry_run {
        eprintln!(
            "would publish {} {} (kpack:handler@{}) to {}",
            meta.name,
            meta.version,
            meta.wit,
            registry.location()
        );
        return Ok(());
    }
    let wasm =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let entry = registry.publish(&meta.name, &meta.version, &meta.wit, &wasm)?;
    println!(
        "published {} {} (kpack:handler@{}) sha256 {} to {}",
        entry.name,
        entry.vers,
        entry.wit,
        entry.cksum,
        registry.location()
    );
    Ok(())
}
