//! `kpack`: split AMD GPU device code out of ROCm fat binaries and kernel
//! databases, per GPU architecture.
//!
//! One module per subcommand; each turns its raw flags into a validated
//! config before doing any I/O. Data goes to stdout, logs to stderr.
//! Exit codes: 0 success, 1 "checked and found problems", 2 error.

mod archive;
mod exit;

use std::process::ExitCode;

use clap::{Parser, Subcommand};


/// Split AMD GPU device code out of ROCm fat binaries, per architecture.
#[derive(Parser)]
#[command(name = "kpack", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List, extract, pack and verify .kpack archives.
    Archive(archive::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Archive(args) => archive::run(args),
    };
    exit::finish(result)
}
