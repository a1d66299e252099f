//! `kpack`: split AMD GPU device code out of ROCm fat binaries and kernel
//! databases, per GPU architecture.
//!
//! One module per subcommand; each turns its raw flags into a validated
//! config before doing any I/O. Data goes to stdout, logs to stderr.
//! Exit codes: 0 success, 1 "checked and found problems", 2 error.

mod amd_compat;
mod archive;
mod archive_args;
mod exit;
mod external;
mod extract;
mod handlers;
mod inspect;
mod offload;
mod offloading;
mod plugins;
mod prune;
mod recombine;
mod safety;
mod split;
mod target_args;
mod verify;
mod verify_elf;
mod wheel;

use std::ffi::OsString;
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
    /// Show wrappers, bundles and code objects of fat binaries and bundle files.
    Inspect(inspect::Args),
    /// Write device code objects out of a fat binary or bundle file.
    Extract(extract::Args),
    /// Move a fat binary's device code into per-arch .kpack archives; write a host-only binary.
    Offload(offload::Args),
    /// Keep only the chosen GPU targets inside a fat executable or shared library.
    Prune(prune::Args),
    /// Check host binaries: segments, program headers, marker, wrappers, relocations.
    VerifyElf(verify_elf::Args),
    /// List, extract, pack and verify .kpack archives.
    Archive(archive::Args),
    /// Database handlers (WebAssembly plugins): list, classify, publish, add.
    Plugins(plugins::Args),
    /// Split build artifacts into generic and per-arch artifacts (TheRock layout).
    Split(split::Args),
    /// Gather per-arch artifacts of several shards into architecture groups.
    Recombine(recombine::Args),
    /// Check split or recombined artifacts, including marker resolution.
    Verify(verify::Args),
    /// Split fat Python wheels into a host wheel and per-arch device wheels.
    Wheel(wheel::Args),
    /// `kpack foo ARGS` runs `kpack-foo ARGS` from PATH (see `kpack --list`).
    #[command(external_subcommand)]
    External(Vec<OsString>),
}

fn main() -> ExitCode {
    safety::quiet_on_broken_pipe();
    if std::env::args_os().nth(1).is_some_and(|a| a == "--list") {
        return exit::finish(
            external::list(&<Cli as clap::CommandFactory>::command()).map_err(Into::into),
        );
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Extract(args) => extract::run(args),
        Command::Offload(args) => offload::run(args),
        Command::Prune(args) => prune::run(args),
        Command::VerifyElf(args) => verify_elf::run(args),
        Command::Archive(args) => archive::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::Split(args) => split::run(args),
        Command::Recombine(args) => recombine::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Wheel(args) => wheel::run(args),
        Command::External(args) => return external::run(args),
    };
    exit::finish(result)
}
