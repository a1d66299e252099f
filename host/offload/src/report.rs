//! What `kpack offload` reports of one binary ([`OffloadReport`]): its
//! `--json` document, its text ([`OffloadReport::text`]) and the notes
//! for stderr ([`OffloadReport::notes`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kpack_binary::TransformReport;
use serde::Serialize;

use crate::{OffloadOptions, Outcome};

/// One archive an offload wrote.
#[derive(Debug, Clone, Serialize)]
pub struct WrittenArchive {
    /// Where it is.
    pub path: PathBuf,
    /// Its entries.
    pub entries: usize,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What an offload did to one binary, with what it was asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct OffloadReport {
    /// The fat binary.
    pub input: PathBuf,
    /// The host binary written.
    pub output: PathBuf,
    /// The TOC key prefix in the marker.
    pub kernel_name: String,
    /// The marker's search paths.
    pub search_paths: Vec<String>,
    /// What happened.
    pub result: Outcome,
    /// The archives written, in the order they were.
    pub archives: Vec<WrittenArchive>,
}

impl OffloadReport {
    /// The report of offloading `input` into `output` with `opts`;
    /// `written` as [`Offload::archives`](crate::Offload::archives).
    pub fn new(
        input: &Path,
        output: &Path,
        opts: &OffloadOptions,
        result: Outcome,
        written: &[(String, kpack_format::Written)],
    ) -> OffloadReport {
        let archives = written
            .iter()
            .map(|(_, w)| WrittenArchive {
                path: w.path.clone(),
                entries: w.entries,
                bytes: w.file_size,
            })
            .collect();
        OffloadReport {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
            kernel_name: opts.kernel_name.clone(),
            search_paths: opts.search_paths.clone(),
            result,
            archives,
        }
    }

    /// Lines for stderr: a binary copied unchanged and why, or a PE
    /// image's Authenticode signature that no longer holds.
    pub fn notes(&self) -> String {
        let input = self.input.display();
        match &self.result {
            Outcome::HostOnly => format!("{input}: no device code; copied unchanged\n"),
            Outcome::AlreadyOffloaded => {
                format!("{input}: already offloaded by kpack; copied unchanged\n")
            }
            Outcome::Offloaded {
                transform: TransformReport::Pe(t),
                ..
            } if t.signature_invalidated => format!(
                "warning: {input}: the Authenticode signature is kept but no longer valid; re-sign the output\n"
            ),
            Outcome::Offloaded { .. } => String::new(),
        }
    }

    /// The text of an offload (empty for a binary copied unchanged): the
    /// transform's line, the code objects and targets, what the target
    /// filter left out (`  excluded T: N`, as `kpack split` says it) and
    /// one line per archive, its path relative to `cwd`.
    pub fn text(&self, cwd: &Path) -> String {
        let Outcome::Offloaded {
            transform,
            code_objects,
            targets,
            excluded,
            ..
        } = &self.result
        else {
            return String::new();
        };
        let mut out = transform_text(&self.input, &self.output, transform);
        let _ = writeln!(
            out,
            "  {code_objects} code objects for {}",
            targets.join(", ")
        );
        let mut counts = BTreeMap::new();
        for t in excluded {
            *counts.entry(t.as_str()).or_insert(0u64) += 1;
        }
        for (t, n) in counts {
            let _ = writeln!(out, "  excluded {t}: {n}");
        }
        for a in &self.archives {
            let shown = kpack_fsafe::relative_path(cwd, &a.path);
            let _ = writeln!(
                out,
                "  {}\t{} entries\t{} bytes",
                shown.display(),
                a.entries,
                a.bytes
            );
        }
        out
    }
}

/// The transform's line: sizes, wrappers, marker, and the ELF layout taken
/// (a PE image's marker is its `.kpackrf` section), with the layout's notes.
fn transform_text(input: &Path, output: &Path, transform: &TransformReport) -> String {
    let (input, output) = (input.display(), output.display());
    match transform {
        TransformReport::Pe(t) => format!(
            "{input} -> {output}: {} -> {} bytes ({} bytes of device code removed), {} wrapper(s) HIPK, marker .kpackrf at {:#x}\n",
            t.input_size, t.output_size, t.bytes_removed, t.wrappers, t.marker_addr
        ),
        TransformReport::Elf(t) => {
            let mut out = format!(
                "{input} -> {output}: {} -> {} bytes ({} bytes of device code removed), {} wrapper(s) HIPK, marker at {:#x}, layout {}\n",
                t.input_size,
                t.output_size,
                t.bytes_removed,
                t.wrappers,
                t.marker_addr,
                t.layout.name()
            );
            for note in &t.layout_notes {
                let _ = writeln!(out, "  {note}");
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(result: Outcome) -> OffloadReport {
        OffloadReport {
            input: "in/libfoo.so".into(),
            output: "out/libfoo.so".into(),
            kernel_name: "libfoo.so".into(),
            search_paths: vec![],
            result,
            archives: vec![WrittenArchive {
                path: "/w/out/.kpack/libfoo_gfx90a.kpack".into(),
                entries: 2,
                bytes: 300,
            }],
        }
    }

    #[test]
    fn binary_copied_unchanged_is_a_note_and_no_text() {
        let r = report(Outcome::HostOnly);
        assert_eq!(
            r.notes(),
            "in/libfoo.so: no device code; copied unchanged\n"
        );
        assert_eq!(r.text(Path::new("/w")), "");
    }

    #[test]
    fn offloaded_elf_reads_transform_targets_exclusions_and_archives() {
        let transform = TransformReport::Elf(kpack_elf::TransformReport {
            layout: kpack_elf::Layout::InPlace,
            input_size: 1000,
            output_size: 600,
            bytes_removed: 400,
            marker_addr: 0x2000,
            wrappers: 1,
            relocations: 0,
            layout_notes: vec!["a note".into()],
        });
        let r = report(Outcome::Offloaded {
            format: None,
            transform,
            code_objects: 2,
            targets: vec!["gfx90a".into()],
            excluded: vec!["gfx942".into(), "gfx1100".into(), "gfx942".into()],
        });
        assert_eq!(r.notes(), "");
        assert_eq!(
            r.text(Path::new("/w")),
            "in/libfoo.so -> out/libfoo.so: 1000 -> 600 bytes (400 bytes of device code \
             removed), 1 wrapper(s) HIPK, marker at 0x2000, layout in-place\n  a note\n  \
             2 code objects for gfx90a\n  excluded gfx1100: 1\n  excluded gfx942: 2\n  \
             out/.kpack/libfoo_gfx90a.kpack\t2 entries\t300 bytes\n"
        );
    }
}
