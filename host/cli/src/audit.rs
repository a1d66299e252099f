//! `kpack audit`: which GPUs a set of wheels really serves. The audit is
//! [`kpack_wheel::audit_wheels`]; this file collects the wheels and prints.

use std::path::PathBuf;

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack audit`.
#[derive(clap::Args)]
pub struct Args {
    /// Wheels, or directories holding wheels (`*.whl`).
    #[arg(value_name = "WHEEL|DIR")]
    inputs: Vec<PathBuf>,
    /// A directory of wheels, as a simple index serves them (a URL is not
    /// read yet: download the wheels and give their directory).
    #[arg(long, value_name = "DIR")]
    index: Option<String>,
    /// Print the audit as JSON.
    #[arg(long)]
    json: bool,
    /// Print a Markdown page (to publish beside the wheels).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
}

/// Run `kpack audit`.
pub fn run(args: Args) -> CliResult {
    let mut inputs = args.inputs.clone();
    if let Some(i) = &args.index {
        if i.contains("://") {
            return Err(anyhow::anyhow!(
                "--index {i}: only a directory of wheels is read; download the wheels first"
            )
            .into());
        }
        inputs.push(PathBuf::from(i));
    }
    if inputs.is_empty() {
        return Err(anyhow::anyhow!("name wheels, directories of wheels, or --index DIR").into());
    }
    for i in inputs.iter().filter(|i| !i.is_dir()) {
        crate::safety::regular_file(i)?;
    }
    let wheels = kpack_wheel::collect_wheels(&inputs)?;
    let audit = kpack_wheel::audit_wheels(&wheels)?;
    for w in &audit.warnings {
        eprintln!("warning: {w}");
    }
    if args.json {
        crate::json::print(&audit)?;
    } else if args.markdown {
        print!("{}", audit.markdown());
    } else {
        print!("{}", audit.text());
    }
    if audit.holes.is_empty() {
        Ok(())
    } else {
        Err(CliError::Findings)
    }
}
