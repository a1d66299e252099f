//! `kpack split` / `recombine` / `verify` end to end: the seed tutorial with
//! three shards of a `blas_lib`-like component built from the real fixtures
//! (gfx1030, gfx90a and gfx908 shards; the gfx908 one carries a stray
//! gfx906 and more, excluded), rocBLAS / hipBLASLt database trees, and a
//! generic-only `support_dev`. Every kernel is then loaded with
//! `kpack-runtime` from the flattened install and compared with
//! `kpack extract`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use kpack_tests::{fixture, stderr, stdout, tree_digest};

use crate::util::{KPACK, component_cache, kpack};

pub(crate) struct Shard {
    pub(crate) name: &'static str,
    pub(crate) family: &'static str,
    arch: &'static str,
    lib: &'static str,
    exe: &'static str,
    pub(crate) exclude: &'static str,
}

pub(crate) const SHARDS: [Shard; 3] = [
    Shard {
        name: "gfx1030_build",
        family: "gfx103X",
        arch: "gfx1030",
        lib: "libaxpy_gfx1030.so",
        exe: "exe_axpy_gfx1030",
        exclude: "",
    },
    Shard {
        name: "gfx90a_build",
        family: "gfx90a",
        arch: "gfx90a",
        lib: "libaxpy_2arch.so",
        exe: "exe_axpy_2arch",
        exclude: "gfx1030",
    },
    Shard {
        name: "gfx908_build",
        family: "gfx908",
        arch: "gfx908",
        lib: "libaxpy_wide.so",
        exe: "exe_axpy_feat",
        exclude: "gfx906,gfx1030,gfx90a,gfx1010,gfx803,gfx900,gfx940",
    },
];

const ROCBLAS: &str = "math-libs/BLAS/rocBLAS/stage";
const HIPBLASLT: &str = "math-libs/BLAS/hipBLASLt/stage";
const SUPPORT: &str = "base/support/stage";

pub(crate) fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

/// One shard's build artifacts, TheRock style.
pub(crate) fn make_shard(root: &Path, s: &Shard) {
    let blas = root.join(format!("blas_lib_{}", s.family));
    write(
        &blas.join("artifact_manifest.txt"),
        format!("{ROCBLAS}\n{HIPBLASLT}\n\nmath-libs/BLAS/missing/stage\n").as_bytes(),
    );
    let rb = blas.join(ROCBLAS);
    copy(
        &fixture(&format!("corpus/{}", s.lib)),
        &rb.join("lib/librocblas.so.4.0"),
    );
    std::os::unix::fs::symlink("librocblas.so.4.0", rb.join("lib/librocblas.so.4")).unwrap();
    copy(
        &fixture(&format!("corpus/{}", s.exe)),
        &rb.join("bin/rocblas-bench"),
    );
    let lib = rb.join("lib/rocblas/library");
    write(
        &lib.join(format!("TensileLibrary_{}.co", s.arch)),
        format!("tensile code {}", s.arch).as_bytes(),
    );
    write(
        &lib.join(format!("TensileLibrary_Type_{}.dat", s.arch)),
        b"tensile data",
    );
    write(&lib.join("TensileLibrary.dat"), b"generic tensile index");
    write(&rb.join("include/rocblas.h"), b"// header\n");
    let lt = blas.join(HIPBLASLT);
    copy(
        &fixture(&format!("corpus/{}", s.lib)),
        &lt.join("lib/libhipblaslt.so.0"),
    );
    write(
        &lt.join(format!("lib/hipblaslt/library/extop_{}.co", s.arch)),
        b"extop",
    );
    write(
        &lt.join("lib/hipblaslt/library/hipblasltExtOpLibrary.json"),
        b"{}",
    );

    let sup = root.join(format!("support_dev_{}", s.family));
    write(
        &sup.join("artifact_manifest.txt"),
        format!("{SUPPORT}\n").as_bytes(),
    );
    let st = sup.join(SUPPORT);
    write(&st.join("include/support.h"), b"// generic\n");
    write(&st.join("bin/helper.sh"), b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        st.join("bin/helper.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("helper.sh", st.join("bin/helper")).unwrap();
}

fn run_kpack(args: &[&str]) -> Output {
    std::process::Command::new(KPACK)
        .args(args)
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", component_cache())
        .output()
        .unwrap()
}

fn split_shard(input: &Path, out: &Path, s: &Shard, jobs: &str) -> serde_json::Value {
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec![
        "split",
        "--batch",
        i,
        "-o",
        o,
        "--split-databases",
        "rocblas,hipblaslt",
        "--json",
        "-j",
        jobs,
    ];
    if !s.exclude.is_empty() {
        args.extend(["--exclude-arch", s.exclude]);
    }
    let r = run_kpack(&args);
    assert!(
        r.status.success(),
        "split {}: {}\n{}",
        s.name,
        stderr(&r),
        stdout(&r)
    );
    serde_json::from_str(&stdout(&r)).unwrap()
}

fn verify_ok(dir: &Path) -> serde_json::Value {
    let r = kpack(["verify", dir.to_str().unwrap(), "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&r)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&r)));
    assert!(
        r.status.success(),
        "verify {}: {}",
        dir.display(),
        serde_json::to_string_pretty(&v).unwrap()
    );
    v
}

/// Copy the prefixes of artifact `a` into `install` (TheRock flattening).
fn flatten(a: &Path, install: &Path) {
    for prefix in std::fs::read_to_string(a.join("artifact_manifest.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
    {
        let r = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", a.join(prefix).display()))
            .arg(install)
            .status()
            .unwrap();
        assert!(r.success());
    }
}

fn marker_of(bin: &Path) -> kpack_format::Marker {
    let fat = kpack_elf::read_fat_binary(bin, Default::default()).unwrap();
    let sec = fat
        .marker
        .unwrap_or_else(|| panic!("{}: no marker", bin.display()));
    let bytes = std::fs::read(bin).unwrap();
    kpack_format::Marker::parse(&bytes[sec.offset as usize..(sec.offset + sec.size) as usize])
        .unwrap()
}

/// The code object `kpack extract` writes for `target` of `fixture_name`.
fn extracted(fixture_name: &str, target: &str, tmp: &Path) -> Vec<u8> {
    let out = tmp.join(format!("x-{fixture_name}-{}", target.replace(':', "_")));
    let r = kpack([
        "extract",
        fixture(&format!("corpus/{fixture_name}")).to_str().unwrap(),
        "--target",
        target,
        "-o",
        out.to_str().unwrap(),
        // Called more than once for one (fixture, target).
        "--force",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    std::fs::read(out.join(format!("bundle0-{}.hsaco", target.replace(':', "_")))).unwrap()
}

#[test]
fn splits_three_shards_recombines_and_every_kernel_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (inputs, shards) = (t.join("in"), t.join("shards"));
    for s in &SHARDS {
        make_shard(&inputs.join(s.name), s);
    }
    let before = tree_digest(&inputs);

    // Split each shard.
    for s in &SHARDS {
        let v = split_shard(&inputs.join(s.name), &shards.join(s.name), s, "2");
        let arts = v["artifacts"].as_array().unwrap();
        let blas = arts.iter().find(|a| a["component"] == "blas_lib").unwrap();
        assert_eq!(
            blas["arches"],
            serde_json::json!([s.arch]),
            "{s:?}",
            s = s.name
        );
        assert_eq!(blas["binaries_offloaded"], 3);
        assert_eq!(
            blas["databases"]["rocblas"][s.arch],
            2,
            "{}",
            serde_json::to_string_pretty(blas).unwrap()
        );
        assert_eq!(blas["databases"]["rocblas"]["generic"], 1);
        assert_eq!(blas["databases"]["hipblaslt"][s.arch], 1);
        assert!(blas["warnings"].to_string().contains("missing/stage"));
        let support = arts
            .iter()
            .find(|a| a["component"] == "support_dev")
            .unwrap();
        assert_eq!(support["generic_only"], true);
        assert_eq!(
            support["outputs"],
            serde_json::json!(["support_dev_generic"])
        );
        if s.name == "gfx908_build" {
            assert!(
                blas["excluded"]["gfx906"].as_u64().unwrap() >= 2,
                "stray gfx906 not reported"
            );
        }
        // No ':' anywhere, no empty per-arch directories, nothing staged left.
        for k in tree_digest(&shards.join(s.name)).keys() {
            assert!(!k.contains(':') && !k.contains(".kpack-tmp-"), "{k}");
        }
        let v = verify_ok(&shards.join(s.name));
        assert!(v["report"]["resolved"].as_u64().unwrap() >= 3);
    }
    assert_eq!(before, tree_digest(&inputs), "inputs were modified");

    // Symlinks stay symlinks, modes kept, database files where they belong.
    let g = shards
        .join("gfx90a_build/support_dev_generic")
        .join(SUPPORT);
    assert_eq!(
        std::fs::read_link(g.join("bin/helper")).unwrap(),
        PathBuf::from("helper.sh")
    );
    assert_eq!(
        std::fs::metadata(g.join("bin/helper.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    let a = shards.join("gfx90a_build/blas_lib_gfx90a").join(ROCBLAS);
    assert!(
        a.join("lib/rocblas/library/TensileLibrary_gfx90a.co")
            .is_file()
    );
    assert!(
        a.join("lib/.kpack/blas_lib.lib.librocblas.so.4.0_gfx90a.kpack")
            .is_file()
    );
    let generic = shards.join("gfx90a_build/blas_lib_generic").join(ROCBLAS);
    assert!(
        generic
            .join("lib/rocblas/library/TensileLibrary.dat")
            .is_file()
    );
    assert!(
        !generic
            .join("lib/rocblas/library/TensileLibrary_gfx90a.co")
            .exists()
    );
    assert_eq!(
        std::fs::read_link(generic.join("lib/librocblas.so.4")).unwrap(),
        PathBuf::from("librocblas.so.4.0")
    );
    let m = marker_of(&generic.join("bin/rocblas-bench"));
    assert_eq!(m.kernel_name, format!("{ROCBLAS}/bin/rocblas-bench"));
    assert_eq!(
        m.search_paths,
        ["../lib/.kpack/blas_lib.bin.rocblas-bench_@GFXARCH@.kpack"]
    );

    // Reproducible: split again, -j1 vs -j2.
    let again = t.join("again");
    split_shard(&inputs.join("gfx908_build"), &again, &SHARDS[2], "1");
    assert_eq!(
        tree_digest(&shards.join("gfx908_build")),
        tree_digest(&again),
        "-j1 and -j2 differ"
    );
    // Shards sharing an output location: an identical existing output is
    // left alone; a different one is never overwritten unless --replace.
    let input_908 = inputs.join("gfx908_build");
    let resplit = |extra: &[&str]| {
        let mut a = vec![
            "split",
            "--batch",
            input_908.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
            "--split-databases",
            "rocblas,hipblaslt",
            "--exclude-arch",
            SHARDS[2].exclude,
        ];
        a.extend_from_slice(extra);
        run_kpack(&a)
    };
    let r = resplit(&[]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(
        stdout(&r).contains("identical to the existing output"),
        "{}",
        stdout(&r)
    );
    assert_eq!(
        tree_digest(&shards.join("gfx908_build")),
        tree_digest(&again)
    );
    let db = again
        .join("blas_lib_generic")
        .join(ROCBLAS)
        .join("lib/rocblas/library/TensileLibrary.dat");
    std::fs::write(&db, b"another shard's").unwrap();
    let r = resplit(&[]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains(
            "first difference: math-libs/BLAS/rocBLAS/stage/lib/rocblas/library/TensileLibrary.dat"
        ),
        "{}",
        stderr(&r)
    );
    assert_eq!(std::fs::read(&db).unwrap(), b"another shard's");
    let r = resplit(&["--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(
        tree_digest(&shards.join("gfx908_build")),
        tree_digest(&again)
    );

    // Recombine into two groups.
    let config = t.join("config.json");
    write(
        &config,
        br#"{"primary_shard": "gfx1030_build",
             "architecture_groups": {
               "gfx103X": {"display_name": "RDNA2", "architectures": ["gfx1030"]},
               "gfx90X": {"display_name": "CDNA", "architectures": ["gfx908", "gfx90a"]}},
             "validation": {"error_on_duplicate_device_code": true, "verify_generic_artifacts_match": false,
                            "error_on_missing_architecture": true}}"#,
    );
    let out = t.join("packages");
    let r = kpack([
        "recombine",
        shards.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "blas_lib_generic",
            "blas_lib_gfx103X",
            "blas_lib_gfx90X",
            "kpack_recombine.json",
            "support_dev_generic"
        ]
    );
    verify_ok(&out);

    // Every kernel of every binary, through the runtime, from the flattened install.
    let cache = kpack_runtime::Cache::new(kpack_runtime::Config::default());
    let cases = [
        (
            "gfx103X",
            "gfx1030",
            vec![
                (
                    ROCBLAS,
                    "lib/librocblas.so.4.0",
                    "libaxpy_gfx1030.so",
                    "gfx1030",
                ),
                (ROCBLAS, "bin/rocblas-bench", "exe_axpy_gfx1030", "gfx1030"),
            ],
        ),
        (
            "gfx90X",
            "gfx90a:sramecc+:xnack-",
            vec![
                (
                    ROCBLAS,
                    "lib/librocblas.so.4.0",
                    "libaxpy_2arch.so",
                    "gfx90a",
                ),
                (ROCBLAS, "bin/rocblas-bench", "exe_axpy_2arch", "gfx90a"),
                (
                    HIPBLASLT,
                    "lib/libhipblaslt.so.0",
                    "libaxpy_2arch.so",
                    "gfx90a",
                ),
            ],
        ),
        (
            "gfx90X",
            "gfx908:sramecc+:xnack-",
            vec![
                (
                    ROCBLAS,
                    "lib/librocblas.so.4.0",
                    "libaxpy_wide.so",
                    "gfx908",
                ),
                (
                    ROCBLAS,
                    "bin/rocblas-bench",
                    "exe_axpy_feat",
                    "gfx908:sramecc+:xnack-",
                ),
                (
                    HIPBLASLT,
                    "lib/libhipblaslt.so.0",
                    "libaxpy_wide.so",
                    "gfx908",
                ),
            ],
        ),
    ];
    for (group, device, bins) in cases {
        let install = t.join(format!("install-{group}-{}", device.replace(':', "_")));
        std::fs::create_dir_all(&install).unwrap();
        flatten(&out.join("blas_lib_generic"), &install);
        flatten(&out.join(format!("blas_lib_{group}")), &install);
        for (_, rel, fix, target) in bins {
            let bin = install.join(rel);
            let m = marker_of(&bin);
            let code = cache
                .load(&m, &bin, 0, &[device])
                .unwrap_or_else(|e| panic!("{rel} on {device}: {e}"));
            assert_eq!(code, extracted(fix, target, t), "{rel} on {device}");
        }
        let dbs = install.join("lib/rocblas/library");
        assert!(dbs.join("TensileLibrary.dat").is_file());
    }
    assert!(
        out.join("blas_lib_gfx90X")
            .join(ROCBLAS)
            .join("lib/rocblas/library/TensileLibrary_gfx908.co")
            .is_file()
    );

    // Duplicate device code in two shards is an error naming both.
    let dup = t.join("dup");
    std::fs::create_dir_all(&dup).unwrap();
    for s in ["gfx1030_build", "gfx90a_build"] {
        assert!(
            std::process::Command::new("cp")
                .arg("-a")
                .arg(shards.join(s))
                .arg(dup.join(s))
                .status()
                .unwrap()
                .success()
        );
    }
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(shards.join("gfx90a_build"))
            .arg(dup.join("zz_again"))
            .status()
            .unwrap()
            .success()
    );
    let r = kpack([
        "recombine",
        dup.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "-o",
        t.join("dup-out").to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    let e = stderr(&r);
    assert!(
        e.contains("gfx90a_build")
            && e.contains("zz_again")
            && e.contains("gfx908 of group gfx90X is in no shard"),
        "{e}"
    );
    assert!(!t.join("dup-out/blas_lib_generic").exists());
}

#[test]
fn verify_reports_a_marker_that_does_not_resolve() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    make_shard(&t.join("in"), &SHARDS[1]);
    split_shard(&t.join("in"), &t.join("out"), &SHARDS[1], "2");
    std::fs::remove_file(
        t.join("out/blas_lib_gfx90a")
            .join(ROCBLAS)
            .join("lib/.kpack/blas_lib.bin.rocblas-bench_gfx90a.kpack"),
    )
    .unwrap();
    let r = kpack(["verify", t.join("out").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    let o = stdout(&r);
    assert!(
        o.contains("rocblas-bench#0: no arch artifact of blas_lib holds code for it"),
        "{o}"
    );

    // A generic artifact with a fat binary in it, and an arch artifact with foreign code.
    let generic = t.join("out/blas_lib_generic").join(ROCBLAS);
    std::fs::copy(
        fixture("corpus/libaxpy_2arch.so"),
        generic.join("lib/stray.so"),
    )
    .unwrap();
    std::fs::copy(
        fixture("corpus/kern_axpy_2arch.co"),
        t.join("out/blas_lib_gfx90a")
            .join(ROCBLAS)
            .join("lib/extra_gfx1030.co"),
    )
    .unwrap();
    let r = kpack(["verify", t.join("out").to_str().unwrap(), "--json"]);
    assert_eq!(r.status.code(), Some(1));
    let o = stdout(&r);
    assert!(
        o.contains("fat binary left in a generic artifact")
            && o.contains("names gfx1030 in the gfx90a artifact"),
        "{o}"
    );
}

#[test]
fn verify_accepts_binaries_with_different_target_sets_in_one_artifact() {
    // libaxpy_2arch (gfx90a + gfx1030) and libaxpy_gfx1030 in one artifact:
    // the gfx90a artifact holds nothing of the second, and that is right.
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let a = t.join("in/blas_lib_gfx94X");
    write(&a.join("artifact_manifest.txt"), b"lib/stage\n");
    copy(
        &fixture("corpus/libaxpy_2arch.so"),
        &a.join("lib/stage/lib/libtwo.so"),
    );
    copy(
        &fixture("corpus/libaxpy_gfx1030.so"),
        &a.join("lib/stage/lib/libone.so"),
    );
    copy(
        &fixture("corpus/libaxpy_wide.so"),
        &a.join("lib/stage/lib/libwide.so"),
    );
    let r = run_kpack(&[
        "split",
        t.join("in").to_str().unwrap(),
        "-o",
        t.join("out").to_str().unwrap(),
        "--batch",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(t.join("out/blas_lib_gfx90a").is_dir() && t.join("out/blas_lib_gfx1030").is_dir());
    let v = verify_ok(&t.join("out"));
    assert_eq!(v["report"]["binaries"], 3, "{v}");
    assert!(v["report"]["resolved"].as_u64().unwrap() >= 4, "{v}");

    // Removing every archive of one binary is still found.
    for e in walk(&t.join("out")) {
        let name = e.file_name().unwrap().to_str().unwrap();
        if name.contains("libone") && name.ends_with(".kpack") {
            std::fs::remove_file(&e).unwrap();
        }
    }
    let r = kpack(["verify", t.join("out").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    assert!(
        stdout(&r).contains("no arch artifact of blas_lib holds code for it"),
        "{}",
        stdout(&r)
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A split that fails (here: its manifest is a symlink, which is never
/// followed) leaves no output behind: not the staging directory, not the
/// output directory or the parents it created; a directory that existed
/// before stays.
#[cfg(unix)]
#[test]
fn a_failed_split_removes_the_output_directories_it_created() {
    let tmp = tempfile::tempdir().unwrap();
    let art = tmp.path().join("blas_lib_gfx90a");
    std::fs::create_dir_all(art.join("stage/lib")).unwrap();
    write(&art.join("stage/lib/a.txt"), b"x");
    std::os::unix::fs::symlink("stage/lib/a.txt", art.join("artifact_manifest.txt")).unwrap();
    let out = tmp.path().join("new/deep/out");
    let o = run_kpack(&["split", art.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("artifact_manifest.txt"),
        "{}",
        stderr(&o)
    );
    assert!(
        !tmp.path().join("new").exists(),
        "left {:?}",
        walk(&tmp.path().join("new"))
    );

    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    let o = run_kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        existing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        existing.is_dir(),
        "a directory the run did not create went away"
    );
    assert_eq!(
        std::fs::read_dir(&existing).unwrap().count(),
        0,
        "staging left behind"
    );
}

/// A distribution's rocBLAS layout (`lib/<triplet>/rocblas/<version>/library/`)
/// is split by the rocblas handler; a file whose name carries a target
/// that no handler asked for claims is named in a warning.
#[test]
fn splits_a_versioned_database_layout_and_warns_of_unclaimed_target_files() {
    let tmp = tempfile::tempdir().unwrap();
    let art = tmp.path().join("blas_lib_gfx110X");
    write(&art.join("artifact_manifest.txt"), b"stage\n");
    let lib = art.join("stage/lib/x86_64-linux-gnu/rocblas/4.3.0/library");
    write(
        &lib.join("TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.dat"),
        b"per-arch solutions",
    );
    write(&lib.join("TensileLibrary.dat"), b"generic tensile index");
    write(
        &art.join("stage/share/other/Kernels_gfx1100.dat"),
        b"per-arch, unknown layout",
    );
    let out = tmp.path().join("out");
    let o = run_kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--split-databases",
        "rocblas",
    ]);
    let (so, se) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{se}");
    assert!(
        so.contains("database rocblas: generic: 1, gfx1100: 1"),
        "{so}"
    );
    assert!(
        out.join("blas_lib_gfx1100/stage/lib/x86_64-linux-gnu/rocblas/4.3.0/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.dat")
            .is_file(),
        "{:?}",
        walk(&out)
    );
    assert!(
        se.contains("1 file(s) whose names carry a GPU target (first: share/other/Kernels_gfx1100.dat, gfx1100)"),
        "{se}"
    );
    assert_eq!(
        se.matches("whose names carry a GPU target").count(),
        1,
        "{se}"
    );
}
