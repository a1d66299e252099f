//! `kpack deploy`: a fake ROCm install (an offloaded library with archives
//! for gfx1100, gfx1201 and gfx942, the stub HIP runtime, librocm_kpack)
//! and an executable linked against it, deployed for some GPUs; the copy
//! runs under the stub HIP runtime with no LD_LIBRARY_PATH, before and
//! after a move, and loads its kernels through librocm_kpack from the
//! deployed archives only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_tests::{fixture, stderr, stdout};

use crate::util::{kpack, offload_into, stub_hip};

/// The fake install and the application.
struct Install {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    prefix: PathBuf,
    app: PathBuf,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
}

fn install() -> Install {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let prefix = root.join("rocm");
    let lib = prefix.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    offload_into(&fixture("clang19/libaxpy_plain.so"), &lib, &[]);
    // The loading stub HIP runtime and its librocm_kpack, as installed: the
    // runtime finds librocm_kpack beside itself.
    let stub = stub_hip(true);
    std::fs::copy(stub.join("libamdhip64.so.5"), lib.join("libamdhip64.so.5")).unwrap();
    std::fs::copy(stub.join("librocm_kpack.so"), lib.join("librocm_kpack.so")).unwrap();
    std::os::unix::fs::symlink("librocm_kpack.so", lib.join("librocm_kpack.so.0")).unwrap();
    run(Command::new("patchelf")
        .args(["--set-rpath", "$ORIGIN"])
        .arg(lib.join("libamdhip64.so.5")));
    let src = root.join("main.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let app = root.join("app");
    run(Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&app)
        .arg(format!("-L{}", lib.display()))
        .args(["-Wl,--no-as-needed", "-laxpy_plain"])
        .arg(format!("-Wl,-rpath,{}", lib.display())));
    Install {
        _tmp: tmp,
        root,
        prefix,
        app,
    }
}

fn deploy(inst: &Install, out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "deploy".into(),
        inst.app.clone().into(),
        "-o".into(),
        out.into(),
        "--rocm-path".into(),
        inst.prefix.clone().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    kpack(args)
}

/// Every `.kpack` file under `dir`, relative, `/`-separated.
fn archives(dir: &Path) -> BTreeSet<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "kpack"))
        .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
        .collect()
}

/// The `load` lines of the stub's log for a run of the deployed
/// executable on a device reporting `arch`, with no library path set.
fn loads(exe: &Path, arch: &str) -> Vec<String> {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(exe);
    for var in [
        "LD_LIBRARY_PATH",
        "ROCM_KPACK_PATH",
        "ROCM_KPACK_PATH_PREFIX",
        "ROCM_KPACK_DISABLE",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("KPACK_STUB_LOG", log.path())
        .env("KPACK_STUB_ARCHS", arch)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", exe.display(), stderr(&out));
    std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("load "))
        .map(str::to_owned)
        .collect()
}

/// The line the stub writes for the oracle's `target` object of
/// libaxpy_plain.so.
fn oracle_load(target: &str) -> String {
    let e = kpack_tests::clang19_oracle()
        .iter()
        .find(|e| e.file == "libaxpy_plain.so" && e.bundle == 0 && e.target == target)
        .unwrap();
    format!("load 0 {target} ok {} {}", e.sha256, e.size)
}

#[test]
fn deploys_only_the_archives_the_listed_gpus_load() {
    let inst = install();
    for (gpus, want) in [
        ("gfx1100", &["gfx1100"][..]),
        ("gfx1100,gfx942", &["gfx1100", "gfx942"][..]),
    ] {
        let out = inst.root.join(format!("dist-{gpus}"));
        let o = deploy(&inst, &out, &["--gpu", gpus]);
        assert!(o.status.success(), "{gpus}: {}{}", stdout(&o), stderr(&o));
        let want: BTreeSet<String> = want
            .iter()
            .map(|g| format!("lib/.kpack/libaxpy_plain_{g}.kpack"))
            .collect();
        assert_eq!(archives(&out), want, "{gpus}");
        for f in ["bin/app", "lib/libaxpy_plain.so", "lib/libamdhip64.so.5"] {
            assert!(out.join(f).is_file(), "{gpus}: {f} not deployed");
        }
        assert!(
            out.join("lib/librocm_kpack.so.0").exists(),
            "{gpus}: no runtime"
        );
        assert!(!out.join("lib/libc.so.6").exists(), "{gpus}: libc deployed");
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("kpack-deploy.json")).unwrap()).unwrap();
        assert_eq!(m["schema_version"], 1);
        let left: Vec<&str> = m["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert!(left.contains(&"libaxpy_plain_gfx1201.kpack"), "{left:?}");
        assert!(left.contains(&"libc.so.6"), "{left:?}");
    }
}

#[test]
fn deployed_directory_loads_its_kernels_wherever_it_is_moved() {
    let inst = install();
    let out = inst.root.join("dist");
    let o = deploy(&inst, &out, &["--gpu", "gfx1100,gfx942"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    for g in ["gfx1100", "gfx942"] {
        assert_eq!(loads(&out.join("bin/app"), g), [oracle_load(g)], "{g}");
    }
    // Moved, with the install it came from gone: nothing points back.
    let moved = inst.root.join("elsewhere/dist2");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&out, &moved).unwrap();
    std::fs::remove_dir_all(&inst.prefix).unwrap();
    for g in ["gfx1100", "gfx942"] {
        assert_eq!(
            loads(&moved.join("bin/app"), g),
            [oracle_load(g)],
            "{g} moved"
        );
    }
    let not_deployed = loads(&moved.join("bin/app"), "gfx1201");
    assert!(
        not_deployed.len() == 1 && not_deployed[0].starts_with("load 0 gfx1201 error"),
        "{not_deployed:?}"
    );
    let c = kpack(["deploy".as_ref(), "--check".as_ref(), moved.as_os_str()]);
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
}

#[test]
fn check_names_absolute_runpaths() {
    let inst = install();
    let c = kpack(["deploy".as_ref(), "--check".as_ref(), inst.root.as_os_str()]);
    assert_eq!(c.status.code(), Some(1), "{}{}", stdout(&c), stderr(&c));
    assert!(
        stdout(&c).contains("app: RUNPATH/RPATH entry"),
        "{}",
        stdout(&c)
    );
}

#[test]
fn refuses_a_gpu_without_code_before_writing() {
    let inst = install();
    let out = inst.root.join("dist");
    let o = deploy(&inst, &out, &["--gpu", "gfx1100,gfx90a"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--gpu gfx90a"), "{}", stderr(&o));
    assert!(!out.exists(), "written despite the refusal");
}

#[test]
fn refuses_an_existing_directory_without_force() {
    let inst = install();
    let out = inst.root.join("dist");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("old"), "old").unwrap();
    let o = deploy(&inst, &out, &["--gpu", "gfx1100"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(out.join("old").exists());
    let o = deploy(&inst, &out, &["--gpu", "gfx1100", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !out.join("old").exists(),
        "--force replaces the directory whole"
    );
    assert!(out.join("bin/app").is_file());
}

#[test]
fn prune_keeps_only_the_listed_gpus_code_objects() {
    let inst = install();
    let fat = inst.root.join("fat/libaxpy_plain.so");
    std::fs::create_dir_all(fat.parent().unwrap()).unwrap();
    std::fs::copy(fixture("clang19/libaxpy_plain.so"), &fat).unwrap();
    for (prune, want) in [
        (false, &["gfx1100", "gfx1201", "gfx942"][..]),
        (true, &["gfx1100", "gfx942"][..]),
    ] {
        let out = inst.root.join(format!("dist-{prune}"));
        let mut args: Vec<std::ffi::OsString> = vec![
            "deploy".into(),
            fat.clone().into(),
            "--gpu=gfx1100,gfx942".into(),
            "-o".into(),
            out.clone().into(),
            "--rocm-path".into(),
            inst.prefix.clone().into(),
        ];
        if prune {
            args.push("--prune".into());
        }
        let o = kpack(args);
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
        let bin =
            kpack_binary::HostBinary::read(&out.join("lib/libaxpy_plain.so"), Default::default())
                .unwrap();
        let got: BTreeSet<String> = bin
            .targets()
            .iter()
            .map(|t| kpack_amdgpu::processor_of(kpack_amdgpu::strip_target_prefix(t)).to_owned())
            .collect();
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "prune {prune}");
        assert!(archives(&out).is_empty());
        // The deployed library runs under a HIP runtime that knows nothing
        // of kpack, and hands it bundles of the listed GPUs only.
        let dump = inst.root.join(format!("dump-{prune}"));
        let (log, bundles) = crate::prune::run_plain_stub(&out.join("lib/libaxpy_plain.so"), &dump);
        assert!(log.iter().any(|l| l.starts_with("fatbin HIPF")), "{log:?}");
        let served: BTreeSet<String> = crate::prune::code_objects(&bundles)
            .into_iter()
            .map(|(t, _)| {
                kpack_amdgpu::processor_of(kpack_amdgpu::strip_target_prefix(&t)).to_owned()
            })
            .collect();
        assert_eq!(served, want, "prune {prune}: what the runtime is handed");
    }
}

/// Write `bytes` at `path`, making its directory.
fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The parsed `kpack-deploy.json` of `dir`.
fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("kpack-deploy.json")).unwrap()).unwrap()
}

#[test]
fn deploys_generic_and_listed_gpus_database_files_only() {
    let inst = install();
    // A rocBLAS-style database beside the libraries (found without being
    // named) and an unclaimed one named with --databases.
    let lib = inst.prefix.join("lib/rocblas/library");
    write(&lib.join("TensileLibrary.dat"), b"generic tensile index");
    write(
        &lib.join("TensileLibrary_gfx1100.co"),
        b"tensile code gfx1100",
    );
    let other = vec![7u8; 4096];
    write(&lib.join("TensileLibrary_gfx942.co"), &other);
    write(
        &lib.join("TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.dat"),
        b"per-arch solutions",
    );
    let extra = inst.prefix.join("share/extra/db");
    write(&extra.join("tuning.txt"), b"tuning for all");
    let out = inst.root.join("dist");
    let o = deploy(
        &inst,
        &out,
        &["--gpu", "gfx1100", "--databases", extra.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    for f in [
        "lib/rocblas/library/TensileLibrary.dat",
        "lib/rocblas/library/TensileLibrary_gfx1100.co",
        "share/extra/db/tuning.txt",
    ] {
        assert!(out.join(f).is_file(), "{f} not deployed");
    }
    assert!(
        !out.join("lib/rocblas/library/TensileLibrary_gfx942.co")
            .exists()
    );
    let m = manifest(&out);
    let left: Vec<&str> = m["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert!(
        left.contains(&"lib/rocblas/library/TensileLibrary_gfx942.co")
            && left.contains(
                &"lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.dat"
            ),
        "{left:?}"
    );
    let db = |p: &str| {
        m["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .unwrap()["database"]
            .clone()
    };
    assert_eq!(
        db("lib/rocblas/library/TensileLibrary_gfx1100.co"),
        "rocblas gfx1100"
    );
    assert_eq!(
        db("lib/rocblas/library/TensileLibrary.dat"),
        "rocblas generic"
    );
    assert_eq!(db("share/extra/db/tuning.txt"), "unclaimed");
    // The fat closure counts every database file, those left out too.
    let fat = |m: &serde_json::Value| m["sizes"][0]["fat_closure_bytes"].as_u64().unwrap();
    let db_bytes: u64 = walkdir::WalkDir::new(&lib)
        .into_iter()
        .chain(walkdir::WalkDir::new(&extra))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(db_bytes > other.len() as u64);
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_dir_all(&extra).unwrap();
    let bare = inst.root.join("dist-bare");
    let o = deploy(&inst, &bare, &["--gpu", "gfx1100"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(fat(&m) - fat(&manifest(&bare)), db_bytes);
}

#[test]
fn refuses_a_database_directory_outside_every_prefix() {
    let inst = install();
    let stray = inst.root.join("stray/db");
    write(&stray.join("a.dat"), b"x");
    let out = inst.root.join("dist");
    let o = deploy(
        &inst,
        &out,
        &["--gpu", "gfx1100", "--databases", stray.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("stray/db"), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn offload_turns_fat_libraries_into_archives_the_runtime_loads() {
    let inst = install();
    let fat_dir = inst.root.join("fat");
    std::fs::create_dir_all(&fat_dir).unwrap();
    std::fs::copy(
        fixture("clang19/libaxpy_plain.so"),
        fat_dir.join("libaxpy_plain.so"),
    )
    .unwrap();
    let app = inst.root.join("fat-app");
    run(Command::new("cc")
        .arg(inst.root.join("main.c"))
        .arg("-o")
        .arg(&app)
        .arg(format!("-L{}", fat_dir.display()))
        .arg(format!(
            "-Wl,-rpath-link,{}",
            inst.prefix.join("lib").display()
        ))
        .args(["-Wl,--no-as-needed", "-laxpy_plain"])
        .arg(format!("-Wl,-rpath,{}", fat_dir.display())));
    let out = inst.root.join("dist");
    let o = kpack([
        "deploy".as_ref(),
        app.as_os_str(),
        "--gpu=gfx1100,gfx942".as_ref(),
        "--offload".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--rocm-path".as_ref(),
        inst.prefix.as_os_str(),
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let want: BTreeSet<String> = ["gfx1100", "gfx942"]
        .iter()
        .map(|g| format!("lib/.kpack/libaxpy_plain_{g}.kpack"))
        .collect();
    assert_eq!(archives(&out), want);
    let bin = kpack_binary::HostBinary::read(&out.join("lib/libaxpy_plain.so"), Default::default())
        .unwrap();
    assert!(bin.is_transformed(), "the copy is still fat");
    let m = manifest(&out);
    let lib = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "lib/libaxpy_plain.so")
        .unwrap();
    assert_eq!(lib["offloaded"], true);
    for g in ["gfx1100", "gfx942"] {
        assert_eq!(loads(&out.join("bin/fat-app"), g), [oracle_load(g)], "{g}");
    }
    let c = kpack(["deploy".as_ref(), "--check".as_ref(), out.as_os_str()]);
    assert!(c.status.success(), "{}{}", stdout(&c), stderr(&c));
}
