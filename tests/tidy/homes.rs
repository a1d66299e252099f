//! Spellings that may appear only in their home files: a fact written
//! once (a magic number, a cut of a target string) and asked for
//! everywhere else.
//!
//! A rule lists the files its spellings may appear in. An entry that is
//! not a home but is tolerated today carries a `// known: <reason>`
//! comment in the table; fixing the code means removing its entry.

use super::source::SourceFile;

/// One fact: the ways code spells it and the files that may.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// What the spellings are (`KPAK archive magic`).
    pub name: &'static str,
    /// How code writes it (see `spells`).
    pub spellings: &'static [&'static str],
    /// The files allowed to spell it, relative to the repository root.
    pub homes: &'static [&'static str],
    /// Where the fact should be asked for instead.
    pub ask: &'static str,
}

/// Numbers (`0x4849_5046`, `0x28, 0xb5, …`) are compared with
/// whitespace and `_` removed; text (`b"KPAK"`, `split(':')`) as written.
/// Both ignore ASCII case.
fn normalize(s: &str, numeric: bool) -> String {
    s.chars()
        .filter(|c| !numeric || (!c.is_whitespace() && *c != '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether `line` spells `spelling`.
fn spells(line: &str, spelling: &str) -> bool {
    let numeric = spelling.contains("0x");
    normalize(line, numeric).contains(&normalize(spelling, numeric))
}

/// The lines of `files` that spell a rule's fact outside its homes, and
/// homes in which the fact no longer appears.
pub fn check(rules: &[Rule], files: &[SourceFile]) -> Vec<String> {
    let mut problems = Vec::new();
    for rule in rules {
        let mut used_homes = Vec::new();
        for f in files {
            for (n, line) in f.text.lines().enumerate() {
                let Some(hit) = rule.spellings.iter().position(|s| spells(line, s)) else {
                    continue;
                };
                if rule.homes.contains(&f.path.as_str()) {
                    used_homes.push(f.path.as_str());
                } else {
                    problems.push(format!(
                        "{}:{}: `{}` ({}) outside its homes; ask {}",
                        f.path,
                        n + 1,
                        rule.spellings[hit],
                        rule.name,
                        rule.ask
                    ));
                }
            }
        }
        for home in rule.homes.iter().filter(|h| !used_homes.contains(h)) {
            problems.push(format!(
                "{home} is listed as a home of the {} but no longer spells it: remove the entry",
                rule.name
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        name: "KPAK archive magic",
        spellings: &["b\"KPAK\"", "0x4b41_504b"],
        homes: &["host/format/src/lib.rs"],
        ask: "FileKind",
    };

    #[test]
    fn a_spelling_in_its_home_is_fine() {
        let files = [SourceFile::new(
            "host/format/src/lib.rs",
            "pub const MAGIC: [u8; 4] = *b\"KPAK\";",
        )];
        assert!(check(&[RULE], &files).is_empty());
    }

    #[test]
    fn rejects_a_spelling_outside_its_home_in_any_case_or_grouping() {
        let files = [
            SourceFile::new("host/format/src/lib.rs", "*b\"KPAK\""),
            SourceFile::new(
                "host/split/src/prefix.rs",
                "fn f() {}\nif magic == 0x4B41504B {",
            ),
        ];
        let problems = check(&[RULE], &files);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("host/split/src/prefix.rs:2: "),
            "{problems:?}"
        );
    }

    #[test]
    fn prose_that_contains_a_magic_word_is_not_a_spelling() {
        assert!(spells("if x == 0x4849_5046 {", "0x48495046"));
        assert!(spells("const M: &[u8] = b\"\\x7FELF\";", "\\x7fELF"));
        assert!(!spells(
            "\"not a clang offload bundle\"",
            "__CLANG_OFFLOAD_BUNDLE__"
        ));
        assert!(!spells(
            "clang_offload_bundler: Option<PathBuf>,",
            "__CLANG_OFFLOAD_BUNDLE__"
        ));
    }

    #[test]
    fn rejects_a_home_that_no_longer_spells_it() {
        let files = [SourceFile::new("host/format/src/lib.rs", "")];
        let problems = check(&[RULE], &files);
        assert!(problems[0].contains("no longer spells it"), "{problems:?}");
    }
}
