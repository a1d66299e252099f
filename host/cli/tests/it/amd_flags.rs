//! AMD's rocm-kpack invocations (spec §12's CLI table, as TheRock's scripts
//! spell them) run unchanged against a TheRock-style shard, and give what
//! kpack's own flags give; recombined groups with any name verify.

use std::path::Path;
use std::process::Output;

use kpack_tests::{stderr, stdout, tree_digest};

use crate::split::{SHARDS, make_shard, write};
use crate::util::{KPACK, component_cache};

fn run(args: &[&str]) -> Output {
    std::process::Command::new(KPACK)
        .args(args)
        .env("XDG_CACHE_HOME", component_cache())
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> Output {
    let r = run(args);
    assert!(
        r.status.success(),
        "kpack {}:\n{}\n{}",
        args.join(" "),
        stdout(&r),
        stderr(&r)
    );
    r
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn amds_invocations_run_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let shard = t.join("build/artifacts");
    // gfx90a shard: blas_lib_gfx90a (libaxpy_2arch: gfx90a + gfx1030) and
    // a generic-only support_dev_gfx90a.
    make_shard(&shard, &SHARDS[1]);
    let blas = shard.join("blas_lib_gfx90a");

    // split_artifacts, single mode, into an existing output directory,
    // with every flag TheRock passes.
    let single = t.join("single");
    std::fs::create_dir_all(&single).unwrap();
    let bundler = "/opt/rocm/llvm/bin/clang-offload-bundler";
    let r = ok(&[
        "split",
        "--artifact-dir",
        s(&blas),
        "--artifact-prefix",
        "blas_lib",
        "--output-dir",
        s(&single),
        "--split-databases",
        "rocblas",
        "hipblaslt",
        "--tmp-dir",
        s(t),
        "--verbose",
        "--clang-offload-bundler",
        bundler,
    ]);
    assert!(
        stderr(&r).contains(&format!("note: --clang-offload-bundler {bundler} ignored")),
        "{}",
        stderr(&r)
    );
    for a in ["blas_lib_generic", "blas_lib_gfx90a", "blas_lib_gfx1030"] {
        assert!(
            single.join(a).join("artifact_manifest.txt").is_file(),
            "{a}"
        );
    }
    // Same run again: the output directory is fine, its artifacts are not replaced.
    let r = run(&[
        "split",
        "--artifact-dir",
        s(&blas),
        "--artifact-prefix",
        "blas_lib",
        "--output-dir",
        s(&single),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("already exists"), "{}", stderr(&r));

    // split_artifacts, batch mode.
    let shards = t.join("shards");
    let batch = shards.join("gfx90a_build");
    ok(&[
        "split",
        "--batch-artifact-parent-dir",
        s(&shard),
        "--output-dir",
        s(&batch),
        "--split-databases",
        "rocblas",
        "hipblaslt",
        "--verbose",
    ]);
    // --artifact-dir D --artifact-prefix P is `D --component P`, and batch
    // mode splits the same artifact the same way.
    for a in ["blas_lib_generic", "blas_lib_gfx90a", "blas_lib_gfx1030"] {
        assert_eq!(
            tree_digest(&single.join(a)),
            tree_digest(&batch.join(a)),
            "{a}"
        );
    }
    assert!(batch.join("support_dev_generic").is_dir());

    // recombine_artifacts, one component, groups named as TheRock's
    // configs name them (not after an arch).
    let config = t.join("config.json");
    write(
        &config,
        br#"{"primary_shard": "gfx90a_build",
             "architecture_groups": {
               "rdna2": {"architectures": ["gfx1030"]},
               "cdna": {"architectures": ["gfx90a"]}}}"#,
    );
    let packages = t.join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    ok(&[
        "recombine",
        "--input-shards-dir",
        s(&shards),
        "--config",
        s(&config),
        "--output-dir",
        s(&packages),
        "--component",
        "blas_lib",
        "--verbose",
    ]);
    let mut names: Vec<String> = std::fs::read_dir(&packages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "blas_lib_cdna",
            "blas_lib_generic",
            "blas_lib_rdna2",
            "kpack_recombine.json"
        ]
    );

    // verify_artifacts knows every group from recombine's record.
    let r = ok(&[
        "verify",
        "--artifacts-dir",
        s(&packages),
        "--verbose",
        "--clang-offload-bundler",
        bundler,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&r)).unwrap();
    // libaxpy_2arch in rocBLAS and hipBLASLt, gfx90a and gfx1030; plus
    // exe_axpy_2arch's two.
    assert_eq!(v["report"]["resolved"], 6, "{v}");
    assert_eq!(v["report"]["findings"], serde_json::json!([]), "{v}");
    // One group alone verifies too (the record is beside it).
    ok(&["verify", s(&packages.join("blas_lib_cdna"))]);
    // The record is what tells verify: without it the old failure.
    let record = std::fs::read(packages.join("kpack_recombine.json")).unwrap();
    std::fs::remove_file(packages.join("kpack_recombine.json")).unwrap();
    let r = run(&["verify", "--artifacts-dir", s(&packages)]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    assert!(
        stdout(&r).contains("carry markers but no arch artifact of blas_lib"),
        "{}",
        stdout(&r)
    );
    std::fs::write(packages.join("kpack_recombine.json"), &record).unwrap();

    // A second component into the same directory extends the record.
    ok(&[
        "recombine",
        "--input-shards-dir",
        s(&shards),
        "--config",
        s(&config),
        "--output-dir",
        s(&packages),
        "--component",
        "support_dev",
    ]);
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(packages.join("kpack_recombine.json")).unwrap())
            .unwrap();
    assert_eq!(
        rec["artifacts"]["blas_lib_rdna2"]["group"], "rdna2",
        "{rec}"
    );
    assert_eq!(
        rec["artifacts"]["support_dev_generic"]["component"], "support_dev",
        "{rec}"
    );
    ok(&["verify", s(&packages)]);
    // An unknown component is an error, nothing written.
    let r = run(&[
        "recombine",
        "--input-shards-dir",
        s(&shards),
        "--config",
        s(&config),
        "--output-dir",
        s(&t.join("none")),
        "--component",
        "nope",
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("\"nope\" is in no shard"),
        "{}",
        stderr(&r)
    );

    // kpack_tool list --summary.
    let archive = single
        .join("blas_lib_gfx90a/math-libs/BLAS/rocBLAS/stage/lib/.kpack")
        .join("blas_lib.lib.librocblas.so.4.0_gfx90a.kpack");
    let r = ok(&["archive", "list", "--summary", s(&archive)]);
    let out = stdout(&r);
    assert!(
        out.contains("Kpack: blas_lib.lib.librocblas.so.4.0_gfx90a.kpack")
            && out.contains("Binaries: 1")
            && out.contains("Total kernels: 1"),
        "{out}"
    );
    assert_eq!(stdout(&ok(&["archive", "list", "-s", s(&archive)])), out);
}

#[test]
fn amds_flags_are_hidden_but_explained() {
    for (cmd, hidden) in [
        (&["split"][..], "--artifact-dir"),
        (&["recombine"][..], "--input-shards-dir"),
        (&["verify"][..], "--artifacts-dir"),
        (&["archive", "list"][..], "--summary"),
    ] {
        let mut args = cmd.to_vec();
        args.push("-h");
        let short = stdout(&ok(&args));
        assert!(
            !short.contains(hidden),
            "{cmd:?} -h shows {hidden}:\n{short}"
        );
        args.pop();
        args.push("--help");
        let long = stdout(&ok(&args));
        assert!(
            long.contains("Compatibility with AMD's rocm-kpack flags") && long.contains(hidden),
            "{cmd:?} --help:\n{long}"
        );
    }
}
