//! The wheels a command writes, as jobs: [`WheelJob`] (a file name, its
//! entries in order, generated dist-info files and the RECORD) and where
//! each entry's bytes come from ([`Source`]). Split, prune, AMD's layout and
//! the variant wheel plan jobs; the pipeline writes them.

use std::path::{Path, PathBuf};

use serde::Serialize;
use zip::DateTime;

use crate::error::{Error, Result};
use crate::progress::{Progress, advance};
use crate::writer::WheelWriter;

/// One wheel file, input or output.
#[derive(Debug, Clone, Serialize)]
pub struct WheelFile {
    /// File name.
    pub file: String,
    /// Full path (in the output directory for outputs).
    pub path: PathBuf,
    /// Distribution name as in METADATA.
    pub distribution: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Files in it (RECORD rows, RECORD included).
    pub files: usize,
}

/// One entry of an output wheel.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) path: String,
    pub(crate) src: Source,
    pub(crate) mode: u32,
}

/// Where an output entry's bytes come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// A file on disk, compressed by the writer.
    Disk(PathBuf),
    /// An input entry whose content is unchanged: its compressed bytes are
    /// copied (no second deflate; the output is still a function of the
    /// input alone), with the writer's timestamp and the entry's mode.
    Raw {
        index: usize,
        hash: String,
        size: u64,
    },
}

/// dist-info last and RECORD after everything (the wheel spec asks for
/// `.dist-info` at the end of the archive); otherwise bytewise path order.
pub(crate) fn entry_order(dist_info: &str, path: &str) -> (bool, String) {
    (path.starts_with(&format!("{dist_info}/")), path.to_string())
}

/// One wheel to write.
#[derive(Clone)]
pub(crate) struct WheelJob {
    pub(crate) file: String,
    pub(crate) distribution: String,
    pub(crate) arch: Option<String>,
    /// Processors whose device trees go into the wheel.
    pub(crate) members: Vec<String>,
    pub(crate) dirs: Vec<(String, u32)>,
    pub(crate) entries: Vec<Entry>,
    /// Generated dist-info files (already in order: METADATA, WHEEL).
    pub(crate) generated: Vec<(String, String)>,
    pub(crate) record: String,
}

impl WheelJob {
    /// The bytes of its entries (what writing it goes through).
    pub(crate) fn bytes(&self) -> u64 {
        let size = |e: &Entry| match &e.src {
            Source::Disk(p) => std::fs::metadata(p).map_or(0, |m| m.len()),
            Source::Raw { size, .. } => *size,
        };
        self.entries.iter().map(size).sum()
    }

    pub(crate) fn write(
        &self,
        input: &Path,
        path: &Path,
        time: DateTime,
        progress: Option<&dyn Progress>,
    ) -> Result<(u64, usize)> {
        let mut w = WheelWriter::create(path, time)?;
        w.progress = progress;
        let mut zip = None;
        for (d, m) in &self.dirs {
            w.add_dir(d, *m)?;
        }
        for e in &self.entries {
            match &e.src {
                Source::Disk(p) => w.add_file(&e.path, p, e.mode)?,
                Source::Raw { index, hash, size } => {
                    let zip = match &mut zip {
                        Some(z) => z,
                        None => {
                            let f = std::fs::File::open(input)
                                .map_err(|e| Error::io(input, "cannot open", e))?;
                            zip.insert(
                                zip::ZipArchive::new(f)
                                    .map_err(|e| Error::zip(input, "not a zip file", e))?,
                            )
                        }
                    };
                    w.add_raw(zip, input, *index, e.mode, hash, *size)?;
                    advance(progress, *size);
                }
            }
        }
        for (p, text) in &self.generated {
            w.add_bytes(p, text.as_bytes(), 0o644)?;
        }
        let files = self.entries.len() + self.generated.len() + 1;
        Ok((w.finish(&self.record)?, files))
    }
}
