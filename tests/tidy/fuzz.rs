//! The fuzz list of `ARCHITECTURE.md` (the **Fuzzing** item of its Tests
//! section) against the files of `fuzz/fuzz_targets/`.

use std::collections::BTreeSet;

use super::source::{SourceFile, backticked, paragraph};

/// Where the list starts.
pub const START: &str = "**Fuzzing**";

/// The target names the list gives: its `` `name` `` spans that are
/// plain names (not paths).
pub fn claimed(markdown: &str) -> Result<BTreeSet<String>, String> {
    let text = paragraph(markdown, START).ok_or("ARCHITECTURE.md has no **Fuzzing** item")?;
    Ok(backticked(text)
        .into_iter()
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string)
        .collect())
}

/// The fuzz targets: `fuzz/fuzz_targets/<name>.rs`.
pub fn targets(files: &[SourceFile]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|f| f.path.strip_prefix("fuzz/fuzz_targets/"))
        .filter_map(|rest| rest.strip_suffix(".rs"))
        .filter(|name| !name.contains('/'))
        .map(str::to_string)
        .collect()
}

/// Targets the list leaves out and names it gives that are no target.
pub fn check(claimed: &BTreeSet<String>, targets: &BTreeSet<String>) -> Vec<String> {
    let missing = targets
        .difference(claimed)
        .map(|t| format!("fuzz/fuzz_targets/{t}.rs is missing from the **Fuzzing** list"));
    let stale = claimed.difference(targets).map(|t| {
        format!("the **Fuzzing** list names `{t}`, which is no file in fuzz/fuzz_targets/")
    });
    missing.chain(stale).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "- **Fuzzing**: `fuzz/fuzz_targets/` (`bundle`, `elf_offload`); long runs\n  stay out.\n- **Blessing**: `KPACK_BLESS`\n";

    fn tree(names: &[&str]) -> BTreeSet<String> {
        let files: Vec<SourceFile> = names
            .iter()
            .map(|n| SourceFile::new(&format!("fuzz/fuzz_targets/{n}.rs"), ""))
            .collect();
        targets(&files)
    }

    #[test]
    fn a_true_list_has_no_problems() {
        let claimed = claimed(MD).unwrap();
        assert_eq!(claimed.len(), 2, "{claimed:?}");
        assert!(check(&claimed, &tree(&["bundle", "elf_offload"])).is_empty());
    }

    #[test]
    fn rejects_a_list_that_misses_a_target() {
        let problems = check(
            &claimed(MD).unwrap(),
            &tree(&["bundle", "elf_offload", "marker"]),
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("marker.rs is missing"), "{problems:?}");
    }

    #[test]
    fn rejects_a_list_that_names_a_removed_target() {
        let problems = check(&claimed(MD).unwrap(), &tree(&["bundle"]));
        assert!(problems[0].contains("names `elf_offload`"), "{problems:?}");
    }
}
