//! Compiled-component cache: JIT-compiling a handler costs 50–1000 ms,
//! loading a compiled one well under a millisecond.
//!
//! Key: sha256 of (the `.wasm`'s sha256, wasmtime's version, the engine's
//! precompile-compatibility hash), so a different wasmtime or engine
//! configuration never sees another's artifacts. Files are written to a
//! temporary name and renamed, so readers never see half a file; failures
//! to write are ignored (the cache is an optimisation). The directory is
//! `$XDG_CACHE_HOME/kpack` or `~/.cache/kpack`.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::{Error, ErrorKind, Result};

/// Where compiled components come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Cache,
    Compiled,
}

/// The default cache directory, if a home can be found.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .map(|d| d.join("kpack"))
}

fn key(engine: &Engine, wasm_sha256: &[u8; 32]) -> String {
    let mut h = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let mut d = Sha256::new();
    d.update(wasm_sha256);
    d.update(b"wasmtime-48.0.8");
    d.update(h.finish().to_le_bytes());
    hex::encode(d.finalize())
}

/// Load `wasm` as a component, through the cache in `dir` when given.
pub(crate) fn load(
    engine: &Engine,
    wasm: &[u8],
    wasm_sha256: &[u8; 32],
    dir: Option<&Path>,
    origin: &str,
) -> Result<(Component, Source)> {
    let path = dir.map(|d| {
        d.join("components")
            .join(format!("{}.cwasm", key(engine, wasm_sha256)))
    });
    if let Some(path) = &path
        && path.is_file()
    {
        // A stale or foreign file fails to deserialize: fall through and recompile.
        if let Ok(c) = trusted::deserialize_file(engine, path) {
            return Ok((c, Source::Cache));
        }
    }
    let component = Component::new(engine, wasm).map_err(|e| {
        Error::new(
            ErrorKind::Invalid,
            format!("{origin}: not a valid WebAssembly component: {e:#}"),
        )
    })?;
    if let Some(path) = &path {
        let _ = store(&component, path);
    }
    Ok((component, Source::Compiled))
}

fn store(component: &Component, path: &Path) -> std::io::Result<()> {
    let bytes = component
        .serialize()
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache path has no parent"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[allow(
    unsafe_code,
    reason = "wasmtime offers no safe way to load a compiled component"
)]
mod trusted {
    use std::path::Path;

    use wasmtime::Engine;
    use wasmtime::component::Component;

    /// Load a compiled component written by [`super::store`].
    pub(super) fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize_file` maps native code and trusts it. The only
        // files read here are ones this module wrote itself (`store`), into
        // the user's own cache directory, under a name that hashes the wasm
        // and the engine configuration; wasmtime additionally checks the
        // header's engine and version and rejects mismatches with an error.
        // kpack never loads a `.cwasm` from a registry or a user argument.
        unsafe { Component::deserialize_file(engine, path) }
    }
}
