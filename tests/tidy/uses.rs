//! The crates table of `ARCHITECTURE.md` against `cargo metadata`: each
//! row's `uses` column lists exactly the workspace crates its crates
//! depend on, and every one of them sits in a row above.
//!
//! `uses` counts normal dependencies only (`[dependencies]`, any target):
//! build dependencies (none today; `kpack-guests` builds its guests with
//! a nested cargo) and dev dependencies (`kpack-tests`, a crate's own
//! test features) are not what the layering is about.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A workspace package as `cargo metadata` describes it.
#[derive(Debug, Clone)]
pub struct Package {
    /// Package name (`kpack-format`).
    pub name: String,
    /// Directory of its manifest, relative to the root (`host/format`).
    pub dir: String,
    /// The workspace crates among its normal dependencies.
    pub uses: BTreeSet<String>,
    /// Whether `cargo publish` may publish it.
    pub published: bool,
    /// Whether it has a library target (others link it).
    pub library: bool,
    /// Its manifest's `description`.
    pub description: String,
}

/// One row of the crates table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Line number in the file (1-based).
    pub line: usize,
    /// The crates the row names (most rows name one).
    pub crates: Vec<String>,
    /// The `dir` column (`host/format`, `plugins/*`).
    pub dir: String,
    /// The `uses` column as package names.
    pub uses: BTreeSet<String>,
}

/// The workspace's packages from `cargo metadata --no-deps`.
pub fn workspace(root: &Path) -> Vec<Package> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    packages(&meta, root)
}

/// The packages of a `cargo metadata` document.
pub fn packages(meta: &serde_json::Value, root: &Path) -> Vec<Package> {
    let list = meta["packages"].as_array().cloned().unwrap_or_default();
    let names: BTreeSet<String> = list
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    list.iter()
        .map(|p| {
            let manifest = Path::new(p["manifest_path"].as_str().unwrap_or(""));
            let dir = manifest.parent().unwrap_or(manifest);
            let dir = dir.strip_prefix(root).unwrap_or(dir);
            let uses = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null() && d["path"].is_string())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(*n))
                .map(str::to_string)
                .collect();
            let kinds = p["targets"].as_array().into_iter().flatten().flat_map(|t| {
                t["kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str())
            });
            let library = kinds.clone().any(|k| k == "lib" || k == "rlib");
            Package {
                name: p["name"].as_str().unwrap_or("").to_string(),
                dir: dir.to_string_lossy().replace('\\', "/"),
                uses,
                // `publish = false` reads as `[]`, publishable anywhere as null.
                published: p["publish"].is_null(),
                library,
                description: p["description"].as_str().unwrap_or("").to_string(),
            }
        })
        .collect()
}

/// The rows of the table headed `| crate | dir | uses | job |`.
pub fn table(markdown: &str) -> Result<Vec<Row>, String> {
    let mut lines = markdown.lines().enumerate();
    lines
        .by_ref()
        .find(|(_, l)| l.replace(' ', "") == "|crate|dir|uses|job|")
        .ok_or("ARCHITECTURE.md has no `| crate | dir | uses | job |` table")?;
    let mut rows = Vec::new();
    for (i, line) in lines.skip(1) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(names), Some(dir), Some(uses)) = (cells.get(1), cells.get(2), cells.get(3))
        else {
            return Err(format!(
                "ARCHITECTURE.md:{}: a row with fewer than 3 columns",
                i + 1
            ));
        };
        let uses = uses_column(uses).map_err(|e| format!("ARCHITECTURE.md:{}: {e}", i + 1))?;
        rows.push(Row {
            line: i + 1,
            crates: super::source::backticked(names)
                .iter()
                .map(|s| s.to_string())
                .collect(),
            dir: dir.trim_matches('`').to_string(),
            uses,
        });
    }
    Ok(rows)
}

/// `nothing`, or short names separated by commas (`amdgpu, fsafe`); a
/// parenthetical note is not part of the list.
fn uses_column(cell: &str) -> Result<BTreeSet<String>, String> {
    let list = match cell.find('(') {
        Some(at) => &cell[..at],
        None => cell,
    };
    let list = list.trim();
    if list == "nothing" {
        return Ok(BTreeSet::new());
    }
    list.split(',')
        .map(str::trim)
        .map(|s| {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if plain {
                Ok(format!("kpack-{s}"))
            } else {
                Err(format!(
                    "the uses column {cell:?} is not `nothing` or a list of short crate names"
                ))
            }
        })
        .collect()
}

/// Every way the table and the workspace disagree, one sentence each.
pub fn check(rows: &[Row], packages: &[Package]) -> Vec<String> {
    let by_name: BTreeMap<&str, &Package> = packages.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut row_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        for name in &row.crates {
            if row_of.insert(name, index).is_some() {
                problems.push(format!(
                    "ARCHITECTURE.md:{}: `{name}` has a second row",
                    row.line
                ));
            }
            if !by_name.contains_key(name.as_str()) {
                problems.push(format!(
                    "ARCHITECTURE.md:{}: `{name}` is not a workspace crate",
                    row.line
                ));
            }
        }
    }
    for p in packages {
        if !row_of.contains_key(p.name.as_str()) {
            problems.push(format!(
                "`{}` ({}) has no row in the crates table",
                p.name, p.dir
            ));
        }
    }
    for row in rows {
        problems.extend(check_row(row, &by_name));
        problems.extend(check_order(row, rows, &row_of));
    }
    problems
}

/// A row's `dir` and `uses` columns against its crates' manifests.
fn check_row(row: &Row, by_name: &BTreeMap<&str, &Package>) -> Vec<String> {
    let at = format!("ARCHITECTURE.md:{}", row.line);
    let members: Vec<&Package> = row
        .crates
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).copied())
        .collect();
    let mut problems = Vec::new();
    for p in &members {
        let dir_ok = match row.dir.strip_suffix('*') {
            Some(prefix) => p.dir.starts_with(prefix),
            None => p.dir == row.dir,
        };
        if !dir_ok {
            problems.push(format!(
                "{at}: `{}` lives in {}, not {}",
                p.name, p.dir, row.dir
            ));
        }
        for dep in p.uses.difference(&row.uses) {
            problems.push(format!(
                "{at}: `{}` uses `{dep}`, which its uses column leaves out",
                p.name
            ));
        }
    }
    let used: BTreeSet<&String> = members.iter().flat_map(|p| &p.uses).collect();
    for claimed in row.uses.iter().filter(|u| !used.contains(u)) {
        problems.push(format!(
            "{at}: the uses column names `{claimed}`, but no crate of the row depends on it"
        ));
    }
    problems
}

/// A row uses only crates of rows above it.
fn check_order(row: &Row, rows: &[Row], row_of: &BTreeMap<&str, usize>) -> Vec<String> {
    let here = rows.iter().position(|r| r.line == row.line).unwrap_or(0);
    row.uses
        .iter()
        .filter_map(|dep| {
            let there = *row_of.get(dep.as_str())?;
            (there >= here).then(|| {
                format!(
                    "ARCHITECTURE.md:{}: {} uses `{dep}`, whose row (line {}) is not above it",
                    row.line,
                    row.crates.join(", "),
                    rows[there].line
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
| crate | dir | uses | job |
|---|---|---|---|
| `kpack-a` | `host/a` | nothing | a |
| `kpack-b` | `host/b` | a | b |
| `kpack-x`, `kpack-y` | `plugins/*` | b (most) | handlers |
";

    fn package(name: &str, dir: &str, uses: &[&str]) -> Package {
        Package {
            name: name.into(),
            dir: dir.into(),
            uses: uses.iter().map(|s| s.to_string()).collect(),
            published: true,
            library: true,
            description: String::new(),
        }
    }

    fn workspace() -> Vec<Package> {
        vec![
            package("kpack-a", "host/a", &[]),
            package("kpack-b", "host/b", &["kpack-a"]),
            package("kpack-x", "plugins/x", &["kpack-b"]),
            package("kpack-y", "plugins/y", &[]),
        ]
    }

    #[test]
    fn a_true_table_has_no_problems() {
        let rows = table(TABLE).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(check(&rows, &workspace()), Vec::<String>::new());
    }

    #[test]
    fn rejects_a_uses_row_that_leaves_a_dependency_out() {
        let doctored = TABLE.replace("| `host/b` | a |", "| `host/b` | nothing |");
        let problems = check(&table(&doctored).unwrap(), &workspace());
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`kpack-b` uses `kpack-a`")),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_a_uses_row_that_names_a_crate_not_used() {
        let doctored = TABLE.replace("| `host/b` | a |", "| `host/b` | a, x |");
        let problems = check(&table(&doctored).unwrap(), &workspace());
        assert!(
            problems.iter().any(|p| p.contains("names `kpack-x`")),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_a_row_that_uses_a_crate_below_it() {
        let lines: Vec<&str> = TABLE.lines().collect();
        let doctored = [lines[0], lines[1], lines[3], lines[2], lines[4]].join("\n");
        let problems = check(&table(&doctored).unwrap(), &workspace());
        assert!(
            problems.iter().any(|p| p.contains("is not above it")),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_a_crate_without_a_row_and_a_wrong_dir() {
        let mut ws = workspace();
        ws.push(package("kpack-new", "host/new", &[]));
        ws[0].dir = "host/aa".into();
        let problems = check(&table(TABLE).unwrap(), &ws);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("`kpack-new` (host/new) has no row")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("lives in host/aa")),
            "{problems:?}"
        );
    }

    #[test]
    fn rejects_prose_in_the_uses_column() {
        let doctored = TABLE.replace("| `host/b` | a |", "| `host/b` | everything above |");
        assert!(table(&doctored).is_err());
    }

    #[test]
    fn reads_normal_path_dependencies_only() {
        let meta = serde_json::json!({"packages": [
            {"name": "kpack-a", "manifest_path": "/r/host/a/Cargo.toml", "dependencies": []},
            {"name": "kpack-b", "manifest_path": "/r/host/b/Cargo.toml", "dependencies": [
                {"name": "kpack-a", "kind": null, "path": "/r/host/a"},
                {"name": "kpack-c", "kind": "dev", "path": "/r/host/c"},
                {"name": "serde", "kind": null}
            ]},
            {"name": "kpack-c", "manifest_path": "/r/host/c/Cargo.toml", "dependencies": []}
        ]});
        let ps = packages(&meta, Path::new("/r"));
        assert_eq!(ps[1].dir, "host/b");
        assert_eq!(ps[1].uses.iter().collect::<Vec<_>>(), ["kpack-a"]);
    }
}
