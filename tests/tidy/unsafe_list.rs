//! The `unsafe` list of `ARCHITECTURE.md` (the "`unsafe` only where it
//! must be" invariant) against every place the tree allows `unsafe_code`:
//! an `allow(unsafe_code)` / `expect(unsafe_code)` attribute in a Rust
//! file, or `unsafe_code = "allow"` in a manifest's lints.
//!
//! The list names each such file by its path in backticks; a `*` in a
//! path stands for any text (`host/capi/examples/*.rs`).

use std::collections::BTreeSet;

use super::source::{SourceFile, backticked, paragraph};

/// Where the list starts.
pub const START: &str = "**`unsafe` only where it must be.**";

/// The path patterns the list names (its backticked spans with a `/`).
pub fn claimed(markdown: &str) -> Result<Vec<String>, String> {
    let text = paragraph(markdown, START).ok_or("ARCHITECTURE.md has no `unsafe` invariant")?;
    // The start marker itself holds a code span: skip past it.
    let text = &text[START.len()..];
    Ok(backticked(text)
        .into_iter()
        .filter(|s| s.contains('/') && !s.contains(' '))
        .map(str::to_string)
        .collect())
}

/// The files that allow `unsafe_code`, sorted.
pub fn sites(files: &[SourceFile]) -> BTreeSet<String> {
    files
        .iter()
        .filter(|f| {
            if f.path.ends_with("Cargo.toml") {
                f.text.lines().any(manifest_allows)
            } else {
                attribute_allows(&f.text)
            }
        })
        .map(|f| f.path.clone())
        .collect()
}

/// `unsafe_code = "allow"` (or `"warn"`, or a table with that level).
fn manifest_allows(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("unsafe_code") && (line.contains("\"allow\"") || line.contains("\"warn\""))
}

/// Whether some `unsafe_code` in `text` is an argument of an `allow` or
/// `expect` attribute that starts its line (`#[allow(` or `#![allow(`,
/// possibly spanning lines); comments and strings that merely contain
/// one do not count.
fn attribute_allows(text: &str) -> bool {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .flat_map(|l| [l, "\n"])
        .collect();
    code.match_indices("unsafe_code").any(|(at, _)| {
        let before = &code[..at];
        let Some(open) = before.rfind('(') else {
            return false;
        };
        let head = before[..open].rsplit('\n').next().unwrap_or("").trim();
        !before[open + 1..].contains(')')
            && ["#[allow", "#![allow", "#[expect", "#![expect"].contains(&head)
    })
}

fn matches(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        Some((prefix, suffix)) => {
            path.len() >= prefix.len() + suffix.len()
                && path.starts_with(prefix)
                && path.ends_with(suffix)
        }
        None => pattern == path,
    }
}

/// Files that allow `unsafe_code` but are not on the list, and list
/// entries that match no such file.
pub fn check(claimed: &[String], sites: &BTreeSet<String>) -> Vec<String> {
    let missing = sites
        .iter()
        .filter(|s| !claimed.iter().any(|c| matches(c, s)))
        .map(|s| {
            format!(
                "{s} allows unsafe_code, but the `unsafe` list in ARCHITECTURE.md does not name it"
            )
        });
    let stale = claimed
        .iter()
        .filter(|c| !sites.iter().any(|s| matches(c, s)))
        .map(|c| format!("the `unsafe` list names `{c}`, which allows no unsafe_code"));
    missing.chain(stale).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "- **`unsafe` only where it must be.** The C ABI\n  (`host/capi/src/lib.rs`) and `host/capi/examples/*.rs`.\n- **No moves**\n";

    fn files() -> Vec<SourceFile> {
        vec![
            SourceFile::new(
                "host/capi/src/lib.rs",
                "#![allow(\n    unsafe_code,\n    reason = \"C ABI\"\n)]\n",
            ),
            SourceFile::new(
                "host/capi/examples/bench.rs",
                "#![allow(unsafe_code, reason = \"x\")]",
            ),
            SourceFile::new(
                "host/format/src/lib.rs",
                "#![forbid(unsafe_code)]\n// allow(unsafe_code) is not here\n",
            ),
            SourceFile::new(
                "tests/guests/a/Cargo.toml",
                "[lints.rust]\nmissing_docs = \"allow\"\n",
            ),
        ]
    }

    #[test]
    fn a_true_list_has_no_problems() {
        let sites = sites(&files());
        assert_eq!(sites.len(), 2, "{sites:?}");
        assert!(check(&claimed(MD).unwrap(), &sites).is_empty());
    }

    #[test]
    fn rejects_a_list_that_misses_an_allow() {
        let mut files = files();
        files.push(SourceFile::new(
            "host/detect/src/hip.rs",
            "#![allow(unsafe_code)]\n",
        ));
        files.push(SourceFile::new(
            "tests/guests/b/Cargo.toml",
            "[lints.rust]\nunsafe_code = \"allow\"\n",
        ));
        let problems = check(&claimed(MD).unwrap(), &sites(&files));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("host/detect/src/hip.rs allows"),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_a_list_that_names_a_file_without_unsafe() {
        let md = MD.replace(
            "(`host/capi/src/lib.rs`)",
            "(`host/capi/src/lib.rs`, `host/malloc/src/lib.rs`)",
        );
        let problems = check(&claimed(&md).unwrap(), &sites(&files()));
        assert_eq!(
            problems,
            ["the `unsafe` list names `host/malloc/src/lib.rs`, which allows no unsafe_code"]
        );
    }
}
