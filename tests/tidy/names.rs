//! An archive's file name, `<stem>_<target>.kpack`, is made and read
//! back by `kpack_format::archive_file_name` and `archive_file_target`
//! only: writers, markers, the runtime's lookups and fetch must agree on
//! it, so it is spelled once.

use super::homes::Rule;

/// Spellings of the archive file name, with the files that may use them.
pub const NAMES: &[Rule] = &[Rule {
    name: "archive file name",
    spellings: &["}.kpack\"", "strip_suffix(\".kpack\")"],
    homes: &[
        "host/format/src/marker.rs",
        "host/offload/src/archive_set.rs", // known: an archive set's files and search path; could ask archive_file_name
    ],
    ask: "kpack_format::archive_file_name or archive_file_target",
}];

#[cfg(test)]
mod tests {
    use super::super::homes::check;
    use super::super::source::SourceFile;
    use super::*;

    #[test]
    fn rejects_an_archive_name_formatted_by_hand() {
        let files = [SourceFile::new(
            "host/split/src/merge.rs",
            "let dest = stage.join(format!(\"{group}_{arch}.kpack\"));",
        )];
        let problems = check(NAMES, &files);
        assert!(
            problems[0].starts_with("host/split/src/merge.rs:1: `}.kpack\"`"),
            "{problems:?}"
        );
    }
}
