//! Exit codes and the error type every subcommand returns.

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
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
