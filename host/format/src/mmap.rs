//! The crate's only `unsafe`: mapping an archive file read-only.
#![allow(
    unsafe_code,
    reason = "memory-mapping a file is unsafe in memmap2; confined to this module"
)]

use std::fs::File;

/// A read-only mapping of a whole file.
#[derive(Debug)]
pub(crate) struct Map(memmap2::Mmap);

impl Map {
    /// Map `file` read-only.
    pub(crate) fn new(file: &File) -> std::io::Result<Map> {
        // SAFETY: the mapping is read-only and private to this process. The
        // remaining hazard is another process truncating or rewriting the
        // file while it is mapped (SIGBUS or changed bytes). Archives are
        // install-time artifacts that are replaced by rename (our writer
        // does exactly that), never rewritten in place, which is the same
        // assumption the dynamic loader makes for the shared libraries next
        // to them. Every byte read through the map is bounds-checked and
        // validated, so changed bytes can produce errors but not UB in our
        // own code.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        Ok(Map(map))
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}
