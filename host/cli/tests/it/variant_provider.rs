//! The AMD wheel-variant provider built from this repository
//! (`python/variant-provider`, `kpack_detect::provider`): variantlib 0.2.2
//! (PyPI, in the venv of `scripts/variant-venv.sh`) loads it through its
//! entry point and orders the variants of kpack-written variant wheels by
//! it; the Python provider, the Rust one and `kpack detect --format
//! variant` give the same ordered properties.

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{stderr, stdout, workspace_root};

use crate::detect::{kpack_with, topology};
use crate::wheel::{build_fat_wheel, kpack_env, read_wheel};

const VARIANT_JSON: &str = "fatpkg-1.0.dist-info/variant.json";

/// The venv's python, with variantlib and the provider installed.
fn variant_python() -> PathBuf {
    let o = Command::new(workspace_root().join("scripts/variant-venv.sh"))
        .output()
        .expect("scripts/variant-venv.sh");
    assert!(o.status.success(), "variant-venv.sh:\n{}", stderr(&o));
    PathBuf::from(stdout(&o).trim())
}

/// `kpack wheel split --group LEVEL --variant-wheel` of the fat test
/// wheel; the variant wheel's `variant.json`.
fn split_variant(tmp: &Path, fat: &Path, level: &str) -> PathBuf {
    let out = tmp.join(level);
    let o = kpack_env(
        &[
            "wheel".as_ref(),
            "split".as_ref(),
            fat.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--group".as_ref(),
            level.as_ref(),
            "--variant-wheel".as_ref(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let wheel = read_wheel(&out.join("fatpkg-1.0-py3-none-linux_x86_64-variant.whl"));
    let json = tmp.join(format!("{level}.json"));
    std::fs::write(&json, &wheel[VARIANT_JSON].0).unwrap();
    json
}

#[test]
fn variantlib_orders_kpack_variants_by_the_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &crate::wheel_groups::fat_files());
    let target = split_variant(tmp.path(), &fat, "target");
    let family = split_variant(tmp.path(), &fat, "family");
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("\"kpack-variant-provider >= 0.1\""), "{text}");
    let script = workspace_root().join("python/variant-provider/tests/test_variantlib.py");
    let o = Command::new(variant_python())
        .arg(&script)
        .arg(&target)
        .arg(&family)
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "ok\n", "{}", stderr(&o));
}

/// The Python provider (run from the source tree with the system python:
/// it has no dependencies) and `kpack detect --format variant` agree, on
/// fake topologies and on every processor forced.
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
    let all: Vec<&str> = kpack_amdgpu::SUB_FAMILIES
        .iter()
        .flat_map(|s| s.members.iter().copied())
        .collect();
    for t in &all {
        cases.push((tmp.path().join("0"), Some(t.to_string())));
    }
    cases.push((tmp.path().join("0"), Some("gfx90a:xnack+,gfx1151".into())));
    let src = workspace_root().join("python/variant-provider");
    for (root, force) in cases {
        let mut py = Command::new("python3");
        py.args(["-m", "kpack_variant_provider"])
            .env("PYTHONPATH", &src)
            .env("KPACK_SYSFS_ROOT", &root)
            .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
            .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION");
        let mut env: Vec<(&str, &std::ffi::OsStr)> = vec![("KPACK_SYSFS_ROOT", root.as_os_str())];
        if let Some(f) = &force {
            py.env("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", f);
            env.push(("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", f.as_ref()));
        }
        let p = py.output().unwrap();
        assert!(p.status.success(), "{}", stderr(&p));
        let k = kpack_with(
            &["detect".as_ref(), "--format".as_ref(), "variant".as_ref()],
            &env,
        );
        assert!(k.status.success(), "{}", stderr(&k));
        assert_eq!(stdout(&p), stdout(&k), "{root:?} {force:?}");
        // The vendorable Rust provider, on the same environment.
        let var = |k: &str| match k {
            "KPACK_SYSFS_ROOT" => Some(root.to_string_lossy().into_owned()),
            "ROCM_BOOTSTRAP_FORCE_GFX_ARCH" => force.clone(),
            _ => None,
        };
        let rust: String =
            kpack_detect::provider::properties_for(&kpack_detect::provider::detect_targets(&var))
                .iter()
                .map(|v| format!("amd :: gfx_arch :: {v}\n"))
                .collect();
        assert_eq!(rust, stdout(&p), "{root:?} {force:?}");
    }
    // The two orders on one machine, spelled out.
    let root = tmp.path().join("2");
    let k = kpack_with(
        &["detect".as_ref(), "--format".as_ref(), "variant".as_ref()],
        &[("KPACK_SYSFS_ROOT", root.as_os_str())],
    );
    assert_eq!(
        stdout(&k),
        "amd :: gfx_arch :: gfx942\namd :: gfx_arch :: gfx1101\namd :: gfx_arch :: gfx9_4\n\
amd :: gfx_arch :: gfx110x\namd :: gfx_arch :: gfx9\namd :: gfx_arch :: gfx11\n"
    );
}
