//! `kpack verify DIR...`: check split or recombined artifacts: manifests,
//! no fat binary left in a generic artifact, arch artifacts holding only
//! their arch, every archive valid, and every marker resolving in the
//! flattened install (exit 1 on findings).

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::{Severity, verify};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack verify`.
#[derive(clap::Args)]
pub struct Args {
    /// Artifact directories, or directories of artifacts.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack verify`.
pub fn run(args: Args) -> CliResult {
    let rep = verify(&args.dirs)?;
    if args.json {
        let v = serde_json::json!({ "schema_version": 1, "errors": rep.errors(), "report": rep });
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
    } else {
        for f in &rep.findings {
            let sev = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            println!("{sev}: [{}] {}: {}", f.check, f.path, f.message);
        }
        // Said only when a generic archive served someone, so reports of
        // trees without generic targets read as before.
        let generic = match rep.generic_served {
            0 => String::new(),
            n => format!(" ({n} more through a generic target)"),
        };
        println!(
            "{} artifacts, {} binaries with markers, {} archives, {} lookups resolved{generic}, {} errors",
            rep.artifacts.len(),
            rep.binaries,
            rep.archives,
            rep.resolved,
            rep.errors()
        );
    }
    if rep.errors() > 0 {
        return Err(CliError::Findings);
    }
    Ok(())
}
