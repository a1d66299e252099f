//! `kpack archive replace` and `kpack archive merge`: archive surgery,
//! done by [`kpack_format::edit`]; this module parses, calls and prints.
//!
//! - `replace BASE --from NEW --keys GLOB... [--add] -o OUT`: BASE with the
//!   entries of NEW whose key matches a glob put in place of its own (a
//!   code-coverage build's kernels swapped into a normal build's archive).
//! - `merge A B... -o OUT`: every entry of every input in one archive;
//!   the same (key, arch) twice is an error naming both files.

use std::path::{Path, PathBuf};

use kpack_format::edit::{self, EditOptions, EditReport, Replace};
use kpack_fsafe::Existing;

use crate::exit::CliResult;

/// Where and how the output is written (the flags both commands share).
pub struct Out<'a> {
    /// `-o`.
    pub path: &'a Path,
    /// `--compression-level`.
    pub level: i32,
    /// `--force`.
    pub force: bool,
    /// `--max-memory`.
    pub max_memory: u64,
}

impl Out<'_> {
    /// The library's options; refuses `-o -` (an archive is not a stream).
    fn options(&self, what: &str) -> anyhow::Result<EditOptions> {
        crate::safety::not_stdout(self.path, what)?;
        crate::safety::clean_stale_temps(
            self.path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        );
        Ok(EditOptions {
            output: self.path.to_path_buf(),
            level: self.level,
            existing: Existing::from_force(self.force),
            max_memory: self.max_memory,
        })
    }
}

/// Run `kpack archive replace`.
pub fn replace(base: &Path, from: &Path, keys: &[String], add: bool, out: &Out<'_>) -> CliResult {
    let options = out.options("archive replace")?;
    let request = Replace {
        base,
        from,
        keys,
        add,
    };
    let report = edit::replace(&request, &options)?;
    print_report(&report);
    eprintln!(
        "replaced {} of {} entries from {}",
        report.replaced,
        report.entries,
        from.display()
    );
    Ok(())
}

/// Run `kpack archive merge`.
pub fn merge(files: &[PathBuf], out: &Out<'_>) -> CliResult {
    let options = out.options("archive merge")?;
    let report = edit::merge(files, &options)?;
    print_report(&report);
    Ok(())
}

/// The line `archive pack` and `convert` print per archive, and a note
/// for entries copied as their frames (written at their own level).
fn print_report(report: &EditReport) {
    println!(
        "{}\t{} entries\t{} bytes",
        report.path.display(),
        report.entries,
        report.file_size
    );
    if report.copied_frames > 0 {
        crate::ui::note(format_args!(
            "{} entries over --max-memory copied as their stored zstd frames (not re-encoded at --compression-level)",
            report.copied_frames
        ));
    }
}
