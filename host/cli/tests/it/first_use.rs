//! What a new user runs into first: each message says what to do next,
//! help exits 0, and nothing that checked nothing reads as a pass.

use std::path::{Path, PathBuf};

use kpack_tests::{fixture, stderr, stdout};

use crate::util::{kpack, offload_into};

fn fat_lib() -> PathBuf {
    fixture("corpus/libaxpy_2arch.so")
}

#[test]
fn verify_of_an_empty_directory_finds_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = kpack(["verify".as_ref(), dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing to verify in"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_of_a_kpack_archive_points_to_archive_list() {
    let dir = tempfile::tempdir().unwrap();
    offload_into(&fat_lib(), dir.path(), &[]);
    let archive = dir.path().join(".kpack/libaxpy_2arch_gfx90a.kpack");
    let out = kpack(["inspect".as_ref(), archive.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("kpack archive list"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_of_an_offloaded_binary_shows_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload_into(&fat_lib(), dir.path(), &[]);
    let out = kpack(["inspect".as_ref(), bin.as_os_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("marker: kernel name \"libaxpy_2arch.so\"")
            && text.contains("search path .kpack/libaxpy_2arch_@GFXARCH@.kpack"),
        "{text}"
    );
}

#[test]
fn help_about_help_exits_zero() {
    for flag in ["--help", "-h"] {
        let out = kpack(["help", flag]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("Usage: kpack"), "{}", stdout(&out));
    }
}

#[test]
fn extract_without_a_selection_names_both_ways_to_select() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fat_lib();
    let out = kpack([
        "extract".as_ref(),
        lib.as_os_str(),
        "-o".as_ref(),
        dir.path().join("x").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("--all") && err.contains("--target"), "{err}");
}

#[test]
fn prune_and_verify_help_say_what_they_take() {
    // Help text is wrapped to the terminal: compare words, not lines.
    let words = |args: &[&str]| {
        stdout(&kpack(args))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let prune = words(&["prune", "--help"]);
    assert!(
        prune.contains("objects") && prune.contains("static archives"),
        "{prune}"
    );
    let top = words(&["--help"]);
    assert!(top.contains("objects and static archives"), "{top}");
    let verify = words(&["verify", "--help"]);
    assert!(verify.contains("installed trees"), "{verify}");
}

#[test]
fn prune_json_says_unchanged_where_the_text_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::util::kpack_prune(&fat_lib(), &dir.path().join("p.so"), "gfx90a", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("layout unchanged"),
        "{}",
        stdout(&out)
    );
    let out = crate::util::kpack_prune(&fat_lib(), &dir.path().join("q.so"), "gfx90a", &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layout"], "unchanged");
    assert_eq!(v["result"]["layout"], "unchanged", "{v}");
}

#[test]
fn verify_gpu_refuses_an_unknown_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = kpack([
        "verify".as_ref(),
        "--gpu".as_ref(),
        "gfx9999".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("gfx9999 is not a known AMD GPU"),
        "{}",
        stderr(&out)
    );
}

fn offload_to(output: &Path, archives: &Path) -> std::process::Output {
    let lib = fat_lib();
    kpack([
        "offload".as_ref(),
        lib.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        "--archives".as_ref(),
        archives.as_os_str(),
    ])
}

#[test]
fn offload_says_which_path_is_a_directory_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    let out = offload_to(&existing, &dir.path().join("a"));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("is a directory") && !err.contains("--force"),
        "{err}"
    );

    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let out = offload_to(&dir.path().join("out.so"), &file);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a directory"),
        "{}",
        stderr(&out)
    );
}

/// A mistyped command gets the nearest one; a file where `verify` wants a
/// directory, a text file given to `archive list`, and `--gpu auto` on a
/// machine without a GPU each say what to do instead.
#[test]
fn a_typo_a_file_for_a_directory_and_no_gpu_each_say_what_to_do() {
    let out = kpack(["inspec", "x.so"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("did you mean `inspect`?"),
        "{}",
        stderr(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "some notes\n").unwrap();
    let out = kpack([
        "verify".as_ref(),
        "--gpu".as_ref(),
        "gfx1100".as_ref(),
        notes.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("notes.txt: a file; `kpack verify` checks a directory"),
        "{}",
        stderr(&out)
    );

    let out = kpack(["archive".as_ref(), "list".as_ref(), notes.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a .kpack archive"),
        "{}",
        stderr(&out)
    );

    let out = std::process::Command::new(crate::util::KPACK)
        .args(["verify", "--gpu", "auto"])
        .arg(dir.path())
        .env("KPACK_SYSFS_ROOT", dir.path().join("no-sysfs"))
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "name the GPU instead (`--gpu gfx1100`), or set ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx1100"
        ),
        "{}",
        stderr(&out)
    );
}
