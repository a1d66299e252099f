//! `kpack plugins classify DIR`: walk a tree and print, for each file a
//! handler claims, its bundle key (`generic`, `gfx942`, `gfx11`...) and the
//! handler. What `kpack split` does with database files, without the split.

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::Classification;
use serde_json::json;

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
    if args.json {
        let handlers: Vec<_> = set
            .handlers()
            .map(|h| {
                json!({"name": h.name, "version": h.version.to_string(), "wit": h.wit.to_string(),
                            "origin": h.origin.to_string(), "sha256": h.sha256})
            })
            .collect();
        let files: Vec<_> = files
            .iter()
            .filter(|(_, c)| args.all || c.is_some())
            .map(|(path, claim)| match claim {
                Some(c) => {
                    json!({"path": path, "handler": c.handler, "key": c.classification.to_string(),
                                  "generic": c.classification == Classification::Generic})
                }
                None => json!({"path": path, "handler": null, "key": null, "generic": null}),
            })
            .collect();
        let doc = crate::json::envelope(json!({"handlers": handlers, "files": files}));
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    for (path, claim) in &files {
        match claim {
            Some(c) => println!("{}\t{}\t{}", c.classification, c.handler, path),
            None if args.all => println!("-\t-\t{path}"),
            None => {}
        }
    }
    Ok(())
}
