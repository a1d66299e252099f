//! kpack-offload on its own: how an `ArchiveSet` names, groups and finds
//! archives and refuses clashes, and the flow's order (archives first,
//! the host binary last, nothing when an archive cannot be written), on
//! the committed fixtures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    reason = "tests"
)]

use std::path::{Path, PathBuf};

use kpack_amdgpu::{Level, TargetFilter, TargetId};
use kpack_format::{Archive, Marker, WriterOptions};
use kpack_offload::{ArchiveSet, Error, OffloadOptions, Outcome, offload};
use kpack_tests::fixture;

fn set(dir: &Path) -> ArchiveSet {
    set_with(dir, kpack_bundle::MemoryBudget::default())
}

fn set_with(dir: &Path, budget: kpack_bundle::MemoryBudget) -> ArchiveSet {
    ArchiveSet::new(
        dir.to_path_buf(),
        "axpy".into(),
        WriterOptions::default(),
        budget,
    )
}

fn target(t: &str) -> TargetId {
    TargetId::parse(t).unwrap()
}

fn opts(search_paths: &[&str]) -> OffloadOptions {
    OffloadOptions {
        kernel_name: "lib/libaxpy.so".into(),
        search_paths: search_paths.iter().map(|s| s.to_string()).collect(),
        verify_hash: true,
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn archives_are_named_per_processor_or_group() {
    let dir = PathBuf::from("out/.kpack");
    let mut s = set(&dir);
    assert_eq!(s.path_for("gfx90a"), dir.join("axpy_gfx90a.kpack"));
    // Features never reach the name: xnack variants share their processor's archive.
    assert_eq!(s.group_of(&target("gfx942:xnack+")), "gfx942");
    s.set_group(Level::SubFamily);
    assert_eq!(s.group_of(&target("gfx1101")), "gfx110x");
    assert_eq!(s.group_of(&target("gfx1100:xnack-")), "gfx110x");
    s.set_group(Level::Family);
    assert_eq!(s.group_of(&target("gfx1101")), "gfx11");

    // Per-processor directories (split's per-arch trees).
    let per = ArchiveSet::per_processor(
        "axpy".into(),
        WriterOptions::default(),
        kpack_bundle::MemoryBudget::default(),
        |p| PathBuf::from(format!("art_{p}/lib/.kpack")),
    );
    assert_eq!(
        per.path_for("gfx1030"),
        Path::new("art_gfx1030/lib/.kpack/axpy_gfx1030.kpack")
    );
}

#[test]
fn search_paths_are_relative_to_the_binary() {
    let s = set(Path::new("/r/lib/.kpack"));
    assert_eq!(
        s.search_path_from(Path::new("/r/lib")),
        ".kpack/axpy_@GFXARCH@.kpack"
    );
    assert_eq!(
        s.search_path(Path::new("/r/lib/sub"), Path::new("/r/lib/.kpack")),
        "../.kpack/axpy_@GFXARCH@.kpack"
    );
    assert_eq!(
        s.search_path(Path::new("/r/x"), Path::new("/r/x")),
        "axpy_@GFXARCH@.kpack"
    );
}

#[test]
fn grouped_archives_add_one_search_path_per_group_after_the_placeholder() {
    let mut s = set(Path::new("k"));
    let sp = vec![
        ".kpack/axpy_@GFXARCH@.kpack".to_string(),
        "fixed.kpack".into(),
    ];
    // Per processor: unchanged.
    assert_eq!(s.marker_search_paths(&sp, ["gfx1101", "gfx90a"]), sp);
    s.set_group(Level::SubFamily);
    assert_eq!(
        s.marker_search_paths(&sp, ["gfx1101", "gfx1100:xnack-", "gfx90a"]),
        [
            ".kpack/axpy_@GFXARCH@.kpack",
            ".kpack/axpy_gfx110x.kpack",
            ".kpack/axpy_gfx9-0.kpack",
            "fixed.kpack",
        ]
    );
}

#[test]
fn an_archive_onto_a_protected_file_or_an_existing_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = set(tmp.path());
    let clash = tmp.path().join("axpy_gfx90a.kpack");
    s.protect(&clash);
    match s.add("k#0", &target("gfx90a"), b"code") {
        Err(Error::OutputClash { path, other }) => {
            assert_eq!(path, clash);
            assert_eq!(other, clash);
        }
        other => panic!("expected a clash, got {:?}", other),
    }
    // Another processor is not protected.
    s.add("k#0", &target("gfx1030"), b"code").unwrap();
    assert!(!s.is_empty());

    let mut s = set(tmp.path());
    std::fs::write(tmp.path().join("axpy_gfx942.kpack"), b"old").unwrap();
    s.set_no_clobber(true);
    let e = s.add("k#0", &target("gfx942"), b"code").unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(
        std::fs::read(tmp.path().join("axpy_gfx942.kpack")).unwrap(),
        b"old"
    );
}

#[test]
fn offload_writes_sorted_archives_and_a_marker_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let input = fixture("corpus/libaxpy_2arch.so");
    let out = tmp.path().join("libaxpy.so");
    let archives = set(&tmp.path().join(".kpack"));
    let sp = [".kpack/axpy_@GFXARCH@.kpack"];
    let done = offload(&input, &out, &opts(&sp), &TargetFilter::default(), archives).unwrap();
    let procs: Vec<&str> = done.archives.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(procs, ["gfx1030", "gfx90a"]);
    let Outcome::Offloaded {
        code_objects,
        targets,
        ..
    } = &done.outcome
    else {
        panic!("not offloaded: {:?}", done.outcome);
    };
    assert_eq!(*code_objects, 2);
    assert_eq!(targets.len(), 2, "{targets:?}");
    assert_eq!(
        names_in(&tmp.path().join(".kpack")),
        ["axpy_gfx1030.kpack", "axpy_gfx90a.kpack"]
    );
    for (p, w) in &done.archives {
        let a = Archive::open(&w.path).unwrap();
        assert!(a.entries().all(|e| e.arch().starts_with(p.as_str())));
    }
    // The host binary carries the marker the options asked for.
    let bin = kpack_binary::HostBinary::read(&out, Default::default()).unwrap();
    assert!(bin.is_transformed());
    let marker = Marker::parse(&bin.read_marker().unwrap().unwrap()).unwrap();
    assert_eq!(marker.kernel_name, "lib/libaxpy.so");
    assert_eq!(marker.search_paths, sp);
}

#[test]
fn two_jobs_in_one_process_keep_their_own_memory_budgets() {
    // No process-wide budget: a library caller runs two offloads at once,
    // one with a ceiling below the fixture's code objects (refused, naming
    // its own ceiling) and one with the default (done, its peak above the
    // other's ceiling). Compressed bundles: inflated under the budget.
    let tmp = tempfile::tempdir().unwrap();
    let input = fixture("clang19/libaxpy_ccob.so");
    let job = |name: &str, budget: kpack_bundle::MemoryBudget| {
        let dir = tmp.path().join(name);
        let archives = set_with(&dir.join(".kpack"), budget);
        let sp = [".kpack/axpy_@GFXARCH@.kpack"];
        offload(
            &input,
            &dir.join("libaxpy.so"),
            &opts(&sp),
            &TargetFilter::default(),
            archives,
        )
    };
    let (small, roomy) = (
        kpack_bundle::MemoryBudget::new(1024),
        kpack_bundle::MemoryBudget::default(),
    );
    let (refused, done) = std::thread::scope(|s| {
        let a = s.spawn(|| job("small", small.clone()));
        let b = s.spawn(|| job("roomy", roomy.clone()));
        (a.join().unwrap(), b.join().unwrap())
    });
    let e = refused.unwrap_err();
    let chain: Vec<String> =
        std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
            .map(|e| e.to_string())
            .collect();
    assert!(
        chain
            .iter()
            .any(|m| m.contains("memory ceiling of 1024 bytes")),
        "{chain:?}"
    );
    assert!(!tmp.path().join("small/libaxpy.so").exists());
    done.unwrap();
    assert!(tmp.path().join("roomy/libaxpy.so").is_file());
    assert!(roomy.peak() > 1024, "peak {}", roomy.peak());
    assert_eq!(small.peak(), 0);
}

#[test]
fn an_archive_that_cannot_be_written_leaves_no_host_binary() {
    // The host binary is committed last: when an archive would land on a
    // protected file (here the output itself), nothing is written.
    let tmp = tempfile::tempdir().unwrap();
    let input = fixture("corpus/libaxpy_2arch.so");
    let out = tmp.path().join("axpy_gfx90a.kpack");
    let archives = set(tmp.path());
    let e = offload(
        &input,
        &out,
        &opts(&["x_@GFXARCH@.kpack"]),
        &TargetFilter::default(),
        archives,
    )
    .unwrap_err();
    assert!(matches!(e, Error::OutputClash { .. }), "{e}");
    assert!(!out.exists());
    assert!(
        names_in(tmp.path())
            .iter()
            .all(|n| n.starts_with(".kpack-tmp")),
        "{:?}",
        names_in(tmp.path())
    );
}

#[test]
fn host_only_and_already_offloaded_inputs_are_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("libhostonly.so");
    let input = fixture("corpus/libhostonly.so");
    let done = offload(
        &input,
        &out,
        &opts(&["x_@GFXARCH@.kpack"]),
        &TargetFilter::default(),
        set(&tmp.path().join(".kpack")),
    )
    .unwrap();
    assert!(matches!(done.outcome, Outcome::HostOnly));
    assert!(done.archives.is_empty());
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&input).unwrap());
    assert!(!tmp.path().join(".kpack").exists());

    // An offloaded binary is copied as it is, with no archive written.
    let first = tmp.path().join("libaxpy.so");
    offload(
        &fixture("corpus/libaxpy_2arch.so"),
        &first,
        &opts(&["x_@GFXARCH@.kpack"]),
        &TargetFilter::default(),
        set(&tmp.path().join("a")),
    )
    .unwrap();
    let again = tmp.path().join("again.so");
    let done = offload(
        &first,
        &again,
        &opts(&["x_@GFXARCH@.kpack"]),
        &TargetFilter::default(),
        set(&tmp.path().join("b")),
    )
    .unwrap();
    assert!(matches!(done.outcome, Outcome::AlreadyOffloaded));
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(&first).unwrap()
    );
    assert!(!tmp.path().join("b").exists());
}

#[test]
fn a_set_dropped_before_finishing_leaves_no_directory_it_made() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out/.kpack");
    let mut s = set(&dir);
    s.add("k", &target("gfx90a"), b"code").unwrap();
    assert!(
        dir.is_dir(),
        "the writer's directory exists while it writes"
    );
    drop(s);
    assert_eq!(names_in(tmp.path()), Vec::<String>::new());

    let mut s = set(&dir);
    s.add("k", &target("gfx90a"), b"code").unwrap();
    s.finish().unwrap();
    assert_eq!(names_in(&dir), ["axpy_gfx90a.kpack"]);
}
