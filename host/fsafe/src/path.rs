//! Paths: which relative paths stay inside their root, and lexical path
//! arithmetic.

use std::path::{Component, Path, PathBuf};

use crate::{Error, Result};

/// `path` is a plain relative path that stays inside whatever root it is
/// joined to, on every platform: not empty, `/`-separated, not absolute, no
/// drive prefix (`C:`), no backslash or NUL, and every component a name
/// (not empty, `.` or `..`).
pub fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains(['\\', '\0'])
        && !path.starts_with('/')
        && !has_drive(path)
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// `name` is one plain path component: [`is_plain_relative`] without `/`.
pub fn is_plain_name(name: &str) -> bool {
    !name.contains('/') && is_plain_relative(name)
}

/// `C:` (a Windows drive) at the start of `path`.
fn has_drive(path: &str) -> bool {
    let b = path.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// `p` with `.` dropped and `..` folded lexically (nothing is read).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `to` relative to `from` (both made absolute against the current
/// directory and [`normalize`]d).
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| {
        if p.is_absolute() {
            normalize(p)
        } else {
            normalize(&std::env::current_dir().unwrap_or_default().join(p))
        }
    };
    let (from, to) = (abs(from), abs(to));
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for c in to.components().skip(common) {
        rel.push(c);
    }
    rel
}

/// `path` made absolute with every symlink of its existing part resolved
/// (a not-yet-existing tail is appended as written, `..` folded).
pub fn resolved(path: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(path).map_err(|source| Error::Absolute {
        path: path.to_path_buf(),
        source,
    })?;
    let lexical = normalize(&abs);
    let mut existing = lexical.as_path();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(tail.iter().rev());
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                existing = parent;
            }
            _ => return Ok(lexical),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_paths() {
        for ok in [
            "a",
            "lib/.kpack",
            "lib/.kpack/axpy_gfx90a:xnack+.kpack",
            "gfx90a:xnack+",
            "a..b/c",
        ] {
            assert!(is_plain_relative(ok), "{ok}");
        }
        for bad in ["", "/abs", "../x", "a/../../x", "a/..", ".."] {
            assert!(!is_plain_relative(bad), "{bad}");
        }
    }

    /// The cases where the copies this replaces disagreed: each was let
    /// through by one of them, and each could leave its root somewhere.
    #[test]
    fn the_strictest_rule_of_every_former_copy() {
        for bad in [
            // `Path::components` drops these, so component checks passed them.
            "a/./b",
            "./a",
            "a//b",
            "a/",
            // a prefix line of `.` or `a/.`, once accepted in manifests
            ".",
            "a/.",
            // `..\x` on Windows; once accepted in archive keys
            "..\\x",
            "a\\b",
            // absolute or drive-relative on Windows
            "C:/x",
            "c:x",
            // a NUL ends the path for the operating system
            "a\0/../../x",
        ] {
            assert!(!is_plain_relative(bad), "{bad:?}");
        }
    }

    #[test]
    fn plain_names_are_one_component() {
        assert!(is_plain_name("libfoo"));
        assert!(is_plain_name("gfx90a:xnack+"));
        for bad in ["", ".", "..", "../x", "a/b", "/x", "a\\b", "C:"] {
            assert!(!is_plain_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn relative_paths_between_directories() {
        assert_eq!(
            relative_path(Path::new("/a/b/lib"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from(".kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b/bin"), Path::new("/a/b/lib/.kpack")),
            PathBuf::from("../lib/.kpack")
        );
        assert_eq!(
            relative_path(Path::new("/a/b"), Path::new("/a/b")),
            PathBuf::new()
        );
        assert_eq!(
            relative_path(Path::new("/a/./b/../c"), Path::new("/a/c/d")),
            PathBuf::from("d")
        );
    }

    #[test]
    fn normalize_folds_dot_and_dot_dot() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("a/b/../../..")), PathBuf::new());
    }
}
