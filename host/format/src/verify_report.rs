//! What `kpack archive verify` reports: per archive, whether [`verify`]
//! found problems and which ([`VerifiedArchive`]), as a `--json` document
//! ([`Verification`]) and as text lines ([`VerifiedArchive::text`]).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::Result;
use crate::verify::verify;

/// One archive checked: its path and its problems, as text.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedArchive {
    /// The archive's path, as given.
    pub path: String,
    /// Whether no problem was found.
    pub ok: bool,
    /// The problems, in [`verify`]'s order.
    pub findings: Vec<String>,
}

impl VerifiedArchive {
    /// Check `path` with [`verify`]; only a file that cannot be read is an
    /// error (an archive that does not open is a finding).
    pub fn check(path: &Path) -> Result<VerifiedArchive> {
        let findings: Vec<String> = verify(path)?.iter().map(ToString::to_string).collect();
        Ok(VerifiedArchive {
            path: path.display().to_string(),
            ok: findings.is_empty(),
            findings,
        })
    }

    /// `ok\tPATH` for a fine archive, else `FAIL\tPATH\tFINDING` per
    /// finding; one line each.
    pub fn text(&self) -> String {
        if self.ok {
            return format!("ok\t{}\n", self.path);
        }
        let mut out = String::new();
        for f in &self.findings {
            let _ = writeln!(out, "FAIL\t{}\t{f}", self.path);
        }
        out
    }
}

/// The `archive verify --json` document: every archive checked, in order.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verification {
    /// The archives.
    pub archives: Vec<VerifiedArchive>,
}

impl Verification {
    /// Whether every archive is fine.
    pub fn ok(&self) -> bool {
        self.archives.iter().all(|a| a.ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_that_does_not_open_fails_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.kpack");
        std::fs::write(&path, b"not an archive").unwrap();
        let v = VerifiedArchive::check(&path).unwrap();
        assert!(!v.ok);
        assert_eq!(v.findings.len(), 1);
        let text = v.text();
        assert!(
            text.starts_with(&format!("FAIL\t{}\t", path.display())),
            "{text}"
        );
        let doc = Verification { archives: vec![v] };
        assert!(!doc.ok());
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["archives"][0]["ok"], false);
    }

    #[test]
    fn missing_archive_is_an_error_not_a_finding() {
        let dir = tempfile::tempdir().unwrap();
        assert!(VerifiedArchive::check(&dir.path().join("none.kpack")).is_err());
    }

    #[test]
    fn fine_archive_is_one_ok_line() {
        let v = VerifiedArchive {
            path: "a.kpack".into(),
            ok: true,
            findings: vec![],
        };
        assert_eq!(v.text(), "ok\ta.kpack\n");
        assert!(Verification { archives: vec![v] }.ok());
    }
}
