//! `kpack plugins classify DIR`: walk a tree and print, for each file a
//! handler claims, its bundle key (`generic`, `gfx942`, `gfx11`...) and the
//! handler. What `kpack split` does with database files, without the split.

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::Classification;

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
        /// One file and the handler that claims it (all null: none).
        #[derive(serde::Serialize)]
        struct Claimed<'a> {
            path: &'a str,
            handler: Option<&'a str>,
            key: Option<String>,
            generic: Option<bool>,
        }
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            handlers: Vec<super::Listed<'a>>,
            files: Vec<Claimed<'a>>,
        }
        let files = files
            .iter()
            .filter(|(_, c)| args.all || c.is_some())
            .map(|(path, claim)| Claimed {
                path,
                handler: claim.as_ref().map(|c| c.handler.as_str()),
                key: claim.as_ref().map(|c| c.classification.to_string()),
                generic: claim
                    .as_ref()
                    .map(|c| c.classification == Classification::Generic),
            })
            .collect();
        crate::json::print(&Document {
            handlers: set.handlers().map(super::Listed::from).collect(),
            files,
        })?;
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
