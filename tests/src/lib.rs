//! Shared helpers for kpack's integration tests: where the fixtures are, and
//! how to run the `kpack` binary built from this workspace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test support code")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Root of the workspace.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A file under `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    let p = workspace_root().join("tests/fixtures").join(rel);
    assert!(p.exists(), "fixture {} is missing", p.display());
    p
}

/// The cargo target directory these tests were built into.
pub fn target_dir() -> PathBuf {
    // .../target/debug/deps/it-HASH -> .../target
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().parent().unwrap().to_path_buf()
}

/// Path of the `kpack` binary, built once per test process.
///
/// `KPACK_BIN` overrides; otherwise `cargo build -p kpack-cli` runs into the
/// same target directory (cargo releases its lock before running tests).
pub fn kpack_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("KPACK_BIN") {
            return p.into();
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .current_dir(workspace_root())
            .args(["build", "-q", "-p", "kpack-cli", "--bin", "kpack"])
            .env("CARGO_TARGET_DIR", target_dir())
            .output()
            .expect("run cargo build");
        assert!(out.status.success(), "building kpack failed:\n{}", String::from_utf8_lossy(&out.stderr));
        target_dir().join("debug/kpack")
    })
}

/// Run `kpack ARGS...` and return its output.
pub fn kpack<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(kpack_bin()).args(args).output().expect("run kpack")
}

/// SHA-256 of bytes, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// stdout of a run as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr of a run as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Directory holding the built handler plugins (`kpack_handler_*.wasm`):
/// `$KPACK_PLUGIN_DIR` (set by scripts/test.sh), else
/// scripts/build-plugins.sh is run once into this target directory.
pub fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("KPACK_PLUGIN_DIR") {
            return d.into();
        }
        let out = Command::new(workspace_root().join("scripts/build-plugins.sh"))
            .env("CARGO_TARGET_DIR", target_dir())
            .output()
            .expect("run scripts/build-plugins.sh");
        assert!(out.status.success(), "building plugins failed:\n{}", String::from_utf8_lossy(&out.stderr));
        target_dir().join("wasm32-wasip2/plugin")
    })
}

/// Every entry below `root`, sorted: relative path → `dir`,
/// `link:<target>` or `file:<mode>:<sha256>`. Two trees are byte-identical
/// (contents, symlinks, modes) when their digests are equal.
pub fn tree_digest(root: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let v = if meta.file_type().is_symlink() {
                format!("link:{}", std::fs::read_link(&p).unwrap().display())
            } else if meta.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!("file:{:o}:{}", meta.permissions().mode() & 0o7777, sha256_hex(&std::fs::read(&p).unwrap()))
            };
            out.insert(rel, v);
        }
    }
    out
}
