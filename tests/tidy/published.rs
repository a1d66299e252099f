//! The public-API line of `ARCHITECTURE.md`: the crates it names are
//! published for others to use; every other published library says in
//! its description that it is internal (as uv's crates do), so a reader
//! on crates.io knows its API changes without notice.

use std::collections::BTreeSet;
use std::path::Path;

use super::source::{backticked, paragraph};
use super::uses::Package;

/// Where the line starts.
pub const START: &str = "**Public API:**";

/// The sentence an internal crate's description carries.
pub const INTERNAL: &str = "Internal crate of kpack, unstable API.";

/// Published libraries whose description lacks the sentence today.
const KNOWN: &[&str] = &[];

/// The workspace's packages.
pub fn packages(root: &Path) -> Vec<Package> {
    super::uses::workspace(root)
}

/// The crates the public-API line names (up to "Every other crate").
pub fn public(markdown: &str) -> Result<BTreeSet<String>, String> {
    let text = paragraph(markdown, START).ok_or("ARCHITECTURE.md has no **Public API:** line")?;
    let text = text.split("**Every other crate").next().unwrap_or(text);
    Ok(backticked(text)
        .into_iter()
        .filter(|s| s.starts_with("kpack-"))
        .map(str::to_string)
        .collect())
}

/// Published libraries that neither are public nor say they are
/// internal, and public ones that say they are internal.
pub fn check(public: &BTreeSet<String>, packages: &[Package]) -> Vec<String> {
    let names: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut problems: Vec<String> = public
        .iter()
        .filter(|c| !names.contains(c.as_str()))
        .map(|c| format!("the public-API line names `{c}`, which is not a workspace crate"))
        .collect();
    for p in packages.iter().filter(|p| p.published && p.library) {
        let says_internal = p.description.contains(INTERNAL);
        if public.contains(&p.name) && says_internal {
            problems.push(format!(
                "{}/Cargo.toml: `{}` is public API but its description says {INTERNAL:?}",
                p.dir, p.name
            ));
        } else if !public.contains(&p.name) && !says_internal && !KNOWN.contains(&p.name.as_str()) {
            problems.push(format!(
                "{}/Cargo.toml: the description of `{}` (not public API) lacks {INTERNAL:?}",
                p.dir, p.name
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "**Public API:** `kpack-format` (the archive format) and `kpack-sdk` are\npublished. **Every other crate** (`kpack-elf`) is internal.\n\n- next";

    fn package(name: &str, description: &str) -> Package {
        Package {
            name: name.into(),
            dir: format!("host/{name}"),
            uses: BTreeSet::new(),
            published: true,
            library: true,
            description: description.into(),
        }
    }

    #[test]
    fn reads_the_public_crates() {
        let public = public(MD).unwrap();
        assert_eq!(
            public.into_iter().collect::<Vec<_>>(),
            ["kpack-format", "kpack-sdk"]
        );
    }

    #[test]
    fn rejects_an_internal_crate_that_does_not_say_so() {
        let ps = [
            package("kpack-format", "KPAK archives."),
            package("kpack-sdk", "Handlers."),
            package("kpack-elf", "ELF fat binaries."),
        ];
        let problems = check(&public(MD).unwrap(), &ps);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("`kpack-elf` (not public API)"),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_a_public_crate_that_calls_itself_internal() {
        let ps = [
            package(
                "kpack-format",
                "KPAK archives. Internal crate of kpack, unstable API.",
            ),
            package("kpack-sdk", "Handlers."),
        ];
        let problems = check(&public(MD).unwrap(), &ps);
        assert!(problems[0].contains("is public API"), "{problems:?}");
    }
}
