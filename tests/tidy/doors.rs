//! What only one door may do. Libraries take their policy from the
//! caller's job and write their outputs through `kpack_fsafe`:
//!
//! - outputs are created, moved and committed only by `kpack_fsafe`
//!   (`Tree`, `Outputs`, `Staged`), never by a bare `std::fs::rename`,
//!   `create_dir*` or a temp file's `persist`;
//! - a library reads no environment variable for policy (the caller
//!   hands it in) and prints nothing (it returns reports and warnings);
//! - a library makes no memory budget of its own (the job carries it);
//! - the CLI builds JSON from `Serialize` report types, not `json!`.
//!
//! Each rule names the part of the tree it governs; a file outside that
//! part is not checked.

use super::homes::Rule;
use super::source::SourceFile;

/// A rule over one part of the tree.
pub struct Door {
    /// The spellings and their homes.
    pub rule: Rule,
    /// Whether a file (repository-relative path) is governed by the rule.
    pub governs: fn(&str) -> bool,
}

/// Library code: the crates under `host/` but the CLI, the SDK and the
/// handlers; build scripts are not libraries.
fn library(path: &str) -> bool {
    (path.starts_with("host/") && !path.starts_with("host/cli/")
        || path.starts_with("sdk/")
        || path.starts_with("plugins/"))
        && !path.ends_with("/build.rs")
}

/// Everything shipped but `kpack-fsafe` itself: the CLI and the libraries.
fn outside_fsafe(path: &str) -> bool {
    library(path) && !path.starts_with("host/fsafe/") || cli(path)
}

/// The CLI's sources.
fn cli(path: &str) -> bool {
    path.starts_with("host/cli/src/")
}

/// The rules.
pub const DOORS: &[Door] = &[
    Door {
        rule: Rule {
            name: "output written around kpack-fsafe",
            spellings: &[
                "fs::rename(",
                "fs::create_dir(",
                "fs::create_dir_all(",
                "DirBuilder",
                ".persist(",
            ],
            homes: &[
                "host/cli/src/main.rs", // known: `kpack man -o DIR`; clap_mangen writes the pages into the directory itself
                // Not an output: the compiled-handler cache directory,
                // made 0700 and checked to be the user's own before use.
                "host/plugin-host/src/cache.rs",
            ],
            ask: "kpack_fsafe::Tree, Outputs or Staged",
        },
        governs: outside_fsafe,
    },
    Door {
        rule: Rule {
            name: "environment read by a library",
            spellings: &["env::var(", "env::var_os(", "env::vars(", "env::vars_os("],
            homes: &[
                // The runtime's ROCM_KPACK_* variables are its contract
                // with the HIP runtime (read once, at the C ABI's first call).
                "host/runtime/src/config.rs",
            ],
            ask: "the caller (the CLI reads its environment and passes options)",
        },
        governs: library,
    },
    Door {
        rule: Rule {
            name: "printing from a library",
            spellings: &["println!(", "print!(", "eprintln!(", "eprint!("],
            homes: &[
                // ROCM_KPACK_DEBUG / ROCM_KPACK_STATS: the runtime's
                // diagnostics go to stderr, as the HIP runtime's do.
                "host/runtime/src/cache.rs",
                "host/capi/src/lib.rs",
                // A handler's log: the guest's stderr is captured by the
                // host's sandbox as that handler's log lines.
                "sdk/src/lib.rs",
            ],
            ask: "a report or warning returned to the caller",
        },
        governs: library,
    },
    Door {
        rule: Rule {
            name: "memory budget made by a library",
            spellings: &["MemoryBudget::default()", "MemoryBudget::unlimited()"],
            homes: &[],
            ask: "the job's budget (kpack_job::Job)",
        },
        governs: library,
    },
    Door {
        rule: Rule {
            name: "JSON built by hand in the CLI",
            spellings: &["json!("],
            homes: &[],
            ask: "a Serialize report type (the envelope in host/cli/src/json.rs wraps it)",
        },
        governs: cli,
    },
];

/// The problems of every door over `files`.
pub fn check(files: &[SourceFile]) -> Vec<String> {
    DOORS
        .iter()
        .flat_map(|d| {
            let governed: Vec<SourceFile> = files
                .iter()
                .filter(|f| (d.governs)(&f.path))
                .cloned()
                .collect();
            super::homes::check(std::slice::from_ref(&d.rule), &governed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(path: &str, line: &str) -> Vec<String> {
        check(&[SourceFile::new(path, line)])
            .into_iter()
            .filter(|p| !p.contains("no longer spells it"))
            .collect()
    }

    #[test]
    fn rejects_a_library_that_renames_an_output_itself() {
        let p = one("host/wheel/src/split.rs", "std::fs::rename(&a, &b)?;");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("kpack_fsafe::Tree"), "{p:?}");
        assert_eq!(
            one("host/split/src/merge.rs", "fs::create_dir_all(&d)?;").len(),
            1
        );
        assert_eq!(
            one("host/format/src/write.rs", "out.persist(&dest)").len(),
            1
        );
    }

    #[test]
    fn fsafe_and_tree_calls_are_the_door() {
        assert!(one("host/fsafe/src/dir.rs", "std::fs::create_dir(&p)?;").is_empty());
        assert!(one("host/split/src/prefix.rs", "tree.create_dir_all(rel)?;").is_empty());
        assert!(one("host/prune/src/lib.rs", "staged.commit(Some(&p))?;").is_empty());
    }

    #[test]
    fn rejects_environment_reads_and_prints_in_libraries_only() {
        assert_eq!(
            one("host/detect/src/lib.rs", "std::env::var_os(\"X\")").len(),
            1
        );
        assert_eq!(
            one("host/plugin-host/src/cache.rs", "eprintln!(\"hi\");").len(),
            1
        );
        assert!(one("host/cli/src/detect.rs", "std::env::var_os(k)").is_empty());
        assert!(one("host/cli/src/ui.rs", "eprintln!(\"hi\");").is_empty());
        assert!(one("host/guests/build.rs", "std::env::var_os(\"TARGET\")").is_empty());
    }

    #[test]
    fn rejects_a_budget_made_by_a_library_and_json_built_in_the_cli() {
        assert_eq!(
            one("host/elf/src/transform.rs", "&MemoryBudget::default()").len(),
            1
        );
        assert_eq!(
            one("host/cli/src/audit.rs", "serde_json::json!({\"a\": 1})").len(),
            1
        );
        assert!(one("host/wheel/src/report.rs", "json!({})").is_empty());
    }
}
