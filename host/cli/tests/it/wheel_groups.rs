//! `kpack wheel split --group`: device wheels grouped by ROCm's packaging
//! hierarchy (rocm-bootstrap 0.3.0), the host wheel's `device-*` extras,
//! and pip resolving one extra to exactly the right wheels.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::verify_gpu_passes;
use crate::wheel::{build_fat_wheel, kpack_env, read_wheel, verify_json, walk_files};

const WHEEL: &str = "fatpkg-1.0-py3-none-linux_x86_64.whl";
const HOST_DI: &str = "fatpkg-1.0.dist-info";

/// A fat wheel of clang-19 libraries: gfx942 (and its xnack variants),
/// gfx1100, gfx1201 and five generic targets. Every library has gfx1100
/// code, so host + the gfx110x wheel resolves every marker.
pub(crate) fn fat_files() -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut f = BTreeMap::new();
    for (p, fx) in [
        ("fatpkg/lib/libplain.so", "clang19/libaxpy_plain.so"),
        ("fatpkg/lib/libxnack.so", "clang19/libaxpy_xnack.so"),
        ("fatpkg/lib/libgeneric.so", "clang19/libaxpy_generic.so"),
    ] {
        f.insert(p.to_string(), (std::fs::read(fixture(fx)).unwrap(), 0o755));
    }
    f.insert(
        format!("{HOST_DI}/METADATA"),
        (
            b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\nSummary: a fat test package\n\nThe description.\n".to_vec(),
            0o644,
        ),
    );
    f.insert(
        format!("{HOST_DI}/WHEEL"),
        (b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(), 0o644),
    );
    f
}

fn split(input: &Path, out: &Path, group: &str) -> serde_json::Value {
    let o = kpack_env(
        &[
            "wheel",
            "split",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--group",
            group,
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "wheel split:\n{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// (dist, targets, extra) of every device wheel in the report.
fn devices(report: &serde_json::Value) -> Vec<(String, Vec<String>, String)> {
    report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["distribution"].as_str().unwrap().to_string(),
                d["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect(),
                d["extra"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn groups_device_wheels_by_family() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let r = split(&fat, &out, "family");
    assert_eq!(
        devices(&r),
        [
            (
                "fatpkg-device-gfx10".into(),
                strs(&["gfx10-3-generic"]),
                "device-gfx10".into()
            ),
            (
                "fatpkg-device-gfx11".into(),
                strs(&["gfx11-generic", "gfx1100"]),
                "device-gfx11".into()
            ),
            (
                "fatpkg-device-gfx12".into(),
                strs(&["gfx12-generic", "gfx1201"]),
                "device-gfx12".into()
            ),
            (
                "fatpkg-device-gfx9".into(),
                strs(&["gfx9-generic", "gfx942"]),
                "device-gfx9".into()
            ),
        ]
    );
    // xnack variants are in their processor's wheel.
    let gfx9 = read_wheel(&out.join("fatpkg_device_gfx9-1.0-py3-none-linux_x86_64.whl"));
    let archives: Vec<&String> = gfx9.keys().filter(|p| p.ends_with(".kpack")).collect();
    assert!(
        archives
            .iter()
            .any(|p| p.contains("libxnack.so_gfx942.kpack")),
        "{archives:?}"
    );
    assert!(
        archives.iter().any(|p| p.contains("gfx9-generic")),
        "{archives:?}"
    );
}

/// Without `--group` a split is by target: the same wheels as `--group
/// target`, byte for byte, the host with its extras and a description
/// line naming them; the output says which grouping was taken.
#[test]
fn default_split_is_by_target_with_extras() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let plain = tmp.path().join("plain");
    let o = crate::wheel::wheel_split(fat.to_str().unwrap(), plain.to_str().unwrap(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        kpack_tests::stdout(&o).contains("grouping: target (the default;"),
        "{}",
        kpack_tests::stdout(&o)
    );
    let meta = |dir: &Path| {
        let w = read_wheel(&dir.join(WHEEL));
        String::from_utf8(w[&format!("{HOST_DI}/METADATA")].0.clone()).unwrap()
    };
    let by_target = tmp.path().join("target");
    split(&fat, &by_target, "target");
    for e in std::fs::read_dir(&plain).unwrap() {
        let name = e.unwrap().file_name();
        let same = std::fs::read(plain.join(&name)).unwrap()
            == std::fs::read(by_target.join(&name)).unwrap();
        assert!(same, "{name:?} differs");
    }
    let m = meta(&by_target);
    assert!(m.contains("Provides-Extra: device-gfx1100\n"), "{m}");
    assert!(
        m.contains(
            "Requires-Dist: fatpkg-device-gfx11-generic == 1.0; extra == \"device-gfx1100\"\n\
             Requires-Dist: fatpkg-device-gfx1100 == 1.0; extra == \"device-gfx1100\"\n"
        ),
        "{m}"
    );
    assert!(m.contains("Provides-Extra: device-all\n"), "{m}");
    assert!(
        m.contains("\n\nGPU device code is in separate wheels: install `fatpkg[device-<target>]`"),
        "{m}"
    );
    assert!(
        m.ends_with("or `fatpkg[device-all]`.\n\nThe description.\n"),
        "{m}"
    );
}

#[test]
fn pip_installs_exactly_the_wheels_of_one_sub_family() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let r = split(&fat, &out, "sub-family");
    let names: Vec<String> = devices(&r).into_iter().map(|d| d.0).collect();
    assert_eq!(
        names,
        [
            "fatpkg-device-gfx10-3",
            "fatpkg-device-gfx11",
            "fatpkg-device-gfx110x",
            "fatpkg-device-gfx12-0",
            "fatpkg-device-gfx9-0",
            "fatpkg-device-gfx9-4",
        ]
    );

    let venv = crate::util::Venv::create(tmp.path());
    venv.install_from(&out, "fatpkg[device-gfx110x]");
    let installed = venv.installed("fatpkg");
    // gfx110x's own wheel and gfx11-generic's (code that runs on gfx110x),
    // nothing of another sub-family.
    assert_eq!(
        installed,
        [
            "fatpkg-device-gfx110x==1.0",
            "fatpkg-device-gfx11==1.0",
            "fatpkg==1.0"
        ]
    );
    let o = venv.pip(&["check"]);
    assert!(o.status.success(), "pip check:\n{}", stdout(&o));

    let site = venv.platlib();
    let kpacks: Vec<String> = walk_files(&site)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "kpack"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        kpacks
            .iter()
            .all(|k| k.contains("gfx1100") || k.contains("gfx11-generic")),
        "{kpacks:?}"
    );
    // Every marker resolves for every processor the installed wheels hold.
    let v = verify_json(&site);
    assert_eq!(v["report"]["binaries"], 3, "{v}");
    // The runtime's own resolution for a gfx1100 finds every kernel.
    verify_gpu_passes(&site, "gfx1100");
}

/// The text summary names what to type: the extras (`device-gfx12-0`),
/// not the groups' keys (`gfx12_0`), and the processors each installs.
#[test]
fn summary_prints_the_extras_to_type() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let o = kpack_env(
        &[
            "wheel",
            "split",
            fat.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--group",
            "sub-family",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.lines().next().unwrap().ends_with("  extra"), "{text}");
    assert!(
        text.contains("  device-gfx12-0 (gfx12-generic, gfx1201)\n")
            && text.contains("  device-gfx110x (gfx1100)\n"),
        "{text}"
    );
    assert!(
        text.contains("pip install 'fatpkg[device-gfx10-3]' (or [device-all])"),
        "{text}"
    );
    let archs = text.lines().find(|l| l.contains("archs: ")).unwrap();
    assert!(
        !archs.contains("gfx12_0") && archs.contains("gfx1201"),
        "{archs}"
    );
}
