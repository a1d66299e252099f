//! Stamps `kpack --version` with the git commit and its date.
//!
//! Outside a git checkout (a crates.io or sdist build, or `git` missing) it
//! sets nothing and the version is the crate's alone. The checkout must
//! track this file: an sdist unpacked inside some other repository must not
//! borrow that repository's commit.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KPACK_GIT_DESCRIBE");
    let dir = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    if git(&dir, &["ls-files", "--error-unmatch", "build.rs"]).is_none() {
        return;
    }
    // Rebuild when the commit moves: HEAD itself, the branch it names, and
    // packed-refs (where the branch may live instead).
    for path in [
        Some("HEAD".to_string()),
        git(&dir, &["symbolic-ref", "-q", "HEAD"]),
        Some("packed-refs".to_string()),
    ]
    .into_iter()
    .flatten()
    {
        if let Some(p) = git(
            &dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &path],
        ) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let (Some(commit), Some(date)) = (
        git(&dir, &["rev-parse", "--short=12", "HEAD"]),
        git(&dir, &["log", "-1", "--format=%cs", "HEAD"]),
    ) else {
        return;
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=KPACK_GIT_DESCRIBE={version} ({commit} {date})");
}
