//! `kpack audit` on a planted wheel set: a kpack split of a package whose
//! second library was built without gfx1201, plus a device wheel whose
//! parent is absent and one holding only `gfx12-5-generic` code (which
//! CLR never asks for). The audit reports exactly those three holes.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::write_wheel;
use crate::wheel::{build_fat_wheel, kpack_env};

const HOST_DI: &str = "fatpkg-1.0.dist-info";

fn planted_set(dir: &Path) -> std::path::PathBuf {
    let mut f: BTreeMap<String, (Vec<u8>, u32)> = BTreeMap::new();
    for (p, fx) in [
        ("fatpkg/lib/libaxpy.so", "clang19/libaxpy_plain.so"),
        ("fatpkg/lib/lib2tu.so", "clang19/lib2tu_plain.so"),
    ] {
        f.insert(p.to_string(), (std::fs::read(fixture(fx)).unwrap(), 0o755));
    }
    f.insert(
        format!("{HOST_DI}/METADATA"),
        (
            b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n".to_vec(),
            0o644,
        ),
    );
    f.insert(
        format!("{HOST_DI}/WHEEL"),
        (b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(), 0o644),
    );
    let fat = build_fat_wheel(dir, &f);
    let out = dir.join("set");
    let o = kpack_env(
        &[
            "wheel".as_ref(),
            "split".as_ref(),
            fat.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--group".as_ref(),
            "target".as_ref(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // A device wheel whose family wheel the set lacks.
    let di = "fatpkg_device_gfx1101-1.0.dist-info";
    write_wheel(
        &out.join("fatpkg_device_gfx1101-1.0-py3-none-linux_x86_64.whl"),
        di,
        [
            (
                &*format!("{di}/METADATA"),
                &b"Metadata-Version: 2.1\nName: fatpkg-device-gfx1101\nVersion: 1.0\n\
Requires-Dist: fatpkg == 1.0\nRequires-Dist: fatpkg-device-gfx11 == 1.0\n"[..],
                0o644,
            ),
            (
                &*format!("{di}/WHEEL"),
                &b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"[..],
                0o644,
            ),
        ],
    );
    // A device wheel with only gfx12-5-generic code.
    let archive = dir.join("fatpkg_gfx12-5-generic.kpack");
    let mut w = kpack_format::ArchiveWriter::create(
        &archive,
        kpack_format::WriterOptions {
            group_name: "fatpkg".into(),
            gfx_arch_family: "gfx12-5-generic".into(),
            gfx_arches: None,
            compression: kpack_format::Compression::None,
            ..Default::default()
        },
    )
    .unwrap();
    w.add(
        "fatpkg/lib/libaxpy.so#0",
        "gfx12-5-generic",
        b"\x7fELF not really",
    )
    .unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    let di = "fatpkg_device_gfx12_5_generic-1.0.dist-info";
    write_wheel(
        &out.join("fatpkg_device_gfx12_5_generic-1.0-py3-none-linux_x86_64.whl"),
        di,
        [
            (
                "_fatpkg_kpack/fatpkg_gfx12-5-generic.kpack",
                &bytes[..],
                0o644,
            ),
            (
                &*format!("{di}/METADATA"),
                &b"Metadata-Version: 2.1\nName: fatpkg-device-gfx12-5-generic\nVersion: 1.0\n\
Requires-Dist: fatpkg == 1.0\n"[..],
                0o644,
            ),
            (
                &*format!("{di}/WHEEL"),
                &b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"[..],
                0o644,
            ),
        ],
    );
    out
}

#[test]
fn reports_exactly_the_planted_holes() {
    let tmp = tempfile::tempdir().unwrap();
    let set = planted_set(tmp.path());
    let o = kpack_env(&["audit".as_ref(), set.as_os_str(), "--json".as_ref()], &[]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["holes"],
        serde_json::json!([
            {"kind": "missing-target", "package": "fatpkg", "binary": "fatpkg/lib/lib2tu.so", "target": "gfx1201"},
            {"kind": "missing-parent", "device": "fatpkg-device-gfx1101", "requires": "fatpkg-device-gfx11 == 1.0"},
            {"kind": "unreachable-archive", "archive": "_fatpkg_kpack/fatpkg_gfx12-5-generic.kpack", "targets": ["gfx12-5-generic"]},
        ]),
        "{v}"
    );
    let pkg = &v["packages"][0];
    assert_eq!(
        pkg["claimed"],
        serde_json::json!(["gfx1100", "gfx1201", "gfx942"])
    );
    let lib = &pkg["binaries"][1];
    assert_eq!(lib["path"], "fatpkg/lib/libaxpy.so");
    assert_eq!(lib["targets"]["gfx1201"], "native");
    assert_eq!(lib["targets"]["gfx1030"], "nothing");
    // The text table and the Markdown page say the same.
    let o = kpack_env(&["audit".as_ref(), set.as_os_str()], &[]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(text.contains("fatpkg 1.0\n"), "{text}");
    assert!(
        text.contains("fatpkg: fatpkg/lib/lib2tu.so has no code for gfx1201"),
        "{text}"
    );
    assert!(text.contains("3 holes:"), "{text}");
    let o = kpack_env(
        &["audit".as_ref(), set.as_os_str(), "--markdown".as_ref()],
        &[],
    );
    let md = stdout(&o);
    assert!(md.starts_with("# GPU coverage\n"), "{md}");
    assert!(
        md.contains("| `fatpkg/lib/libaxpy.so` | N | N | N |"),
        "{md}"
    );
    // Without the planted wheels, the split alone: one hole left.
    for w in ["fatpkg_device_gfx1101", "fatpkg_device_gfx12_5_generic"] {
        std::fs::remove_file(set.join(format!("{w}-1.0-py3-none-linux_x86_64.whl"))).unwrap();
    }
    let o = kpack_env(&["audit".as_ref(), set.as_os_str(), "--json".as_ref()], &[]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["holes"].as_array().unwrap().len(), 1, "{v}");
}
