//! Reading the tree: the repository's files, the non-test part of its Rust
//! sources, and the paragraphs of `ARCHITECTURE.md` the checks read.

use std::path::{Path, PathBuf};

/// The repository root (this crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// One file of the tree: its path relative to the root (`/`-separated)
/// and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Relative to the repository root, `/`-separated.
    pub path: String,
    /// The file's text (for Rust sources read by `production`, without
    /// test modules and comment lines).
    pub text: String,
}

impl SourceFile {
    /// A file made up by a test.
    pub fn new(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.to_string(),
            text: text.to_string(),
        }
    }
}

/// Directories no check looks into: build output and version control.
const NEVER: [&str; 3] = ["target", ".git", "node_modules"];

/// Every file under `root` whose name ends with one of `suffixes`, sorted,
/// build output skipped.
pub fn files(root: &Path, suffixes: &[&str]) -> Vec<SourceFile> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !NEVER.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if suffixes.iter().any(|s| name.ends_with(s)) {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.push(SourceFile {
                    path: relative(root, &path),
                    text,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Path components that mark test code: test directories, examples,
/// benches, fuzz targets, and the `tests/` crate with its guests.
const TEST_DIRS: [&str; 4] = ["tests", "examples", "benches", "fuzz"];

/// Whether a file belongs to the shipped code (not tests, examples,
/// benches, fuzz targets).
pub fn is_production(path: &str) -> bool {
    path.ends_with(".rs")
        && !path.ends_with("/tests.rs")
        && !path.ends_with("_tests.rs")
        && !path.split('/').any(|c| TEST_DIRS.contains(&c))
}

/// The shipped Rust code of the tree: files `is_production` keeps, each
/// without its `#[cfg(test)]` modules and comment lines.
pub fn production(root: &Path) -> Vec<SourceFile> {
    files(root, &[".rs"])
        .into_iter()
        .filter(|f| is_production(&f.path))
        .map(|f| SourceFile {
            text: code_only(&f.text),
            path: f.path,
        })
        .collect()
}

/// `text` without `#[cfg(test)] mod … { … }` blocks and without lines
/// that are comments (`//`, `///`, `//!`). Lines keep their numbers: a
/// dropped line becomes empty.
pub fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut depth, mut attr) = (0usize, 0isize);
    let mut pending_cfg_test = false;
    for line in text.lines() {
        let t = line.trim_start();
        if depth > 0 {
            depth = (depth + count(line, '{')).saturating_sub(count(line, '}'));
            out.push('\n');
            continue;
        }
        let in_attribute = attr > 0 || t.starts_with("#[");
        if in_attribute {
            attr += count(line, '[') as isize - count(line, ']') as isize;
        }
        if is_test_cfg(t) {
            pending_cfg_test = true;
        } else if pending_cfg_test && is_mod_line(t) {
            pending_cfg_test = false;
            depth = count(line, '{').saturating_sub(count(line, '}'));
            out.push('\n');
            continue;
        } else if !in_attribute && !t.is_empty() {
            pending_cfg_test = false;
        }
        if !t.starts_with("//") {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `#[cfg(test)]`, or a `cfg(all(test, …))` that also needs `test`.
fn is_test_cfg(t: &str) -> bool {
    t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test,")
}

fn is_mod_line(t: &str) -> bool {
    let t = t
        .strip_prefix("pub(crate) ")
        .or_else(|| t.strip_prefix("pub "))
        .unwrap_or(t);
    t.starts_with("mod ") && t.contains('{')
}

fn count(line: &str, c: char) -> usize {
    line.chars().filter(|&x| x == c).count()
}

/// The paragraph of `markdown` that starts at `start` and runs to the
/// next blank line or list item (`start` itself excluded from the end
/// search), or `None` when `start` is absent.
pub fn paragraph<'a>(markdown: &'a str, start: &str) -> Option<&'a str> {
    let at = markdown.find(start)?;
    let rest = &markdown[at..];
    let end = rest[start.len()..]
        .find("\n\n")
        .into_iter()
        .chain(rest[start.len()..].find("\n- "))
        .min()
        .map_or(rest.len(), |e| e + start.len());
    Some(&rest[..end])
}

/// Every `` `code` `` span of `text`, in order.
pub fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_only_drops_test_modules_and_comments() {
        let text = "fn a() {}\n// b\"KPAK\"\n#[cfg(test)]\n#[allow(\n    x,\n)]\nmod tests {\n    fn t() { x(b\"KPAK\") }\n}\nfn c() {}\n";
        let code = code_only(text);
        assert!(!code.contains("KPAK"), "{code}");
        assert!(code.contains("fn a()") && code.contains("fn c()"), "{code}");
        assert_eq!(code.lines().count(), text.lines().count());
    }

    #[test]
    fn code_only_drops_platform_test_modules_and_crate_visible_ones() {
        let text = "fn a() {}\n#[cfg(all(test, unix))]\nmod tests {\n    fn t() { x(b\"KPAK\") }\n}\n#[cfg(test)]\npub(crate) mod tests2 {\n    fn u() { x(b\"KPAK\") }\n}\nfn c() {}\n";
        let code = code_only(text);
        assert!(!code.contains("KPAK"), "{code}");
        assert!(code.contains("fn a()") && code.contains("fn c()"), "{code}");
    }

    #[test]
    fn examples_and_test_dirs_are_not_production() {
        assert!(is_production("host/format/src/lib.rs"));
        assert!(!is_production("host/format/tests/delta.rs"));
        assert!(!is_production("host/capi/examples/bench_load.rs"));
        assert!(!is_production("tests/guests/trap/src/lib.rs"));
        assert!(!is_production("fuzz/fuzz_targets/bundle.rs"));
        assert!(!is_production("host/fsafe/src/output_tests.rs"));
    }

    #[test]
    fn paragraph_stops_at_the_next_list_item() {
        let md = "- **A** one\n  two\n- **B** three\n";
        assert_eq!(paragraph(md, "**A**"), Some("**A** one\n  two"));
        assert_eq!(backticked("a `x` b `y`"), vec!["x", "y"]);
    }
}
