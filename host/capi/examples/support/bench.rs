//! What the C ABI benchmark examples share (included with `#[path]`; not
//! an example itself).

use std::os::fd::AsRawFd;
use std::path::Path;

/// The bytes of ELF section `name` (the marker of an offloaded binary).
#[allow(dead_code, reason = "bench_load needs no marker")]
pub fn elf_section(file: &[u8], name: &str) -> Option<Vec<u8>> {
    use object::{Object, ObjectSection};
    let elf = object::File::parse(file).ok()?;
    let data = elf.section_by_name(name)?.data().ok()?;
    Some(data.to_vec())
}

/// Drop `path`'s clean pages from the page cache; dirty pages (an archive
/// just written) survive DONTNEED, so they are written back first.
pub fn evict(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: fadvise on an open fd; only drops clean page-cache pages.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}
