//! What kpack promises about your files (`kpack-fsafe` keeps the promises:
//! atomic writes, temp names, output checks, path validation; its
//! checks are re-exported here), and what only a command line adds: saying
//! which stale temp files it removed, saying when it waits for a lock, and
//! stdout as an output (`-o -`, a reader that goes away).

use std::path::{Path, PathBuf};

use anyhow::Context;
pub use kpack_fsafe::{
    CreatedDir, Outputs, OutputsBuilder, inside_root, not_existing, not_nested, plain_name,
    regular_file,
};

/// Remove stale temp files of dead kpack processes in `dir`, saying so
/// (for a directory a library writes into; [`create_outputs`] says so for
/// the outputs a command creates).
pub fn clean_stale_temps(dir: &Path) {
    say_removed(&kpack_fsafe::remove_stale_temps(dir));
}

/// The command's outputs, as `builder` describes them (its inputs, a lock
/// on the root: see [`lock_message`]), saying which stale temps of dead
/// runs were removed: the one way a command creates its [`Outputs`].
pub fn create_outputs(builder: OutputsBuilder<'_>) -> kpack_fsafe::Result<Outputs> {
    let outputs = builder.create()?;
    say_removed(outputs.removed_stale());
    Ok(outputs)
}

/// A note for each stale temp removed.
fn say_removed(removed: &[PathBuf]) {
    for p in removed {
        crate::ui::note(format_args!(
            "removed {}, left by a kpack run that died",
            p.display()
        ));
    }
}

/// What a command says while it waits for the lock on `dir`
/// ([`OutputsBuilder::lock`]): another kpack is writing there.
pub fn lock_message(dir: &Path) -> impl FnOnce() + '_ {
    move || {
        crate::ui::status(format_args!(
            "waiting for the lock on {} (another kpack is writing there)",
            dir.display()
        ));
    }
}

/// On SIGINT or SIGTERM, remove the temp files writers registered
/// ([`kpack_fsafe::remove_on_interrupt`]), then die of the signal as
/// without a handler (exit status 128 + its number in a shell).
#[cfg(unix)]
pub fn remove_temps_on_signal() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            kpack_fsafe::remove_registered();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
}

/// Signals are not caught off Unix.
#[cfg(not(unix))]
pub fn remove_temps_on_signal() {}

/// `kpack inspect FILE | head -1`: when the reader of stdout goes away,
/// exit quietly, like other Unix tools, instead of panicking in `println!`.
/// Any other failure to print (`> /dev/full`) is an error, exit 2 with a
/// message on stderr (when stderr itself still takes one), not a panic.
pub fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(code) = print_failure_exit(msg) {
            if code != 0 {
                use std::io::Write;
                let cause = msg.split_once(": ").map_or(msg, |(_, c)| c);
                let stream = if msg.starts_with("failed printing to stdout") {
                    "stdout"
                } else {
                    "stderr"
                };
                // Not eprintln!: it would panic again when stderr is the one failing.
                let _ = writeln!(
                    std::io::stderr(),
                    "error: cannot write to {stream}\n  caused by: {cause}"
                );
            }
            std::process::exit(code);
        }
        default(info)
    }));
}

/// The exit status for the panic message of a failed `print!`/`eprint!`:
/// 0 when the reader went away (EPIPE), 2 for any other write error, and
/// `None` for a panic that is not about printing.
fn print_failure_exit(msg: &str) -> Option<i32> {
    if !(msg.starts_with("failed printing to stdout")
        || msg.starts_with("failed printing to stderr"))
    {
        return None;
    }
    let broken_pipe = msg.contains("Broken pipe") || msg.contains("os error 32");
    Some(if broken_pipe { 0 } else { 2 })
}

/// Whether an output path is `-`, which means stdout where one stream is
/// written (and is refused elsewhere, never a file named `-`).
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuse `-o -` for an output that is not a single stream.
pub fn not_stdout(path: &Path, what: &str) -> anyhow::Result<()> {
    if is_stdout(path) {
        anyhow::bail!(
            "-o -: {what} writes more than one stream, so it cannot go to stdout; name a path (./- for a file named -)"
        );
    }
    Ok(())
}

/// Copy `bytes` to stdout as the command's one output stream.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        // The reader went away (`| head -c`): quiet, as for printed output.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.context("cannot write to stdout"),
    }
}
