//! The standard handlers are embedded in the `kpack` binary: a copy of the
//! binary alone, in an empty directory with a clean environment and HOME,
//! splits rocBLAS databases; `plugins list` names them `embedded`; a handler
//! on disk overrides the embedded one.

use std::path::Path;
use std::process::{Command, Output};

use kpack_tests::{fixture, sha256_hex, stderr, stdout, tree_digest};

use crate::util::{KPACK, component_cache};

const ROCBLAS: &str = "math-libs/BLAS/rocBLAS/stage";

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A TheRock artifact with a fat rocBLAS library and its Tensile database
/// for gfx90a, plus the arch-independent index.
fn rocblas_artifact(root: &Path) {
    let a = root.join("blas_lib_gfx90a");
    write(
        &a.join("artifact_manifest.txt"),
        format!("{ROCBLAS}\n").as_bytes(),
    );
    let rb = a.join(ROCBLAS);
    write(
        &rb.join("lib/librocblas.so.4"),
        &std::fs::read(fixture("corpus/libaxpy_2arch.so")).unwrap(),
    );
    let lib = rb.join("lib/rocblas/library");
    write(
        &lib.join("TensileLibrary_gfx90a.co"),
        b"tensile code gfx90a",
    );
    write(&lib.join("TensileLibrary_Type_gfx90a.dat"), b"tensile data");
    write(&lib.join("TensileLibrary.dat"), b"generic tensile index");
}

/// Copy the built `kpack` to `to` with `cp`: a copy written by this
/// multithreaded process could have its write descriptor inherited by a
/// child another test forks meanwhile, and exec would fail with ETXTBSY.
fn copy_kpack(to: &Path) {
    let ok = Command::new("cp").arg(KPACK).arg(to).status().unwrap();
    assert!(ok.success(), "cp {KPACK} {}", to.display());
}

/// `kpack` at `exe` with nothing from the caller's environment: no PATH
/// entries of ours, no `KPACK_PLUGIN_DIR`, HOME an empty directory.
fn run_clean(exe: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(home)
        .output()
        .unwrap()
}

#[test]
fn copied_binary_alone_splits_rocblas_databases_with_embedded_handlers() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // The copy sits in a directory of its own, away from the target
    // directory and its wasm32-wasip2 builds.
    let bin = t.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("kpack");
    copy_kpack(&exe);
    let home = t.join("home");
    std::fs::create_dir(&home).unwrap();
    let input = t.join("in");
    rocblas_artifact(&input);

    let out = t.join("out");
    let r = run_clean(
        &exe,
        &home,
        &[
            "split",
            input.join("blas_lib_gfx90a").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--split-databases",
            "rocblas",
            "--json",
        ],
    );
    assert!(r.status.success(), "{}", stderr(&r));
    let v: serde_json::Value = serde_json::from_str(&stdout(&r)).unwrap();
    let blas = &v["artifacts"][0];
    assert_eq!(
        blas["databases"]["rocblas"]["gfx90a"],
        2,
        "{}",
        serde_json::to_string_pretty(&v).unwrap()
    );
    assert_eq!(blas["databases"]["rocblas"]["generic"], 1);
    let arch = out.join(format!("blas_lib_gfx90a/{ROCBLAS}/lib/rocblas/library"));
    assert!(arch.join("TensileLibrary_gfx90a.co").is_file());
    // The compiled components went to the clean HOME's cache.
    assert!(home.join(".cache/kpack/components").is_dir());

    // The same split with the handlers the build wrote to disk gives the
    // same tree: the embedded bytes are those handlers.
    let disk_out = t.join("out-disk");
    let r = Command::new(KPACK)
        .args([
            "split",
            input.join("blas_lib_gfx90a").to_str().unwrap(),
            "-o",
            disk_out.to_str().unwrap(),
            "--split-databases",
            "rocblas",
        ])
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", component_cache())
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(tree_digest(&out), tree_digest(&disk_out));
}

#[test]
fn plugins_list_names_every_standard_handler_embedded_unless_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("kpack");
    copy_kpack(&exe);
    let r = run_clean(&exe, tmp.path(), &["plugins", "list", "--json"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let v: serde_json::Value = serde_json::from_str(&stdout(&r)).unwrap();
    let listed: Vec<(String, String, String)> = v["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_string(),
                h["origin"].as_str().unwrap().to_string(),
                h["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = kpack_guests::HANDLERS
        .iter()
        .map(|g| {
            (
                g.name.to_string(),
                "embedded".to_string(),
                sha256_hex(&std::fs::read(g.path).unwrap()),
            )
        })
        .collect();
    assert_eq!(listed, want);
    assert_eq!(kpack_guests::EMBEDDED.len(), 8);

    // A handler on disk with the same name wins over the embedded one.
    let dir = tmp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        kpack_guests::HANDLER_ROCBLAS,
        dir.join("kpack_handler_rocblas.wasm"),
    )
    .unwrap();
    let r = run_clean(
        &exe,
        tmp.path(),
        &["plugins", "list", "--split-databases", "rocblas,miopen"],
    );
    assert!(r.status.success(), "{}", stderr(&r));
    let out = stdout(&r);
    let line = |n: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{n} ")))
            .unwrap_or_else(|| panic!("{n} missing: {out}"))
            .to_string()
    };
    assert!(
        line("rocblas").ends_with(&format!(
            "bundled {}",
            dir.join("kpack_handler_rocblas.wasm").display()
        )),
        "{out}"
    );
    assert!(line("miopen").ends_with(" embedded"), "{out}");
}
