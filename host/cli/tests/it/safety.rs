//! What kpack promises about your files (data safety, and the
//! small ones): inputs are never written, outputs stay inside their root,
//! existing outputs need `--force`, failed runs leave nothing, stale temp
//! files are cleaned, non-regular inputs are refused, EPIPE is quiet, and
//! writers into one archive directory take turns.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kpack_tests::{fixture, stderr};

use crate::util::{KPACK, kpack, scratch};

const FAT: &str = "corpus/lib2tu_2arch.so";

/// A fresh scratch directory for one test.
fn tmp(name: &str) -> PathBuf {
    let d = scratch().join(format!("safety-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success());
}

#[test]
fn offload_never_writes_over_its_input() {
    let d = tmp("same-file");
    std::fs::create_dir(d.join("x")).unwrap();
    let input = d.join("x/in.so");
    std::fs::copy(fixture(FAT), &input).unwrap();
    let orig = std::fs::read(&input).unwrap();
    std::fs::hard_link(&input, d.join("link.so")).unwrap();
    let sneaky = d.join("x/../x/./in.so");
    for out in [input.clone(), sneaky, d.join("link.so")] {
        let o = kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--archives".as_ref(),
            d.join("arch").as_os_str(),
            "--force".as_ref(),
        ]);
        assert_eq!(code(&o), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("is the input"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&input).unwrap(), orig);
    }
    // The failed runs removed the archive directory they created.
    assert!(!d.join("arch").exists());
}

#[test]
fn offload_name_cannot_leave_the_archive_directory() {
    let d = tmp("name-escape");
    let o = kpack([
        "offload".as_ref(),
        fixture(FAT).as_os_str(),
        "-o".as_ref(),
        d.join("out.so").as_os_str(),
        "--archives".as_ref(),
        d.join("a/b").as_os_str(),
        "--name".as_ref(),
        "../../X".as_ref(),
    ]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--name"), "{}", stderr(&o));
    assert!(names(&d).is_empty(), "{:?}", names(&d));
}

/// `kpack ARGS` with `--force` appended when `force`.
fn with_force(mut args: Vec<std::ffi::OsString>, force: bool) -> Output {
    if force {
        args.push("--force".into());
    }
    kpack(args)
}

/// A command that writes: the first run succeeds, a second one over its
/// output is refused (exit 2, naming `--force`), and `--force` succeeds.
fn assert_second_run_needs_force(run: impl Fn(bool) -> Output) {
    assert_eq!(code(&run(false)), Some(0));
    let o = run(false);
    assert_eq!(code(&o), Some(2));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(code(&run(true)), Some(0));
}

#[test]
fn existing_outputs_need_force_in_every_command() {
    let d = tmp("force");
    let offload = |force: bool| {
        let args = vec![
            "offload".into(),
            fixture(FAT).into_os_string(),
            "-o".into(),
            d.join("out.so").into_os_string(),
            "--archives".into(),
            d.join("arch").into_os_string(),
        ];
        with_force(args, force)
    };
    assert_eq!(code(&offload(false)), Some(0));
    let again = offload(false);
    assert_eq!(code(&again), Some(2));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    // Only the archives are left: OUTPUT missing, archives still there.
    std::fs::remove_file(d.join("out.so")).unwrap();
    let o = offload(false);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(".kpack: already exists"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("out.so").exists());
    assert_eq!(code(&offload(true)), Some(0));

    assert_second_run_needs_force(|force| {
        let args = vec![
            "extract".into(),
            fixture(FAT).into_os_string(),
            "--all".into(),
            "-o".into(),
            d.join("ext").into_os_string(),
        ];
        with_force(args, force)
    });

    let archive = d.join("arch").join(&names(&d.join("arch"))[0]);
    assert_second_run_needs_force(|force| {
        let args = vec![
            "archive".into(),
            "extract".into(),
            archive.clone().into_os_string(),
            "-o".into(),
            d.join("aext").into_os_string(),
        ];
        with_force(args, force)
    });

    let pack = |force: bool| {
        let args = vec![
            "archive".into(),
            "pack".into(),
            d.join("aext").into_os_string(),
            "-o".into(),
            d.join("packed.kpack").into_os_string(),
        ];
        with_force(args, force)
    };
    assert_eq!(code(&pack(false)), Some(0));
    assert_eq!(code(&pack(false)), Some(2));
    assert_eq!(code(&pack(true)), Some(0));
}

#[test]
fn archive_extract_of_a_corrupt_archive_leaves_nothing() {
    let d = tmp("corrupt");
    let o = kpack([
        "offload".as_ref(),
        fixture(FAT).as_os_str(),
        "-o".as_ref(),
        d.join("out.so").as_os_str(),
        "--archives".as_ref(),
        d.join("arch").as_os_str(),
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let archive = d.join("arch").join(&names(&d.join("arch"))[0]);
    let mut bytes = std::fs::read(&archive).unwrap();
    // Break the last zstd frame, so that entries before it decode fine.
    let magic = [0x28, 0xb5, 0x2f, 0xfd];
    let frames: Vec<usize> = (0..bytes.len() - 4)
        .filter(|&i| bytes[i..i + 4] == magic)
        .collect();
    assert!(frames.len() >= 2, "{frames:?}");
    let last = frames[frames.len() - 1];
    for b in &mut bytes[last + 8..last + 40] {
        *b ^= 0x5a;
    }
    std::fs::write(&archive, &bytes).unwrap();
    let o = kpack([
        "archive".as_ref(),
        "extract".as_ref(),
        archive.as_os_str(),
        "-o".as_ref(),
        d.join("ext").as_os_str(),
    ]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(!d.join("ext").exists(), "{:?}", names(&d.join("ext")));
}

#[test]
fn split_paths_stay_inside_the_output_and_outside_the_input() {
    let d = tmp("split");
    let art = d.join("blas_gfx90a");
    crate::util::artifact_with_library(&art, fixture(FAT), "libx.so");
    std::fs::write(d.join("victim"), b"keep").unwrap();
    let split = |args: &[&std::ffi::OsStr]| {
        let mut v: Vec<&std::ffi::OsStr> = vec!["split".as_ref(), art.as_os_str()];
        v.extend_from_slice(args);
        kpack(v)
    };
    let o = split(&[
        "-o".as_ref(),
        d.join("out").as_os_str(),
        "--archive-dir".as_ref(),
        "../../../../victim".as_ref(),
    ]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--archive-dir"), "{}", stderr(&o));
    assert!(!d.join("out").exists());
    for out in [art.clone(), art.join("stage/lib/out")] {
        let o = split(&["-o".as_ref(), out.as_os_str()]);
        assert_eq!(code(&o), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("inside the input"), "{}", stderr(&o));
    }
    assert!(!art.join("stage/lib/out").exists());
    let o = split(&["-o".as_ref(), d.as_os_str()]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is inside it"), "{}", stderr(&o));
    assert_eq!(std::fs::read(d.join("victim")).unwrap(), b"keep");
}

#[test]
fn split_does_not_read_through_symlinks_that_leave_the_artifact() {
    let d = tmp("split-links");
    let outside = d.join("outside");
    std::fs::create_dir_all(outside.join("lib")).unwrap();
    std::fs::write(outside.join("lib/secret.txt"), b"secret").unwrap();
    let fat = std::fs::read(fixture("corpus/libaxpy_2arch.so")).unwrap();
    std::fs::write(outside.join("lib/libfat.so"), &fat).unwrap();
    std::fs::write(d.join("passwd"), b"root:x:0:0:SECRET-LINE\n").unwrap();

    // A prefix that is a link out of the artifact: kept as a link.
    let linked_prefix = d.join("a_gfx90a");
    std::fs::create_dir_all(&linked_prefix).unwrap();
    std::fs::write(linked_prefix.join("artifact_manifest.txt"), "stage\n").unwrap();
    std::os::unix::fs::symlink(&outside, linked_prefix.join("stage")).unwrap();
    let o = kpack([
        "split".as_ref(),
        linked_prefix.as_os_str(),
        "-o".as_ref(),
        d.join("out-a").as_os_str(),
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    let generic = d.join("out-a/a_generic");
    assert_eq!(std::fs::read_link(generic.join("stage")).unwrap(), outside);
    assert_eq!(
        std::fs::read_to_string(generic.join("artifact_manifest.txt")).unwrap(),
        "stage\n"
    );
    let mut found = Vec::new();
    walk(&d.join("out-a"), &mut found);
    // The outside fat library was not offloaded (no arch artifact, no
    // archive) and nothing behind the link was copied.
    let mut names: Vec<String> = found
        .iter()
        .map(|p| {
            p.strip_prefix(d.join("out-a"))
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "a_generic",
            "a_generic/artifact_manifest.txt",
            "a_generic/stage"
        ]
    );
    assert_eq!(std::fs::read(outside.join("lib/libfat.so")).unwrap(), fat);
    // verify does not read through the link either.
    let o = kpack(["verify".as_ref(), d.join("out-a").as_os_str()]);
    assert_eq!(
        code(&o),
        Some(0),
        "{}{}",
        kpack_tests::stdout(&o),
        stderr(&o)
    );

    // A manifest that is a link out of the artifact: refused, not read.
    let linked_manifest = d.join("b_gfx90a");
    std::fs::create_dir_all(linked_manifest.join("stage")).unwrap();
    std::os::unix::fs::symlink(
        d.join("passwd"),
        linked_manifest.join("artifact_manifest.txt"),
    )
    .unwrap();
    let o = kpack([
        "split".as_ref(),
        linked_manifest.as_os_str(),
        "-o".as_ref(),
        d.join("out-b").as_os_str(),
    ]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    let all = format!("{}{}", kpack_tests::stdout(&o), stderr(&o));
    assert!(!all.contains("SECRET-LINE"), "{all}");
    assert!(
        all.contains("the artifact manifest is not a regular file (a symlink is not followed)"),
        "{all}"
    );
    let mut found = Vec::new();
    walk(&d.join("out-b"), &mut found);
    assert!(
        found.iter().all(|p| !p.ends_with("secret.txt")),
        "{found:?}"
    );
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&p, out);
        }
        out.push(p);
    }
}

#[test]
fn stale_temp_files_of_dead_processes_are_removed() {
    let d = tmp("stale");
    let arch = d.join("arch");
    std::fs::create_dir_all(&arch).unwrap();
    // pid_max is at most 2^22 on Linux: no live process has this id.
    let stale_file = arch.join(".kpack-tmp-99999999-archive-abc");
    let stale_dir = d.join(".kpack-tmp-99999999-host-abc");
    std::fs::write(&stale_file, b"half an archive").unwrap();
    std::fs::create_dir(&stale_dir).unwrap();
    let o = kpack([
        "offload".as_ref(),
        fixture(FAT).as_os_str(),
        "-o".as_ref(),
        d.join("out.so").as_os_str(),
        "--archives".as_ref(),
        arch.as_os_str(),
    ]);
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!stale_file.exists() && !stale_dir.exists());
    assert!(stderr(&o).contains("left by a kpack run that died"));
    // `kpack verify` flags (and keeps) one.
    let artifact = d.join("blas_gfx90a");
    std::fs::create_dir_all(artifact.join("stage")).unwrap();
    std::fs::write(artifact.join("artifact_manifest.txt"), "stage\n").unwrap();
    let stale = artifact.join("stage/.kpack-tmp-99999999-split-abc");
    std::fs::write(&stale, b"x").unwrap();
    let o = kpack(["verify".as_ref(), artifact.as_os_str()]);
    assert_eq!(code(&o), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("[stale-temp]"), "{}", stderr(&o));
    assert!(stale.exists());
    // Every temp name this build uses is recognisable.
    assert!(kpack_fsafe::temp_prefix("x").starts_with(kpack_fsafe::TEMP_PREFIX));
}

#[test]
fn non_regular_inputs_are_refused_up_front() {
    let d = tmp("fifo");
    let fifo = d.join("pipe");
    mkfifo(&fifo);
    let (e, o, a) = (d.join("e"), d.join("o"), d.join("a"));
    let runs: [Vec<&std::ffi::OsStr>; 7] = [
        vec!["inspect".as_ref(), fifo.as_os_str()],
        vec![
            "extract".as_ref(),
            fifo.as_os_str(),
            "--all".as_ref(),
            "-o".as_ref(),
            e.as_os_str(),
        ],
        vec![
            "offload".as_ref(),
            fifo.as_os_str(),
            "-o".as_ref(),
            o.as_os_str(),
            "--archives".as_ref(),
            a.as_os_str(),
        ],
        vec!["archive".as_ref(), "list".as_ref(), fifo.as_os_str()],
        vec!["archive".as_ref(), "verify".as_ref(), fifo.as_os_str()],
        vec!["verify-elf".as_ref(), fifo.as_os_str()],
        vec!["inspect".as_ref(), d.as_os_str()],
    ];
    for args in runs {
        let o = kpack(&args);
        assert_eq!(code(&o), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    }
    assert_eq!(names(&d), ["pipe"]);
    // The runtime (kpack_open goes through Archive::open) refuses it too,
    // instead of blocking in open(2).
    let e = kpack_format::Archive::open(&fifo).err().unwrap();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn inspect_exits_quietly_when_its_reader_goes_away() {
    // The read end is closed before kpack starts: every write gets EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(KPACK)
        .args(["inspect".as_ref(), fixture(FAT).as_os_str()])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn offloads_into_one_archive_directory_take_turns() {
    let d = tmp("lock");
    let arch = d.join("arch");
    std::fs::create_dir_all(&arch).unwrap();
    let held = std::fs::File::open(&arch).unwrap();
    held.lock().unwrap();
    let mut child = Command::new(KPACK)
        .args([
            "offload".as_ref(),
            fixture(FAT).as_os_str(),
            "-o".as_ref(),
            d.join("out.so").as_os_str(),
            "--archives".as_ref(),
            arch.as_os_str(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("waiting for the lock"), "{line}");
    // While the lock is held, nothing was written.
    assert!(!d.join("out.so").exists());
    assert!(names(&arch).is_empty(), "{:?}", names(&arch));
    held.unlock().unwrap();
    let st = child.wait().unwrap();
    assert!(st.success());
    assert!(d.join("out.so").exists());
}
