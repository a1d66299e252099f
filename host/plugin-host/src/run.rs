//! Running loaded handlers: [`HandlerSet`] asks them, in order, to classify
//! files, in batches sized to the sandbox's memory cap.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use kpack_split::{Claim, Classification, Databases, FileInfo};
use rayon::prelude::*;

use crate::sandbox::{self, Limits, LogLine};
use crate::types::HandlerMeta;
use crate::wit::{Bindings, GuestError};
use crate::{Error, ErrorKind, Result};

/// One loaded handler: what it is, and its linked component.
pub(crate) struct Loaded {
    pub(crate) meta: HandlerMeta,
    pub(crate) bindings: Box<dyn Bindings>,
}

/// Database handlers, loaded and ready, asked in the order given
/// ([`HandlerSet::load`] builds one).
pub struct HandlerSet {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) limits: Limits,
    pub(crate) handlers: Vec<Loaded>,
    pub(crate) logs: Mutex<Vec<LogLine>>,
    /// What loading the handlers had to say (a cache that could not be
    /// used), once each; the caller reports them.
    pub(crate) warnings: Vec<String>,
}

impl fmt::Debug for HandlerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerSet")
            .field("handlers", &self.handlers().collect::<Vec<_>>())
            .finish()
    }
}

impl HandlerSet {
    /// The loaded handlers, in probe order.
    pub fn handlers(&self) -> impl ExactSizeIterator<Item = &HandlerMeta> {
        self.handlers.iter().map(|h| &h.meta)
    }

    /// How many leading bytes of `path` the handlers that may claim it want
    /// (0 for most files, thanks to path hints).
    pub fn prefix_bytes_for(&self, path: &str) -> usize {
        self.handlers
            .iter()
            .filter(|h| h.meta.wants(path))
            .map(|h| h.meta.prefix_bytes as usize)
            .max()
            .unwrap_or(0)
    }

    /// Classify `files`: for each, the first handler (in load order) that
    /// claims it, or `None`. A handler that traps, times out or runs out of
    /// memory fails the whole call with an error naming it.
    pub fn classify(&self, files: &[FileInfo]) -> Result<Vec<Option<Claim>>> {
        let mut out: Vec<Option<Claim>> = vec![None; files.len()];
        for h in &self.handlers {
            let pending: Vec<usize> = (0..files.len())
                .filter(|&i| out[i].is_none() && h.meta.wants(&files[i].path))
                .collect();
            if pending.is_empty() {
                continue;
            }
            let batches = self.batches(&pending, files, h.meta.prefix_bytes as usize);
            let results = batches
                .par_iter()
                .map(|batch| self.run_batch(h, files, batch))
                .collect::<Result<Vec<_>>>()?;
            for (batch, verdicts) in batches.iter().zip(results) {
                for (&i, v) in batch.iter().zip(verdicts) {
                    out[i] = v.map(|classification| Claim {
                        handler: h.meta.name.clone(),
                        classification,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Walk `root` (sorted, regular files only, symlinks not followed) and
    /// classify every file; paths are relative to `root`.
    pub fn classify_tree(&self, root: &Path) -> Result<Vec<(String, Option<Claim>)>> {
        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
            let entry = entry.map_err(|e| {
                Error::new(ErrorKind::Io, format!("walking {}: {e}", root.display()))
            })?;
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            let rel = rel
                .to_str()
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Io,
                        format!("{}: path is not UTF-8", entry.path().display()),
                    )
                })?
                .replace(std::path::MAIN_SEPARATOR, "/");
            let want = self.prefix_bytes_for(&rel);
            files.push(read_file_info(root, &rel, want)?);
        }
        let claims = self.classify(&files)?;
        Ok(files.into_iter().map(|f| f.path).zip(claims).collect())
    }

    /// What loading the handlers had to say, once each (no library prints:
    /// the caller reports these).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Log lines handlers sent since the last call (at most 1,000 per call).
    pub fn take_logs(&self) -> Vec<LogLine> {
        self.logs
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    fn batches(&self, pending: &[usize], files: &[FileInfo], prefix: usize) -> Vec<Vec<usize>> {
        // Guest memory per entry: the lowered record (~32 B), the path and
        // prefix copies, the result, and allocator slack; keep a batch's
        // payload within a quarter of the memory cap.
        let budget = (self.limits.memory_bytes / 4)
            .saturating_sub(1 << 20)
            .max(64 << 10);
        let mut out = Vec::new();
        let mut cur = Vec::new();
        let mut bytes = 0usize;
        for &i in pending {
            let cost = 96 + files[i].path.len() * 2 + prefix.min(files[i].prefix.len());
            if !cur.is_empty() && (cur.len() >= self.limits.max_batch || bytes + cost > budget) {
                out.push(std::mem::take(&mut cur));
                bytes = 0;
            }
            cur.push(i);
            bytes += cost;
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    fn run_batch(
        &self,
        h: &Loaded,
        files: &[FileInfo],
        batch: &[usize],
    ) -> Result<Vec<Option<Classification>>> {
        let who = h.meta.label();
        let mut store = sandbox::store(&self.engine, &self.limits);
        let fuel = sandbox::refuel(&mut store, &self.limits, batch.len())?;
        let guest = h
            .bindings
            .instantiate(&mut store)
            .map_err(|e| sandbox::call_error(&who, "instantiation", &e, &mut store, fuel))?;
        let refs: Vec<&FileInfo> = batch.iter().map(|&i| &files[i]).collect();
        let result = guest.classify(&mut store, &refs, h.meta.prefix_bytes as usize);
        let what = format!(
            "classify of {} files (first: {})",
            batch.len(),
            refs.first().map_or("", |f| f.path.as_str())
        );
        let outcome = match result {
            Ok(Ok(v)) if v.len() == batch.len() => Ok(v),
            Ok(Ok(v)) => Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "{who} returned {} results for {} files",
                    v.len(),
                    batch.len()
                ),
            )),
            Ok(Err(GuestError::InvalidInput(m))) => Err(Error::new(
                ErrorKind::Handler,
                format!("{who} rejected the input of {what}: {m}"),
            )),
            Ok(Err(GuestError::Internal(m))) => Err(Error::new(
                ErrorKind::Handler,
                format!("{who} failed during {what}: {m}"),
            )),
            Err(e) => Err(sandbox::call_error(&who, &what, &e, &mut store, fuel)),
        };
        let logs = store.data_mut().take_logs();
        if !logs.is_empty()
            && let Ok(mut sink) = self.logs.lock()
        {
            let room = 1000usize.saturating_sub(sink.len());
            sink.extend(logs.into_iter().take(room).map(|(level, message)| LogLine {
                handler: h.meta.name.clone(),
                level,
                message,
            }));
        }
        outcome
    }
}

/// Split asks its classifier through this trait; the handlers are one.
impl Databases for HandlerSet {
    fn prefix_bytes_for(&self, path: &str) -> usize {
        HandlerSet::prefix_bytes_for(self, path)
    }
    fn classify(
        &self,
        files: &[FileInfo],
    ) -> std::result::Result<Vec<Option<Claim>>, kpack_split::ClassifyError> {
        Ok(HandlerSet::classify(self, files)?)
    }
}

/// Size and the first `prefix_bytes` bytes of `root/rel`.
fn read_file_info(root: &Path, rel: &str, prefix_bytes: usize) -> Result<FileInfo> {
    let full = root.join(rel);
    let meta = std::fs::metadata(&full).map_err(|e| Error::io(full.display(), e))?;
    let mut info = FileInfo::new(rel, meta.len());
    if prefix_bytes > 0 {
        let f = std::fs::File::open(&full).map_err(|e| Error::io(full.display(), e))?;
        f.take(prefix_bytes as u64)
            .read_to_end(&mut info.prefix)
            .map_err(|e| Error::io(full.display(), e))?;
    }
    Ok(info)
}
