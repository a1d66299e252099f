//! [`Progress`] (the job's sink): where a wheel command reports its
//! phases and bytes done.

pub use kpack_job::Progress;

/// [`Progress::phase`] on an optional display.
pub(crate) fn phase(p: Option<&dyn Progress>, what: &str, total: u64) {
    if let Some(p) = p {
        p.phase(what, total);
    }
}

/// [`Progress::advance`] on an optional display.
pub(crate) fn advance(p: Option<&dyn Progress>, bytes: u64) {
    if let Some(p) = p {
        p.advance(bytes);
    }
}
