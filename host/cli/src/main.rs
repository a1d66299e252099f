//! `kpack`: split AMD GPU device code out of ROCm fat binaries and kernel
//! databases, per GPU architecture.
//!
//! One module per subcommand; each turns its raw flags into a validated
//! config before doing any I/O. Data goes to stdout, logs to stderr.
//! Exit codes: 0 success, 1 "checked and found problems", 2 error.

mod amd_compat;
mod archive;
mod archive_args;
mod audit;
mod deploy;
mod detect;
mod environment;
mod exit;
mod external;
mod extract;
mod fetch;
mod handlers;
mod help_markdown;
mod index;
mod inspect;
mod install;
mod job;
mod json;
mod memory_args;
mod offload;
mod offloading;
mod package;
#[cfg(feature = "handlers")]
mod plugins;
mod prune;
mod recombine;
mod safety;
mod split;
mod target_args;
mod ui;
mod verify;
mod verify_elf;
mod wheel;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Split AMD GPU device code out of ROCm fat binaries, per architecture.
#[derive(Parser)]
#[command(name = "kpack", version = VERSION, about, propagate_version = true)]
struct Cli {
    /// Say less on stderr: warnings and errors only, no progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say more on stderr about what is being done.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// `--version`: the crate version, and the git commit and its date when
/// built from a checkout (see build.rs).
const VERSION: &str = match option_env!("KPACK_GIT_DESCRIBE") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// Shells `kpack completions` writes a script for.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

#[derive(Subcommand)]
enum Command {
    /// Show wrappers, bundles and code objects of fat binaries and bundle files.
    Inspect(inspect::Args),
    /// Write device code objects out of a fat binary or bundle file.
    Extract(extract::Args),
    /// Move a fat binary's device code into per-arch .kpack archives; write a host-only binary.
    Offload(offload::Args),
    /// Keep only the chosen GPU targets inside fat executables, shared libraries, objects and static archives.
    Prune(prune::Args),
    /// Check host binaries: segments, program headers, marker, wrappers, relocations.
    VerifyElf(verify_elf::Args),
    /// List, extract, pack and verify .kpack archives.
    Archive(archive::Args),
    /// Database handlers (WebAssembly plugins): list, classify, publish, add.
    #[cfg(feature = "handlers")]
    Plugins(plugins::Args),
    /// Split build artifacts into generic and per-arch artifacts (TheRock layout).
    Split(split::Args),
    /// Gather per-arch artifacts of several shards into architecture groups.
    Recombine(recombine::Args),
    /// Check split or recombined artifacts, or an installed tree, including marker resolution.
    Verify(verify::Args),
    /// Split fat Python wheels into a host wheel and per-arch device wheels.
    Wheel(wheel::Args),
    /// Split fat .deb packages into a host package and per-GPU device packages.
    Deb(package::Args),
    /// Split fat .rpm packages into a host package and per-GPU device packages.
    Rpm(package::Args),
    /// List the AMD GPUs of this machine and the device packages they need.
    Detect(detect::Args),
    /// Install only the archives this machine's GPUs need, from an index.
    Fetch(fetch::Args),
    /// Copy an application and its ROCm libraries into one relocatable directory, with only the archives its GPUs need.
    Deploy(deploy::Args),
    /// Install a split package with its device wheels for this machine's GPUs (pip or uv, through extras).
    Install(install::Args),
    /// Write the listing `kpack fetch --index` reads (name, size, SHA-256).
    Index(index::Args),
    /// Which GPU targets a set of wheels serves, binary by binary, and its holes.
    Audit(audit::Args),
    /// Print a shell completion script on stdout (e.g. `kpack completions bash > ~/.local/share/bash-completion/completions/kpack`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Write the man page (roff) for kpack and each subcommand.
    Man {
        /// Directory for kpack.1 and kpack-<command>.1 [default: print kpack.1 on stdout].
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
    },
    /// Print every command's help as Markdown (the guide's command reference).
    #[command(hide = true)]
    HelpMarkdown,
    /// `kpack foo ARGS` runs `kpack-foo ARGS` from PATH (see `kpack --list`).
    #[command(external_subcommand)]
    External(Vec<OsString>),
}

fn main() -> ExitCode {
    // First, before any thread or large buffer exists: freed zstd windows
    // and buffers go back to the OS instead of staying in glibc's arenas
    // (see kpack-malloc).
    kpack_malloc::return_large_frees_to_the_os();
    safety::quiet_on_broken_pipe();
    safety::remove_temps_on_signal();
    if help_about_help() {
        // `kpack help --help`: clap's `help` takes no flags; answer with the help.
        let printed = <Cli as clap::CommandFactory>::command().print_help();
        return stdout_written(printed.and_then(|()| std::io::stdout().flush()), 0);
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "--list") {
        return exit::finish(
            external::list(&<Cli as clap::CommandFactory>::command()).map_err(Into::into),
        );
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help > /dev/full`: help that cannot be written is an error.
            let printed = e.print().and_then(|()| std::io::stdout().flush());
            return stdout_written(printed, if e.use_stderr() { 2 } else { 0 });
        }
    };
    let verbosity = match (cli.quiet, cli.verbose) {
        (true, _) => ui::Verbosity::Quiet,
        (false, 0) => ui::Verbosity::Normal,
        (false, _) => ui::Verbosity::Verbose,
    };
    ui::init(verbosity, json_requested());
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Extract(args) => extract::run(args),
        Command::Offload(args) => offload::run(args),
        Command::Prune(args) => prune::run(args),
        Command::VerifyElf(args) => verify_elf::run(args),
        Command::Archive(args) => archive::run(args),
        #[cfg(feature = "handlers")]
        Command::Plugins(args) => plugins::run(args),
        Command::Split(args) => split::run(args),
        Command::Recombine(args) => recombine::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Wheel(args) => wheel::run(args),
        Command::Deb(args) => package::run(args),
        Command::Rpm(args) => package::run_rpm(args),
        Command::Detect(args) => detect::run(args),
        Command::Install(args) => install::run(args),
        Command::Fetch(args) => fetch::run(args),
        Command::Deploy(args) => deploy::run(args),
        Command::Index(args) => index::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Completions { shell } => completions(shell),
        Command::Man { output } => man(output.as_deref()),
        Command::HelpMarkdown => help_markdown::run(<Cli as clap::CommandFactory>::command()),
        Command::External(args) => {
            return external::run(args, &<Cli as clap::CommandFactory>::command());
        }
    };
    // The outputs are in place, but a staging directory stayed: checked,
    // found a problem (exit 1).
    let left_behind = warn_left_behind();
    let code = match result {
        Ok(()) if left_behind => ExitCode::from(1),
        result => exit::finish(result),
    };
    // What is still buffered must reach stdout too (`print!` without a
    // newline): a failure to write it is an error, as in `println!`.
    match std::io::stdout().flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => stdout_written(Err(e), 2),
        _ => code,
    }
}

/// Warn about every staging directory a commit could not remove, naming
/// it; whether there was one.
fn warn_left_behind() -> bool {
    let left = kpack_fsafe::take_left_behind();
    for l in &left {
        eprintln!(
            "warning: {}: cannot remove this staging directory ({}); the outputs are in place, remove it by hand",
            l.path.display(),
            l.error
        );
    }
    !left.is_empty()
}

/// `code`, or 2 with a message on stderr when writing to stdout failed
/// (a reader that went away, EPIPE, is not a failure: exit quietly).
fn stdout_written(written: std::io::Result<()>, code: u8) -> ExitCode {
    match written {
        Ok(()) => ExitCode::from(code),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(code),
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot write to stdout\n  caused by: {e}"
            );
            ExitCode::from(2)
        }
    }
}

/// Whether the command line is `kpack help` asked for its own help
/// (`kpack help --help`, `kpack help -h`).
fn help_about_help() -> bool {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    args.first().is_some_and(|a| a == "help")
        && args.len() > 1
        && args[1..].iter().all(|a| a == "--help" || a == "-h")
}

/// Whether `--json` is among the arguments (before a `--`). Read from the
/// raw command line so that [`exit::finish`] can answer in JSON for every
/// subcommand that has the flag, without each one reporting it.
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

fn completions(shell: Shell) -> exit::CliResult {
    use clap_complete::Shell as S;
    let shell = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
        Shell::Powershell => S::PowerShell,
    };
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Into a buffer: clap_complete panics when its writer fails (a closed
    // pipe, a full disk); stdout's failures are handled as everywhere.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kpack", &mut out);
    safety::write_stdout(&out)?;
    Ok(())
}

fn man(output: Option<&std::path::Path>) -> exit::CliResult {
    use anyhow::Context;
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = output else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        safety::write_stdout(&out)?;
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // One page per subcommand too, named as git and cargo name theirs.
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
    println!("{}", dir.join("kpack.1").display());
    Ok(())
}
