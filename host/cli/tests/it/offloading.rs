//! `kpack inspect` / `kpack extract` on new-offload-driver objects and
//! static archives, against clang-offload-packager-19's images
//! (`clang19/OFFLOAD_ORACLE.tsv`) and clang-offload-bundler-19's entries
//! (`clang19/ORACLE.tsv`).

use std::collections::BTreeMap;
use std::path::Path;

use kpack_tests::{fixture, sha256_hex, stderr, stdout};

use crate::util::kpack;

/// `OFFLOAD_ORACLE.tsv`: (file, image) -> (arch, size, sha256).
fn offload_oracle() -> BTreeMap<(String, usize), (String, u64, String)> {
    let text = std::fs::read_to_string(fixture("clang19/OFFLOAD_ORACLE.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                (f[0].to_string(), f[1].parse().unwrap()),
                (f[2].to_string(), f[4].parse().unwrap(), f[5].to_string()),
            )
        })
        .collect()
}

/// `ORACLE.tsv` rows of `file`: (bundle, entry id) -> sha256.
fn bundle_oracle(file: &str) -> BTreeMap<(usize, String), String> {
    let text = std::fs::read_to_string(fixture("clang19/ORACLE.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[0] == file)
        .map(|f| ((f[1].parse().unwrap(), f[2].to_string()), f[4].to_string()))
        .collect()
}

fn extract(args: &[&str], file: &Path, out: &Path) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["extract".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.extend([file.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    kpack(a)
}

fn written(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn inspect_json_lists_archive_members_and_their_images() {
    let oracle = offload_oracle();
    let out = kpack([
        "inspect".as_ref(),
        "--json".as_ref(),
        fixture("clang19/libnd_kernels.a").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let f = &v["files"][0];
    assert_eq!(f["format"], "ar");
    assert_eq!(f["archive_format"], "gnu");
    assert_eq!(f["thin"], false);
    assert_eq!(f["symbols"], 19);
    let members = f["members"].as_array().unwrap();
    let names: Vec<_> = members
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nd_kern_axpy.o", "nd_kern_reduce.o"]);
    for m in members {
        assert_eq!(m["kind"], "elf");
        let entries = m["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        for e in entries {
            let key = (
                format!("libnd_kernels.a({})", m["name"].as_str().unwrap()),
                e["index"].as_u64().unwrap() as usize,
            );
            let (arch, size, _) = &oracle[&key];
            assert_eq!(e["arch"], arch.as_str(), "{key:?}");
            assert_eq!(e["size"], *size, "{key:?}");
            assert_eq!(e["kind"], "bitcode");
            assert_eq!(e["producer"], "hip");
            assert_eq!(e["triple"], "amdgcn-amd-amdhsa");
            assert_eq!(e["section"], ".llvm.offloading");
        }
    }
}

#[test]
fn inspect_json_says_elf_for_a_new_driver_object() {
    let out = kpack([
        "inspect".as_ref(),
        "--json".as_ref(),
        fixture("clang19/nd_kern_reduce.o").as_os_str(),
        fixture("clang19/libaxpy_small.so").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["files"][0]["format"], "elf");
    assert_eq!(v["files"][0]["members"][0]["entries"][1]["arch"], "gfx942");
    // A fat binary beside it keeps its own report.
    assert_eq!(v["files"][1]["kind"], "dyn");
    assert!(v["files"][1].get("format").is_none());
}

#[test]
fn extract_all_from_an_archive_matches_the_packager() {
    let oracle = offload_oracle();
    let dir = tempfile::tempdir().unwrap();
    let out = extract(&["--all"], &fixture("clang19/libnd_kernels.a"), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        written(dir.path()),
        [
            "nd_kern_axpy.o-0-gfx1100.bc",
            "nd_kern_axpy.o-1-gfx942.bc",
            "nd_kern_reduce.o-0-gfx1100.bc",
            "nd_kern_reduce.o-1-gfx942.bc",
        ]
    );
    for ((file, image), (arch, size, sha)) in &oracle {
        let Some(member) = file
            .strip_prefix("libnd_kernels.a(")
            .and_then(|m| m.strip_suffix(')'))
        else {
            continue;
        };
        let bytes = std::fs::read(dir.path().join(format!("{member}-{image}-{arch}.bc"))).unwrap();
        assert_eq!(bytes.len() as u64, *size);
        assert_eq!(&sha256_hex(&bytes), sha, "{file} image {image}");
    }
}

#[test]
fn extract_one_target_from_an_object_and_reject_an_absent_one() {
    let oracle = offload_oracle();
    let dir = tempfile::tempdir().unwrap();
    let obj = fixture("clang19/nd_kern_reduce.o");
    let out = extract(&["--target", "gfx942"], &obj, dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(written(dir.path()), ["nd_kern_reduce.o-1-gfx942.bc"]);
    let bytes = std::fs::read(dir.path().join("nd_kern_reduce.o-1-gfx942.bc")).unwrap();
    assert_eq!(
        sha256_hex(&bytes),
        oracle[&("nd_kern_reduce.o".into(), 1)].2
    );

    let out = extract(&["--target", "gfx90a"], &obj, dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no image for target gfx90a") && err.contains("gfx1100, gfx942"),
        "{err}"
    );
}

#[test]
fn extract_from_a_mixed_archive_writes_bundle_entries_too() {
    let dir = tempfile::tempdir().unwrap();
    let out = extract(&["--all"], &fixture("clang19/libmixed.a"), dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let names = written(dir.path());
    assert_eq!(names.len(), 6, "{names:?}");
    for member in ["kern_axpy_old.o", "kern_axpy_old_ccob.o"] {
        let oracle = bundle_oracle(member);
        assert_eq!(oracle.len(), 2);
        for ((bundle, id), sha) in oracle {
            let target = id.rsplit("--").next().unwrap().replace(':', "_");
            let name = format!("{member}-bundle{bundle}-{target}.hsaco");
            let bytes = std::fs::read(dir.path().join(&name))
                .unwrap_or_else(|_| panic!("{name} missing from {names:?}"));
            assert_eq!(sha256_hex(&bytes), sha, "{name}");
        }
    }
    assert!(names.contains(&"nd_kern_reduce.o-0-gfx1100.bc".to_string()));
}

#[test]
fn inspect_reads_thin_archive_members_beside_the_archive() {
    let out = kpack([
        "inspect".as_ref(),
        fixture("clang19/thin/libnd_up.a").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("static archive (gnu, thin), 2 members"),
        "{text}"
    );
    assert!(text.contains("member ../nd_kern_axpy.o"), "{text}");
    assert!(
        text.contains(".hip_fatbin bundle 0 hipv4-amdgcn-amd-amdhsa--gfx942"),
        "{text}"
    );

    // Moved away from its members, the archive names the missing file.
    let tmp = tempfile::tempdir().unwrap();
    let moved = tmp.path().join("libnd_up.a");
    std::fs::copy(fixture("clang19/thin/libnd_up.a"), &moved).unwrap();
    let out = kpack(["inspect".as_ref(), moved.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("member `../nd_kern_axpy.o`") && err.contains("cannot read"),
        "{err}"
    );
}
