//! `kpack recombine SHARDS_DIR --config CONFIG.json -o OUT`: gather the
//! per-arch artifacts of several CI shards into architecture groups (AMD's
//! config schema; every validation flag enforced).

use std::path::PathBuf;

use kpack_split::{RecombineConfig, RecombineOptions, recombine_with};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack recombine`.
#[derive(clap::Args)]
#[command(after_long_help = crate::amd_compat::RECOMBINE_HELP)]
pub struct Args {
    /// Directory whose subdirectories are shards (split outputs).
    #[arg(
        required_unless_present = "input_shards_dir",
        conflicts_with = "input_shards_dir"
    )]
    shards: Option<PathBuf>,
    /// AMD's name for SHARDS.
    #[arg(long, value_name = "DIR", hide = true)]
    input_shards_dir: Option<PathBuf>,
    /// Packaging config (primary_shard, architecture_groups, validation).
    #[arg(long)]
    config: PathBuf,
    /// Output directory (may exist). An output artifact that exists with
    /// the same contents is left alone; one with other contents is an error
    /// naming the first differing file.
    #[arg(short, long, alias = "output-dir")]
    output: PathBuf,
    /// Replace output artifacts that exist with other contents
    /// (`--replace` is the same flag).
    #[arg(long, alias = "replace")]
    force: bool,
    /// Write each output artifact as a directory, or as a `.tar.zst`
    /// artifact archive (TheRock's name, members sorted, mtime
    /// `SOURCE_DATE_EPOCH` or 0) with its sha256 equivalence manifest
    /// (`<name>.artifact_equivalence.json`), as `split` does.
    #[arg(long, value_enum, default_value = "dir")]
    output_format: crate::split::OutputFormatArg,
    /// Recombine only this component (AMD's --component).
    #[arg(long, hide = true)]
    component: Option<String>,
    #[command(flatten)]
    amd: crate::amd_compat::Ignored,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack recombine`.
pub fn run(args: Args) -> CliResult {
    args.amd.note();
    let Some(shards) = args.shards.as_ref().or(args.input_shards_dir.as_ref()) else {
        return Err(anyhow::anyhow!("no shards directory given").into());
    };
    crate::safety::not_stdout(&args.output, "recombine")?;
    let config = RecombineConfig::load(&args.config)?;
    let opts = RecombineOptions {
        component: args.component.clone(),
        force: args.force,
        output_format: args.output_format.format(),
        mtime: crate::split::source_date_epoch(0)?,
    };
    crate::ui::info(format_args!(
        "recombining {} into {} (config {})",
        shards.display(),
        args.output.display(),
        args.config.display()
    ));
    let spinner = crate::ui::spinner(format!("recombining {}", shards.display()));
    let rep = recombine_with(shards, &config, &args.output, &opts);
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let rep = rep?;
    if args.json {
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a, C, R> {
            config: &'a C,
            result: &'a R,
        }
        crate::json::print(&Document {
            config: &config,
            result: &rep,
        })?;
    } else {
        for o in &rep.outputs {
            if rep.identical.contains(o) {
                println!(
                    "{}: identical to the existing output, left alone",
                    args.output.join(o).display()
                );
            } else {
                println!("{}", args.output.join(o).display());
            }
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
