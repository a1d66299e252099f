//! One way to write: names taken from inputs never reach a path outside
//! the output, outputs get a new file's mode, fetch never follows a
//! directory swapped while it downloads, and a `kill -9` at any rename,
//! directory creation or write leaves the output as it was or complete.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::stderr;

use crate::fetch::tree_and_index;
use crate::util::{KPACK, kpack};
use crate::wheel::{HOST_DI, build_fat_wheel, fat_files};

/// Every file under `dir` (symlinks as their targets) but kpack's temps:
/// relative path → content; `None` when `dir` does not exist.
fn snapshot(dir: &Path) -> Option<BTreeMap<String, Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".kpack-tmp-") {
                continue;
            }
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.insert(rel, target.to_string_lossy().as_bytes().to_vec());
            } else if meta.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    std::fs::metadata(dir).ok()?;
    walk(dir, dir, &mut out);
    Some(out)
}

/// The fat test wheel with METADATA's `Name` set to `name`, RECORD correct.
fn wheel_named(dir: &Path, name: &str) -> PathBuf {
    let mut files = fat_files();
    let meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n");
    files.insert(format!("{HOST_DI}/METADATA"), (meta.into_bytes(), 0o644));
    std::fs::create_dir_all(dir).unwrap();
    build_fat_wheel(dir, &files)
}

fn args(a: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    a.iter().map(|s| s.as_ref().to_os_string()).collect()
}

#[test]
fn a_wheel_name_never_leaves_the_output_directory() {
    let t = tempfile::tempdir().unwrap();
    let esc = t.path().join("esc");
    std::fs::create_dir_all(&esc).unwrap();
    let pwn = esc.join("pwn");
    let out = t.path().join("out");
    for name in [pwn.to_str().unwrap(), "../../pwn", "otherpkg", "fat/pkg"] {
        let whl = wheel_named(&t.path().join("in"), name);
        for extra in [
            &["--device-prefix", "okdev"][..],
            &[][..],
            &[
                "--overlay-root",
                "fatpkg/",
                "--device-package-prefix",
                "okdev",
            ][..],
        ] {
            let mut a = args(&[&"wheel", &"split", &whl, &"-o", &out]);
            a.extend(extra.iter().map(OsString::from));
            let o = kpack(a);
            assert_eq!(o.status.code(), Some(2), "{name} {extra:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("METADATA Name"),
                "{name} {extra:?}: {}",
                stderr(&o)
            );
            assert_eq!(std::fs::read_dir(&esc).unwrap().count(), 0, "{name}");
            assert!(!out.exists(), "{name} {extra:?}: the output was created");
            let left: Vec<_> = std::fs::read_dir(t.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .filter(|n| n.to_string_lossy().starts_with(".kpack-tmp-"))
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
    }
}

#[test]
fn recombine_group_names_cannot_name_paths() {
    let t = tempfile::tempdir().unwrap();
    let shards = t.path().join("shards");
    std::fs::create_dir_all(shards.join("gfx1030_build")).unwrap();
    let escape = format!("{}var/tmp/x", "../".repeat(30));
    for group in [escape.as_str(), "..", "", "generic", "a/b", "."] {
        let config = t.path().join("config.json");
        let doc = serde_json::json!({
            "primary_shard": "gfx1030_build",
            "architecture_groups": { group: { "architectures": ["gfx1030"] } },
        });
        std::fs::write(&config, doc.to_string()).unwrap();
        let out = t.path().join("out");
        let o = kpack(args(&[
            &"recombine",
            &shards,
            &"--config",
            &config,
            &"-o",
            &out,
        ]));
        assert_eq!(o.status.code(), Some(2), "{group:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot name an output artifact"),
            "{group:?}: {}",
            stderr(&o)
        );
        assert!(!out.exists());
    }
}

/// This process's umask, from /proc.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line.split_whitespace().nth(1).unwrap(), 8).unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn index_and_fetch_outputs_are_readable_by_everyone() {
    let t = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(t.path());
    let want = 0o666 & !umask();
    assert_eq!(mode(&idx.join("kpack-index.json")), want);
    let o = kpack(args(&[
        &"fetch", &"--index", &idx, &"--gpu", &"gfx1100", &tree,
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let got = tree.join("lib/.kpack/axpy_gfx1100.kpack");
    assert_eq!(mode(&got), want);
    assert_eq!(mode(&tree.join("lib/.kpack")), 0o777 & !umask());
}

/// Run `kpack args` under strace, killed at the `n`-th call of `syscall`;
/// whether it was killed (false: it finished before that call).
fn killed_at(a: &[OsString], syscall: &str, n: usize) -> bool {
    let o = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("inject={syscall}:signal=KILL:when={n}"))
        .arg(KPACK)
        .args(a)
        .output()
        .expect("strace runs (the test command installs it)");
    o.status.signal() == Some(9) || o.status.code() == Some(137)
}

/// A kill sweep: `run` sets up and returns the command and the output
/// directory to watch; the command is killed at every rename and at
/// sampled mkdirs and writes (the 1st, 2nd, 4th, 8th, ...); each time the output must be as it was, complete, or
/// (a kill inside a commit) made complete by the next run of the command.
fn sweep(name: &str, setup: impl Fn(&Path) -> (Vec<OsString>, PathBuf)) {
    let t = tempfile::tempdir().unwrap();
    let reference = {
        let dir = t.path().join("reference");
        let (a, out) = setup(&dir);
        let o = kpack(a.clone());
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        snapshot(&out)
    };
    let (mut points, mut runs) = (0, 0);
    for (syscall, every) in [
        ("rename,renameat,renameat2", true),
        ("mkdir,mkdirat", false),
        ("write,pwrite64", false),
    ] {
        let mut n = 1;
        loop {
            runs += 1;
            let dir = t.path().join(format!("run-{runs}"));
            let (a, out) = setup(&dir);
            let before = snapshot(&out);
            if !killed_at(&a, syscall, n) {
                break;
            }
            points += 1;
            let after = snapshot(&out);
            if after != before && after != reference {
                // Only a commit in progress may leave a part: the next run
                // finishes it.
                let _ = kpack(a.clone());
                assert_eq!(
                    snapshot(&out).map(|s| s.into_keys().collect::<Vec<_>>()),
                    reference.clone().map(|s| s.into_keys().collect::<Vec<_>>()),
                    "{name}: killed at {syscall} #{n}: neither as it was nor complete"
                );
            }
            std::fs::remove_dir_all(&dir).unwrap();
            n = if every { n + 1 } else { n * 2 };
        }
    }
    assert!(points > 3, "{name}: only {points} kill points");
}

/// A fat wheel in `dir/in` and an output directory that exists (with an
/// unrelated file) or not.
fn wheel_setup(dir: &Path, existing: bool, extra: &[&str]) -> (Vec<OsString>, PathBuf) {
    let whl = wheel_named(&dir.join("in"), "fatpkg");
    let out = dir.join("out");
    if existing {
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("other.whl"), b"x").unwrap();
    }
    let mut a = args(&[&"wheel", &"split", &whl, &"-o", &out]);
    a.extend(extra.iter().map(OsString::from));
    (a, out)
}

#[test]
fn a_killed_wheel_split_leaves_nothing_new_or_everything() {
    sweep("wheel split", |d| wheel_setup(d, false, &["-j", "1"]));
    sweep("wheel split into an existing directory", |d| {
        wheel_setup(d, true, &["-j", "1"])
    });
    sweep("wheel split, AMD's layout", |d| {
        wheel_setup(
            d,
            true,
            &[
                "--overlay-root",
                "fatpkg/",
                "--device-package-prefix",
                "fatpkg-device",
            ],
        )
    });
}

#[test]
fn a_killed_split_recombine_or_fetch_leaves_nothing_new_or_everything() {
    use crate::split::{SHARDS, Shard, make_shard};
    let split = |d: &Path, s: &Shard, out: &Path| {
        let input = d.join("in").join(s.name);
        make_shard(&input, s);
        let mut a = args(&[&"split", &"--batch", &input, &"-o", &out, &"-j", &"1"]);
        if !s.exclude.is_empty() {
            a.extend(args(&[&"--exclude-arch", &s.exclude]));
        }
        a
    };
    sweep("split", |d| {
        let out = d.join("out");
        (split(d, &SHARDS[0], &out), out)
    });
    sweep("recombine", |d| {
        for s in &SHARDS[..2] {
            let o = kpack(split(d, s, &d.join("shards").join(s.name)));
            assert!(o.status.success(), "{}", stderr(&o));
        }
        let config = d.join("config.json");
        std::fs::write(
            &config,
            r#"{"primary_shard": "gfx1030_build", "architecture_groups": {
                 "gfx103X": {"architectures": ["gfx1030"]},
                 "gfx90X": {"architectures": ["gfx90a"]}}}"#,
        )
        .unwrap();
        let out = d.join("out");
        let a = args(&[
            &"recombine",
            &d.join("shards"),
            &"--config",
            &config,
            &"-o",
            &out,
        ]);
        (a, out)
    });
    sweep("fetch", |d| {
        let (tree, idx) = tree_and_index(d);
        (
            args(&[&"fetch", &"--index", &idx, &"--gpu", &"gfx1100", &tree]),
            tree,
        )
    });
}

/// The archive directory swapped for a symlink to elsewhere while the
/// archive downloads: the archive never lands outside the tree.
#[test]
fn fetch_never_follows_a_directory_swapped_during_the_download() {
    use crate::fetch::{Spoil, serve};
    let t = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(t.path());
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (dir, out, root) = (tree.join("lib/.kpack"), outside.clone(), idx.clone());
    std::thread::spawn(move || {
        for i in 0..2 {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            if i == 1 {
                if dir.exists() {
                    std::fs::rename(&dir, dir.with_extension("old")).unwrap();
                }
                std::os::unix::fs::symlink(&out, &dir).unwrap();
            }
            serve(&mut conn, &root, Spoil::None, "");
        }
    });
    let o = kpack(args(&[
        &"fetch", &"--index", &url, &"--gpu", &"gfx1100", &tree,
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("symlink"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
