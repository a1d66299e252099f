//! How much the CLI says on stderr, and its progress bars.
//!
//! The global `-q/--quiet` and `-v/--verbose` flags set one verbosity level
//! for the whole run, kept here so subcommands need not thread it through:
//! `-q` silences notes, timings and progress (warnings and errors stay),
//! `-v` adds [`info`] lines about what is being done. Data on stdout is the
//! same at every level.
//!
//! Every progress bar comes from [`progress`], so the rule for when one is
//! drawn lives in one place.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// How chatty the run is on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// `-q`: warnings and errors only.
    Quiet,
    /// The default: notes, timings, progress on a terminal.
    Normal,
    /// `-v` (or more): also what is being done.
    Verbose,
}

struct State {
    verbosity: Verbosity,
    json: bool,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Set the run's verbosity and whether `--json` was asked for; first call wins.
pub fn init(verbosity: Verbosity, json: bool) {
    let _ = STATE.set(State { verbosity, json });
}

/// The run's verbosity ([`Verbosity::Normal`] before [`init`]).
pub fn verbosity() -> Verbosity {
    STATE.get().map_or(Verbosity::Normal, |s| s.verbosity)
}

/// Whether the command line asked for `--json` output.
pub fn json() -> bool {
    STATE.get().is_some_and(|s| s.json)
}

/// Print a `note:` line on stderr unless `-q`.
pub fn note(msg: impl std::fmt::Display) {
    if verbosity() >= Verbosity::Normal {
        eprintln!("note: {msg}");
    }
}

/// Print a plain line on stderr unless `-q` (timings, summaries).
pub fn status(msg: impl std::fmt::Display) {
    if verbosity() >= Verbosity::Normal {
        eprintln!("{msg}");
    }
}

/// Print an `info:` line on stderr with `-v` only.
pub fn info(msg: impl std::fmt::Display) {
    if verbosity() >= Verbosity::Verbose {
        eprintln!("info: {msg}");
    }
}

/// [`info`] while `bar` may be drawn: the line goes above the bar instead
/// of through it.
pub fn info_above(bar: Option<&indicatif::ProgressBar>, msg: impl std::fmt::Display) {
    if verbosity() < Verbosity::Verbose {
        return;
    }
    match bar {
        Some(b) => b.suspend(|| eprintln!("info: {msg}")),
        None => eprintln!("info: {msg}"),
    }
}

/// A `warning:` line on stderr (even with `-q`) while `bar` may be drawn:
/// above the bar instead of through it.
pub fn warn_above(bar: Option<&indicatif::ProgressBar>, msg: impl std::fmt::Display) {
    match bar {
        Some(b) => b.suspend(|| eprintln!("warning: {msg}")),
        None => eprintln!("warning: {msg}"),
    }
}

/// Whether progress may be drawn: stderr is a terminal that understands
/// cursor movement (`TERM` is not `dumb`), and the run is not `-q`.
fn progress_wanted() -> bool {
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    verbosity() >= Verbosity::Normal && !dumb && std::io::stderr().is_terminal()
}

/// What a progress bar counts.
#[derive(Clone, Copy)]
pub enum Unit {
    /// Bytes processed (shown as sizes).
    Bytes,
    /// Items (files, entries, code objects) done.
    Items,
}

/// A progress bar of `len` units on stderr, or `None` where none should be
/// drawn (see [`progress_wanted`]); callers skip their updates on `None`.
pub fn progress(len: u64, unit: Unit) -> Option<indicatif::ProgressBar> {
    if !progress_wanted() {
        return None;
    }
    let template = match unit {
        Unit::Bytes => "{spinner} {bytes}/{total_bytes} {wide_bar} {elapsed} {msg}",
        Unit::Items => "{spinner} {pos}/{len} {wide_bar} {elapsed} {msg}",
    };
    let b = indicatif::ProgressBar::new(len);
    b.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(b)
}

/// A spinner with a message for work whose size is not known up front.
pub fn spinner(msg: impl Into<String>) -> Option<indicatif::ProgressBar> {
    if !progress_wanted() {
        return None;
    }
    let b = indicatif::ProgressBar::new_spinner();
    b.set_message(msg.into());
    b.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(b)
}

/// A bar for work that goes through phases (unpacking, offloading,
/// writing), each started with [`set_phase`]; `None` where none should be
/// drawn (see [`progress_wanted`]).
pub fn phases() -> Option<indicatif::ProgressBar> {
    if !progress_wanted() {
        return None;
    }
    let b = indicatif::ProgressBar::new(0);
    set_phase(&b, "", 0);
    b.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(b)
}

/// Start phase `msg` on `bar`: `total` bytes to go through, or a spinner
/// when 0 (not known).
pub fn set_phase(bar: &indicatif::ProgressBar, msg: &str, total: u64) {
    let template = if total == 0 {
        "{spinner} {msg} {elapsed}"
    } else {
        "{spinner} {msg} {bytes}/{total_bytes} {wide_bar} {elapsed}"
    };
    bar.set_length(total);
    bar.set_position(0);
    bar.set_message(msg.to_string());
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
}
