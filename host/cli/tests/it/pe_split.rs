//! Windows PE images through `kpack inspect` and `kpack wheel split`: a
//! `win_amd64` wheel of the PE fixtures (a `.dll`, the same DLL named
//! `.pyd`, an `.exe`) splits into a host wheel and one device wheel per
//! processor, with `/` in every archive name, marker and TOC key.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::kpack;

const WHEEL: &str = "winpkg-1.0-cp312-cp312-win_amd64.whl";
const DI: &str = "winpkg-1.0.dist-info";

/// Number of device code objects per PE fixture, from `ORACLE.tsv`.
fn oracle_counts() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in std::fs::read_to_string(fixture("pe/ORACLE.tsv"))
        .unwrap()
        .lines()
        .skip(1)
    {
        let r: Vec<&str> = l.split('\t').collect();
        if !r[3].starts_with("host-") {
            *m.entry(r[0].to_string()).or_default() += 1;
        }
    }
    m
}

#[test]
fn inspect_json_says_format_pe_and_finds_every_code_object_of_every_pe_fixture() {
    let counts = oracle_counts();
    assert!(counts.len() >= 10, "{counts:?}");
    for (name, expected) in &counts {
        let o = kpack([
            "inspect".as_ref(),
            fixture(&format!("pe/{name}")).as_os_str(),
            "--json".as_ref(),
        ]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let f = &v["files"][0];
        assert_eq!(f["format"], "pe", "{name}");
        assert_eq!(f["device_code"], true, "{name}");
        let found: u64 = f["totals"]
            .as_object()
            .unwrap()
            .values()
            .map(|t| t["code_objects"].as_u64().unwrap())
            .sum();
        assert_eq!(found, *expected as u64, "{name}");
        assert!(!f["wrappers"].as_array().unwrap().is_empty(), "{name}");
    }
    // Text output names the image kind, not an ELF kind.
    let o = kpack(["inspect".as_ref(), fixture("pe/exe_1tu.exe").as_os_str()]);
    assert!(stdout(&o).contains("PE32+ executable"), "{}", stdout(&o));
}

fn build_wheel(dir: &Path) -> std::path::PathBuf {
    let dll = std::fs::read(fixture("pe/dll_2tu.dll")).unwrap();
    let files: Vec<(String, Vec<u8>)> = vec![
        ("winpkg/__init__.py".into(), b"".to_vec()),
        ("winpkg/lib/k.dll".into(), dll.clone()),
        ("winpkg/_ext.cp312-win_amd64.pyd".into(), dll),
        (
            "winpkg/bin/tool.exe".into(),
            std::fs::read(fixture("pe/exe_1tu.exe")).unwrap(),
        ),
        (
            format!("{DI}/METADATA"),
            b"Metadata-Version: 2.1\nName: winpkg\nVersion: 1.0\n".to_vec(),
        ),
        (
            format!("{DI}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: cp312-cp312-win_amd64\n".to_vec(),
        ),
    ];
    let path = dir.join(WHEEL);
    let members = files.iter().map(|(p, b)| (p.as_str(), b.as_slice(), 0o644));
    crate::util::write_wheel(&path, DI, members);
    path
}

fn entries(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        let mut b = Vec::new();
        e.read_to_end(&mut b).unwrap();
        out.insert(e.name().to_string(), b);
    }
    out
}

#[test]
fn wheel_split_of_a_win_amd64_wheel_offloads_dlls_pyds_and_exes_by_magic() {
    let dir = tempfile::tempdir().unwrap();
    let input = build_wheel(dir.path());
    let out = dir.path().join("out");
    let o = kpack([
        "wheel".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            WHEEL,
            "winpkg_device_gfx1100-1.0-cp312-cp312-win_amd64.whl",
            "winpkg_device_gfx90a-1.0-cp312-cp312-win_amd64.whl",
        ],
    );
    // Every PE in the host wheel is offloaded (all wrappers HIPK), verified
    // and smaller; the input is untouched.
    let host = entries(&out.join(WHEEL));
    let unpacked = dir.path().join("host");
    for p in [
        "winpkg/lib/k.dll",
        "winpkg/_ext.cp312-win_amd64.pyd",
        "winpkg/bin/tool.exe",
    ] {
        let f = unpacked.join(p.replace('/', "_"));
        std::fs::create_dir_all(&unpacked).unwrap();
        std::fs::write(&f, &host[p]).unwrap();
        let o = kpack(["inspect".as_ref(), f.as_os_str(), "--json".as_ref()]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["files"][0]["format"], "pe", "{p}");
        assert_eq!(v["files"][0]["transformed"], true, "{p}");
        assert_eq!(v["files"][0]["device_code"], false, "{p}");
        let o = kpack(["verify-elf".as_ref(), f.as_os_str()]);
        assert!(o.status.success(), "{p}: {}{}", stdout(&o), stderr(&o));
    }
    assert!(
        host["winpkg/lib/k.dll"].len() < std::fs::read(fixture("pe/dll_2tu.dll")).unwrap().len()
    );
    // Device wheels: archive names, and the TOC keys and marker search
    // paths inside, use `/` only.
    for arch in ["gfx90a", "gfx1100"] {
        let w = entries(&out.join(format!(
            "winpkg_device_{arch}-1.0-cp312-cp312-win_amd64.whl"
        )));
        let archives: Vec<&String> = w.keys().filter(|k| k.ends_with(".kpack")).collect();
        assert_eq!(archives.len(), 3, "{arch}: {:?}", w.keys());
        for a in archives {
            assert!(!a.contains('\\'), "{a}");
            let f = dir.path().join(format!("{arch}.kpack"));
            std::fs::write(&f, &w[a]).unwrap();
            let o = kpack(["archive".as_ref(), "list".as_ref(), f.as_os_str()]);
            assert!(o.status.success(), "{}", stderr(&o));
            let list = stdout(&o);
            assert!(list.contains("winpkg/"), "{a}: {list}");
            assert!(!list.contains('\\'), "{a}: {list}");
        }
    }
}
