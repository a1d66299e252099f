//! Compiled-component cache: JIT-compiling a handler costs 50–1000 ms,
//! loading a compiled one well under a millisecond.
//!
//! Key: sha256 of (the `.wasm`'s sha256, wasmtime's version, the engine's
//! precompile-compatibility hash), so a different wasmtime or engine
//! configuration never sees another's artifacts. Files are written to a
//! temporary name and renamed, so readers never see half a file; failures
//! to write are ignored (the cache is an optimisation). The directory is
//! `$XDG_CACHE_HOME/kpack` or `~/.cache/kpack`.
//!
//! A compiled component is native code that wasmtime maps and runs without
//! checking it, so the cache trusts a file only when (1) the cache
//! directory, its `components/` directory and the file are owned by the
//! current user and not writable by group or others, and (2) the file
//! starts with an HMAC-SHA256 of the rest under a per-user random key kept
//! in `cache-key` (mode 0600, same checks). A file that fails (2) is
//! recompiled and replaced; a directory that fails (1) is not used at all,
//! with a warning on stderr. The bytes checked are the bytes loaded (read
//! into memory once, never mapped from the file).

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

fn key(engine: &Engine, wasm_sha256: &[u8; 32]) -> String {
    let mut h = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let mut d = Sha256::new();
    d.update(wasm_sha256);
    d.update(b"wasmtime-48.0.8");
    d.update(h.finish().to_le_bytes());
    hex::encode(d.finalize())
}

/// The MAC at the start of every cache file.
const MAC_LEN: usize = 32;

type Mac = hmac::Hmac<Sha256>;

/// Why a cache path is not trusted, or what failed while checking it.
#[derive(Debug, thiserror::Error)]
enum Untrusted {
    /// The path is not as the cache needs it (owner, mode, type).
    #[error("{}: {why}", path.display())]
    Refused {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Checking or creating the path failed.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// `path` is refused because of `why`.
fn untrusted(path: &Path, why: impl Into<String>) -> Untrusted {
    Untrusted::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Checking or creating `path` failed with `source`.
fn io_failed(path: &Path) -> impl FnOnce(std::io::Error) -> Untrusted + '_ {
    move |source| Untrusted::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `e` and its causes on one line, `: `-separated, for a warning.
fn one_line(e: &dyn std::error::Error) -> String {
    std::iter::successors(Some(e), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// `meta` (of `path`) is owned by the current user and not writable by
/// group or others.
#[cfg(unix)]
fn check_owner(path: &Path, meta: &std::fs::Metadata) -> std::result::Result<(), Untrusted> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(untrusted(
            path,
            format!(
                "owned by uid {}, not by the current user ({me})",
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(
            path,
            format!(
                "writable by group or others (mode {:o})",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner(_path: &Path, _meta: &std::fs::Metadata) -> std::result::Result<(), Untrusted> {
    Ok(())
}

/// A private directory: created 0700 if missing, else checked.
fn private_dir(dir: &Path) -> std::result::Result<(), Untrusted> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).map_err(io_failed(dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io_failed(dir))?;
    if !meta.is_dir() {
        return Err(untrusted(dir, "not a directory"));
    }
    check_owner(dir, &meta)
}

/// The cache's HMAC key, `dir/cache-key`: created with fresh random bytes
/// and mode 0600 if missing; otherwise it must be a regular file owned by
/// the current user that nobody else can read or write.
fn cache_key(dir: &Path) -> std::result::Result<Vec<u8>, Untrusted> {
    use std::io::Read;
    let path = dir.join("cache-key");
    if std::fs::symlink_metadata(&path).is_err() {
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(io_failed(Path::new("/dev/urandom")))?;
        // A private temp file (0600); persist_noclobber keeps a key
        // another process wrote first.
        let mut tmp = kpack_fsafe::private_temp_file_in(dir, "cache").map_err(io_failed(dir))?;
        tmp.write_all(&key).map_err(io_failed(dir))?;
        let _ = tmp.persist_noclobber(&path);
    }
    let mut f = std::fs::File::open(&path).map_err(io_failed(&path))?;
    let meta = f.metadata().map_err(io_failed(&path))?;
    let link = std::fs::symlink_metadata(&path).map_err(io_failed(&path))?;
    if !meta.is_file() || !link.is_file() {
        return Err(untrusted(&path, "not a regular file"));
    }
    check_owner(&path, &meta)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.mode() & 0o077 != 0 {
            return Err(untrusted(
                &path,
                format!(
                    "readable by group or others (mode {:o})",
                    meta.mode() & 0o7777
                ),
            ));
        }
    }
    let mut key = Vec::new();
    f.read_to_end(&mut key).map_err(io_failed(&path))?;
    if key.len() != 32 {
        return Err(untrusted(&path, "not a 32-byte key"));
    }
    Ok(key)
}

/// The trusted components directory of cache `dir` and its key, or why
/// the cache may not be used.
fn open_cache(dir: &Path) -> std::result::Result<(PathBuf, Vec<u8>), Untrusted> {
    private_dir(dir)?;
    let key = cache_key(dir)?;
    let components = dir.join("components");
    private_dir(&components)?;
    Ok((components, key))
}

fn mac(key: &[u8]) -> Mac {
    // HMAC takes keys of any length; 32 bytes is checked above.
    <Mac as hmac::Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

/// The compiled bytes of cache file `path` if it is ours and its MAC is
/// right; `None` otherwise (missing, foreign, tampered).
fn read_verified(path: &Path, key: &[u8]) -> Option<Vec<u8>> {
    use hmac::Mac as _;
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || check_owner(path, &meta).is_err() {
        return None;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    if bytes.len() < MAC_LEN {
        return None;
    }
    let code = bytes.split_off(MAC_LEN);
    let mut m = mac(key);
    m.update(&code);
    m.verify_slice(&bytes).ok()?;
    Some(code)
}

/// Load `wasm` as a component, through the cache in `dir` when given; a
/// cache that cannot be used is said in `warnings` (the caller reports it).
pub(crate) fn load(
    engine: &Engine,
    wasm: &[u8],
    wasm_sha256: &[u8; 32],
    dir: Option<&Path>,
    origin: &str,
    warnings: &mut Vec<String>,
) -> Result<(Component, Source)> {
    let cache = dir.and_then(|d| match open_cache(d) {
        Ok(c) => Some(c),
        Err(why) => {
            warnings.push(format!(
                "compiled-handler cache not used: {}",
                one_line(&why)
            ));
            None
        }
    });
    let path = cache
        .as_ref()
        .map(|(c, _)| c.join(format!("{}.cwasm", key(engine, wasm_sha256))));
    if let (Some(path), Some((_, k))) = (&path, &cache)
        && let Some(code) = read_verified(path, k)
    {
        // A stale file fails to deserialize: fall through and recompile.
        if let Ok(c) = trusted::deserialize(engine, &code) {
            return Ok((c, Source::Cache));
        }
    }
    // wasmtime's own message for a file that is no WebAssembly at all
    // prints both magic byte arrays over many lines; say it in one.
    if !wasm.starts_with(b"\0asm") {
        let head: Vec<String> = wasm.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "{origin}: not a WebAssembly component (it starts with {}, not the magic 00 61 73 6d, \"\\0asm\")",
                if head.is_empty() {
                    "nothing".to_string()
                } else {
                    head.join(" ")
                }
            ),
        ));
    }
    let component = Component::new(engine, wasm).map_err(|e| {
        Error::new(
            ErrorKind::Invalid,
            format!("{origin}: not a valid WebAssembly component: {e:#}"),
        )
    })?;
    if let (Some(path), Some((_, k))) = (&path, &cache) {
        let _ = store(&component, path, k);
    }
    Ok((component, Source::Compiled))
}

fn store(component: &Component, path: &Path, key: &[u8]) -> std::io::Result<()> {
    use hmac::Mac as _;
    let bytes = component
        .serialize()
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    let mut m = mac(key);
    m.update(&bytes);
    // Staged files are created 0600 and keep that mode (no `mode_from`).
    let mut staged = kpack_fsafe::Staged::private(path, "cache").map_err(|e| e.source)?;
    staged.file_mut().write_all(&m.finalize().into_bytes())?;
    staged.file_mut().write_all(&bytes)?;
    staged.commit(None).map_err(|e| e.source)
}

#[allow(
    unsafe_code,
    reason = "wasmtime offers no safe way to load a compiled component"
)]
mod trusted {
    use wasmtime::Engine;
    use wasmtime::component::Component;

    /// Load a compiled component whose bytes [`super::read_verified`]
    /// checked.
    pub(super) fn deserialize(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize` trusts `code` as native code. It reaches
        // here only from `read_verified`: the file is owned by this user,
        // not writable by others, in a directory with the same checks, and
        // carries an HMAC-SHA256 under this user's 0600 key that only
        // `store` (this module's writer) computes, so these are bytes this
        // user's kpack compiled. They are checked in memory and loaded from
        // the same buffer (no re-read of the file). wasmtime additionally
        // checks the header's engine and version.
        unsafe { Component::deserialize(engine, code) }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]
mod tests {
    use super::*;

    /// The empty component: magic, component-model version, layer 1.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";

    fn load_empty(dir: &Path) -> Source {
        let engine = crate::sandbox::engine().unwrap();
        let sha: [u8; 32] = Sha256::digest(EMPTY).into();
        load(&engine, EMPTY, &sha, Some(dir), "empty", &mut Vec::new())
            .unwrap()
            .1
    }

    fn cwasm(dir: &Path) -> PathBuf {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("components"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.pop().unwrap()
    }

    #[test]
    fn a_blob_that_is_no_webassembly_is_named_in_one_line() {
        let engine = crate::sandbox::engine().unwrap();
        for (blob, start) in [(&b"ELF\x7f..."[..], "45 4c 46 7f"), (&b""[..], "nothing")] {
            let sha: [u8; 32] = Sha256::digest(blob).into();
            let e = load(&engine, blob, &sha, None, "x.wasm", &mut Vec::new())
                .err()
                .unwrap()
                .to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(
                e.contains(&format!(
                    "x.wasm: not a WebAssembly component (it starts with {start},"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_cache_dir_that_cannot_be_made_keeps_the_os_error_as_its_source() {
        use std::error::Error as _;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let dir = file.join("kpack");
        let e = open_cache(&dir).unwrap_err();
        assert_eq!(e.to_string(), dir.display().to_string());
        let os = e.source().expect("the I/O error is the source");
        assert!(os.downcast_ref::<std::io::Error>().is_some(), "{os}");
        assert_eq!(one_line(&e), format!("{}: {os}", dir.display()));
        let mut warnings = Vec::new();
        let engine = crate::sandbox::engine().unwrap();
        let sha: [u8; 32] = Sha256::digest(EMPTY).into();
        load(&engine, EMPTY, &sha, Some(&dir), "empty", &mut warnings).unwrap();
        assert_eq!(
            warnings,
            [format!(
                "compiled-handler cache not used: {}: {os}",
                dir.display()
            )]
        );
    }

    #[test]
    fn a_tampered_artifact_is_recompiled_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kpack");
        assert_eq!(load_empty(&dir), Source::Compiled);
        assert_eq!(load_empty(&dir), Source::Cache);
        // Overwrite code bytes (after the MAC) with int3.
        let file = cwasm(&dir);
        let mut bytes = std::fs::read(&file).unwrap();
        let n = bytes.len();
        for b in &mut bytes[MAC_LEN + 64..n.min(MAC_LEN + 4096)] {
            *b = 0xcc;
        }
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(load_empty(&dir), Source::Compiled);
        // Replaced by a good one.
        assert_eq!(load_empty(&dir), Source::Cache);
        // A different key (another user's, or a lost one) also recompiles.
        std::fs::remove_file(dir.join("cache-key")).unwrap();
        assert_eq!(load_empty(&dir), Source::Compiled);
        assert_eq!(load_empty(&dir), Source::Cache);
    }

    #[cfg(unix)]
    #[test]
    fn a_world_writable_cache_dir_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kpack");
        assert_eq!(load_empty(&dir), Source::Compiled);
        assert_eq!(load_empty(&dir), Source::Cache);
        for d in [dir.clone(), dir.join("components")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
            assert!(
                open_cache(&dir)
                    .unwrap_err()
                    .to_string()
                    .contains("writable by group or others")
            );
            assert_eq!(load_empty(&dir), Source::Compiled);
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        // A key others can read is no secret.
        let key = dir.join("cache-key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            open_cache(&dir)
                .unwrap_err()
                .to_string()
                .contains("readable by group or others")
        );
        assert_eq!(load_empty(&dir), Source::Compiled);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(load_empty(&dir), Source::Cache);
    }
}
