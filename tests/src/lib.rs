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
