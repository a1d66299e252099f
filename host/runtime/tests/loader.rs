//! The loader against AMD's vectors and archives laid out like the split
//! tool's, covering §10.5 and the upstream C++ loader tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kpack_format::{ArchiveWriter, Compression, WriterOptions};
use kpack_runtime::{Cache, Config, ErrorKind, Marker};

fn vector(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/vectors")
        .join(name)
}

fn marker(kernel_name: &str, paths: &[&str]) -> Marker {
    Marker {
        kernel_name: kernel_name.into(),
        search_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
    }
}

/// A tree `root/lib/libx.so` (the binary, never read) and
/// `root/.kpack/x_<arch>.kpack` holding `"<arch>:<key>"` for each arch.
fn split_tree(arches: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("lib")).unwrap();
    std::fs::create_dir_all(dir.path().join(".kpack")).unwrap();
    for arch in arches {
        let path = dir.path().join(format!(".kpack/x_{arch}.kpack"));
        let mut w = ArchiveWriter::create(
            &path,
            WriterOptions {
                gfx_arch_family: (*arch).into(),
                ..Default::default()
            },
        )
        .unwrap();
        for k in 0..2 {
            let key = format!("lib/libx.so#{k}");
            w.add(&key, arch, format!("{arch}:{key}").as_bytes())
                .unwrap();
        }
        w.finish().unwrap();
    }
    dir
}

fn load(
    cache: &Cache,
    root: &Path,
    co: u32,
    arches: &[&str],
) -> Result<String, kpack_runtime::Error> {
    let m = marker("lib/libx.so", &["../.kpack/x_@GFXARCH@.kpack"]);
    cache
        .load(&m, &root.join("lib/libx.so"), co, arches)
        .map(|b| String::from_utf8(b).unwrap())
}

#[test]
fn loads_from_amd_noop_and_zstd_vectors_with_arch_priority() {
    let cache = Cache::new(Config::default());
    let noop = vector("amd_test_noop.kpack");
    let m = marker("lib/libtest.so", &[noop.to_str().unwrap()]);
    let bin = Path::new("/nonexistent/bin/app");
    let got = cache.load(&m, bin, 0, &["gfx906", "gfx900"]).unwrap();
    assert!(got.starts_with(b"KERNEL2_GFX906_DATA") && got.len() == 219);
    let got = cache
        .load(&m, bin, 0, &["gfx1100", "amdgcn-amd-amdhsa--gfx900"])
        .unwrap();
    assert!(got.starts_with(b"KERNEL1_GFX900_DATA") && got.len() == 119);
    let zstd = vector("amd_test_zstd.kpack");
    let m = marker("lib/libhip.so", &[zstd.to_str().unwrap()]);
    let got = cache.load(&m, bin, 0, &["gfx1101"]).unwrap();
    assert_eq!(got.len(), 619);
    assert!(got.starts_with(b"HIP_KERNEL_GFX1101_XXX"));
    assert_eq!(cache.open_archive_count(), 2);
    // Same archive again: still two open.
    cache.load(&m, bin, 0, &["gfx1100"]).unwrap();
    assert_eq!(cache.open_archive_count(), 2);
}

#[test]
fn expands_gfxarch_per_compatible_target_most_specific_first() {
    let tree = split_tree(&[
        "gfx90a:xnack+",
        "gfx90a",
        "gfx942",
        "gfx908:sramecc+:xnack-",
    ]);
    let cache = Cache::new(Config::default());
    let root = tree.path();
    assert_eq!(
        load(&cache, root, 0, &["gfx90a:xnack+"]).unwrap(),
        "gfx90a:xnack+:lib/libx.so#0"
    );
    assert_eq!(
        load(&cache, root, 1, &["gfx90a"]).unwrap(),
        "gfx90a:lib/libx.so#1"
    );
    assert_eq!(
        load(&cache, root, 0, &["gfx90a:xnack-"]).unwrap(),
        "gfx90a:lib/libx.so#0"
    );
    assert_eq!(
        load(
            &cache,
            root,
            0,
            &["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"]
        )
        .unwrap(),
        "gfx942:lib/libx.so#0"
    );
    assert_eq!(
        load(&cache, root, 0, &["gfx908:sramecc+:xnack-"]).unwrap(),
        "gfx908:sramecc+:xnack-:lib/libx.so#0"
    );
    // The first device arch with any archive wins over later ones.
    assert_eq!(
        load(&cache, root, 0, &["gfx1100", "gfx11-generic", "gfx942"]).unwrap(),
        "gfx942:lib/libx.so#0"
    );
}

#[test]
fn reports_arch_not_found_with_a_diagnostic_naming_the_search() {
    let tree = split_tree(&["gfx942"]);
    let cache = Cache::new(Config::default());
    // Archive for another arch exists only under an explicit path.
    let m = marker(
        "lib/libx.so",
        &["../.kpack/x_@GFXARCH@.kpack", "../.kpack/x_gfx942.kpack"],
    );
    let err = cache
        .load(&m, &tree.path().join("lib/libx.so"), 0, &["gfx1100"])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArchNotFound);
    assert_eq!(err.kind().code(), 14);
    let diag = cache.last_diagnostic().unwrap();
    assert!(
        diag.contains("x_gfx1100.kpack") && diag.contains("does not exist"),
        "{diag}"
    );
    assert!(
        diag.contains("x_gfx942.kpack") && diag.contains("opened"),
        "{diag}"
    );
}

#[test]
fn reports_archive_not_found_listing_tried_paths() {
    let tree = split_tree(&[]);
    let cache = Cache::new(Config::default());
    let err = load(&cache, tree.path(), 0, &["gfx942:xnack+"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArchiveNotFound);
    assert_eq!(err.kind().code(), 13);
    let msg = err.to_string();
    assert!(
        msg.contains("x_gfx942:xnack+.kpack") && msg.contains("x_gfx942.kpack"),
        "{msg}"
    );
    assert_eq!(cache.last_diagnostic().unwrap(), msg);
    // A corrupt archive is skipped like a missing one, with its reason.
    std::fs::write(tree.path().join(".kpack/x_gfx942.kpack"), b"KPAK garbage").unwrap();
    let err = load(&cache, tree.path(), 0, &["gfx942"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArchiveNotFound);
    assert!(err.to_string().contains("cannot open"), "{err}");
    // An archive installed later is found (failures are not memoised).
    let tree2 = split_tree(&["gfx942"]);
    std::fs::copy(
        tree2.path().join(".kpack/x_gfx942.kpack"),
        tree.path().join(".kpack/x_gfx942.kpack"),
    )
    .unwrap();
    assert_eq!(
        load(&cache, tree.path(), 0, &["gfx942"]).unwrap(),
        "gfx942:lib/libx.so#0"
    );
}

#[test]
fn archive_not_found_names_the_targets_that_are_shipped() {
    let tree = split_tree(&["gfx90a:xnack+", "gfx1030", "gfx90a"]);
    let cache = Cache::new(Config::default());
    let err = load(&cache, tree.path(), 0, &["gfx942:sramecc+:xnack-"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArchiveNotFound);
    let kpack = std::fs::canonicalize(tree.path().join(".kpack")).unwrap();
    let want = format!(
        "archives present for {}: gfx1030, gfx90a, gfx90a:xnack+",
        kpack.join("x_@GFXARCH@.kpack").display()
    );
    assert!(err.to_string().contains(&want), "{err}");
    // Nothing shipped at all: said so.
    let empty = split_tree(&[]);
    let err = load(&cache, empty.path(), 0, &["gfx942"]).unwrap_err();
    assert!(err.to_string().contains("x_@GFXARCH@.kpack: none"), "{err}");
}

#[test]
fn key_missing_from_every_compatible_archive_is_kernel_not_found() {
    let tree = split_tree(&["gfx942", "gfx9-4-generic"]);
    let cache = Cache::new(Config::default());
    let err = load(&cache, tree.path(), 999, &["gfx942", "gfx9-4-generic"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KernelNotFound);
    let diag = cache.last_diagnostic().unwrap();
    assert!(diag.contains("lib/libx.so#999"), "{diag}");
    // Both archives were tried, in arch-list order.
    let a = diag.find("x_gfx942.kpack target \"gfx942\": no such key");
    let b = diag.find("x_gfx9-4-generic.kpack target \"gfx9-4-generic\": no such key");
    assert!(a.is_some() && b.is_some() && a < b, "{diag}");
}

#[test]
fn rocm_kpack_path_replaces_and_prefix_precedes_embedded_paths() {
    let tree = split_tree(&["gfx942"]);
    let other = split_tree(&["gfx942"]);
    // Rewrite `other`'s archive so its content is distinguishable.
    let p = other.path().join(".kpack/x_gfx942.kpack");
    let mut w = ArchiveWriter::create(&p, WriterOptions::default()).unwrap();
    w.add("lib/libx.so#0", "gfx942", b"from other").unwrap();
    w.finish().unwrap();

    let prefix = Cache::new(Config {
        path_prefix: vec![p.clone()],
        ..Default::default()
    });
    assert_eq!(
        load(&prefix, tree.path(), 0, &["gfx942"]).unwrap(),
        "from other"
    );
    let replace = Cache::new(Config {
        path: Some(vec![p.clone()]),
        path_prefix: vec![],
        ..Default::default()
    });
    assert_eq!(
        load(&replace, tree.path(), 0, &["gfx942"]).unwrap(),
        "from other"
    );
    // ROCM_KPACK_PATH entries are verbatim: no @GFXARCH@ expansion.
    let verbatim = Cache::new(Config {
        path: Some(vec![tree.path().join(".kpack/x_@GFXARCH@.kpack")]),
        ..Default::default()
    });
    assert_eq!(
        load(&verbatim, tree.path(), 0, &["gfx942"])
            .unwrap_err()
            .kind(),
        ErrorKind::ArchiveNotFound
    );
}

#[test]
fn disabled_loader_and_empty_arch_list_are_refused() {
    let tree = split_tree(&["gfx942"]);
    let disabled = Cache::new(Config {
        disabled: true,
        ..Default::default()
    });
    assert_eq!(
        load(&disabled, tree.path(), 0, &["gfx942"])
            .unwrap_err()
            .kind(),
        ErrorKind::NotImplemented
    );
    let cache = Cache::new(Config::default());
    assert_eq!(
        load(&cache, tree.path(), 0, &[]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn eight_threads_load_concurrently_from_one_cache() {
    let tree = split_tree(&["gfx942", "gfx90a"]);
    let cache = Arc::new(Cache::new(Config::default()));
    let root = tree.path().to_path_buf();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (cache, root) = (Arc::clone(&cache), root.clone());
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    let arch = if (t + i) % 2 == 0 { "gfx942" } else { "gfx90a" };
                    let co = i % 2;
                    assert_eq!(
                        load(&cache, &root, co, &[arch]).unwrap(),
                        format!("{arch}:lib/libx.so#{co}")
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(cache.open_archive_count(), 2);
}

#[test]
fn zstd_archives_load_through_the_loader() {
    let tree = split_tree(&[]);
    let p = tree.path().join(".kpack/x_gfx1100.kpack");
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut w = ArchiveWriter::create(
        &p,
        WriterOptions {
            compression: Compression::Zstd { level: 3 },
            ..Default::default()
        },
    )
    .unwrap();
    w.add("lib/libx.so#3", "gfx1100", &big).unwrap();
    w.finish().unwrap();
    let cache = Cache::new(Config::default());
    let m = marker("lib/libx.so", &["../.kpack/x_@GFXARCH@.kpack"]);
    assert_eq!(
        cache
            .load(&m, &tree.path().join("lib/libx.so"), 3, &["gfx1100"])
            .unwrap(),
        big
    );
}

/// A `zstd-delta` family archive: the loader serves each member (bases and
/// deltas) byte-exact through the same API, warm loads included (served
/// with the memoised base).
#[test]
fn loads_bases_and_deltas_from_a_zstd_delta_family_archive() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("lib")).unwrap();
    let path = dir.path().join("x_gfx110x.kpack");
    let mut w = ArchiveWriter::create(
        &path,
        WriterOptions {
            gfx_arch_family: "gfx110x".into(),
            compression: Compression::ZstdDelta { level: 3 },
            ..Default::default()
        },
    )
    .unwrap();
    let mut x = 0x1234_5678u32;
    let base: Vec<u8> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    let arches = ["gfx1100", "gfx1101", "gfx1102"];
    let mut objects = Vec::new();
    for (i, arch) in arches.iter().enumerate() {
        let mut o = base.clone();
        o[i * 100..i * 100 + 10].fill(i as u8 + 1);
        w.add("lib/libx.so#0", arch, &o).unwrap();
        objects.push(o);
    }
    w.finish().unwrap();
    let a = kpack_format::Archive::open(&path).unwrap();
    assert!(a.entries().any(|e| e.base().is_some()), "{}", a.dump());
    let cache = Cache::new(Config::default());
    let m = marker("lib/libx.so", &[path.to_str().unwrap()]);
    for _ in 0..2 {
        for (arch, o) in arches.iter().zip(&objects) {
            let got = cache
                .load(&m, &dir.path().join("lib/libx.so"), 0, &[arch])
                .unwrap();
            assert!(got == *o, "{arch}");
        }
    }
}

#[test]
fn portable_spirv_only_when_named_and_after_native_and_generic_code() {
    let tree = split_tree(&["gfx1201", "gfx12-generic", "amdgcnspirv"]);
    let cache = Cache::new(Config::default());
    // Named first by the caller, still tried after native and generic code.
    let got = load(
        &cache,
        tree.path(),
        0,
        &["amdgcnspirv", "gfx1201", "gfx12-generic"],
    );
    assert_eq!(got.unwrap(), "gfx1201:lib/libx.so#0");
    let got = load(
        &cache,
        tree.path(),
        1,
        &["amdgcnspirv", "gfx1250", "gfx12-generic"],
    );
    assert_eq!(got.unwrap(), "gfx12-generic:lib/libx.so#1");
    // Not named: never offered, even when nothing else serves.
    let err = load(&cache, tree.path(), 0, &["gfx1250"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ArchiveNotFound, "{err}");
    // Named, and nothing else serves: loaded.
    let got = load(&cache, tree.path(), 0, &["gfx1250", "amdgcnspirv"]);
    assert_eq!(got.unwrap(), "amdgcnspirv:lib/libx.so#0");
    // AMD's four-field ISA name reads as its target id.
    let got = load(
        &cache,
        tree.path(),
        1,
        &["amdgcn-amd-amdhsa-unknown-gfx1201"],
    );
    assert_eq!(got.unwrap(), "gfx1201:lib/libx.so#1");
}
