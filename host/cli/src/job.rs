//! The job context a command builds once from its flags ([`kpack_job::Job`]):
//! memory budget, worker threads, the rule for existing outputs, and a
//! progress bar on a terminal.

use std::sync::Arc;

use anyhow::Context;
use kpack_bundle::MemoryBudget;
use kpack_fsafe::Existing;
use kpack_job::Job;

/// A terminal's progress bar as the job's progress sink.
struct Bar(indicatif::ProgressBar);

impl kpack_job::Progress for Bar {
    fn phase(&self, what: &str, total: u64) {
        crate::ui::set_phase(&self.0, what, total);
    }

    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

/// One command's job, and its progress bar (cleared when dropped).
pub struct CommandJob {
    pub job: Job,
    bar: Option<indicatif::ProgressBar>,
}

impl Drop for CommandJob {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The job of a command: `budget`, `threads` workers (every core when
/// `None`), the `existing` rule for outputs (`Existing::from_force`, or
/// `keeping_identical` where shards write alike); with `bar`, a progress
/// bar when stderr is a terminal (commands whose libraries report phases).
pub fn build(
    budget: MemoryBudget,
    threads: Option<usize>,
    existing: Existing,
    bar: bool,
) -> anyhow::Result<CommandJob> {
    let bar = if bar { crate::ui::phases() } else { None };
    let mut b = Job::builder(budget).existing(existing);
    if let Some(n) = threads {
        b = b.threads(n);
    }
    if let Some(bar) = &bar {
        b = b.progress(Arc::new(Bar(bar.clone())));
    }
    let job = b.build().context("starting worker threads")?;
    Ok(CommandJob { job, bar })
}
