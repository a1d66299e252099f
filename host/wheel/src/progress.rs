//! [`Progress`]: where a wheel command reports its phases and bytes done.

/// What a wheel command is doing, for a progress display (the CLI draws
/// one on a terminal). Called from several threads.
pub trait Progress: Sync {
    /// A phase starts: `what` it does (`unpacking x.whl`), and how many
    /// bytes it goes through (0: not known).
    fn phase(&self, what: &str, total: u64);
    /// `bytes` more of the current phase are done.
    fn advance(&self, bytes: u64);
}

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
