//! `kpack verify-elf FILE...`: structural checks of host binaries
//! ([`kpack_binary::verify_file`]: ELF by kpack-elf, plus `readelf -lSW`
//! when it is installed; PE images by kpack-pe). Exit 1 on findings.

use std::path::PathBuf;

use kpack_binary::{Checked, VerifyOptions};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack verify-elf`.
#[derive(clap::Args)]
pub struct Args {
    /// Host binaries to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Skip the `readelf -lSW` cross-check.
    #[arg(long)]
    no_readelf: bool,
    /// Print findings as JSON.
    #[arg(long)]
    json: bool,
    /// The files are outputs of `kpack prune`: wrappers stay HIPF and
    /// must point into `.hip_fatbin`'s file bytes; no marker.
    #[arg(long)]
    pruned: bool,
}

/// Run `kpack verify-elf`.
pub fn run(args: Args) -> CliResult {
    let options = VerifyOptions {
        pruned: args.pruned,
        readelf: !args.no_readelf,
    };
    let mut files = Vec::new();
    for path in &args.files {
        crate::safety::regular_file(path)?;
        files.push(kpack_binary::verify_file(path, options)?);
    }
    if args.json {
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            files: &'a [Checked],
        }
        crate::json::print(&Document { files: &files })?;
    } else {
        files.iter().for_each(|c| print!("{c}"));
    }
    if files.iter().all(Checked::ok) {
        Ok(())
    } else {
        Err(CliError::Findings)
    }
}
