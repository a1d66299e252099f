//! Hostile TheRock artifact archives: member names and links that try to
//! leave the output, names that come twice, and decompression bombs. Every
//! escape is tried against a victim file and directory beside the output:
//! `split` (both output formats), `verify` and `recombine` write nothing
//! outside their output and end with exit 2 naming the member; a symlink
//! that merely points outside is kept as a link with a warning; bombs end
//! with a clear exit 2 in bounded memory and disk.

use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_tests::stderr;

use crate::util::{KPACK, scratch};

/// One member of a hand-made archive.
enum M<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
}

/// A fresh directory with a victim file and directory beside the output.
struct Scene {
    root: PathBuf,
}

/// A passing test's scene is removed (the bomb tests leave GiB-sized
/// outputs); a failing one stays for a look.
impl Drop for Scene {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

impl Scene {
    fn new(name: &str) -> Scene {
        let root = scratch().join(name);
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("victim-dir")).unwrap();
        std::fs::write(root.join("victim"), "keep").unwrap();
        Scene { root }
    }

    fn victim(&self) -> String {
        self.root.join("victim").to_str().unwrap().to_string()
    }

    fn victim_dir(&self) -> String {
        self.root.join("victim-dir").to_str().unwrap().to_string()
    }

    /// The victims are as they were: same bytes, same mode, nothing new.
    fn assert_untouched(&self) {
        use std::os::unix::fs::PermissionsExt;
        let v = self.root.join("victim");
        assert_eq!(std::fs::read_to_string(&v).unwrap(), "keep");
        let mode = std::fs::metadata(&v).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "victim's mode changed");
        let n = std::fs::read_dir(self.root.join("victim-dir"))
            .unwrap()
            .count();
        assert_eq!(n, 0, "something was written into the victim directory");
    }

    /// `members` after a manifest listing `prefixes`, as `name`.tar.zst.
    fn archive(&self, name: &str, prefixes: &str, members: &[M<'_>]) -> PathBuf {
        let path = self.root.join(format!("{name}.tar.zst"));
        let enc = zstd::stream::write::Encoder::new(std::fs::File::create(&path).unwrap(), 3)
            .unwrap()
            .auto_finish();
        let mut tar = tar::Builder::new(enc);
        append(
            &mut tar,
            &M::File("artifact_manifest.txt", prefixes.as_bytes()),
        );
        for m in members {
            append(&mut tar, m);
        }
        tar.into_inner().unwrap().flush().unwrap();
        path
    }
}

/// Append `m` with its name and link written as they are (the tar crate's
/// path checks are what a hostile archive does not go through).
fn append<W: Write>(tar: &mut tar::Builder<W>, m: &M<'_>) {
    let mut h = tar::Header::new_gnu();
    let (name, kind, data, link): (&str, _, &[u8], Option<&str>) = match m {
        M::File(n, d) => (n, tar::EntryType::Regular, d, None),
        M::Dir(n) => (n, tar::EntryType::Directory, &[], None),
        M::Symlink(n, t) => (n, tar::EntryType::Symlink, &[], Some(t)),
        M::HardLink(n, t) => (n, tar::EntryType::Link, &[], Some(t)),
    };
    let raw = &mut h.as_old_mut().name;
    raw[..name.len()].copy_from_slice(name.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(if matches!(m, M::Dir(_)) { 0o755 } else { 0o777 });
    h.set_size(data.len() as u64);
    if let Some(l) = link {
        h.set_link_name_literal(l).unwrap();
    }
    h.set_cksum();
    tar.append(&h, data).unwrap();
}

fn kpack(args: &[&str]) -> std::process::Output {
    std::process::Command::new(KPACK)
        .args(args)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap()
}

/// `split` of `archive` into `out` in both output formats, and `verify`
/// of it: each refused with exit 2 and a message containing `why`.
fn refused_everywhere(scene: &Scene, archive: &Path, why: &str) {
    let a = archive.to_str().unwrap();
    for format in ["dir", "tar.zst"] {
        let out = scene.root.join(format!("out-{format}"));
        let r = kpack(&[
            "split",
            a,
            "-o",
            out.to_str().unwrap(),
            "--output-format",
            format,
        ]);
        assert_eq!(r.status.code(), Some(2), "split ({format}): {}", stderr(&r));
        assert!(stderr(&r).contains(why), "split ({format}): {}", stderr(&r));
        assert!(
            !out.exists() || std::fs::read_dir(&out).unwrap().count() == 0,
            "split ({format}) left outputs"
        );
        scene.assert_untouched();
    }
    let r = kpack(&["verify", a]);
    assert_eq!(r.status.code(), Some(2), "verify: {}", stderr(&r));
    assert!(stderr(&r).contains(why), "verify: {}", stderr(&r));
    scene.assert_untouched();
}

#[test]
fn a_file_under_a_symlinked_directory_member_is_refused() {
    let s = Scene::new("hostile-under-symlink");
    let vd = s.victim_dir();
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[
            M::Dir("p"),
            M::Symlink("p/etc", &vd),
            M::File("p/etc/passwd", b"owned"),
        ],
    );
    refused_everywhere(&s, &a, "lies under the symlink member");
}

#[test]
fn a_file_of_the_same_name_as_a_symlink_member_is_refused() {
    let s = Scene::new("hostile-same-name");
    let v = s.victim();
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[M::Dir("p"), M::Symlink("p/x", &v), M::File("p/x", b"owned")],
    );
    refused_everywhere(&s, &a, "comes twice");
}

#[test]
fn a_symlinked_manifest_prefix_is_never_written_through() {
    let s = Scene::new("hostile-prefix-symlink");
    let vd = s.victim_dir();
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[M::Symlink("p", &vd), M::File("p/new", b"owned")],
    );
    refused_everywhere(&s, &a, "lies under the symlink member");
}

#[test]
fn a_prefix_named_like_the_manifest_is_refused() {
    let s = Scene::new("hostile-manifest-prefix");
    let v = s.victim();
    let a = s.archive(
        "blas_lib_gfx942",
        "artifact_manifest.txt\n",
        &[M::Symlink("artifact_manifest.txt", &v)],
    );
    refused_everywhere(&s, &a, "the manifest itself");
}

#[test]
fn hard_links_out_of_the_artifact_are_refused() {
    let s = Scene::new("hostile-hard-link");
    let rel = "../../victim";
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[M::Dir("p"), M::HardLink("p/hl", rel), M::File("p/hl", b"x")],
    );
    refused_everywhere(&s, &a, "not a plain relative path");
    let abs = s.victim();
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[M::Dir("p"), M::HardLink("p/hl", &abs)],
    );
    refused_everywhere(&s, &a, "not a plain relative path");
    let a = s.archive(
        "blas_lib_gfx90a",
        "p\n",
        &[
            M::Dir("p"),
            M::HardLink("p/hl", "p/later"),
            M::File("p/later", b"x"),
        ],
    );
    refused_everywhere(&s, &a, "not an earlier regular file");
}

#[test]
fn a_name_that_comes_twice_is_refused() {
    let s = Scene::new("hostile-duplicates");
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[
            M::Dir("p"),
            M::File("p/a.dat", b"one"),
            M::File("p/a.dat", b"two"),
        ],
    );
    refused_everywhere(&s, &a, "comes twice");
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[
            M::Dir("p"),
            M::File("p/d/f", b"one"),
            M::File("p/d", b"two"),
        ],
    );
    refused_everywhere(&s, &a, "is also the directory of earlier members");
}

#[test]
fn a_symlink_pointing_outside_is_kept_as_a_link_with_a_warning() {
    let s = Scene::new("hostile-outside-link");
    let v = s.victim();
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[
            M::Dir("p"),
            M::File("p/a.dat", b"data"),
            M::Symlink("p/evil", &v),
        ],
    );
    let out = s.root.join("out");
    let r = kpack(&["split", a.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("points outside the artifact"),
        "{}",
        stderr(&r)
    );
    let link = out.join("blas_lib_generic/p/evil");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&v));
    s.assert_untouched();
}

#[test]
fn recombine_never_writes_through_a_symlink_another_shard_left() {
    let s = Scene::new("hostile-recombine");
    let shards = s.root.join("shards");
    let vd = s.victim_dir();
    for (shard, members) in [
        ("a", vec![M::Dir("p"), M::Symlink("p/lib", vd.as_str())]),
        ("b", vec![M::Dir("p"), M::File("p/lib/passwd", b"owned")]),
    ] {
        let dir = shards.join(shard);
        std::fs::create_dir_all(&dir).unwrap();
        let arch = if shard == "a" { "gfx942" } else { "gfx90a" };
        let a = s.archive(&format!("blas_lib_{arch}"), "p\n", &members);
        std::fs::rename(&a, dir.join(a.file_name().unwrap())).unwrap();
        let g = s.archive("blas_lib_gfx942", "p\n", &[M::Dir("p")]);
        std::fs::rename(&g, dir.join(g.file_name().unwrap())).unwrap();
    }
    let config = s.root.join("config.json");
    std::fs::write(
        &config,
        r#"{"architecture_groups": {"all": {"architectures": ["gfx942", "gfx90a"]}}}"#,
    )
    .unwrap();
    let out = s.root.join("out");
    let r = kpack(&[
        "recombine",
        shards.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    s.assert_untouched();
}

/// Run kpack under GNU time; returns the result and its peak RSS in bytes.
fn measured(args: &[&str], dir: &Path) -> (std::process::Output, u64) {
    let rss = dir.join("rss");
    let r = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o", rss.to_str().unwrap(), KPACK])
        .args(args)
        .output()
        .expect("GNU time (/usr/bin/time, Debian package `time`; scripts/test.sh installs it)");
    // GNU time writes "Command exited with non-zero status N" first then.
    let text = std::fs::read_to_string(&rss).unwrap();
    let kb: u64 = text.lines().last().unwrap().trim().parse().unwrap();
    (r, kb * 1024)
}

/// A directory's size on disk, files only.
fn disk_bytes(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

#[test]
fn a_zstd_frame_asking_for_a_huge_window_is_refused_in_little_memory() {
    let s = Scene::new("hostile-window");
    let path = s.root.join("blas_lib_gfx942.tar.zst");
    let mut enc =
        zstd::stream::write::Encoder::new(std::fs::File::create(&path).unwrap(), 1).unwrap();
    enc.window_log(31).unwrap();
    enc.long_distance_matching(true).unwrap();
    enc.include_contentsize(false).unwrap();
    let mut tar = tar::Builder::new(enc.auto_finish());
    append(&mut tar, &M::File("artifact_manifest.txt", b"p\n"));
    append(&mut tar, &M::Dir("p"));
    let big = vec![7u8; 4 << 20];
    append(&mut tar, &M::File("p/a.dat", &big));
    tar.into_inner().unwrap().flush().unwrap();
    let out = s.root.join("out");
    let (r, rss) = measured(
        &["split", path.to_str().unwrap(), "-o", out.to_str().unwrap()],
        &s.root,
    );
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("window") || stderr(&r).contains("memory"),
        "{}",
        stderr(&r)
    );
    assert!(rss < 256 << 20, "peak RSS {rss} bytes");
}

#[test]
fn an_archive_inflating_past_its_ratio_stops_at_the_cap() {
    let s = Scene::new("hostile-bomb");
    let path = s.root.join("blas_lib_gfx942.tar.zst");
    let enc = zstd::stream::write::Encoder::new(std::fs::File::create(&path).unwrap(), 1)
        .unwrap()
        .auto_finish();
    let mut tar = tar::Builder::new(enc);
    append(&mut tar, &M::File("artifact_manifest.txt", b"p\n"));
    append(&mut tar, &M::Dir("p"));
    let mut h = tar::Header::new_gnu();
    h.set_path("p/zeros.dat").unwrap();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    let size: u64 = 1 << 30;
    h.set_size(size);
    h.set_cksum();
    tar.append(&h, std::io::Read::take(std::io::repeat(0), size))
        .unwrap();
    tar.into_inner().unwrap().flush().unwrap();
    let out = s.root.join("out");
    let (r, rss) = measured(
        &["split", path.to_str().unwrap(), "-o", out.to_str().unwrap()],
        &s.root,
    );
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("--max-unpacked-size"), "{}", stderr(&r));
    assert!(rss < 256 << 20, "peak RSS {rss} bytes");
    // The staging directory is gone, and it never held more than the cap.
    assert_eq!(disk_bytes(&out), 0);
    // Raising the total lets a genuinely large archive through.
    let r = kpack(&[
        "split",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--max-unpacked-size",
        "2G",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
}

#[test]
fn a_manifest_over_its_limit_is_refused_not_cut() {
    let s = Scene::new("hostile-manifest-size");
    let mut text = String::new();
    let mut i = 0;
    while text.len() <= 16 << 20 {
        text.push_str(&format!("prefix/number/{i:08}\n"));
        i += 1;
    }
    let a = s.archive("blas_lib_gfx942", &text, &[]);
    let out = s.root.join("out");
    let r = kpack(&["split", a.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("larger than"), "{}", stderr(&r));
}

/// Errors about an archive's members name them inside the archive, never
/// by the spool path they were read from.
#[test]
fn errors_name_members_inside_the_archive() {
    let s = Scene::new("hostile-named-inside");
    let a = s.archive(
        "blas_lib_gfx942",
        "p\n",
        &[
            M::Dir("p"),
            M::File("p/lib/x.kpack", b"KPAK\x01\x00\x00\x00 not split twice"),
        ],
    );
    let out = s.root.join("out");
    let r = kpack(&["split", a.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    let named = format!("{}: a kpack archive", a.join("p/lib/x.kpack").display());
    assert!(stderr(&r).contains(&named), "{}", stderr(&r));
    assert!(!stderr(&r).contains(".kpack-tmp"), "{}", stderr(&r));
}
