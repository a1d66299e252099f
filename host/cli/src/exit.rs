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
//!
//! Under `--json` the same error is also printed on stdout, as the one JSON
//! document of the run, so a script reading stdout always gets JSON:
//!
//! ```text
//! {"schema_version":1,"error":{"message":"…","causes":["…"],"exit_code":2}}
//! ```

use std::process::ExitCode;

/// What a subcommand reports when it does not succeed.
#[derive(Debug)]
pub enum CliError {
    /// The command ran and checked something, and found problems (exit 1).
    /// The findings were already printed.
    Findings,
    /// The command could not do its job (exit 2).
    Failed(anyhow::Error),
    /// The command could not do all of its job and has already reported
    /// each failure (on stderr, and in its `--json` document): exit 2.
    Reported,
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
        Err(CliError::Reported) => ExitCode::from(2),
        Err(CliError::Failed(e)) => {
            eprint!("{}", report(&e));
            if crate::ui::json() {
                println!("{}", json_report(&e, 2));
            }
            ExitCode::from(2)
        }
    }
}

/// The error of a command that already printed its `--json` document
/// (which lists the failures) and still fails: the message goes to stderr
/// only, so stdout holds one JSON document.
pub fn failed_after_document(e: anyhow::Error) -> CliError {
    if crate::ui::json() {
        eprint!("{}", report(&e));
        CliError::Reported
    } else {
        CliError::Failed(e)
    }
}

/// The JSON document [`finish`] prints on stdout under `--json` for `e`.
pub fn json_report(e: &anyhow::Error, exit_code: u8) -> String {
    /// The document: `{"error": {...}}`.
    #[derive(serde::Serialize)]
    struct Report {
        error: Failure,
    }
    /// The error, its causes and the exit code.
    #[derive(serde::Serialize)]
    struct Failure {
        message: String,
        causes: Vec<String>,
        exit_code: u8,
    }
    let error = Failure {
        message: e.to_string(),
        causes: e.chain().skip(1).map(|c| c.to_string()).collect(),
        exit_code,
    };
    // Strings and a number: serializing cannot fail.
    crate::json::document(&Report { error })
        .unwrap_or_default()
        .to_string()
}

/// The text [`finish`] prints for `e`: `error: <message>` and one
/// `  caused by: <cause>` line per error in its source chain.
pub fn report(e: &anyhow::Error) -> String {
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

    #[test]
    fn json_report_has_message_causes_and_exit_code() {
        let os = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(os).context("libx.so: cannot open");
        let v: serde_json::Value = serde_json::from_str(&json_report(&e, 2)).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["error"]["message"], "libx.so: cannot open");
        assert_eq!(v["error"]["causes"].as_array().unwrap().len(), 1);
        assert_eq!(v["error"]["exit_code"], 2);
    }
}
