//! The C ABI's marker path as CLR drives it: arbitrary bytes as the HIPK
//! metadata `kpack_load_code_object` is handed (a pointer, no length),
//! placed flush against an unreadable guard page so any read past the
//! marker's own bytes that is not guarded (the 64 KiB lookahead must go
//! through `process_vm_readv`) crashes. The first byte picks the co_index
//! and one of two caches (env unset / `ROCM_KPACK_PATH` naming AMD's zstd
//! vector); the binary path is next to AMD's vectors so relative search
//! paths reach real archives. Every call must return an AMD error code or
//! a buffer of the size it reports.
#![no_main]
#![allow(unsafe_code, reason = "drives the C ABI exactly as a C caller would")]

use std::ffi::{CString, c_void};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rocm_kpack::*;

struct Fixture {
    caches: [kpack_cache_t; 2],
    binary: CString,
    arches: [CString; 3],
    page: usize,
}
// SAFETY: the caches are thread-safe; libFuzzer runs one input at a time.
unsafe impl Send for Fixture {}
// SAFETY: as above.
unsafe impl Sync for Fixture {}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let vectors =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/format/tests/vectors");
        let vectors = std::fs::canonicalize(vectors).expect("AMD's vectors");
        let mut caches = [std::ptr::null_mut(); 2];
        // SAFETY: single-threaded initialisation; valid out pointers.
        unsafe {
            std::env::remove_var("ROCM_KPACK_PATH");
            std::env::remove_var("ROCM_KPACK_PATH_PREFIX");
            std::env::remove_var("ROCM_KPACK_DISABLE");
            std::env::remove_var("ROCM_KPACK_DEBUG");
            assert_eq!(
                kpack_cache_create(&mut caches[0]),
                kpack_error_t::KPACK_SUCCESS
            );
            std::env::set_var("ROCM_KPACK_PATH", vectors.join("amd_test_zstd.kpack"));
            assert_eq!(
                kpack_cache_create(&mut caches[1]),
                kpack_error_t::KPACK_SUCCESS
            );
            std::env::remove_var("ROCM_KPACK_PATH");
        }
        Fixture {
            caches,
            binary: CString::new(vectors.join("libfuzz.so").to_str().unwrap()).unwrap(),
            arches: [
                CString::new("gfx906:sramecc+:xnack-").unwrap(),
                CString::new("amdgcn-amd-amdhsa--gfx1100").unwrap(),
                CString::new("gfx900").unwrap(),
            ],
            // SAFETY: sysconf has no preconditions.
            page: usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, marker)) = data.split_first() else {
        return;
    };
    if marker.is_empty() {
        return; // the ABI requires at least the marker's first byte to be readable
    }
    let f = fixture();
    // [ ... marker bytes ][ PROT_NONE page ]
    let body = marker.len().div_ceil(f.page) * f.page;
    // SAFETY: fresh anonymous mapping of body + one page.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            body + f.page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let base = base.cast::<u8>();
    // SAFETY: all offsets lie inside the mapping.
    let start = unsafe {
        assert_eq!(
            libc::mprotect(base.add(body).cast(), f.page, libc::PROT_NONE),
            0
        );
        let start = base.add(body - marker.len());
        std::ptr::copy_nonoverlapping(marker.as_ptr(), start, marker.len());
        start
    };
    let arches: Vec<*const std::ffi::c_char> = f.arches.iter().map(|a| a.as_ptr()).collect();
    let mut out: *mut c_void = std::ptr::null_mut();
    let mut size = usize::MAX;
    // SAFETY: every pointer is valid; the marker pointer's first byte is readable.
    let e = unsafe {
        kpack_load_code_object(
            f.caches[usize::from(sel & 1)],
            start.cast(),
            f.binary.as_ptr(),
            u32::from(sel >> 1) % 4,
            arches.as_ptr(),
            arches.len(),
            &mut out,
            &mut size,
        )
    };
    if e == kpack_error_t::KPACK_SUCCESS {
        assert!(!out.is_null() || size == 0);
        // SAFETY: a code object buffer of `size` bytes; touch every byte.
        let bytes = unsafe { std::slice::from_raw_parts(out.cast::<u8>(), size) };
        std::hint::black_box(bytes.iter().fold(0u8, |a, b| a ^ b));
        // SAFETY: buffer from kpack_load_code_object.
        unsafe { kpack_free_code_object(out) };
    } else {
        assert!(
            (1..=14).contains(&(e as i32)),
            "error {e:?} outside AMD's range"
        );
        assert!(out.is_null(), "{e:?} with an output buffer");
    }
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(base.cast(), body + f.page) };
});
