//! One problem a checker found, the one shape every checking command
//! reports: `kpack verify` (layouts, archives, markers), `kpack verify-elf`
//! (host-binary structure) and `kpack inspect` (code objects that disagree
//! with their bundle id). Typed problems of one format (an archive's
//! [`ArchiveProblem`](crate::ArchiveProblem), a marker's
//! [`MarkerProblem`](crate::MarkerProblem)) become findings when reported.

use std::fmt;

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something is broken (the command exits 1).
    Error,
    /// Worth a look (device code kept in an object file, …).
    Warning,
}

/// One problem found, naming the check that found it and the file.
///
/// `Display` is the message alone; the reports put the path and check
/// around it as their layout requires.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Which check (`manifest`, `generic`, `arch`, `archive`, `marker`,
    /// `elf`, `pe`, `readelf`, `code-object`).
    pub check: &'static str,
    /// The file or artifact concerned; empty when the checker saw bytes
    /// only (the caller names the file with [`Finding::in_file`]).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Finding {
    /// An error found by `check`, in bytes whose file the caller names.
    pub fn error(check: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Error,
            check,
            path: String::new(),
            message: message.into(),
        }
    }

    /// A warning found by `check`, in bytes whose file the caller names.
    pub fn warning(check: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(check, message)
        }
    }

    /// The same finding, about the file `path`.
    pub fn in_file(mut self, path: impl Into<String>) -> Finding {
        self.path = path.into();
        self
    }

    /// Serialize a list of findings as their messages alone: the shape of
    /// the reports whose findings are one file's sentences (`verify-elf`'s
    /// `findings`, `inspect`'s `warnings`).
    pub fn serialize_messages<S: serde::Serializer>(
        findings: &[Finding],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(findings.iter().map(|f| &f.message))
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_severity_lowercase_in_field_order() {
        let f = Finding::warning("arch", "kept").in_file("a/b");
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"severity":"warning","check":"arch","path":"a/b","message":"kept"}"#
        );
    }

    #[test]
    fn errors_sort_before_warnings() {
        let mut v = [Finding::warning("x", "w"), Finding::error("x", "e")];
        v.sort();
        assert_eq!(v[0].severity, Severity::Error);
    }

    #[test]
    fn message_list_serializes_as_strings() {
        #[derive(Serialize)]
        struct Doc {
            #[serde(serialize_with = "Finding::serialize_messages")]
            findings: Vec<Finding>,
        }
        let d = Doc {
            findings: vec![Finding::error("elf", "one"), Finding::error("elf", "two")],
        };
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            r#"{"findings":["one","two"]}"#
        );
    }
}
