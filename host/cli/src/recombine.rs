//! `kpack recombine SHARDS_DIR --config CONFIG.json -o OUT`: gather the
//! per-arch artifacts of several CI shards into architecture groups (AMD's
//! config schema; every validation flag enforced).

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::{RecombineConfig, recombine};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack recombine`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory whose subdirectories are shards (split outputs).
    shards: PathBuf,
    /// Packaging config (primary_shard, architecture_groups, validation).
    #[arg(long)]
    config: PathBuf,
    /// Output directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack recombine`.
pub fn run(args: Args) -> CliResult {
    crate::safety::not_stdout(&args.output, "recombine")?;
    let config = RecombineConfig::load(&args.config)?;
    let spinner = crate::ui::spinner(format!("recombining {}", args.shards.display()));
    let rep = recombine(&args.shards, &config, &args.output);
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let rep = rep?;
    if args.json {
        let v = serde_json::json!({ "schema_version": 1, "config": config, "result": rep });
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
    } else {
        for o in &rep.outputs {
            println!("{}", args.output.join(o).display());
        }
        for c in &rep.generic_only {
            crate::ui::note(format_args!("{c} is generic-only"));
        }
    }
    for w in &rep.warnings {
        eprintln!("warning: {w}");
    }
    for e in &rep.errors {
        eprintln!("error: {e}");
    }
    if !rep.errors.is_empty() {
        eprintln!(
            "recombine: {} validation errors; nothing written",
            rep.errors.len()
        );
        return Err(CliError::Findings);
    }
    Ok(())
}
