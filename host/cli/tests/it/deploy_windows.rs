//! `kpack deploy` of Windows PE images: the PE fixture `dll_2tu.dll`
//! offloaded into a fake ROCm install's `bin` (archives for gfx1100 and
//! gfx90a in `bin/.kpack`, a stand-in `amdhip64.dll`, `rocm_kpack.dll`),
//! deployed for gfx1100: every DLL side by side, only gfx1100's archive.
//! After a move, `deploy --check` passes, and a C program cross-built
//! with mingw-w64 and run under wine64 loads the DLL's code objects
//! through the deployed `rocm_kpack.dll`, byte-identical to the archive's
//! entries. `scripts/test.sh` installs mingw-w64 and wine64 and adds the
//! `x86_64-pc-windows-gnu` Rust target.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::wine::{windows_path, windows_runtime, wine64};
use kpack_tests::{fixture, stderr, stdout};

use crate::util::{kpack, offload_into};

/// Loads code object `argv[3]` of the binary `argv[2]` (its marker's bytes
/// in the file `argv[1]`) for gfx1100 through rocm_kpack.dll into the file
/// `argv[4]`; then opens the archive `argv[5]` with `kpack_open`.
const LOADER_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <rocm_kpack/kpack.h>

int main(int argc, char **argv) {
  if (argc != 6) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 3;
  static unsigned char marker[65536];
  size_t n = fread(marker, 1, sizeof marker, f);
  fclose(f);
  if (n == 0) return 3;
  const char *arches[] = {"gfx1100"};
  kpack_cache_t c = NULL;
  if (kpack_cache_create(&c) != KPACK_SUCCESS) return 4;
  void *data = NULL;
  size_t size = 0;
  kpack_error_t e = kpack_load_code_object(c, marker, argv[2], (uint32_t)atoi(argv[3]),
                                           arches, 1, &data, &size);
  if (e != KPACK_SUCCESS) {
    char msg[1024];
    kpack_last_error_detail(msg, sizeof msg, NULL);
    printf("load failed: %d %s\n", (int)e, msg);
    return 5;
  }
  FILE *o = fopen(argv[4], "wb");
  if (!o || fwrite(data, 1, size, o) != size) return 6;
  fclose(o);
  kpack_free_code_object(data);
  kpack_cache_destroy(c);
  kpack_archive_t a = NULL;
  if (kpack_open(argv[5], &a) != KPACK_SUCCESS) return 7;
  kpack_close(a);
  printf("loaded %zu bytes\n", size);
  return 0;
}
"#;

/// The fake install: its scratch root and the ROCm prefix in it.
struct Install {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    prefix: PathBuf,
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/test.sh installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// A DLL exporting one function, built with mingw-w64: a stand-in for a
/// library the loader only has to find.
fn stand_in_dll(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, "int kpack_stand_in(void) { return 0; }\n").unwrap();
    let out = dir.join(name);
    run(Command::new("x86_64-w64-mingw32-gcc")
        .arg("-shared")
        .arg(&src)
        .arg("-o")
        .arg(&out));
    std::fs::remove_file(&src).unwrap();
    out
}

/// `rocm/bin/dll_2tu.dll` offloaded, its archives in `rocm/bin/.kpack`,
/// a stand-in `amdhip64.dll` beside it; `rocm_kpack` is `runtime` (the
/// real DLL or a stand-in).
fn install(runtime: &Path) -> Install {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let prefix = root.join("rocm");
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    offload_into(&fixture("pe/dll_2tu.dll"), &bin, &[]);
    stand_in_dll(&bin, "amdhip64.dll");
    std::fs::copy(runtime, bin.join("rocm_kpack.dll")).unwrap();
    Install {
        _tmp: tmp,
        root,
        prefix,
    }
}

/// The files under `dir`, relative, `/`-separated.
fn files(dir: &Path) -> BTreeSet<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap();
            rel.to_string_lossy().replace('\\', "/")
        })
        .collect()
}

fn deploy(apps: &[&Path], inst: &Install, out: &Path) {
    let mut args: Vec<std::ffi::OsString> = vec!["deploy".into()];
    args.extend(apps.iter().map(|a| a.as_os_str().to_owned()));
    args.extend([
        "--gpu".into(),
        "gfx1100".into(),
        "--rocm-path".into(),
        inst.prefix.clone().into_os_string(),
        "-o".into(),
        out.into(),
    ]);
    let o = kpack(args);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

fn check(dir: &Path) -> std::process::Output {
    kpack(["deploy".as_ref(), "--check".as_ref(), dir.as_os_str()])
}

#[test]
fn deploy_of_an_offloaded_dll_for_one_gpu_lays_its_dlls_side_by_side_with_that_gpus_archive() {
    let scratch = tempfile::tempdir().unwrap();
    let runtime = stand_in_dll(scratch.path(), "rocm_kpack.dll");
    let inst = install(&runtime);
    let out = inst.root.join("dist");
    deploy(&[&inst.prefix.join("bin/dll_2tu.dll")], &inst, &out);
    let expected: BTreeSet<String> = [
        ".kpack/dll_2tu_gfx1100.kpack",
        "amdhip64.dll",
        "dll_2tu.dll",
        "kpack-deploy.json",
        "rocm_kpack.dll",
    ]
    .map(String::from)
    .into();
    assert_eq!(files(&out), expected);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("kpack-deploy.json")).unwrap()).unwrap();
    let left: Vec<&str> = m["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert!(left.contains(&"dll_2tu_gfx90a.kpack"), "{left:?}");
    assert!(left.contains(&"KERNEL32.dll"), "{left:?}");

    // Moved, it still finds everything inside.
    let moved = inst.root.join("elsewhere/app");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&out, &moved).unwrap();
    std::fs::remove_dir_all(&inst.prefix).unwrap();
    let o = check(&moved);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("0 problems"), "{}", stdout(&o));
}

#[test]
fn deploy_check_names_a_missing_import_and_a_missing_archive_of_a_pe_directory() {
    let scratch = tempfile::tempdir().unwrap();
    let runtime = stand_in_dll(scratch.path(), "rocm_kpack.dll");
    let inst = install(&runtime);
    let out = inst.root.join("dist");
    deploy(&[&inst.prefix.join("bin/dll_2tu.dll")], &inst, &out);
    std::fs::remove_file(out.join("amdhip64.dll")).unwrap();
    std::fs::remove_dir_all(out.join(".kpack")).unwrap();
    let o = check(&out);
    assert!(!o.status.success());
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains("dll_2tu.dll: imports amdhip64.dll, not found"),
        "{text}"
    );
    assert!(text.contains("resolves to no archive"), "{text}");
}

#[test]
fn deploy_of_a_dll_importing_an_unknown_dll_names_it_and_where_it_looked() {
    let scratch = tempfile::tempdir().unwrap();
    let runtime = stand_in_dll(scratch.path(), "rocm_kpack.dll");
    let inst = install(&runtime);
    std::fs::remove_file(inst.prefix.join("bin/amdhip64.dll")).unwrap();
    let o = kpack([
        "deploy".as_ref(),
        inst.prefix.join("bin/dll_2tu.dll").as_os_str(),
        "--gpu".as_ref(),
        "gfx1100".as_ref(),
        "-o".as_ref(),
        inst.root.join("dist").as_os_str(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("amdhip64.dll"), "{}", stderr(&o));
    assert!(!inst.root.join("dist").exists());
}

/// The `.kpackrf` marker section's bytes of the PE image at `path`.
fn marker_bytes(path: &Path) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(path).unwrap();
    let file = object::read::pe::PeFile64::parse(&*data).unwrap();
    let section = file.section_by_name(".kpackrf").unwrap();
    section.data().unwrap().to_vec()
}

/// Build the loader program against `runtime`'s import library at `exe`.
fn build_loader(runtime: &Path, exe: &Path) {
    let dir = exe.parent().unwrap();
    let src = dir.join("kpack_load.c");
    std::fs::write(&src, LOADER_C).unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../capi/include");
    run(Command::new("x86_64-w64-mingw32-gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(exe)
        .arg(runtime.join("librocm_kpack.dll.a")));
    std::fs::remove_file(&src).unwrap();
}

/// Run the loader (in `dir`) under wine64 for code object `index`.
fn load_under_wine(dir: &Path, prefix: &Path, marker: &Path, index: &str, out: &Path) {
    let archive = dir.join(".kpack/dll_2tu_gfx1100.kpack");
    run(Command::new(wine64())
        .arg(dir.join("kpack_load.exe"))
        .arg(windows_path(marker))
        .arg(windows_path(&dir.join("dll_2tu.dll")))
        .arg(index)
        .arg(windows_path(out))
        .arg(windows_path(&archive))
        .current_dir(dir)
        .env("WINEPREFIX", prefix)
        .env("WINEDEBUG", "-all")
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .env_remove("DISPLAY"));
}

#[test]
fn a_program_under_wine_loads_the_moved_deployed_dlls_code_objects_through_rocm_kpack_dll() {
    let runtime = windows_runtime();
    let inst = install(&runtime.join("rocm_kpack.dll"));
    let exe = inst.prefix.join("bin/kpack_load.exe");
    build_loader(&runtime, &exe);
    let out = inst.root.join("dist");
    deploy(&[&exe, &inst.prefix.join("bin/dll_2tu.dll")], &inst, &out);
    let expected: BTreeSet<String> = [
        ".kpack/dll_2tu_gfx1100.kpack",
        "amdhip64.dll",
        "dll_2tu.dll",
        "kpack-deploy.json",
        "kpack_load.exe",
        "rocm_kpack.dll",
    ]
    .map(String::from)
    .into();
    assert_eq!(files(&out), expected);

    let moved = inst.root.join("elsewhere/app");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&out, &moved).unwrap();
    std::fs::remove_dir_all(&inst.prefix).unwrap();
    let o = check(&moved);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));

    // Rust's std imports ProcessPrng from bcryptprimitives.dll (a system
    // DLL, left out by deploy), which wine 8.0 lacks: a stand-in.
    let capi = Path::new(env!("CARGO_MANIFEST_DIR")).join("../capi");
    run(Command::new("x86_64-w64-mingw32-gcc")
        .args(["-std=c11", "-shared"])
        .arg(capi.join("tests/c/wine_bcryptprimitives.c"))
        .arg("-o")
        .arg(moved.join("bcryptprimitives.dll"))
        .arg("-ladvapi32"));
    let marker = inst.root.join("dll_2tu.marker");
    std::fs::write(&marker, marker_bytes(&moved.join("dll_2tu.dll"))).unwrap();
    let archive = kpack_format::Archive::open(moved.join(".kpack/dll_2tu_gfx1100.kpack")).unwrap();
    let mut loaded = 0;
    for e in archive.entries() {
        let (_, index) = e.key().rsplit_once('#').unwrap();
        let got = inst.root.join(format!("loaded_{index}.bin"));
        load_under_wine(&moved, &inst.root.join("wineprefix"), &marker, index, &got);
        assert_eq!(
            std::fs::read(&got).unwrap(),
            archive.read(e).unwrap().to_vec(),
            "{}",
            e.key()
        );
        loaded += 1;
    }
    assert_eq!(loaded, 2);
}
