//! What the host reports about a loaded handler: [`HandlerMeta`] and its
//! [`Origin`].

use std::fmt;
use std::path::PathBuf;

use semver::Version;

use crate::search::{DirKind, SearchDir};

/// Where a loaded handler came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Given as a file.
    File(PathBuf),
    /// Found by name in a search directory.
    Dir(SearchDir, PathBuf),
    /// Resolved from a registry (its location).
    Registry(String),
    /// Carried inside the executable ([`LoadOptions::embedded`](crate::LoadOptions::embedded)):
    /// the fallback after every search directory.
    Embedded,
}

/// A handler component compiled into the executable, asked for by `name`
/// when no search directory has one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedHandler {
    /// The name it is asked for by (`rocblas`).
    pub name: &'static str,
    /// The component's bytes.
    pub wasm: &'static [u8],
}

impl fmt::Debug for EmbeddedHandler {
    // The bytes are megabytes of wasm: show their size only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedHandler")
            .field("name", &self.name)
            .field("wasm_len", &self.wasm.len())
            .finish()
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "file {}", p.display()),
            Origin::Dir(d, p) => {
                // The user-facing names of the flag and variable.
                let how = match d.kind {
                    DirKind::Flag => "--plugin-dir",
                    DirKind::Env => "KPACK_PLUGIN_DIR",
                    DirKind::Installed => "installed",
                    DirKind::Bundled => "bundled",
                };
                write!(f, "{how} {}", p.display())
            }
            Origin::Registry(r) => write!(f, "registry {r}"),
            Origin::Embedded => f.write_str("embedded"),
        }
    }
}

/// What a loaded handler is.
#[derive(Clone, Debug)]
pub struct HandlerMeta {
    /// Handler name (from the component's `info`).
    pub name: String,
    /// Handler version (from `info`).
    pub version: Version,
    /// The `kpack:handler` WIT version it was built against (from its export).
    pub wit: Version,
    /// Where it came from.
    pub origin: Origin,
    /// sha256 of the `.wasm`, lowercase hex.
    pub sha256: String,
    /// Leading bytes it wants per file (after the host's cap).
    pub prefix_bytes: u32,
    /// Its path hints (empty = every file).
    pub path_hints: Vec<String>,
    /// Whether the compiled component came from the cache.
    pub from_cache: bool,
}

impl HandlerMeta {
    /// `handler rocblas 0.1.0 (kpack:handler@1.1.0)`: how errors name a handler.
    pub fn label(&self) -> String {
        format!(
            "handler {} {} (kpack:handler@{})",
            self.name, self.version, self.wit
        )
    }

    /// Whether the handler may claim `path` (its path hints allow it).
    pub(crate) fn wants(&self, path: &str) -> bool {
        self.path_hints.is_empty() || self.path_hints.iter().any(|h| path.contains(h.as_str()))
    }
}
