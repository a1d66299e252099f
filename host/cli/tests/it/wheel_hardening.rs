//! Wheels as they come: a RECORD left stale by retagging (accepted with a
//! warning, as pip 23.2 installs it), a rerun over an identical output,
//! invalid `--device-requires-dist` values, device wheel names, what
//! `audit` says of a fat wheel, and device wheels merging payloads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_tests::{stderr, stdout};
use zip::write::SimpleFileOptions;

use crate::wheel::{HOST_DI, WHEEL, build_fat_wheel, fat_files, kpack_env, read_wheel, walk_files};

/// The retagged name of the fat wheel.
const RETAGGED: &str = "fatpkg-1.0-py3-none-manylinux_2_28_x86_64.whl";

/// `input`'s entries rewritten into `dir/name`, each through `edit`
/// (path, bytes), its RECORD left as it was.
fn rewrite(input: &Path, dir: &Path, name: &str, edit: impl Fn(&str, &mut Vec<u8>)) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(name);
    let mut src = zip::ZipArchive::new(std::fs::File::open(input).unwrap()).unwrap();
    let mut z = zip::ZipWriter::new(std::fs::File::create(&out).unwrap());
    for i in 0..src.len() {
        let mut e = src.by_index(i).unwrap();
        if e.is_dir() {
            continue;
        }
        let mut b = Vec::new();
        e.read_to_end(&mut b).unwrap();
        edit(e.name(), &mut b);
        let mode = e.unix_mode().unwrap_or(0o644) & 0o777;
        z.start_file(
            e.name(),
            SimpleFileOptions::default().unix_permissions(mode),
        )
        .unwrap();
        z.write_all(&b).unwrap();
    }
    z.finish().unwrap();
    out
}

/// The fat wheel retagged as `wheel tags` without `--remove` would leave
/// it if it forgot RECORD: WHEEL's `Tag` and the file name changed, the
/// RECORD row of WHEEL stale. Returns (retagged wheel, stale hash, new hash).
fn retagged(dir: &Path) -> (PathBuf, String, String) {
    let fat = build_fat(&dir.join("fat"));
    let old = fat_files()[&format!("{HOST_DI}/WHEEL")].0.clone();
    let new = String::from_utf8(old.clone())
        .unwrap()
        .replace(
            "Tag: py3-none-linux_x86_64",
            "Tag: py3-none-manylinux_2_28_x86_64",
        )
        .into_bytes();
    let wheel_file = format!("{HOST_DI}/WHEEL");
    let edited = new.clone();
    let w = rewrite(&fat, &dir.join("in"), RETAGGED, move |p, b| {
        if p == wheel_file {
            *b = edited.clone();
        }
    });
    (
        w,
        kpack_wheel::record_hash(&old),
        kpack_wheel::record_hash(&new),
    )
}

fn build_fat(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    build_fat_wheel(dir, &fat_files())
}

/// The warning a stale WHEEL row gets: its path, the row's hash and the
/// file's.
fn assert_warns_stale(err: &str, stale: &str, actual: &str) {
    let line = err
        .lines()
        .find(|l| l.starts_with("warning: ") && l.contains("stale RECORD row"))
        .unwrap_or_else(|| panic!("no stale-row warning:\n{err}"));
    assert!(
        line.contains(&format!("{HOST_DI}/WHEEL")) && line.contains(stale) && line.contains(actual),
        "{line}"
    );
}

#[test]
fn a_retagged_wheel_with_a_stale_record_is_split_pruned_and_audited_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, stale, actual) = retagged(tmp.path());
    // pip 23.2 installs it without a word: the row is stale, not the wheel.
    let out = tmp.path().join("split");
    let o = kpack_env(
        &[
            "wheel",
            "split",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_warns_stale(&stderr(&o), &stale, &actual);
    let wheels: Vec<PathBuf> = walk_files(&out)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert!(wheels.len() >= 3, "{wheels:?}");
    for w in &wheels {
        // Every RECORD written is right (read_wheel checks every row).
        read_wheel(w);
    }

    let pruned = tmp.path().join("pruned");
    let o = kpack_env(
        &[
            "wheel",
            "prune",
            input.to_str().unwrap(),
            "--keep",
            "gfx90a",
            "-o",
            pruned.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_warns_stale(&stderr(&o), &stale, &actual);
    read_wheel(&pruned.join(RETAGGED));

    let o = kpack_env(&["audit", input.to_str().unwrap()], &[]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_warns_stale(&stderr(&o), &stale, &actual);
}

/// A row stale for a file the split rewrites (a fat library) is accepted
/// too, as pip installs it; the host wheel's RECORD has the new bytes' hash.
#[test]
fn a_stale_row_of_a_fat_library_is_accepted_as_pip_accepts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat(&tmp.path().join("fat"));
    // One byte appended to the library after RECORD was written (past
    // every section, so the library is as good as it was).
    let input = rewrite(&fat, &tmp.path().join("in"), WHEEL, |p, b| {
        if p == "fatpkg/lib/libaxpy.so" {
            b.push(0);
        }
    });
    let out = tmp.path().join("out");
    let o = kpack_env(
        &[
            "wheel",
            "split",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("stale RECORD row fatpkg/lib/libaxpy.so: it says sha256=")
            && err.contains("bytes, the file is sha256="),
        "{err}"
    );
    // The library was offloaded and every RECORD written is right.
    let host = read_wheel(&out.join(WHEEL));
    assert!(host.contains_key("fatpkg/lib/libaxpy.so"));
}

/// The unpacked wheel given as a directory warns of the same stale row
/// (it was dropped silently).
#[test]
fn an_unpacked_wheel_with_a_stale_record_warns_of_the_row() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, stale, actual) = retagged(tmp.path());
    let dir = tmp.path().join("unpacked");
    let mut z = zip::ZipArchive::new(std::fs::File::open(&input).unwrap()).unwrap();
    z.extract(&dir).unwrap();
    let out = tmp.path().join("out");
    let o = kpack_env(
        &[
            "wheel",
            "split",
            dir.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--overlay-root",
            "fatpkg/",
            "--device-package-prefix",
            "fatpkg-device",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_warns_stale(&stderr(&o), &stale, &actual);
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).unwrap()
}

fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walk_files(dir)
        .into_iter()
        .map(|p| {
            (
                p.strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// `kpack wheel split` of the fat wheel into `out` (an existing directory
/// gets an unrelated file first, so that commits move files into it).
fn split_into(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut a = vec![
        "wheel",
        "split",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    a.extend(extra);
    kpack_env(&a, &[])
}

#[test]
fn a_rerun_over_an_identical_output_says_identical_and_a_different_one_needs_force() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat(&tmp.path().join("in"));
    let out = tmp.path().join("out");
    assert_eq!(split_into(&input, &out, &[]).status.code(), Some(0));
    let before = files_of(&out);
    let o = split_into(&input, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for f in before.keys() {
        assert!(
            text.contains(&format!(
                "  {f}: identical to the existing output, left alone\n"
            )),
            "{f}: {text}"
        );
    }
    assert_eq!(files_of(&out), before);
    // One device wheel differs: refused, naming --force; forced, replaced.
    let device = out.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl");
    std::fs::write(&device, b"not the wheel").unwrap();
    let o = split_into(&input, &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    let o = split_into(&input, &out, &["--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(files_of(&out), before);
}

/// Killed at each rename of its commit into an existing directory, a
/// rerun finishes the commit (the journal) and exits 0: its output is
/// then identical to what it would write.
#[test]
fn a_rerun_after_a_kill_during_the_commit_completes_and_exits_0() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat(&tmp.path().join("in"));
    let reference = tmp.path().join("reference");
    assert_eq!(split_into(&input, &reference, &[]).status.code(), Some(0));
    let want = files_of(&reference);
    let mut partial = 0;
    for n in 1.. {
        let out = tmp.path().join(format!("run-{n}"));
        std::fs::create_dir_all(&out).unwrap();
        let o = std::process::Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-e"])
            .arg(format!(
                "inject=rename,renameat,renameat2:signal=KILL:when={n}"
            ))
            .arg(crate::util::KPACK)
            .args(["wheel", "split", "-j", "1"])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
            .env_remove("SOURCE_DATE_EPOCH")
            .output()
            .expect("strace runs (the test command installs it)");
        if o.status.signal() != Some(9) {
            break;
        }
        let got = files_of(&out);
        if !got.is_empty() && got != want {
            partial += 1;
        }
        let o = split_into(&input, &out, &[]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "killed at rename #{n}: {}",
            stderr(&o)
        );
        assert_eq!(
            files_of(&out)
                .into_keys()
                .filter(|k| !k.contains(".kpack-tmp"))
                .collect::<Vec<_>>(),
            want.keys().cloned().collect::<Vec<_>>(),
            "killed at rename #{n}"
        );
    }
    assert!(partial > 0, "no kill left a partial output");
}

/// The python of `scripts/variant-venv.sh`'s venv, which holds
/// `packaging` (variantlib's dependency; 26.x, as installers read METADATA).
fn packaging_python() -> PathBuf {
    let o =
        std::process::Command::new(kpack_tests::workspace_root().join("scripts/variant-venv.sh"))
            .output()
            .expect("scripts/variant-venv.sh");
    assert!(o.status.success(), "variant-venv.sh:\n{}", stderr(&o));
    PathBuf::from(stdout(&o).trim())
}

/// Whether `packaging.requirements.Requirement` accepts each of `reqs`.
fn packaging_accepts(reqs: &[&str]) -> Vec<bool> {
    let script = "import json, sys\nfrom packaging.requirements import Requirement\n\
        def ok(r):\n    try:\n        Requirement(r)\n        return True\n    except Exception:\n        return False\n\
        print(json.dumps([ok(r) for r in json.load(sys.stdin)]))\n";
    let mut child = std::process::Command::new(packaging_python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(reqs).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `--device-requires-dist` values `packaging` refuses (with the target in
/// place) are refused before anything is written, naming the flag; the
/// ones it takes are written into METADATA that `packaging` reads.
#[test]
fn device_requires_dist_is_refused_unless_packaging_reads_it() {
    let bad = [
        "rocm-sdk-device-@GFXARCH@ ==",
        "rocm-sdk-device-@GFXARCH@ == 7.1 junk",
        "rocm-sdk-device-@GFXARCH@ >= 7.*",
        "rocm-sdk-device-@GFXARCH@ ~= 7",
        "rocm-sdk-device-@GFXARCH@ == 7.1; garbage",
        "rocm-sdk-device-@GFXARCH@ ; python_version >= \"3.9",
        "rocm-sdk-device-@GFXARCH@[a,] == 1",
        "rocm-sdk-device-@GFXARCH@ (>= 1",
        "rocm-sdk-device-@GFXARCH@ == 1.0a1.*",
        "rocm-sdk-device-@GFXARCH@ ; extra == \"a\" and",
    ];
    let good = [
        "rocm-sdk-device-@GFXARCH@ == 7.1",
        "rocm-sdk-device-@GFXARCH@[x]>=7.1,<8; python_version >= \"3.9\"",
        "rocm-sdk-device-@GFXARCH@ (~=7.1.0)",
        "rocm-sdk-device-@GFXARCH@ ; (os_name == 'posix' or extra == \"a\") and 'x' not in platform_release",
    ];
    let with_target = |r: &&str| r.replace("@GFXARCH@", "gfx90a");
    let bad_t: Vec<String> = bad.iter().map(with_target).collect();
    let good_t: Vec<String> = good.iter().map(with_target).collect();
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    // The oracle agrees with the lists.
    assert!(packaging_accepts(&refs(&bad_t)).iter().all(|ok| !ok));
    assert!(packaging_accepts(&refs(&good_t)).iter().all(|ok| *ok));

    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat(&tmp.path().join("in"));
    let split = |req: &str, out: &Path| {
        split_into(
            &input,
            out,
            &[
                "--overlay-root",
                "fatpkg/",
                "--device-package-prefix",
                "fatpkg-device",
                "--device-requires-dist",
                req,
            ],
        )
    };
    for (i, b) in bad.iter().enumerate() {
        let out = tmp.path().join(format!("bad-{i}"));
        let o = split(b, &out);
        assert_eq!(o.status.code(), Some(2), "{b}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--device-requires-dist"),
            "{b}: {}",
            stderr(&o)
        );
        assert!(!out.exists(), "{b}: something was written");
    }
    for (i, g) in good.iter().enumerate() {
        let out = tmp.path().join(format!("good-{i}"));
        let o = split(g, &out);
        assert_eq!(o.status.code(), Some(0), "{g}: {}", stderr(&o));
        let dev = read_wheel(&out.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl"));
        let meta = String::from_utf8(dev["fatpkg_device_gfx90a-1.0.dist-info/METADATA"].0.clone())
            .unwrap();
        let reqs: Vec<&str> = meta
            .lines()
            .filter_map(|l| l.strip_prefix("Requires-Dist: "))
            .collect();
        assert!(reqs.contains(&with_target(g).as_str()), "{meta}");
        assert!(packaging_accepts(&reqs).iter().all(|ok| *ok), "{meta}");
    }
}

/// A distribution named with `_` (`fat_pkg`): its device wheels are
/// projects of their own with PEP 503 normalised names, `fat-pkg-device-…`.
#[test]
fn device_wheel_names_are_normalised() {
    let tmp = tempfile::tempdir().unwrap();
    let di = "fat_pkg-1.0.dist-info";
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for (p, (b, m)) in fat_files() {
        let p = p
            .replace(HOST_DI, di)
            .replace("fatpkg-1.0.data", "fat_pkg-1.0.data");
        let b = if p.ends_with("/METADATA") {
            b"Metadata-Version: 2.1\nName: fat_pkg\nVersion: 1.0\n".to_vec()
        } else {
            b
        };
        files.push((p, b, m));
    }
    let input = tmp.path().join("fat_pkg-1.0-py3-none-linux_x86_64.whl");
    crate::util::write_wheel(
        &input,
        di,
        files.iter().map(|(p, b, m)| (p.as_str(), b.as_slice(), *m)),
    );
    let out = tmp.path().join("out");
    let o = split_into(&input, &out, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    for d in v["devices"].as_array().unwrap() {
        let dist = d["distribution"].as_str().unwrap();
        assert!(dist.starts_with("fat-pkg-device-gfx"), "{dist}");
        let file = d["file"].as_str().unwrap();
        assert!(file.starts_with("fat_pkg_device_gfx"), "{file}");
        let w = read_wheel(&out.join(file));
        let stem = file.split('-').take(2).collect::<Vec<_>>().join("-");
        let meta = String::from_utf8(w[&format!("{stem}.dist-info/METADATA")].0.clone()).unwrap();
        assert!(meta.contains(&format!("\nName: {dist}\n")), "{meta}");
    }
}

/// `audit` of a fat wheel never split: per binary, the targets it carries
/// inside; no empty table.
#[test]
fn audit_of_a_fat_wheel_says_it_carries_its_device_code_inside() {
    let tmp = tempfile::tempdir().unwrap();
    let input = build_fat(&tmp.path().join("in"));
    let o = kpack_env(&["audit", input.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("fatpkg 1.0: carries its device code inside (never split"),
        "{text}"
    );
    assert!(
        text.contains("  fatpkg/lib/libaxpy.so: gfx1030, gfx90a\n"),
        "{text}"
    );
    assert!(!text.contains("  binary"), "an empty table: {text}");
    let o = kpack_env(&["audit", input.to_str().unwrap(), "--json"], &[]);
    let v = json(&o);
    let fat = v["fat_binaries"].as_array().unwrap();
    assert!(
        fat.iter()
            .any(|b| b["path"] == "fatpkg/lib/libaxpy.so" && b["package"] == "fatpkg"),
        "{v}"
    );
}

/// The `archives: …` line says how archives were written: nothing for a
/// wheel without device code.
#[test]
fn a_wheel_without_device_code_gets_no_archives_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = fat_files();
    files.retain(|p, _| p.contains(".dist-info/") || p.ends_with(".py"));
    let input = build_fat_wheel(&tmp.path().join("x").tap_mkdir(), &files);
    let o = split_into(&input, &tmp.path().join("out"), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no device code"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("archives: "), "{}", stderr(&o));
    // With device code it is said.
    let input = build_fat(&tmp.path().join("fat"));
    let o = split_into(&input, &tmp.path().join("out2"), &[]);
    assert!(stderr(&o).contains("archives: "), "{}", stderr(&o));
}

/// `create_dir_all` in an expression.
trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
