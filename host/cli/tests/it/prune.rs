//! `kpack prune`: every corpus fixture pruned to one of its targets keeps
//! its structure, registers the same kernels under a HIP runtime without
//! kpack support, and that runtime receives bundles holding exactly the
//! kept code objects, byte-identical to clang-offload-bundler's, also
//! after strip, objcopy and patchelf.

use std::collections::BTreeSet;
use std::path::Path;

use kpack_amdgpu::TargetFilter;
use kpack_bundle::{WalkOptions, walk};
use kpack_tests::{
    CLANG19_FAT_FIXTURES, CLANG22_FAT_FIXTURES, FAT_FIXTURES, OracleEntry, clang19_oracle,
    clang22_oracle, fixture, oracle, sha256_hex, stderr, stdout, stub_command,
};

use crate::offload::packaging_steps;
use crate::util::{kpack, kpack_prune, stub_hip};

/// A run under the stub HIP runtime built without `-DKPACK_LOAD`: its log
/// lines and every bundle a wrapper handed it.
pub(crate) fn run_plain_stub(binary: &Path, dump: &Path) -> (Vec<String>, Vec<Vec<u8>>) {
    std::fs::create_dir_all(dump).unwrap();
    let log = dump.join("log");
    let out = stub_command(stub_hip(false), binary)
        .env("KPACK_STUB_LOG", &log)
        .env("KPACK_STUB_DUMP", dump)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}: {out:?}", binary.display());
    let lines = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut bundles = Vec::new();
    for n in 0.. {
        match std::fs::read(dump.join(format!("{n}.bundle"))) {
            Ok(b) => bundles.push(b),
            Err(_) => break,
        }
    }
    (lines, bundles)
}

/// (target, sha256) of every device code object in `bundles`.
pub(crate) fn code_objects(bundles: &[Vec<u8>]) -> BTreeSet<(String, String)> {
    let mut set = BTreeSet::new();
    for bytes in bundles {
        for item in walk(bytes, 0, bytes.len() as u64, WalkOptions::default()) {
            let item = item.unwrap();
            for (i, e) in item.entries.iter().enumerate() {
                if let Some(t) = e.id.target() {
                    let code = item.read_entry(bytes, i).unwrap();
                    set.insert((t.to_string(), sha256_hex(&code)));
                }
            }
        }
    }
    set
}

/// Registration lines (kernels, variables), the part that must not change.
pub(crate) fn registrations(log: &[String]) -> Vec<String> {
    log.iter()
        .filter(|l| l.starts_with("function ") || l.starts_with("var ") || l.starts_with("fatbin"))
        .cloned()
        .collect()
}

#[test]
fn every_fixture_pruned_to_one_target_runs_with_only_that_code() {
    prune_and_run("corpus", FAT_FIXTURES, oracle());
}

#[test]
fn clang19_fixtures_pruned_to_one_target_run_with_only_that_code() {
    // The aarch64 ones cannot run here (no emulator).
    let names: Vec<&str> = CLANG19_FAT_FIXTURES
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !n.contains("aarch64"))
        .collect();
    prune_and_run("clang19", &names, clang19_oracle());
}

#[test]
fn clang22_fixtures_pruned_to_one_target_run_with_only_that_code() {
    let names: Vec<&str> = CLANG22_FAT_FIXTURES.iter().map(|(n, _)| *n).collect();
    prune_and_run("clang22", &names, clang22_oracle());
}

fn prune_and_run(set: &str, names: &[&str], oracle: &[OracleEntry]) {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        let input = fixture(&format!("{set}/{name}"));
        let mine: Vec<_> = oracle.iter().filter(|e| e.file == *name).collect();
        let all: BTreeSet<_> = mine
            .iter()
            .map(|e| (e.target.clone(), e.sha256.clone()))
            .collect();
        let target = mine.iter().map(|e| e.target.clone()).min().unwrap();
        let filter = TargetFilter::new(&target, "").unwrap();
        let expected: BTreeSet<_> = all
            .iter()
            .filter(|(t, _)| filter.keeps(t))
            .cloned()
            .collect();
        let output = dir.path().join(format!("{name}.pruned"));
        let out = kpack_prune(&input, &output, &target, &[]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let in_len = std::fs::metadata(&input).unwrap().len();
        let out_len = std::fs::metadata(&output).unwrap().len();
        // Small files never grow by more than one page.
        assert!(out_len <= in_len + 4096, "{name}: {in_len} -> {out_len}");
        // The first free page takes the new program header table, so
        // only binaries with more than a page freed shrink: the wide ones.
        if name.contains("wide") {
            assert!(out_len < in_len, "{name}: nothing left the file");
        }

        let v = kpack([
            "verify-elf".as_ref(),
            "--pruned".as_ref(),
            output.as_os_str(),
        ]);
        assert!(v.status.success(), "{name}: {}", stdout(&v));

        let (log_in, bundles_in) = run_plain_stub(&input, &dir.path().join(format!("{name}.in")));
        let (log_out, bundles_out) =
            run_plain_stub(&output, &dir.path().join(format!("{name}.out")));
        assert_eq!(registrations(&log_out), registrations(&log_in), "{name}");
        // The dump sees what the runtime sees: the original's bundles hold
        // every code object of the oracle, the pruned ones only the kept.
        assert_eq!(code_objects(&bundles_in), all, "{name}: original");
        assert_eq!(code_objects(&bundles_out), expected, "{name}: pruned");

        // What distributions run after us keeps the pruned file sound and
        // loadable with the same kernels and code objects.
        for (step, (tool, args)) in packaging_steps(kpack_tests::e_machine(&input))
            .into_iter()
            .enumerate()
        {
            let copy = dir.path().join(format!("{name}.step{step}"));
            std::fs::copy(&output, &copy).unwrap();
            let out = std::process::Command::new(tool)
                .args(&args)
                .arg(&copy)
                .output()
                .unwrap_or_else(|e| panic!("{tool}: {e}"));
            assert!(
                out.status.success(),
                "{name}: {tool} {args:?}: {}",
                stderr(&out)
            );
            let v = kpack(["verify-elf".as_ref(), "--pruned".as_ref(), copy.as_os_str()]);
            assert!(v.status.success(), "{name} after {tool}: {}", stdout(&v));
            let (log, bundles) =
                run_plain_stub(&copy, &dir.path().join(format!("{name}.step{step}.out")));
            assert_eq!(
                registrations(&log),
                registrations(&log_in),
                "{name} after {tool}"
            );
            assert_eq!(code_objects(&bundles), expected, "{name} after {tool}");
        }
    }
}

#[test]
fn keeping_nothing_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("corpus/libaxpy_2arch.so");
    let output = dir.path().join("out.so");
    for keep in ["", "gfx1100"] {
        let out = kpack_prune(&input, &output, keep, &[]);
        assert_eq!(out.status.code(), Some(2), "{keep:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("keep nothing"), "{}", stderr(&out));
        assert!(!output.exists());
    }
}

#[test]
fn a_missing_target_warns_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("corpus/libaxpy_2arch.so");
    let output = dir.path().join("out.so");
    let args = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> = vec![
            "prune".into(),
            input.clone().into(),
            "-o".into(),
            output.clone().into(),
            "--keep".into(),
            "gfx90a,gfx1100".into(),
        ];
        a.extend(extra.iter().map(Into::into));
        a
    };
    let out = kpack(args(&["--strict"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("gfx1100"), "{}", stderr(&out));
    assert!(!output.exists());
    let out = kpack(args(&[]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning:") && stderr(&out).contains("gfx1100"),
        "{}",
        stderr(&out)
    );
    // The output exists now: again without --force is refused.
    let again = kpack(args(&[]));
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    // And the output is never the input.
    let same = kpack_prune(&input, &input, "gfx90a", &["--force"]);
    assert_eq!(same.status.code(), Some(2), "{}", stderr(&same));
}

#[test]
fn two_tu_fixtures_take_the_runs_layout_and_free_pages_between_bundles() {
    // Two bundles each, whole pages free between them once pruned: the
    // runs layout (which `every_fixture_pruned_to_one_target_...` then
    // runs under the stub, strip, objcopy and patchelf).
    let dir = tempfile::tempdir().unwrap();
    for (name, keep) in [
        ("corpus/exe_2tu_wide", "gfx1010"),
        ("corpus/lib2tu_2arch.so", "gfx1030"),
        ("clang19/lib2tu_plain.so", "gfx1100"),
    ] {
        let input = fixture(name);
        let output = dir.path().join(name.replace('/', "_"));
        let out = kpack_prune(&input, &output, keep, &["--json"]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["layout"], "runs", "{name}: {v}");
        let result = &v["result"];
        assert!(result["runs"].as_u64().unwrap() >= 2, "{name}: {v}");
        let removed = result["bytes_removed"].as_u64().unwrap();
        // More than the tail: pages between the two bundles left too.
        let in_len = std::fs::metadata(&input).unwrap().len();
        let out_len = std::fs::metadata(&output).unwrap().len();
        assert!(removed >= 2 * 4096, "{name}: {v}");
        assert!(out_len + removed <= in_len + 4096, "{name}: {v}");
        // Read back through its runs: both bundles, only the kept target.
        let inspect = kpack(["inspect".as_ref(), output.as_os_str()]);
        assert!(inspect.status.success(), "{name}: {}", stderr(&inspect));
        let text = stdout(&inspect);
        assert_eq!(text.matches("  bundle ").count(), 2, "{name}: {text}");
        assert!(text.contains(keep), "{name}: {text}");
        // Pruning the result again is refused, not mangled.
        let again = kpack_prune(&output, &dir.path().join("again"), keep, &[]);
        assert_eq!(again.status.code(), Some(2), "{name}: {}", stderr(&again));
        assert!(stderr(&again).contains("runs"), "{}", stderr(&again));
    }
}
