//! `--compression-mode speed|balance|size`: each mode is its bundle of
//! scheme, grouping and level (byte for byte the flags it stands for),
//! explicit flags win over the mode, and every run says which runtimes
//! read what it wrote.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, stderr};

use crate::util::{kpack, scratch};

/// Offload the many-target fixture into `name` with `flags`; returns the
/// files written (name → bytes) and what the run said on stderr.
fn offload(name: &str, flags: &[&str]) -> (BTreeMap<String, Vec<u8>>, String) {
    let out = scratch().join("compression-modes").join(name);
    let _ = std::fs::remove_dir_all(&out);
    let input = fixture("corpus/libaxpy_wide.so");
    let (o, a) = (out.join("lib.so"), out.join(".kpack"));
    let mut args = vec![
        "offload",
        input.to_str().unwrap(),
        "-o",
        o.to_str().unwrap(),
        "--archives",
        a.to_str().unwrap(),
    ];
    args.extend(flags);
    let r = kpack(&args);
    assert!(r.status.success(), "{flags:?}: {}", stderr(&r));
    let mut files = BTreeMap::new();
    walk(&out, &out, &mut files);
    (files, stderr(&r))
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.insert(rel, std::fs::read(&p).unwrap());
        }
    }
}

fn same(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> bool {
    a.keys().eq(b.keys()) && a.iter().zip(b).all(|((_, x), (_, y))| x == y)
}

#[test]
fn each_mode_is_the_flags_it_stands_for_and_says_who_reads_it() {
    let (speed, said) = offload("default", &[]);
    assert!(
        said.contains("archives: zstd-per-kernel level 3, per target (mode speed); read by AMD's runtime and kpack's"),
        "{said}"
    );
    let (named, _) = offload("speed", &["--compression-mode", "speed"]);
    assert!(
        same(&speed, &named),
        "--compression-mode speed is not the default"
    );

    let (balance, said) = offload("balance", &["--compression-mode", "balance"]);
    assert!(
        said.contains(
            "archives: zstd-delta level 3, per family (mode balance); read by kpack's runtime only"
        ),
        "{said}"
    );
    let (flags, _) = offload(
        "balance-flags",
        &["--compression", "zstd-delta", "--archive-group", "family"],
    );
    assert!(
        same(&balance, &flags),
        "balance is not zstd-delta per family at level 3"
    );
    assert!(
        balance.keys().any(|k| k.ends_with("_gfx9.kpack")),
        "{:?}",
        balance.keys()
    );

    let (size, said) = offload("size", &["--compression-mode", "size"]);
    assert!(
        said.contains("zstd-delta level 19, per family (mode size)"),
        "{said}"
    );
    let (flags, _) = offload(
        "size-flags",
        &[
            "--compression",
            "zstd-delta",
            "--compression-level",
            "19",
            "--archive-group",
            "family",
        ],
    );
    assert!(
        same(&size, &flags),
        "size is not zstd-delta per family at level 19"
    );
    let total = |m: &BTreeMap<String, Vec<u8>>| -> usize {
        m.iter()
            .filter(|(k, _)| k.ends_with(".kpack"))
            .map(|(_, v)| v.len())
            .sum()
    };
    assert!(total(&size) <= total(&balance) && total(&balance) < total(&speed));
}

#[test]
fn explicit_flags_win_over_the_mode() {
    let (speed, _) = offload("default-again", &[]);
    let (overridden, said) = offload(
        "size-overridden",
        &[
            "--compression-mode",
            "size",
            "--compression",
            "zstd",
            "--compression-level",
            "3",
            "--archive-group",
            "target",
        ],
    );
    assert!(same(&speed, &overridden), "explicit flags did not win");
    assert!(said.contains("read by AMD's runtime and kpack's"), "{said}");
    // The level alone: the mode's scheme and grouping stay.
    let (level, said) = offload(
        "size-level-3",
        &["--compression-mode", "size", "--level", "3"],
    );
    let (balance, _) = offload("balance-again", &["--compression-mode", "balance"]);
    assert!(same(&level, &balance), "size at level 3 is not balance");
    assert!(
        said.contains("zstd-delta level 3, per family (mode size)"),
        "{said}"
    );
}
