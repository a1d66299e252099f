//! Write → read → equal, through readers that return short reads, plus the
//! golden text dumps of AMD's vectors (bless with `KPACK_BLESS=1`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::io::Read;
use std::path::PathBuf;

use kpack_format::{Archive, ArchiveWriter, Compression, EntryOrder, WriterOptions};

/// Hands out at most a few bytes per `read` call.
struct ShortReader<R> {
    inner: R,
    step: usize,
}

impl<R: Read> Read for ShortReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.step = self.step % 7 + 1;
        let n = buf.len().min(self.step);
        self.inner.read(&mut buf[..n])
    }
}

/// Deterministic pseudo-random bytes (xorshift), compressible in parts.
fn kernel(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 { 0 } else { x as u8 }
        })
        .collect()
}

#[test]
fn round_trips_both_schemes_and_orders_through_short_reads() {
    let dir = tempfile::tempdir().unwrap();
    let arches = ["gfx900", "gfx906", "gfx1100", "gfx942:xnack+"];
    let mut items = Vec::new();
    for b in 0..7u64 {
        for (i, arch) in arches.iter().enumerate() {
            if !(b + i as u64).is_multiple_of(3) {
                let len = [0, 1, 100, 5000, 70_000][((b as usize) + i) % 5];
                items.push((
                    format!("lib/lib{b}.so#{}", b % 2),
                    arch.to_string(),
                    kernel(b * 31 + i as u64, len),
                ));
            }
        }
    }
    for compression in [
        Compression::None,
        Compression::Zstd { level: 3 },
        Compression::Zstd { level: 19 },
    ] {
        for order in [EntryOrder::Sorted, EntryOrder::Insertion] {
            let path = dir.path().join("rt.kpack");
            let options = WriterOptions {
                group_name: "rt".into(),
                gfx_arch_family: "mix".into(),
                compression,
                order,
                ..Default::default()
            };
            let mut w = ArchiveWriter::create(&path, options).unwrap();
            for (k, a, d) in &items {
                w.add_from_reader(
                    k,
                    a,
                    ShortReader {
                        inner: d.as_slice(),
                        step: 0,
                    },
                )
                .unwrap();
            }
            assert_eq!(w.len(), items.len());
            let written = w.finish().unwrap();
            assert_eq!(written.entries, items.len());

            let bytes = std::fs::read(&path).unwrap();
            let from_reader = Archive::from_reader(ShortReader {
                inner: bytes.as_slice(),
                step: 0,
            })
            .unwrap();
            let mapped = Archive::open(&path).unwrap();
            for a in [&from_reader, &mapped] {
                assert_eq!(a.entry_count(), items.len());
                let mut want_arches: Vec<_> = arches.to_vec();
                want_arches.sort();
                assert_eq!(a.arches(), want_arches);
                for (k, arch, d) in &items {
                    assert_eq!(
                        &*a.get(k, arch).unwrap(),
                        d.as_slice(),
                        "{compression:?} {order:?} {k} {arch}"
                    );
                }
                let keys: Vec<_> = a.binaries().collect();
                let mut sorted = keys.clone();
                sorted.sort();
                assert_eq!(keys, sorted);
            }
        }
    }
}

#[test]
fn empty_archive_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    for compression in [Compression::None, Compression::default()] {
        let path = dir.path().join("empty.kpack");
        let w = ArchiveWriter::create(
            &path,
            WriterOptions {
                compression,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(w.is_empty());
        w.finish().unwrap();
        let a = Archive::open(&path).unwrap();
        assert_eq!(a.entry_count(), 0);
        assert!(a.arches().is_empty());
    }
}

#[test]
fn metadata_round_trips_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.kpack");
    let mut w = ArchiveWriter::create(&path, WriterOptions::default()).unwrap();
    let meta = [
        ("target", "hipv4-amdgcn-amd-amdhsa--gfx1100"),
        ("source_prefix", "math-libs/x"),
    ];
    w.add_with_metadata("a#0", "gfx1100", b"k", &meta).unwrap();
    w.add("b#0", "gfx1100", b"k").unwrap();
    w.finish().unwrap();
    let a = Archive::open(&path).unwrap();
    let got: Vec<(&str, &str)> = a
        .entry("a#0", "gfx1100")
        .unwrap()
        .metadata()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(got, meta);
    assert!(a.entry("b#0", "gfx1100").unwrap().metadata().is_empty());
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("KPACK_BLESS").is_some() {
        // Blessing rewrites the expectation and passes: in CI that would
        // turn a real difference into a green run.
        assert!(
            std::env::var_os("CI").is_none(),
            "KPACK_BLESS is set together with CI; blessing is for local runs only"
        );
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing; run with KPACK_BLESS=1", path.display()));
    assert_eq!(
        actual,
        expected,
        "dump differs from {}; bless with KPACK_BLESS=1 if intended",
        path.display()
    );
}

#[test]
fn dumps_match_goldens() {
    let vectors = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    for name in ["amd_test_noop", "amd_test_zstd"] {
        let a = Archive::open(vectors.join(format!("{name}.kpack"))).unwrap();
        golden(&format!("{name}.txt"), &a.dump());
    }
}
