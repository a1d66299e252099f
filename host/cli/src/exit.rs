//! Exit codes and the error type every subcommand returns.
//!
//! # How an error is printed
//!
//! Library errors follow thiserror's convention: an error's message says
//! what failed and where (file, offset, target, entry) and does not repeat
//! its cause; the cause is `source()`. The CLI is the one place that prints
//! the whole chain, on stderr, the top message first and each cause on its
//! own line:
//!
//! ```text
//! error: /nonexistent: cannot open archive
//!   caused by: No such file or directory (os error 2)
//! ```
//!
//! so every cause appears exactly once. The exit status is 2 (see
//! [`finish`]).

use std::process::ExitCode;

/// What a subcommand reports when it does not succeed.
#[derive(Debug)]
pub enum CliError {
    /// The command ran and checked something, and found problems (exit 1).
    /// The findings were already printed.
    Findings,
    /// The command could not do its job (exit 2).
    Failed(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError::Failed(e.into())
    }
}

/// Result of a subcommand.
pub type CliResult = Result<(), CliError>;

/// Turn a subcommand's result into the process exit code, printing errors.
pub fn finish(result: CliResult) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Findings) => ExitCode::from(1),
        Err(CliError::Failed(e)) => {
            eprint!("{}", report(&e));
            ExitCode::from(2)
        }
    }
}

/// The text [`finish`] prints for `e`: `error: <message>` and one
/// `  caused by: <cause>` line per error in its source chain.
fn report(e: &anyhow::Error) -> String {
    let mut out = format!("error: {e}\n");
    for cause in e.chain().skip(1) {
        out.push_str(&format!("  caused by: {cause}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_prints_each_cause_once_on_its_own_line() {
        let os = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(os).context("libx.so: cannot open");
        let text = report(&e);
        assert_eq!(
            text,
            format!(
                "error: libx.so: cannot open\n  caused by: {}\n",
                std::io::Error::from(std::io::ErrorKind::NotFound)
            )
        );
    }
}
