//! `kpack plugins classify DIR`: walk a tree and print, for each file a
//! handler claims, its bundle key (`generic`, `gfx942`, `gfx11`...) and the
//! handler. What `kpack split` does with database files, without the split.

use std::path::PathBuf;

use anyhow::Context;
use kpack_plugin_host::TreeClassification;

use crate::exit::CliResult;
use crate::handlers::HandlerArgs;

/// Arguments of `kpack plugins classify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    handlers: HandlerArgs,
    /// The install prefix to walk (may also come last after `--split-databases`).
    dir: Option<PathBuf>,
    /// Also print files no handler claims (key `-`).
    #[arg(long)]
    all: bool,
    /// Print JSON (`schema_version` 1).
    #[arg(long)]
    json: bool,
}

/// Run `kpack plugins classify`.
pub fn run(mut args: Args) -> CliResult {
    // `--split-databases a b DIR` reads DIR as a handler; take it back.
    if args.dir.is_none()
        && let Some(last) = args.handlers.split_databases.last()
        && std::path::Path::new(last).is_dir()
    {
        args.dir = args.handlers.split_databases.pop().map(PathBuf::from);
    }
    let dir = args.dir.context("missing the directory to classify")?;
    if args.handlers.is_empty() {
        return Err(anyhow::anyhow!(
            "no handlers chosen: pass --split-databases NAME... and/or --plugin FILE.wasm"
        )
        .into());
    }
    let set = args.handlers.load()?;
    let files = set
        .classify_tree(&dir)
        .with_context(|| format!("classifying {}", dir.display()))?;
    for line in set.take_logs() {
        eprintln!("{}: {:?}: {}", line.handler, line.level, line.message);
    }
    let doc = TreeClassification::new(&set, &files, args.all);
    if args.json {
        crate::json::print(&doc)?;
    } else {
        print!("{doc}");
    }
    Ok(())
}
