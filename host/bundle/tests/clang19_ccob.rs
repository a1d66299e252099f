//! Compressed bundles as clang-19's own bundler writes them (CCOB v2, zstd:
//! the only compressed bundles in the fixtures, since `--offload-compress`
//! on clang 19 writes v2 with zstd and nothing else), read by our reader
//! and checked against clang-offload-bundler-19's unbundle
//! (`tests/fixtures/clang19/ORACLE.tsv`), so a misreading shared by our
//! CCOB reader and writer cannot pass. `deflate`-made v1/v3 and zlib
//! bundles are covered by `mutation_sweep.rs` and the unit tests only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::collections::BTreeMap;

use kpack_bundle::{Format, Method, WalkOptions, walk};
use kpack_tests::{clang19_oracle, fixture, sha256_hex};
use object::{Object, ObjectSection};

/// The clang-19 fixtures whose `.hip_fatbin` holds compressed bundles
/// (INVENTORY.tsv's `bundles` column).
fn ccob_fixtures() -> Vec<String> {
    let inv = std::fs::read_to_string(fixture("clang19/INVENTORY.tsv")).unwrap();
    let v: Vec<String> = inv
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[5].contains("ccob"))
        .map(|f| f[0].to_string())
        .collect();
    // The README's table lists this many; fewer means INVENTORY.tsv lost some.
    assert!(v.len() >= 12, "{v:?}");
    v
}

fn hip_fatbin(name: &str) -> Vec<u8> {
    let bytes = std::fs::read(fixture(&format!("clang19/{name}"))).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    obj.section_by_name(".hip_fatbin")
        .unwrap_or_else(|| panic!("{name}: no .hip_fatbin"))
        .data()
        .unwrap()
        .to_vec()
}

#[test]
fn every_clang19_compressed_bundle_reads_as_clang_offload_bundler_unbundles_it() {
    let mut oracle: BTreeMap<(String, usize, String), (u64, String)> = BTreeMap::new();
    for e in clang19_oracle() {
        oracle.insert(
            (e.file.clone(), e.bundle, e.target.clone()),
            (e.size, e.sha256.clone()),
        );
    }
    let mut objects = 0;
    for name in ccob_fixtures() {
        let data = hip_fatbin(&name);
        let mut seen = 0;
        let items = walk(
            &data,
            0,
            data.len() as u64,
            WalkOptions { verify_hash: true },
        );
        for (bundle, item) in items.enumerate() {
            let item = item.unwrap_or_else(|e| panic!("{name}: {e}"));
            let Format::Compressed(h) = &item.format else {
                panic!("{name}: bundle {bundle} is {:?}, not CCOB", item.format);
            };
            assert_eq!((h.version, h.method), (2, Method::Zstd), "{name}: {h:?}");
            for (i, e) in item.entries.iter().enumerate() {
                if e.id.is_host() {
                    continue;
                }
                let target = e.id.raw().rsplit("--").next().unwrap().to_string();
                let bytes = item.read_entry(&data, i).unwrap();
                let want = oracle
                    .get(&(name.clone(), bundle, target.clone()))
                    .unwrap_or_else(|| {
                        panic!("{name}: bundle {bundle} {target} not in ORACLE.tsv")
                    });
                assert_eq!(
                    (bytes.len() as u64, sha256_hex(&bytes)),
                    want.clone(),
                    "{name}: bundle {bundle} {target} differs from clang-offload-bundler-19"
                );
                let info = item.code_object(&data, i).unwrap();
                assert!(
                    info.mismatches(&e.id).is_empty(),
                    "{name}: {target}: {:?}",
                    info.mismatches(&e.id)
                );
                seen += 1;
            }
        }
        let want = oracle.keys().filter(|(f, _, _)| *f == name).count();
        assert_eq!(
            seen, want,
            "{name}: read {seen} code objects, the oracle has {want}"
        );
        objects += seen;
    }
    // The entries column of INVENTORY.tsv summed over the CCOB fixtures.
    assert_eq!(objects, 34, "code objects checked");
}
