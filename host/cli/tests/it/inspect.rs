//! `kpack inspect` and `kpack extract` on the real fat-binary fixtures,
//! checked against clang-offload-bundler's own output (ORACLE.tsv).

use std::collections::BTreeMap;

use kpack_tests::{fixture, sha256_hex, stderr, stdout};

use crate::util::kpack;

/// (file, bundle, target as in file names) -> (size, sha256), as LLVM's bundler unbundled them.
fn oracle() -> BTreeMap<(String, usize, String), (u64, String)> {
    kpack_tests::oracle()
        .iter()
        .map(|e| {
            (
                (e.file.clone(), e.bundle, e.target.replace(':', "_")),
                (e.size, e.sha256.clone()),
            )
        })
        .collect()
}

#[test]
fn extract_all_matches_clang_offload_bundler_for_every_fixture() {
    let oracle = oracle();
    let files: std::collections::BTreeSet<&String> = oracle.keys().map(|(f, _, _)| f).collect();
    assert!(files.len() >= 15, "oracle covers too few fixtures");
    for file in files {
        let dir = tempfile::tempdir().unwrap();
        let out = kpack([
            "extract".as_ref(),
            "--all".as_ref(),
            fixture(&format!("corpus/{file}")).as_os_str(),
            "-o".as_ref(),
            dir.path().as_os_str(),
        ]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let mut written: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        written.sort();
        let expected: Vec<_> = oracle.iter().filter(|((f, _, _), _)| f == file).collect();
        assert_eq!(written.len(), expected.len(), "{file}: wrote {written:?}");
        for ((_, bundle, target), (size, sha)) in expected {
            let name = format!("bundle{bundle}-{target}.hsaco");
            let bytes = std::fs::read(dir.path().join(&name))
                .unwrap_or_else(|_| panic!("{file}: {name} missing"));
            assert_eq!(bytes.len() as u64, *size, "{file} {name}");
            assert_eq!(
                &sha256_hex(&bytes),
                sha,
                "{file} {name} differs from clang-offload-bundler"
            );
        }
    }
}

#[test]
fn extract_one_target_and_reject_an_absent_one() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fixture("corpus/libaxpy_feat.so");
    let out = kpack([
        "extract".as_ref(),
        lib.as_os_str(),
        "--target".as_ref(),
        "gfx90a:xnack+".as_ref(),
        "-o".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("bundle0-gfx90a_xnack+.hsaco")]
    );

    let out = kpack([
        "extract".as_ref(),
        lib.as_os_str(),
        "--target".as_ref(),
        "gfx1100".as_ref(),
        "-o".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no code object for target gfx1100"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("gfx90a:xnack-"),
        "should list what is present: {}",
        stderr(&out)
    );
}

#[test]
fn inspect_json_resolves_wrappers_to_bundles() {
    let cases = [
        // file, wrappers, bundles, how the pointer is resolved
        ("lib2tu_2arch.so", 2, 2, "relative"),
        ("librdc_2arch.so", 2, 1, "symbol"),
        ("exe_rdc_2arch", 2, 1, "relative"),
        ("exe_axpy_2arch_nopie", 1, 1, "inline"),
        ("kern_axpy_2arch.o", 1, 1, "symbol"),
        ("exe_2tu_wide", 2, 2, "relative"),
    ];
    for (file, nwrap, nbundle, via) in cases {
        let out = kpack([
            "inspect".as_ref(),
            "--json".as_ref(),
            fixture(&format!("corpus/{file}")).as_os_str(),
        ]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["schema_version"], 1);
        let f = &v["files"][0];
        let wrappers = f["wrappers"].as_array().unwrap();
        assert_eq!(wrappers.len(), nwrap, "{file}");
        assert_eq!(f["bundles"].as_array().unwrap().len(), nbundle, "{file}");
        for (i, w) in wrappers.iter().enumerate() {
            assert_eq!(w["magic"], "HIPF");
            assert_eq!(w["via"]["via"], via, "{file} wrapper {i}");
            let expect_bundle = if nbundle == nwrap { i } else { 0 };
            assert_eq!(w["bundle"], expect_bundle, "{file} wrapper {i}");
        }
        for b in f["bundles"].as_array().unwrap() {
            for e in b["entries"].as_array().unwrap() {
                assert!(e["warnings"].as_array().unwrap().is_empty(), "{file}: {e}");
                if e["target"].is_string() {
                    assert!(e["kernel_count"].as_u64().unwrap() >= 2, "{file}: {e}");
                    let co = &e["code_object"];
                    assert_eq!(co["code_object_version"], 4);
                    let t = e["target"].as_str().unwrap();
                    assert!(
                        co["metadata_target"].as_str().unwrap().ends_with(t),
                        "{file}: {co} vs {t}"
                    );
                }
            }
        }
    }
}

#[test]
fn inspect_reports_feature_flags_and_totals() {
    let out = kpack([
        "inspect".as_ref(),
        "--json".as_ref(),
        fixture("corpus/exe_axpy_feat").as_os_str(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = v["files"][0]["totals"].as_object().unwrap();
    let keys: Vec<&String> = totals.keys().collect();
    assert_eq!(
        keys,
        [
            "gfx1030",
            "gfx908:sramecc+:xnack-",
            "gfx90a:xnack+",
            "gfx90a:xnack-"
        ]
    );
    let entries = v["files"][0]["bundles"][0]["entries"].as_array().unwrap();
    let xp = entries
        .iter()
        .find(|e| e["target"] == "gfx90a:xnack+")
        .unwrap();
    assert_eq!(xp["code_object"]["xnack"], "on");
    let xm = entries
        .iter()
        .find(|e| e["target"] == "gfx90a:xnack-")
        .unwrap();
    assert_eq!(xm["code_object"]["xnack"], "off");
}

#[test]
fn host_only_files_say_no_device_code() {
    for file in ["libhostonly.so", "exe_hostonly"] {
        let out = kpack([
            "inspect".as_ref(),
            fixture(&format!("corpus/{file}")).as_os_str(),
        ]);
        assert!(out.status.success());
        assert!(
            stdout(&out).contains("no device code"),
            "{file}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let orig = std::fs::read(fixture("corpus/lib2tu_2arch.so")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated.so", orig[..20000].to_vec(), "section header"),
        (
            "text.txt",
            b"hello world, not an elf".to_vec(),
            "not an ELF",
        ),
        (
            "elf32",
            {
                let mut b = orig.clone();
                b[4] = 1;
                b
            },
            "64-bit",
        ),
        (
            "garbage-bundle.so",
            {
                let mut b = orig.clone();
                b[0x3000] = b'X';
                b
            },
            "0x3000",
        ),
        (
            "huge-count.so",
            {
                let mut b = orig.clone();
                b[0x3000 + 24..0x3000 + 32].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            "entries",
        ),
        (
            "bad-pointer.so",
            {
                // Point wrapper 1's relocation addend outside .hip_fatbin.
                let mut b = orig.clone();
                let needle = 0x8000u64.to_le_bytes();
                let pos = (0x988..0x988 + 21 * 24)
                    .step_by(24)
                    .map(|p| p + 16)
                    .find(|&p| b[p..p + 8] == needle)
                    .unwrap();
                b[pos..pos + 8].copy_from_slice(&0x1234u64.to_le_bytes());
                b
            },
            "not the start of a bundle",
        ),
    ];
    for (name, bytes, expect) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = kpack(["inspect".as_ref(), p.as_os_str()]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(name) && err.contains(expect), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

/// lib2tu_2arch.so with its two plain bundles (at +0x0 and +0x5000 of
/// .hip_fatbin, file offset 0x3000) replaced in place by compressed ones.
fn compressed_variant(
    first: (u16, kpack_bundle::Method),
    second: (u16, kpack_bundle::Method),
) -> Vec<u8> {
    let mut bytes = std::fs::read(fixture("corpus/lib2tu_2arch.so")).unwrap();
    let (base, len) = (0x3000usize, 41241usize);
    let items: Vec<kpack_bundle::Item> =
        kpack_bundle::walk(&bytes, base as u64, len as u64, Default::default())
            .map(|r| r.unwrap())
            .collect();
    assert_eq!(items.len(), 2);
    let mut region = vec![0u8; len];
    for (item, (version, method)) in items.iter().zip([first, second]) {
        let start = base + item.offset as usize;
        let plain = bytes[start..start + item.len as usize].to_vec();
        let c = kpack_bundle::deflate(&plain, version, method, 3).unwrap();
        assert!(c.len() < plain.len());
        region[item.offset as usize..item.offset as usize + c.len()].copy_from_slice(&c);
    }
    bytes[base..base + len].copy_from_slice(&region);
    bytes
}

#[test]
fn compressed_bundles_in_a_real_library_extract_and_offload_like_the_originals() {
    use kpack_bundle::Method::{Zlib, Zstd};
    let oracle = oracle();
    for (first, second) in [
        ((3, Zstd), (2, Zlib)),
        ((1, Zlib), (1, Zstd)),
        ((2, Zstd), (3, Zlib)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib2tu_2arch.so");
        std::fs::write(&lib, compressed_variant(first, second)).unwrap();
        let out = kpack(["inspect".as_ref(), "--json".as_ref(), lib.as_os_str()]);
        assert!(
            out.status.success(),
            "{first:?} {second:?}: {}",
            stderr(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let b = &v["files"][0]["bundles"];
        assert_eq!(b[0]["format"], "compressed");
        assert_eq!(b[0]["version"], first.0);
        assert_eq!(b[1]["version"], second.0);
        for w in v["files"][0]["wrappers"].as_array().unwrap() {
            assert!(w["bundle"].is_u64(), "wrapper lost its bundle: {w}");
        }
        let x = dir.path().join("x");
        let out = kpack([
            "extract".as_ref(),
            "--all".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            x.as_os_str(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        for ((file, bundle, target), (_, sha)) in oracle
            .iter()
            .filter(|((f, _, _), _)| f == "lib2tu_2arch.so")
        {
            let got = std::fs::read(x.join(format!("bundle{bundle}-{target}.hsaco"))).unwrap();
            assert_eq!(
                &sha256_hex(&got),
                sha,
                "{file} {bundle} {target} via {first:?}/{second:?}"
            );
        }
        let host = dir.path().join("out/lib2tu_2arch.so");
        let out = kpack([
            "offload".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            host.as_os_str(),
            "--archives".as_ref(),
            dir.path().join("out/.kpack").as_os_str(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = kpack(["verify-elf".as_ref(), host.as_os_str()]);
        assert!(out.status.success(), "{}", stdout(&out));
    }
}

#[test]
fn a_corrupt_ccob_hash_is_an_error_unless_hash_checks_are_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = compressed_variant(
        (3, kpack_bundle::Method::Zstd),
        (3, kpack_bundle::Method::Zstd),
    );
    bytes[0x3000 + 24] ^= 0x55; // first byte of the v3 hash field
    let lib = dir.path().join("badhash.so");
    std::fs::write(&lib, bytes).unwrap();
    let out = kpack(["inspect".as_ref(), lib.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("MD5 mismatch") && stderr(&out).contains("0x3000"),
        "{}",
        stderr(&out)
    );
    let out = kpack([
        "inspect".as_ref(),
        "--no-verify-hash".as_ref(),
        lib.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn missing_file_names_the_path_once_and_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexistent");
    let out = kpack(["inspect".as_ref(), missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let path = missing.display().to_string();
    assert_eq!(err.matches(path.as_str()).count(), 1, "{err}");
    // The OS error, "No such file or directory (os error 2)", exactly once.
    let os_line = std::fs::File::open(&missing).unwrap_err().to_string();
    assert!(os_line.contains("os error"), "{os_line}");
    assert_eq!(err.matches(os_line.as_str()).count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
}

/// The real bundle's entries as (id, bytes), in file order.
fn real_bundle_entries() -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(fixture("corpus/kern_axpy_2arch.co")).unwrap();
    let header = kpack_bundle::parse_bundle(&bytes, 0, bytes.len() as u64).unwrap();
    header
        .entries
        .iter()
        .map(|e| {
            let (o, n) = (e.offset as usize, e.size as usize);
            (e.id.raw().to_string(), bytes[o..o + n].to_vec())
        })
        .collect()
}

/// Runs `kpack inspect [--strict] FILE` on `bundle` written to a file.
fn inspect_crafted(bundle: &[u8], strict: bool) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.co");
    std::fs::write(&path, bundle).unwrap();
    let mut args = vec!["inspect".as_ref(), path.as_os_str()];
    if strict {
        args.push("--strict".as_ref());
    }
    kpack(args)
}

/// Code objects whose bundle id disagrees with what they say about
/// themselves (`e_flags`, `amdhsa.target`), crafted from the real bundle
/// with kpack-bundle's writer: `inspect` warns naming the bundle, entry and
/// the disagreement, exits 0, and `--strict` makes the same run exit 1. The
/// untouched bundle, rewritten by the same writer, stays silent under
/// `--strict` (so the writer is not what triggers the warnings).
#[test]
fn a_code_object_that_disagrees_with_its_bundle_id_warns_and_strict_exits_1() {
    let entries = real_bundle_entries();
    let ids: Vec<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
    let co = |suffix: &str| {
        entries
            .iter()
            .find(|(id, _)| id.ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} in {ids:?}"))
            .1
            .clone()
    };
    let host: Vec<(String, Vec<u8>)> = entries
        .iter()
        .filter(|(id, _)| id.starts_with("host-"))
        .cloned()
        .collect();
    let (gfx90a, gfx1030) = (co("--gfx90a"), co("--gfx1030"));
    let write = |list: &[(&str, &[u8])]| {
        let mut all: Vec<(&str, &[u8])> = host
            .iter()
            .map(|(i, b)| (i.as_str(), b.as_slice()))
            .collect();
        all.extend_from_slice(list);
        kpack_bundle::write_bundle(&all, 4096)
    };

    let faithful = write(&[
        ("hipv4-amdgcn-amd-amdhsa--gfx1030", &gfx1030),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", &gfx90a),
    ]);
    let o = inspect_crafted(&faithful, true);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));

    // amdhsa.target alone: patch the note's string in the gfx1030 object
    // to name gfx1031 (same length, so the msgpack stays well-formed);
    // e_flags still says gfx1030.
    let mut patched = gfx1030.clone();
    let needle = b"amdgcn-amd-amdhsa--gfx1030";
    let at = patched
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("amdhsa.target in the gfx1030 object");
    patched[at + needle.len() - 1] = b'1';

    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "swapped ids",
            write(&[
                ("hipv4-amdgcn-amd-amdhsa--gfx1030", &gfx90a),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", &gfx1030),
            ]),
            &[
                "entry hipv4-amdgcn-amd-amdhsa--gfx1030: e_flags name processor gfx90a, the bundle id says gfx1030",
                "entry hipv4-amdgcn-amd-amdhsa--gfx90a: e_flags name processor gfx1030, the bundle id says gfx90a",
                "amdhsa.target is amdgcn-amd-amdhsa--gfx90a, the bundle id says gfx1030",
            ],
        ),
        (
            "xnack in the id, not in e_flags",
            write(&[("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &gfx90a)]),
            &["entry hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+: xnack is"],
        ),
        (
            "amdhsa.target only",
            write(&[("hipv4-amdgcn-amd-amdhsa--gfx1030", &patched)]),
            &["amdhsa.target is amdgcn-amd-amdhsa--gfx1031, the bundle id says gfx1030"],
        ),
    ];
    for (what, bundle, want) in cases {
        let o = inspect_crafted(&bundle, false);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
        let err = stderr(&o);
        for w in want {
            assert!(err.contains(w), "{what}: no {w:?} in\n{err}");
        }
        assert!(err.contains("crafted.co: bundle 0 entry "), "{what}: {err}");
        let o = inspect_crafted(&bundle, true);
        assert_eq!(o.status.code(), Some(1), "{what} --strict: {}", stderr(&o));

        // The same bundle compressed (CCOB v2, zstd) warns the same way.
        let ccob = kpack_bundle::deflate(&bundle, 2, kpack_bundle::Method::Zstd, 3).unwrap();
        let o = inspect_crafted(&ccob, true);
        assert_eq!(o.status.code(), Some(1), "{what} as CCOB: {}", stderr(&o));
        for w in want {
            assert!(stderr(&o).contains(w), "{what} as CCOB: no {w:?}");
        }
    }
}

#[test]
fn a_code_object_larger_than_max_memory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = compressed_variant(
        (3, kpack_bundle::Method::Zstd),
        (3, kpack_bundle::Method::Zstd),
    );
    let lib = dir.path().join("ccob.so");
    std::fs::write(&lib, bytes).unwrap();
    let out_dir = dir.path().join("out");
    let host = dir.path().join("host.so");
    // The same library in a TheRock artifact, for `split`.
    let art = dir.path().join("blas_lib_gfx90a");
    std::fs::create_dir_all(art.join("stage/lib")).unwrap();
    std::fs::copy(&lib, art.join("stage/lib/libccob.so")).unwrap();
    std::fs::write(art.join("artifact_manifest.txt"), "stage\n").unwrap();
    let runs: [Vec<&std::ffi::OsStr>; 4] = [
        vec!["inspect".as_ref(), lib.as_os_str()],
        vec![
            "extract".as_ref(),
            "--all".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            out_dir.as_os_str(),
        ],
        vec![
            "offload".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            host.as_os_str(),
            "--archives".as_ref(),
            out_dir.as_os_str(),
        ],
        vec![
            "split".as_ref(),
            art.as_os_str(),
            "-o".as_ref(),
            out_dir.as_os_str(),
        ],
    ];
    for args in runs {
        let mut with_limit = args.clone();
        with_limit.push(std::ffi::OsStr::new("--max-memory"));
        with_limit.push(std::ffi::OsStr::new("1K"));
        let out = kpack(&with_limit);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("ccob.so")
                && err.contains("0x3000")
                && err.contains("gfx")
                && err.contains("1024 bytes")
                && err.contains("--max-memory"),
            "{args:?}: {err}"
        );
        assert!(!host.exists() && !out_dir.join("blas_lib_gfx90a").exists());
        // The default ceiling fits.
        let out = kpack(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let _ = std::fs::remove_dir_all(&out_dir);
        let _ = std::fs::remove_file(&host);
    }
    let out = kpack([
        "inspect".as_ref(),
        "--max-memory".as_ref(),
        "12Q".as_ref(),
        lib.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn extract_verbose_names_each_written_object_with_its_target_and_size() {
    let lib = fixture("corpus/libaxpy_feat.so");
    let run = |verbose: bool| {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["extract".as_ref(), "--all".as_ref(), lib.as_os_str()];
        args.extend(["-o".as_ref(), dir.path().as_os_str()]);
        if verbose {
            args.push("-v".as_ref());
        }
        let out = kpack(args);
        assert!(out.status.success(), "{}", stderr(&out));
        (dir, stdout(&out), stderr(&out))
    };
    let (_dir, listing, quiet) = run(false);
    assert!(!quiet.contains("info: wrote"), "{quiet}");
    let (_dir, listing_v, err) = run(true);
    let mut lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("info: wrote"))
        .collect();
    lines.sort();
    // Every written object once, with its path and size as stdout lists
    // them and its target id as the bundle names it.
    let written: Vec<&str> = listing.lines().collect();
    assert!(written.len() >= 2, "{listing}");
    assert_eq!(lines.len(), written.len(), "{err}");
    for (line, entry) in listing_v.lines().zip(&written) {
        let (path, size) = line.split_once('\t').unwrap();
        let name = std::path::Path::new(path)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(
            entry.rsplit_once('\t').unwrap().1,
            size,
            "-v changed stdout"
        );
        let target = name
            .strip_prefix("bundle0-")
            .and_then(|n| n.strip_suffix(".hsaco"))
            .unwrap()
            .replace('_', ":");
        let want = format!("info: wrote {path} ({target}, {size} bytes)");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {err}");
    }
}

/// A compressed bundle whose zstd stream is corrupt: the error names the
/// file and section, and every cause down to zstd's own message is printed
/// once, each on its own `caused by:` line (and in `--json`'s `causes`),
/// none flattened into its parent's message.
#[test]
fn a_corrupt_compressed_bundle_prints_every_nested_cause_on_its_own_line() {
    let mut bytes = std::fs::read(fixture("clang19/libaxpy_ccob_l19.so")).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"CCOB")
        .expect("a compressed bundle");
    for b in &mut bytes[at + 40..at + 60] {
        *b ^= 0x5a;
    }
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("corrupt.so");
    std::fs::write(&lib, &bytes).unwrap();

    let out = kpack(["inspect".as_ref(), lib.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let causes: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("  caused by: "))
        .collect();
    assert!(
        err.starts_with("error: ") && err.contains("corrupt.so"),
        "{err}"
    );
    assert!(
        causes
            .iter()
            .any(|c| c.ends_with("inside the compressed bundle")),
        "{err}"
    );
    assert!(
        causes.iter().any(|c| c.ends_with("zstd stream is corrupt")),
        "{err}"
    );
    // zstd's own message, the innermost cause, still appears.
    assert!(
        causes
            .last()
            .is_some_and(|c| !c.contains("stream is corrupt") && !c.contains("offset")),
        "{err}"
    );

    let out = kpack(["inspect".as_ref(), "--json".as_ref(), lib.as_os_str()]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let json_causes = doc["errors"][0]["causes"].as_array().unwrap();
    assert_eq!(json_causes.len(), causes.len(), "{doc}");
}

/// `verify-elf` on a file that is no ELF: the message names the file and
/// what it is not; the parser's reason is the cause, on its own line.
#[test]
fn verify_elf_of_a_non_elf_names_the_file_and_prints_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("notes.txt");
    std::fs::write(&f, b"plain text, no ELF header here\n").unwrap();
    let out = kpack(["verify-elf".as_ref(), f.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some(format!("error: {}: not a 64-bit little-endian ELF", f.display()).as_str()),
        "{err}"
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("  caused by: ")),
        "{err}"
    );
}

/// A marker search path ending in a bare `@GFXARCH@` names the files of
/// a directory; `inspect` names only the KPAK archives there, never the
/// other files, nor their first bytes.
#[test]
fn a_bare_gfxarch_search_path_names_only_kpak_archives() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("subdir")).unwrap();
    std::fs::write(elsewhere.join("secret.txt"), b"TOPS3CRET").unwrap();
    let search = format!("{}/@GFXARCH@", elsewhere.display());
    let lib = d.join("lib/libaxpy.so");
    let o = kpack([
        "offload".as_ref(),
        fixture("clang19/libaxpy_generic.so").as_os_str(),
        "-o".as_ref(),
        lib.as_os_str(),
        "--archives".as_ref(),
        d.join("lib/.kpack").as_os_str(),
        "--name".as_ref(),
        "axpy".as_ref(),
        "--search-path".as_ref(),
        search.as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::copy(
        d.join("lib/.kpack/axpy_gfx1100.kpack"),
        elsewhere.join("gfx1100"),
    )
    .unwrap();
    for extra in [None, Some("--json")] {
        let mut args = vec!["inspect".as_ref(), lib.as_os_str()];
        args.extend(extra.map(std::ffi::OsStr::new));
        let o = kpack(args);
        let out = stdout(&o);
        assert!(out.contains("gfx1100"), "{out}");
        for leak in ["secret", "subdir", "[54, 4f, 50, 53]", "TOPS"] {
            assert!(!out.contains(leak), "{leak}: {out}");
        }
    }
}
