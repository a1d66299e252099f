//! What split needs from a database classifier: the [`Databases`] trait and
//! the values it passes across. Split owns them (as ripgrep's searcher owns
//! its `Matcher`) so that it does not depend on the WebAssembly runtime;
//! `kpack-plugin-host` implements the trait for its handlers.

use std::fmt;

/// Classifies database files (kernel libraries that are not fat binaries).
/// Implemented by `kpack_plugin_host::HandlerSet`; tests and other tools
/// may provide their own.
pub trait Databases: Sync {
    /// How many leading bytes of the file at `path` (relative to the prefix,
    /// `/`-separated) the classifier wants to see.
    fn prefix_bytes_for(&self, path: &str) -> usize;
    /// For each file, the claiming handler and its verdict, or `None`.
    fn classify(
        &self,
        files: &[FileInfo],
    ) -> std::result::Result<Vec<Option<Claim>>, ClassifyError>;
}

/// Why a [`Databases`] classifier failed: its own error, kept whole (split
/// reports it as the cause of its own).
pub type ClassifyError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One file to classify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Path relative to the install prefix, `/`-separated, no leading `/`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The file's first bytes: at least [`Databases::prefix_bytes_for`] of
    /// them when the file is that long (more is fine; fewer hides content).
    pub prefix: Vec<u8>,
}

impl FileInfo {
    /// A file with no content prefix.
    pub fn new(path: impl Into<String>, size: u64) -> Self {
        FileInfo {
            path: path.into(),
            size,
            prefix: Vec::new(),
        }
    }
}

/// A handler's verdict on a file it claims.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Classification {
    /// Needed on every GPU target.
    Generic,
    /// Needed only for this bundle key (`gfx942`, `gfx90a:xnack+`, `gfx11`).
    Arch(String),
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classification::Generic => f.write_str("generic"),
            Classification::Arch(k) => f.write_str(k),
        }
    }
}

/// Which handler claimed a file, and its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    /// Name of the claiming handler.
    pub handler: String,
    /// Its verdict.
    pub classification: Classification,
}

/// Database files counted per handler and per verdict (arch key or
/// `generic`), as the reports keep them.
pub type VerdictCounts =
    std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>;

/// Add the counts of `from` into `into`.
pub fn add_verdict_counts(into: &mut VerdictCounts, from: &VerdictCounts) {
    for (handler, verdicts) in from {
        let to = into.entry(handler.clone()).or_default();
        for (verdict, n) in verdicts {
            *to.entry(verdict.clone()).or_default() += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_counts_add_per_handler_and_verdict() {
        let one = |h: &str, v: &str, n: u64| -> VerdictCounts {
            [(h.to_owned(), [(v.to_owned(), n)].into())].into()
        };
        let mut total = one("rocblas", "gfx942", 2);
        add_verdict_counts(&mut total, &one("rocblas", "gfx942", 3));
        add_verdict_counts(&mut total, &one("rocblas", "generic", 1));
        add_verdict_counts(&mut total, &one("miopen", "gfx942", 4));
        assert_eq!(total["rocblas"]["gfx942"], 5);
        assert_eq!(total["rocblas"]["generic"], 1);
        assert_eq!(total["miopen"]["gfx942"], 4);
    }
}
