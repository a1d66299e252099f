//! Writing an [`ExtractPlan`](crate::ExtractPlan)'s files: each bundle is
//! read once, as a stream, and its selected entries written as they
//! arrive (bundles in parallel on the current rayon pool, each under the
//! memory budget). The caller chooses the directory (a staging directory
//! of `kpack_fsafe::Outputs`, every path planned first) and hears of each
//! file through an [`ExtractEvent`].

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use kpack_bundle::MemoryBudget;
use kpack_fsafe::IoError;
use rayon::prelude::*;

use crate::extract::ExtractFile;
use crate::host::{Error, HostBinary};

/// What [`HostBinary::write_extract`] reports as it goes (from any of its
/// threads).
#[derive(Debug)]
pub enum ExtractEvent<'a> {
    /// `file` was written, `bytes` long.
    Written {
        /// The file.
        file: &'a ExtractFile,
        /// Its size.
        bytes: usize,
    },
    /// `file`'s entry claims SPIR-V but is no valid module; it is written
    /// as it is.
    InvalidSpirv {
        /// The file.
        file: &'a ExtractFile,
        /// The entry's bundle entry id, as the bundle spells it.
        entry: &'a str,
        /// Why the module is invalid.
        error: String,
    },
}

/// A failure inside one bundle's stream, before it gets its bundle's name.
enum Failure {
    Bundle(kpack_bundle::Error),
    Io(IoError),
}

impl From<kpack_bundle::Error> for Failure {
    fn from(e: kpack_bundle::Error) -> Failure {
        Failure::Bundle(e)
    }
}

impl HostBinary {
    /// Write each of `files` (from [`HostBinary::extract_plan`]) into `dir`
    /// under its name. `path` names the binary in errors. Every bundle
    /// involved is checked against `budget` before anything is written.
    /// Returns how many files are invalid SPIR-V modules (each also an
    /// [`ExtractEvent::InvalidSpirv`]).
    pub fn write_extract(
        &self,
        path: &Path,
        files: &[ExtractFile],
        dir: &Path,
        budget: &MemoryBudget,
        on_event: &(dyn Fn(ExtractEvent<'_>) + Sync),
    ) -> Result<usize, Error> {
        let bundles = self.bundles();
        let mut by_bundle: Vec<Vec<&ExtractFile>> = vec![Vec::new(); bundles.len()];
        for f in files {
            if let Some(list) = by_bundle.get_mut(f.bundle) {
                list.push(f);
            }
        }
        let named = |index: usize| {
            move |source: kpack_bundle::Error| Error::Bundle {
                path: path.to_path_buf(),
                index,
                source,
            }
        };
        for (b, list) in by_bundle.iter().enumerate() {
            if !list.is_empty() {
                bundles[b].check_fits(budget).map_err(named(b))?;
            }
        }
        let invalid = AtomicUsize::new(0);
        by_bundle
            .par_iter()
            .enumerate()
            .filter(|(_, list)| !list.is_empty())
            .try_for_each(|(b, list)| {
                self.write_bundle(b, list, dir, budget, on_event, &invalid)
                    .map_err(|e| match e {
                        Failure::Bundle(e) => named(b)(e),
                        Failure::Io(e) => Error::Io(e),
                    })
            })?;
        Ok(invalid.into_inner())
    }

    /// Stream bundle `b` and write the entries `list` selects.
    fn write_bundle(
        &self,
        b: usize,
        list: &[&ExtractFile],
        dir: &Path,
        budget: &MemoryBudget,
        on_event: &(dyn Fn(ExtractEvent<'_>) + Sync),
        invalid: &AtomicUsize,
    ) -> Result<(), Failure> {
        self.bundles()[b].stream_entries(self.source(), budget, |i, entry, data| {
            let Some(file) = list.iter().find(|f| f.entry == i) else {
                return Ok(());
            };
            if let Some(Err(e)) =
                kpack_bundle::inspect_spirv(&entry.id, &data, 0, data.len() as u64)
            {
                invalid.fetch_add(1, Ordering::Relaxed);
                on_event(ExtractEvent::InvalidSpirv {
                    file,
                    entry: entry.id.raw(),
                    error: e.to_string(),
                });
            }
            let out = dir.join(&file.name);
            std::fs::write(&out, data)
                .map_err(|e| Failure::Io(IoError::new(&out, "cannot write", e)))?;
            on_event(ExtractEvent::Written {
                file,
                bytes: data.len(),
            });
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_planned_entry_and_reports_each() {
        let fixture = kpack_tests::fixture("corpus/libaxpy_2arch.so");
        let bin = HostBinary::read(&fixture, Default::default()).expect("read");
        let plan = bin.extract_plan(true, &[]);
        assert!(plan.files.len() >= 2, "{plan:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let seen = std::sync::Mutex::new(Vec::new());
        let budget = MemoryBudget::new(kpack_bundle::DEFAULT_READ_MEMORY_LIMIT);
        let invalid = bin
            .write_extract(&fixture, &plan.files, dir.path(), &budget, &|e| {
                if let ExtractEvent::Written { file, bytes } = e {
                    seen.lock().expect("lock").push((file.name.clone(), bytes));
                }
            })
            .expect("write");
        assert_eq!(invalid, 0);
        let mut seen = seen.into_inner().expect("lock");
        seen.sort();
        let mut want: Vec<String> = plan.files.iter().map(|f| f.name.clone()).collect();
        want.sort();
        assert_eq!(seen.iter().map(|s| s.0.clone()).collect::<Vec<_>>(), want);
        for (name, bytes) in seen {
            let on_disk = std::fs::metadata(dir.path().join(&name)).expect("file");
            assert_eq!(on_disk.len(), bytes as u64, "{name}");
        }
    }
}
