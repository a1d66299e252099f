//! The job context: what one run of a kpack command shares with every
//! library it calls, built once by the caller (the CLI, the Python API)
//! and passed by reference.
//!
//! A [`Job`] holds
//! - the memory budget every reader of the run inflates under
//!   ([`kpack_bundle::MemoryBudget`], `--max-memory`);
//! - the worker threads ([`Job::install`], `--jobs`);
//! - the rule for outputs that exist already ([`kpack_fsafe::Existing`],
//!   `--force`), applied by [`Job::outputs`];
//! - a progress sink ([`Progress`]) and a warning sink ([`Warnings`]):
//!   libraries never print, they tell the job.
//!
//! No library makes its own budget, reads an environment variable for a
//! policy or prints: each takes a `&Job`.
//!
//! # Example
//! ```
//! use kpack_job::{Collected, Job};
//! use std::sync::Arc;
//!
//! let warnings = Arc::new(Collected::default());
//! let job = Job::builder(kpack_bundle::MemoryBudget::new(256 << 20))
//!     .threads(2)
//!     .warnings(warnings.clone())
//!     .build()?;
//! let n = job.install(|| rayon::current_num_threads());
//! assert_eq!(n, 2);
//! job.warn("an archive was left as it is");
//! assert_eq!(warnings.take(), ["an archive was left as it is"]);
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use kpack_bundle::MemoryBudget;
use kpack_fsafe::{Existing, Outputs};

/// Where a job reports its progress: phases and bytes done. The CLI draws
/// a bar on a terminal; everything else may ignore it.
pub trait Progress: Send + Sync {
    /// A phase starts: what it does, and how many bytes it goes through
    /// (0: not known).
    fn phase(&self, what: &str, total: u64);
    /// `bytes` more of the current phase are done.
    fn advance(&self, bytes: u64);
}

/// Where a job's warnings go: printed by the CLI, collected by a library
/// caller. A warning never changes what is written.
pub trait Warnings: Send + Sync {
    /// One warning, a line without its `warning: ` prefix.
    fn warn(&self, message: &str);
}

/// Progress nobody watches.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}

impl Warnings for Quiet {
    fn warn(&self, _: &str) {}
}

/// Warnings kept in order, for a caller that reports them itself.
#[derive(Debug, Default)]
pub struct Collected(Mutex<Vec<String>>);

impl Collected {
    /// The warnings so far, in order; the list is emptied.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Warnings for Collected {
    fn warn(&self, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(message.to_string());
    }
}

/// One run's shared context.
pub struct Job {
    budget: MemoryBudget,
    pool: rayon::ThreadPool,
    existing: Existing,
    progress: Arc<dyn Progress>,
    warnings: Arc<dyn Warnings>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("memory_limit", &self.budget.limit())
            .field("threads", &self.pool.current_num_threads())
            .field("existing", &self.existing)
            .finish()
    }
}

/// Builds a [`Job`].
pub struct JobBuilder {
    budget: MemoryBudget,
    threads: Option<usize>,
    existing: Existing,
    progress: Arc<dyn Progress>,
    warnings: Arc<dyn Warnings>,
}

impl Job {
    /// A job with the memory budget `budget`; by default every core, quiet
    /// progress, warnings dropped, existing outputs refused.
    pub fn builder(budget: MemoryBudget) -> JobBuilder {
        JobBuilder {
            budget,
            threads: None,
            existing: Existing::Refuse,
            progress: Arc::new(Quiet),
            warnings: Arc::new(Quiet),
        }
    }

    /// The run's memory budget, shared by every reader.
    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// The rule for outputs that exist already.
    pub fn existing(&self) -> Existing {
        self.existing
    }

    /// The job's worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Run `f` on the job's worker threads (rayon's parallel iterators
    /// inside it use them).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// The progress sink.
    pub fn progress(&self) -> &dyn Progress {
        &*self.progress
    }

    /// Report a warning.
    pub fn warn(&self, message: &str) {
        self.warnings.warn(message);
    }

    /// The staged outputs of a command under `root` (`what` names its
    /// staging directory), with the job's rule for existing outputs.
    pub fn outputs(&self, root: &Path, what: &str) -> kpack_fsafe::Result<Outputs> {
        Outputs::create(root, what, self.existing)
    }
}

impl JobBuilder {
    /// Worker threads (`--jobs`; at least one).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n.max(1));
        self
    }

    /// The rule for outputs that exist already (`--force`).
    pub fn existing(mut self, existing: Existing) -> Self {
        self.existing = existing;
        self
    }

    /// Where progress goes.
    pub fn progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// Where warnings go.
    pub fn warnings(mut self, warnings: Arc<dyn Warnings>) -> Self {
        self.warnings = warnings;
        self
    }

    /// The job, its worker threads started.
    pub fn build(self) -> std::io::Result<Job> {
        let mut pool = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("kpack-worker-{i}"));
        if let Some(n) = self.threads {
            pool = pool.num_threads(n);
        }
        let pool = pool.build().map_err(std::io::Error::other)?;
        Ok(Job {
            budget: self.budget,
            pool,
            existing: self.existing,
            progress: self.progress,
            warnings: self.warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_shares_its_budget_and_applies_its_rule_for_existing_outputs() {
        let job = Job::builder(MemoryBudget::new(1 << 20))
            .existing(Existing::KeepIdentical)
            .build()
            .unwrap();
        let r = job.budget().acquire(1 << 19).unwrap();
        assert_eq!(job.budget().in_flight(), 1 << 19);
        drop(r);
        assert_eq!(job.existing(), Existing::KeepIdentical);
        let d = tempfile::tempdir().unwrap();
        let out = job.outputs(&d.path().join("out"), "test").unwrap();
        assert!(out.tree().is_dir());
    }

    #[test]
    fn warnings_are_collected_in_order() {
        let w = Arc::new(Collected::default());
        let job = Job::builder(MemoryBudget::new(1 << 20))
            .threads(1)
            .warnings(w.clone())
            .build()
            .unwrap();
        job.warn("a");
        job.install(|| job.warn("b"));
        assert_eq!(w.take(), ["a", "b"]);
        assert!(w.take().is_empty());
        assert_eq!(job.threads(), 1);
    }
}
