//! The AMD wheel-variant provider built from this repository
//! (`python/variant-provider`, `kpack_detect::provider`) against AMD's own
//! (rocm-bootstrap 0.3.0) under variantlib 0.2.2 (all pinned, in the venv
//! of `scripts/variant-venv.sh`): the same variant selected on the same
//! machines at every grouping; the Python provider, the Rust one and
//! `kpack detect --format variant` give the same values; hostile KFD files
//! end quickly with a clean answer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kpack_tests::{stderr, stdout, workspace_root};

use crate::detect::{kpack_with, topology};

/// The venv's python, with variantlib, rocm-bootstrap, uv, pip 26 and
/// kpack's provider installed.
pub(crate) fn variant_python() -> PathBuf {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let o = Command::new(workspace_root().join("scripts/variant-venv.sh"))
                .output()
                .expect("scripts/variant-venv.sh");
            assert!(o.status.success(), "variant-venv.sh:\n{}", stderr(&o));
            PathBuf::from(stdout(&o).trim())
        })
        .clone()
}

/// Whether this process may make a private mount namespace (root on
/// Linux with `unshare`): then rocm-bootstrap, which has no sysfs
/// override, reads a fake topology at /sys itself.
fn can_unshare() -> bool {
    Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "mount",
            "-t",
            "tmpfs",
            "none",
            "/mnt",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `python ARGS` seeing `root`'s KFD topology at /sys/class/kfd, in a
/// private mount namespace; or, where none can be made, with
/// `KPACK_SYSFS_ROOT` and rocm-bootstrap's forced targets (what `kpack
/// detect --plain` finds there).
fn on_machine(root: &Path, python: &Path, args: &[&Path]) -> std::process::Output {
    let mut cmd;
    if can_unshare() {
        cmd = Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(
                "mount -t tmpfs none /sys/class && cp -r \"$0/class/kfd\" /sys/class/ && exec \"$@\"",
            )
            .arg(root)
            .arg(python)
            .args(args);
    } else {
        let plain = kpack_with(
            &["detect".as_ref(), "--plain".as_ref()],
            &[("KPACK_SYSFS_ROOT", root.as_os_str())],
        );
        cmd = Command::new(python);
        cmd.args(args).env("KPACK_SYSFS_ROOT", root).env(
            "ROCM_BOOTSTRAP_FORCE_GFX_ARCH",
            stdout(&plain).trim().replace('\n', ","),
        );
    }
    if can_unshare() {
        cmd.env_remove("KPACK_SYSFS_ROOT")
            .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH");
    }
    cmd.env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
        .output()
        .expect("run python")
}

/// One line of `test_variantlib.py`: `(grouping, kpack's, rocm-bootstrap's)`.
fn picks(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let v = |i: usize, p: &str| w[i].strip_prefix(p).unwrap().to_string();
            (w[0].to_string(), v(1, "kpack="), v(2, "rocm-bootstrap="))
        })
        .collect()
}

#[test]
fn both_providers_select_the_same_variant_at_every_grouping() {
    let out = crate::installers::split_output();
    let docs: Vec<PathBuf> = ["target", "sub-family", "family"]
        .iter()
        .map(|g| out.join(g).join("fatpkg-1.0-variants.json"))
        .collect();
    let docs: Vec<&Path> = docs.iter().map(PathBuf::as_path).collect();
    let script = workspace_root().join("python/variant-provider/tests/test_variantlib.py");
    let mut args = vec![script.as_path()];
    args.extend(&docs);
    let tmp = tempfile::tempdir().unwrap();
    // (machine, the variant chosen at target, sub-family, family grouping)
    for (versions, want) in [
        (&[110000][..], ["gfx1100", "gfx110x", "gfx11"]),
        (
            &[110000, 90402],
            ["gfx1100,gfx942", "gfx110x,gfx9_4", "gfx11,gfx9"],
        ),
        (&[110501], ["-", "-", "gfx11"]),
    ] {
        let root = tmp.path().join(format!("{versions:?}"));
        topology(&root, versions);
        let o = on_machine(&root, &variant_python(), &args);
        assert!(o.status.success(), "{versions:?}: {}", stderr(&o));
        let got = picks(&stdout(&o));
        assert_eq!(got.len(), 3, "{}", stdout(&o));
        for ((group, kpack, rocm), want) in got.iter().zip(want) {
            assert_eq!(
                kpack, rocm,
                "{versions:?} at {group}: the providers disagree"
            );
            assert_eq!(kpack, want, "{versions:?} at {group}");
        }
    }
}

/// `python -m kpack_variant_provider` from the source tree (no
/// dependencies) with only `env` among the detection variables.
fn python_provider(env: &[(&str, &std::ffi::OsStr)]) -> std::process::Output {
    let mut py = Command::new("python3");
    py.args(["-m", "kpack_variant_provider"])
        .env(
            "PYTHONPATH",
            workspace_root().join("python/variant-provider"),
        )
        .env_remove("KPACK_SYSFS_ROOT")
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION");
    for (k, v) in env {
        py.env(k, v);
    }
    py.output().unwrap()
}

/// The Python provider, `kpack detect --format variant` and the Rust
/// provider give the same values, on fake topologies and on every
/// processor forced; a forced name `kpack detect` refuses, both refuse.
#[test]
fn python_and_rust_providers_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(PathBuf, Option<String>)> = Vec::new();
    for (i, versions) in [
        &[110000][..],
        &[110003, 110000],
        &[90402, 110001, 90402],
        &[100300, 120500],
        &[],
    ]
    .iter()
    .enumerate()
    {
        let root = tmp.path().join(i.to_string());
        topology(&root, versions);
        cases.push((root, None));
    }
    for s in kpack_amdgpu::SUB_FAMILIES {
        for t in s.members {
            cases.push((tmp.path().join("0"), Some(t.to_string())));
        }
    }
    cases.push((tmp.path().join("0"), Some("gfx90a:xnack+,gfx1151".into())));
    for (root, force) in cases {
        let mut env: Vec<(&str, &std::ffi::OsStr)> = vec![("KPACK_SYSFS_ROOT", root.as_os_str())];
        if let Some(f) = &force {
            env.push(("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", f.as_ref()));
        }
        let p = python_provider(&env);
        assert!(p.status.success(), "{}", stderr(&p));
        let k = kpack_with(
            &["detect".as_ref(), "--format".as_ref(), "variant".as_ref()],
            &env,
        );
        assert!(k.status.success(), "{}", stderr(&k));
        assert_eq!(stdout(&p), stdout(&k), "{root:?} {force:?}");
    }
    let root = tmp.path().join("2");
    let k = kpack_with(
        &["detect".as_ref(), "--format".as_ref(), "variant".as_ref()],
        &[("KPACK_SYSFS_ROOT", root.as_os_str())],
    );
    assert_eq!(
        stdout(&k),
        "amd :: gfx_arch :: gfx942\namd :: gfx_arch :: gfx1101\n"
    );
    for bad in ["GFX1100", "gfx11-generic", "../../x", "gfx90a:xnack"] {
        let env = [("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", bad.as_ref())];
        let p = python_provider(&env);
        let k = kpack_with(
            &["detect".as_ref(), "--format".as_ref(), "variant".as_ref()],
            &env,
        );
        assert_eq!(p.status.code(), Some(2), "{bad}: {}", stderr(&p));
        assert_eq!(k.status.code(), Some(2), "{bad}: {}", stderr(&k));
        assert!(
            stderr(&p).starts_with("error: ROCM_BOOTSTRAP_FORCE_GFX_ARCH: "),
            "{}",
            stderr(&p)
        );
        assert!(!stderr(&p).contains("Traceback"), "{}", stderr(&p));
    }
}

/// A `properties` file that is a FIFO, `/dev/zero`, 200 MB long or not
/// UTF-8: the node is skipped with a warning, the other GPU still found,
/// in well under a second; a forced path is refused as fast.
#[test]
fn hostile_properties_end_quickly_with_a_clean_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let make = |name: &str, write: &dyn Fn(&Path)| {
        let root = tmp.path().join(name);
        topology(&root, &[110000, 90402]);
        let p = root.join("class/kfd/kfd/topology/nodes/2/properties");
        std::fs::remove_file(&p).unwrap();
        write(&p);
        root
    };
    let fifo = make("fifo", &|p| {
        let ok = Command::new("mkfifo").arg(p).status().unwrap();
        assert!(ok.success());
    });
    let zero = make("zero", &|p| {
        std::os::unix::fs::symlink("/dev/zero", p).unwrap()
    });
    let big = make("big", &|p| {
        let f = std::fs::File::create(p).unwrap();
        f.set_len(200 << 20).unwrap();
    });
    let ff = make("ff", &|p| {
        std::fs::write(p, b"simd_count 96\n\xff\ngfx_target_version 90402\n").unwrap()
    });
    // A number longer than a u64 (Python refuses to parse one of 4301
    // digits): no value, and the node has no GPU.
    let digits = make("digits", &|p| {
        std::fs::write(
            p,
            format!("simd_count 96\ngfx_target_version {}\n", "9".repeat(5000)),
        )
        .unwrap()
    });
    let t = Instant::now();
    let p = python_provider(&[("KPACK_SYSFS_ROOT", digits.as_os_str())]);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(p.status.success(), "{}", stderr(&p));
    assert_eq!(stdout(&p), "amd :: gfx_arch :: gfx1100\n");
    assert_eq!(stderr(&p), "");
    for root in [&fifo, &zero, &big, &ff] {
        let t = Instant::now();
        let p = python_provider(&[("KPACK_SYSFS_ROOT", root.as_os_str())]);
        let took = t.elapsed();
        assert!(took < Duration::from_secs(1), "{root:?}: {took:?}");
        assert!(p.status.success(), "{root:?}: {}", stderr(&p));
        assert_eq!(stdout(&p), "amd :: gfx_arch :: gfx1100\n", "{root:?}");
        assert!(
            stderr(&p).starts_with("warning: "),
            "{root:?}: {}",
            stderr(&p)
        );
        assert!(stderr(&p).contains("node skipped"), "{}", stderr(&p));
        assert!(!stderr(&p).contains("Traceback"), "{}", stderr(&p));
    }
    let t = Instant::now();
    let p = python_provider(&[("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "../../x".as_ref())]);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(p.status.code(), Some(2));
    assert_eq!(
        stderr(&p),
        "error: ROCM_BOOTSTRAP_FORCE_GFX_ARCH: '../../x' is not a GPU target (bad processor name)\n"
    );
}

/// A sub-family key is spelled one way in every format (`gfx9_0`, the
/// key; distribution names spell it `gfx9-0`).
#[test]
fn detect_spells_a_sub_family_alike_in_every_format() {
    let env = [("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a".as_ref())];
    let human = kpack_with(&["detect".as_ref()], &env);
    assert!(
        stdout(&human).contains("  packages: gfx90a -> gfx9_0 -> gfx9\n"),
        "{}",
        stdout(&human)
    );
    let chain = kpack_with(&["detect".as_ref(), "--chain".as_ref()], &env);
    assert_eq!(stdout(&chain), "gfx90a gfx9_0 gfx9\n");
}
