//! What the C ABI benchmark examples share (included with `#[path]`; not
//! an example itself).

use std::ffi::{CStr, c_void};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rocm_kpack::{
    kpack_cache_create, kpack_cache_t, kpack_error_t, kpack_free_code_object,
    kpack_load_code_object,
};

/// A new cache (destroy it with `kpack_cache_destroy`).
pub fn new_cache() -> kpack_cache_t {
    let mut cache: kpack_cache_t = std::ptr::null_mut();
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { kpack_cache_create(&mut cache) },
        kpack_error_t::KPACK_SUCCESS
    );
    cache
}

/// One `kpack_load_code_object` of entry `co` for device `arch` through
/// `cache`, as CLR calls it, timed; the buffer is freed. Returns (time,
/// size); a failed load panics.
pub fn timed_load(
    cache: kpack_cache_t,
    marker: &[u8],
    binary: &CStr,
    co: u32,
    arch: &CStr,
) -> (Duration, usize) {
    let arches = [arch.as_ptr()];
    let mut out: *mut c_void = std::ptr::null_mut();
    let mut size = 0usize;
    let t = Instant::now();
    // SAFETY: all pointers valid for the call.
    let e = unsafe {
        kpack_load_code_object(
            cache,
            marker.as_ptr().cast(),
            binary.as_ptr(),
            co,
            arches.as_ptr(),
            1,
            &mut out,
            &mut size,
        )
    };
    let dt = t.elapsed();
    assert_eq!(e, kpack_error_t::KPACK_SUCCESS, "load #{co}");
    // SAFETY: buffer from kpack_load_code_object.
    unsafe { kpack_free_code_object(out) };
    (dt, size)
}

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
