//! A TheRock artifact archive as arbitrary bytes: the tar stream inside a
//! zstd frame, read through `kpack_artifact::walk` (the one walk split,
//! verify and recombine use) and unpacked with `unpack_artifact` into a
//! scratch directory. Nothing may panic; whatever the walk hands out obeys
//! its rule (plain relative names inside the scratch tree), and nothing is
//! written outside it.
#![no_main]

use std::io::Read;

use kpack_artifact::{Event, Limits, MemberKind, walk};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let archive = dir.path().join("a_gfx942.tar.zst");
    let Ok(frame) = zstd::bulk::compress(data, 1) else {
        return;
    };
    if std::fs::write(&archive, frame).is_err() {
        return;
    }
    // Small limits: a fuzz input never needs more.
    let limits = Limits {
        max_unpacked_size: 64 << 20,
        max_ratio: u64::MAX,
        window_log_max: 24,
    };
    let _ = walk(&archive, &limits, |event| {
        if let Event::Member(mut m) = event {
            assert!(
                kpack_fsafe::is_plain_relative(m.path.as_str()),
                "{}",
                m.path
            );
            assert!(
                m.path.as_str().starts_with(m.prefix),
                "{} in {}",
                m.path,
                m.prefix
            );
            if let MemberKind::File { .. } = m.kind {
                let _ = std::io::copy(&mut m.data().take(1 << 20), &mut std::io::sink());
            }
        }
        Ok::<(), kpack_artifact::Error>(())
    });
    let out = dir.path().join("out");
    let _ = kpack_artifact::unpack_artifact(&archive, &out, &limits);
    for e in walkdir::WalkDir::new(dir.path())
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        assert!(e.path().starts_with(dir.path()), "{}", e.path().display());
    }
});
