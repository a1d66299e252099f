//! The text form of [`VerifyReport`]: its findings and summary line.

use std::fmt;

use super::{Severity, VerifyReport};

impl fmt::Display for VerifyReport {
    /// One line per finding, then the summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for x in &self.findings {
            let sev = match x.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            writeln!(f, "{sev}: [{}] {}: {}", x.check, x.path, x.message)?;
        }
        // Said only when a generic archive served someone, so reports of
        // trees without generic targets read as before.
        let generic = match self.generic_served {
            0 => String::new(),
            n => format!(" ({n} more through a generic target)"),
        };
        writeln!(
            f,
            "{} artifacts, {} binaries with markers, {} archives, {} lookups resolved{generic}, {} errors",
            self.artifacts.len(),
            self.binaries,
            self.archives,
            self.resolved,
            self.errors()
        )
    }
}
