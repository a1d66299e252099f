//! `kpack plugins`: database handlers (WebAssembly components): list the
//! available ones, classify a tree with them, and publish to / install from
//! a registry, and scaffold a new handler crate.

mod add;
mod classify;
mod list;
mod new;
mod publish;
mod yank;

use crate::exit::CliResult;

/// Arguments of `kpack plugins`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Show handlers: name, version, WIT version, origin, sha256.
    List(list::Args),
    /// Walk a directory and print each database file's classification.
    Classify(classify::Args),
    /// Publish a handler component to a registry.
    Publish(publish::Args),
    /// Install a handler from a registry (semver resolution, checksum verified).
    Add(add::Args),
    /// Hide a published version from resolution (or show it again with --undo).
    Yank(yank::Args),
    /// Create a handler crate on kpack-sdk (builds with one cargo command).
    New(new::Args),
}

/// Run `kpack plugins ...`.
pub fn run(args: Args) -> CliResult {
    match args.command {
        Command::List(a) => list::run(a),
        Command::Classify(a) => classify::run(a),
        Command::Publish(a) => publish::run(a),
        Command::Add(a) => add::run(a),
        Command::Yank(a) => yank::run(a),
        Command::New(a) => new::run(a),
    }
}
