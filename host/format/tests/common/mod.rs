//! What kpack-format's integration tests share (`mod common;` in each).

use std::path::Path;

use kpack_format::{ArchiveWriter, Compression, WriterOptions};

/// Write `items` (key, arch, bytes), added in the order given, to `path`
/// as an archive of the `family` group at `compression`; its bytes.
pub fn write<'a>(
    path: &Path,
    family: &str,
    compression: Compression,
    items: impl IntoIterator<Item = (&'a str, &'a str, &'a [u8])>,
) -> Vec<u8> {
    let options = WriterOptions {
        group_name: "g".into(),
        gfx_arch_family: family.into(),
        compression,
        ..Default::default()
    };
    let mut w = ArchiveWriter::create(path, options).unwrap();
    for (key, arch, data) in items {
        w.add(key, arch, data).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

/// Assert that `write(threads)` (an archive's bytes) is the same run on a
/// rayon pool of each of `counts` threads.
pub fn assert_same_at_thread_counts(counts: &[usize], write: impl Fn(usize) -> Vec<u8> + Sync) {
    let outputs: Vec<Vec<u8>> = counts
        .iter()
        .map(|&threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| write(threads))
        })
        .collect();
    for (threads, out) in counts.iter().zip(&outputs).skip(1) {
        assert!(
            *out == outputs[0],
            "{threads} threads wrote other bytes than {}",
            counts[0]
        );
    }
}
