//! Hostile and careless inputs to the archive commands and the command
//! line itself: archives of huge entries, names `archive verify` rejects,
//! keys longer than a format width, full disks on stdout, flags that
//! would mean "everything" or "forever".

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kpack_format::{ArchiveWriter, Compression, WriterOptions};
use kpack_tests::{fixture, stderr, stdout};

use crate::util::{KPACK, kpack};

/// One GiB: the decoded size of each huge entry.
const GIB: u64 = 1 << 30;
/// sha256 of one GiB of zero bytes.
const GIB_OF_ZEROS_SHA256: &str =
    "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14";

/// One zstd frame of `len` zero bytes (content size declared), made a
/// MiB at a time.
fn zero_frame(len: u64) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.set_pledged_src_size(Some(len)).unwrap();
    enc.include_contentsize(true).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..len >> 20 {
        enc.write_all(&chunk).unwrap();
    }
    enc.finish().unwrap()
}

fn sha256_of_zeros() -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&GIB_OF_ZEROS_SHA256[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// Options of a test archive listing `arches`.
fn options(compression: Compression, arches: &[&str]) -> WriterOptions {
    WriterOptions {
        group_name: "g".into(),
        gfx_arch_family: "f".into(),
        gfx_arches: Some(arches.iter().map(|a| (*a).to_owned()).collect()),
        compression,
        ..Default::default()
    }
}

/// A small zstd-per-kernel archive with three entries of a GiB of zeros
/// each (`lib/big.so#0..2`, gfx1100): a few dozen KiB on disk.
fn huge_archive(path: &Path) {
    let frame = zero_frame(GIB);
    let sha = sha256_of_zeros();
    let mut w =
        ArchiveWriter::create(path, options(Compression::Zstd { level: 3 }, &["gfx1100"])).unwrap();
    for i in 0..3 {
        w.add_precompressed(&format!("lib/big.so#{i}"), "gfx1100", &frame, GIB, sha)
            .unwrap();
    }
    w.finish().unwrap();
}

/// An archive with one small entry per (key, arch).
fn small_archive(path: &Path, compression: Compression, arches: &[&str], entries: &[(&str, &str)]) {
    let mut w = ArchiveWriter::create(path, options(compression, arches)).unwrap();
    for (key, arch) in entries {
        w.add(key, arch, &[0x5a; 300]).unwrap();
    }
    w.finish().unwrap();
}

/// Run `kpack ARGS` under GNU time: its output and peak RSS in MiB.
fn kpack_peak_rss(args: &[&std::ffi::OsStr]) -> (Output, u64) {
    let rss = tempfile::NamedTempFile::new().unwrap();
    let o = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(rss.path())
        .arg(KPACK)
        .args(args)
        .output()
        .expect("run /usr/bin/time (Debian package `time`)");
    let text = std::fs::read_to_string(rss.path()).unwrap();
    let kib: u64 = text
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no RSS in {text:?}"));
    (o, kib >> 10)
}

/// Every `.kpack-tmp-` name directly in `dir`.
fn temps(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".kpack-tmp-")
        })
        .collect()
}

/// Merge and replace stream huge entries through (copied as frames) with
/// bounded memory, and refuse with exit 2 where they would have to be
/// decoded whole; a refusal leaves nothing behind.
#[test]
fn merge_and_replace_of_huge_entries_stay_within_the_memory_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (huge, small, delta) = (
        d.join("huge.kpack"),
        d.join("small.kpack"),
        d.join("delta.kpack"),
    );
    huge_archive(&huge);
    assert!(std::fs::metadata(&huge).unwrap().len() < 1 << 20);
    small_archive(
        &small,
        Compression::Zstd { level: 3 },
        &["gfx1100", "gfx942"],
        &[("lib/small.so#0", "gfx942")],
    );
    small_archive(
        &delta,
        Compression::ZstdDelta { level: 3 },
        &["gfx1100"],
        &[("lib/d.so#0", "gfx1100")],
    );
    let merged = d.join("merged.kpack");
    let (o, mib) = kpack_peak_rss(&[
        "archive".as_ref(),
        "merge".as_ref(),
        small.as_os_str(),
        huge.as_os_str(),
        "-o".as_ref(),
        merged.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(mib < 512, "archive merge peaked at {mib} MiB");
    assert!(stdout(&o).contains("4 entries"), "{}", stdout(&o));
    let a = kpack_format::Archive::open(&merged).unwrap();
    let big = a.entry("lib/big.so#2", "gfx1100").unwrap();
    assert_eq!(big.original_size(), GIB);
    assert_eq!(big.sha256(), Some(&sha256_of_zeros()));

    let replaced = d.join("replaced.kpack");
    let (o, mib) = kpack_peak_rss(&[
        "archive".as_ref(),
        "replace".as_ref(),
        small.as_os_str(),
        "--from".as_ref(),
        huge.as_os_str(),
        "--keys".as_ref(),
        "lib/big.so#*".as_ref(),
        "--add".as_ref(),
        "-o".as_ref(),
        replaced.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(mib < 512, "archive replace peaked at {mib} MiB");
    assert!(
        stderr(&o).contains("replaced 3 of 4 entries"),
        "{}",
        stderr(&o)
    );

    // A zstd-delta output re-encodes every entry: a GiB one is refused.
    let refused = d.join("refused.kpack");
    let (o, mib) = kpack_peak_rss(&[
        "archive".as_ref(),
        "merge".as_ref(),
        delta.as_os_str(),
        huge.as_os_str(),
        "-o".as_ref(),
        refused.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(mib < 512, "a refused merge peaked at {mib} MiB");
    assert!(
        stderr(&o).contains("over the memory budget of 268435456 bytes"),
        "{}",
        stderr(&o)
    );
    assert!(!refused.exists());
    assert!(temps(d).is_empty(), "{:?}", temps(d));
}

/// Keys and arches `archive verify` rejects are refused (exit 2) by
/// merge and replace, which write nothing, not even the output's parents.
#[test]
fn archive_edits_refuse_names_that_archive_verify_rejects() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let good = d.join("good.kpack");
    small_archive(
        &good,
        Compression::None,
        &["gfx1100"],
        &[("lib/a.so#0", "gfx1100")],
    );
    let no_index = d.join("no-index.kpack");
    small_archive(
        &no_index,
        Compression::None,
        &["gfx1100"],
        &[("lib/b.so", "gfx1100")],
    );
    let bad_arch = d.join("bad-arch.kpack");
    small_archive(
        &bad_arch,
        Compression::None,
        &["../x"],
        &[("lib/c.so#0", "../x")],
    );
    for (bad, want) in [
        (&no_index, "no #<co_index> suffix"),
        (&bad_arch, "not an AMDGPU target id"),
    ] {
        let out = d.join("new/dir/out.kpack");
        let o = kpack([
            "archive".as_ref(),
            "merge".as_ref(),
            good.as_os_str(),
            bad.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
        assert!(stderr(&o).contains("archive verify"), "{}", stderr(&o));
        assert!(!d.join("new").exists(), "a refused merge created parents");
    }
    let o = kpack([
        "archive".as_ref(),
        "replace".as_ref(),
        good.as_os_str(),
        "--from".as_ref(),
        no_index.as_os_str(),
        "--keys".as_ref(),
        "*".as_ref(),
        "--add".as_ref(),
        "-o".as_ref(),
        d.join("out.kpack").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!d.join("out.kpack").exists());
    assert!(temps(d).is_empty(), "{:?}", temps(d));
}

/// Merge writes through staged outputs: the staging directory a killed
/// run left beside the output is removed by the next run, and a new
/// output's missing parents are created only on success.
#[test]
fn archive_merge_removes_stale_temps_and_creates_parents_only_on_success() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (a, b) = (d.join("a.kpack"), d.join("b.kpack"));
    small_archive(
        &a,
        Compression::Zstd { level: 3 },
        &["gfx1100"],
        &[("lib/a.so#0", "gfx1100")],
    );
    small_archive(
        &b,
        Compression::Zstd { level: 3 },
        &["gfx942"],
        &[("lib/a.so#0", "gfx942")],
    );
    let stale = d.join(".kpack-tmp-99999999-archive-edit-abc123");
    std::fs::create_dir_all(stale.join("out")).unwrap();
    std::fs::write(stale.join("out/half.kpack"), b"KPAK").unwrap();
    let out = d.join("new/merged.kpack");
    let o = kpack([
        "archive".as_ref(),
        "merge".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(temps(d).is_empty(), "{:?}", temps(d));
    assert!(temps(&d.join("new")).is_empty());
    assert_eq!(kpack_format::Archive::open(&out).unwrap().entry_count(), 2);
    // Existing output: refused without --force, replaced with it.
    let again = |force: bool| {
        let mut args = vec![
            "archive".as_ref(),
            "merge".as_ref(),
            a.as_os_str(),
            b.as_os_str(),
        ];
        args.extend(["-o".as_ref(), out.as_os_str()]);
        if force {
            args.push("--force".as_ref());
        }
        kpack(args)
    };
    assert_eq!(again(false).status.code(), Some(2));
    assert_eq!(again(true).status.code(), Some(0));
}

/// `archive list` of a key longer than a format width (65,535) prints it
/// instead of panicking.
#[test]
fn archive_list_prints_a_key_longer_than_a_format_width() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("long.kpack");
    let key = format!("{}#0", "k".repeat(70_000));
    small_archive(&path, Compression::None, &["gfx1100"], &[(&key, "gfx1100")]);
    let o = kpack(["archive".as_ref(), "list".as_ref(), path.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&key));
}

/// Help or output that cannot be written to stdout (a full disk) is an
/// error, exit 2, not a success.
#[test]
fn output_to_a_full_stdout_is_an_error() {
    let vector = kpack_tests::workspace_root().join("host/format/tests/vectors");
    let some_vector = std::fs::read_dir(&vector)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "kpack"))
        .unwrap();
    for args in [
        vec!["--help".into()],
        vec!["archive".into(), "--help".into()],
        vec![
            "archive".into(),
            "list".into(),
            some_vector.into_os_string(),
        ],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(KPACK)
            .args(&args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write to stdout"),
            "{}",
            stderr(&o)
        );
    }
}

/// `--gpu-targets ''` is an empty list, not "no filter"; `-j` has a
/// ceiling instead of starting 99,999 threads.
#[test]
fn an_empty_target_list_and_unbounded_jobs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let offload = |extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "offload".into(),
            fixture("clang19/libaxpy_generic.so").into(),
            "-o".into(),
            d.join("lib/libaxpy.so").into(),
            "--archives".into(),
            d.join("lib/.kpack").into(),
        ];
        args.extend(extra.iter().map(Into::into));
        kpack(args)
    };
    for (extra, want) in [
        (
            &["--gpu-targets", ""][..],
            "--gpu-targets: empty target list",
        ),
        (&["--gpu-targets", "gfx1100,"][..], "an empty target name"),
        (
            &["--exclude-arch", ""][..],
            "--exclude-arch: empty target list",
        ),
        (&["-j", "99999"][..], "99999 is not in 1..=256"),
        (&["--jobs", "0"][..], "0 is not in 1..=256"),
    ] {
        let o = offload(extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
        assert!(!d.join("lib").exists(), "{extra:?} wrote output");
    }
}
