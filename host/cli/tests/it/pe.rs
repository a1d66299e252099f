//! `kpack extract`, `offload` and `verify-elf` on Windows PE fixtures
//! (`tests/fixtures/pe/`), checked against `clang-offload-bundler-19`'s
//! unbundled code objects in `ORACLE.tsv`.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, sha256_hex, stderr, stdout};

use crate::util::kpack;

/// (bundle, entry id) -> sha256 of the fixture's code objects.
fn oracle(name: &str) -> BTreeMap<(usize, String), String> {
    std::fs::read_to_string(fixture("pe/ORACLE.tsv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|r| r[0] == name)
        .map(|r| ((r[1].parse().unwrap(), r[3].to_string()), r[5].to_string()))
        .collect()
}

#[test]
fn extract_writes_the_code_objects_of_a_dll_byte_identical_to_the_bundler() {
    let out = tempfile::tempdir().unwrap();
    let o = kpack([
        "extract".as_ref(),
        fixture("pe/dll_2tu.dll").as_os_str(),
        "--all".as_ref(),
        "-o".as_ref(),
        out.path().as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected = oracle("dll_2tu.dll");
    assert_eq!(expected.len(), 4);
    for ((bundle, id), sha) in &expected {
        let target = id.rsplit("--").next().unwrap().replace(':', "_");
        let bytes = std::fs::read(out.path().join(format!("bundle{bundle}-{target}.hsaco")))
            .unwrap_or_else(|e| panic!("bundle {bundle} {id}: {e}"));
        assert_eq!(&sha256_hex(&bytes), sha, "bundle {bundle} {id}");
    }
}

#[test]
fn offload_of_a_signed_dll_writes_a_smaller_verified_image_and_warns_about_the_signature() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("bin/dll_cert.dll");
    let archives = dir.path().join("bin/.kpack");
    let o = kpack([
        "offload".as_ref(),
        fixture("pe/dll_cert.dll").as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        "--archives".as_ref(),
        archives.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["result"]["status"], "offloaded");
    assert_eq!(v["result"]["format"], "pe");
    assert_eq!(v["result"]["transform"]["signature_invalidated"], true);
    assert_eq!(v["result"]["transform"]["checksum_recomputed"], true);
    let before = std::fs::metadata(fixture("pe/dll_cert.dll")).unwrap().len();
    let after = std::fs::metadata(&output).unwrap().len();
    assert!(after < before, "{before} -> {after}");

    let o = kpack(["verify-elf".as_ref(), output.as_os_str()]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));

    // The archives hold exactly the bundler's code objects under key#bundle.
    let mut found = BTreeMap::new();
    for arch in ["gfx1100", "gfx90a"] {
        let a =
            kpack_format::Archive::open(archives.join(format!("dll_cert_{arch}.kpack"))).unwrap();
        for e in a.entries() {
            let bytes = a.read(e).unwrap();
            let (_, idx) = e.key().rsplit_once('#').unwrap();
            found.insert(
                (
                    idx.parse::<usize>().unwrap(),
                    format!("hipv4-amdgcn-amd-amdhsa--{}", e.arch()),
                ),
                sha256_hex(&bytes),
            );
        }
    }
    assert_eq!(found, oracle("dll_cert.dll"));

    // Without --json the signature warning goes to stderr.
    let o = kpack([
        "offload".as_ref(),
        fixture("pe/dll_cert.dll").as_os_str(),
        "-o".as_ref(),
        dir.path().join("again.dll").as_os_str(),
        "--archives".as_ref(),
        dir.path().join("again").as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("signature"), "{}", stderr(&o));
}

#[test]
fn verify_elf_flags_a_corrupted_pe_image() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.dll");
    let mut bytes = std::fs::read(fixture("pe/dll_cert.dll")).unwrap();
    let lfanew = u32::from_le_bytes(bytes[0x3c..0x40].try_into().unwrap()) as usize;
    bytes[lfanew + 24 + 64] ^= 1; // CheckSum no longer matches
    std::fs::write(&bad, &bytes).unwrap();
    let o = kpack(["verify-elf".as_ref(), Path::new(&bad).as_os_str()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("CheckSum"), "{}", stdout(&o));
}
