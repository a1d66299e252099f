//! What opening an archive costs in memory when its TOC is mostly values
//! the reader does not know: they are skipped, not built. One test in this
//! binary, so the counting allocator sees nothing else.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
#![allow(unsafe_code, reason = "a counting global allocator")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kpack_format::Archive;

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let live = if new_size >= layout.size() {
            LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size()
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed) - (layout.size() - new_size)
        };
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn str(out: &mut Vec<u8>, s: &str) {
    rmp::encode::write_str(out, s).unwrap();
}

/// A valid `none` archive of one 4-byte kernel whose TOC also holds
/// `nils` msgpack nils in an array under a key no reader knows.
fn archive_with_nils(nils: u32) -> Vec<u8> {
    let mut out = b"KPAK".to_vec();
    out.extend(1u32.to_le_bytes());
    out.extend(68u64.to_le_bytes());
    out.resize(64, 0);
    out.extend(b"CODE");
    let t = &mut out;
    rmp::encode::write_map_len(t, 8).unwrap();
    str(t, "format_version");
    rmp::encode::write_uint(t, 1).unwrap();
    str(t, "padding");
    rmp::encode::write_array_len(t, nils).unwrap();
    t.resize(t.len() + nils as usize, 0xc0);
    str(t, "group_name");
    str(t, "g");
    str(t, "gfx_arch_family");
    str(t, "f");
    str(t, "gfx_arches");
    rmp::encode::write_array_len(t, 1).unwrap();
    str(t, "gfx900");
    str(t, "toc");
    rmp::encode::write_map_len(t, 1).unwrap();
    str(t, "a#0");
    rmp::encode::write_map_len(t, 1).unwrap();
    str(t, "gfx900");
    rmp::encode::write_map_len(t, 3).unwrap();
    str(t, "type");
    str(t, "hsaco");
    str(t, "ordinal");
    rmp::encode::write_uint(t, 0).unwrap();
    str(t, "original_size");
    rmp::encode::write_uint(t, 4).unwrap();
    str(t, "compression_scheme");
    str(t, "none");
    str(t, "blobs");
    rmp::encode::write_array_len(t, 1).unwrap();
    rmp::encode::write_map_len(t, 2).unwrap();
    str(t, "offset");
    rmp::encode::write_uint(t, 64).unwrap();
    str(t, "size");
    rmp::encode::write_uint(t, 4).unwrap();
    out
}

#[test]
fn a_25_mb_toc_of_unknown_nils_opens_in_a_few_kb() {
    let bytes = archive_with_nils(25_000_000);
    assert!(bytes.len() > 25_000_000);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let archive = Archive::from_bytes(bytes).unwrap();
    let extra = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(&*archive.get("a#0", "gfx900").unwrap(), b"CODE");
    // A value tree would take tens of bytes per nil (~1 GB here).
    assert!(
        extra < 1 << 20,
        "opening allocated {extra} bytes at its peak"
    );
}
