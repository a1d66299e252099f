//! `kpack verify-elf`'s checks of one host binary: the format's own
//! structural checks (segment coverage, program headers, marker, wrappers,
//! relocations into removed bytes for ELF; `kpack-pe`'s for PE images),
//! plus what `readelf -lSW` complains of, when it is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_format::{Finding, Severity};
use object::ReadCache;
use serde::Serialize;

use crate::host::Error;
use crate::kind::FileKind;

/// How [`verify_file`] checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyOptions {
    /// The file is an output of `kpack prune`: wrappers stay HIPF and must
    /// point into `.hip_fatbin`'s file bytes; no marker.
    pub pruned: bool,
    /// Also run `readelf -lSW` and report its complaints (ELF only).
    pub readelf: bool,
}

/// One file's findings.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The file.
    pub path: PathBuf,
    /// What its checks found.
    pub findings: Vec<Finding>,
}

impl Checked {
    /// No finding is an error.
    pub fn ok(&self) -> bool {
        !self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// [`Checked`] as `verify-elf --json` shows it: the messages of errors
/// apart from those of warnings.
#[derive(Serialize)]
struct CheckedDoc<'a> {
    path: &'a Path,
    ok: bool,
    findings: Vec<&'a str>,
    warnings: Vec<&'a str>,
}

impl Serialize for Checked {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let messages = |severity: Severity| -> Vec<&str> {
            self.findings
                .iter()
                .filter(|f| f.severity == severity)
                .map(|f| f.message.as_str())
                .collect()
        };
        CheckedDoc {
            path: &self.path,
            ok: self.ok(),
            findings: messages(Severity::Error),
            warnings: messages(Severity::Warning),
        }
        .serialize(s)
    }
}

impl std::fmt::Display for Checked {
    /// `PATH: ok` when no finding is an error, then one line per finding.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.path.display();
        if self.ok() {
            writeln!(f, "{p}: ok")?;
        }
        for finding in &self.findings {
            match finding.severity {
                Severity::Error => writeln!(f, "{p}: {finding}")?,
                Severity::Warning => writeln!(f, "{p}: warning: {finding}")?,
            }
        }
        Ok(())
    }
}

/// Check the host binary at `path`: a PE image (told by magic) with
/// `kpack-pe`'s checks, anything else with `kpack-elf`'s.
pub fn verify_file(path: &Path, options: VerifyOptions) -> Result<Checked, Error> {
    let read_error = |e| kpack_fsafe::IoError::new(path, "cannot read", e);
    let findings = if FileKind::of_path(path).map_err(read_error)? == FileKind::Pe {
        let bytes = std::fs::read(path).map_err(read_error)?;
        kpack_pe::verify_image(&bytes)
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| kpack_fsafe::IoError::new(path, "cannot open", e))?;
        let cache = ReadCache::new(file);
        let verify = if options.pruned {
            kpack_elf::verify_pruned_image
        } else {
            kpack_elf::verify_image
        };
        let mut findings = verify(&cache).map_err(|e| e.in_file(path))?;
        if options.readelf {
            findings.extend(readelf_complaints(path));
        }
        findings
    };
    Ok(Checked {
        path: path.to_path_buf(),
        findings,
    })
}

/// Lines of `readelf -lSW` output that complain; nothing if readelf is absent.
fn readelf_complaints(path: &Path) -> Vec<Finding> {
    let Ok(out) = Command::new("readelf").arg("-lSW").arg(path).output() else {
        return Vec::new();
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    const COMPLAINTS: [&str; 7] = [
        "warning",
        "error",
        "corrupt",
        "invalid",
        "not covered",
        "truncated",
        "overlaps",
    ];
    text.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            COMPLAINTS.iter().any(|w| l.contains(w))
        })
        .map(|l| Finding::error("readelf", format!("readelf: {}", l.trim())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_alone_is_ok_and_errors_are_listed_apart() {
        let mut c = Checked {
            path: PathBuf::from("lib.so"),
            findings: vec![Finding {
                severity: Severity::Warning,
                ..Finding::error("wrapper", "HIPF once")
            }],
        };
        assert!(c.ok());
        assert_eq!(c.to_string(), "lib.so: ok\nlib.so: warning: HIPF once\n");
        c.findings.push(Finding::error("marker", "no marker"));
        assert!(!c.ok());
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["findings"], serde_json::json!(["no marker"]));
        assert_eq!(json["warnings"], serde_json::json!(["HIPF once"]));
        assert_eq!(json["ok"], serde_json::json!(false));
    }
}
