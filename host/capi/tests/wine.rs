//! librocm_kpack built for `x86_64-pc-windows-gnu` and a C program
//! cross-built with mingw-w64 (`tests/c/test_windows.c`), run under
//! Debian's `wine64`: the Windows code paths (`GetModuleHandleExW` path
//! discovery, `;`-separated `ROCM_KPACK_PATH`, drive-letter paths) run for
//! real, not only compile. `scripts/test.sh` installs wine64 and mingw-w64
//! and adds the Rust target.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::Path;
use std::process::Command;

use kpack_runtime::Marker;
use kpack_tests::wine::{windows_path, windows_runtime, wine64};

#[test]
fn c_program_cross_built_for_windows_runs_under_wine() {
    let work = tempfile::tempdir().unwrap();
    // Canonical: wine reports module paths from the real directory.
    let dir = std::fs::canonicalize(work.path()).unwrap();
    let lib = windows_runtime();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vectors = crate_dir.join("../format/tests/vectors");
    let noop = dir.join("amd_test_noop.kpack");
    std::fs::copy(vectors.join("amd_test_noop.kpack"), &noop).unwrap();
    // The archive again where a relative search path finds it.
    std::fs::create_dir(dir.join(".kpack")).unwrap();
    std::fs::copy(&noop, dir.join(".kpack/test_gfx906.kpack")).unwrap();
    let marker = |name: &str, search: String| {
        let m = Marker {
            kernel_name: "lib/libtest.so".into(),
            search_paths: vec![search],
        };
        let p = dir.join(name);
        std::fs::write(&p, m.to_bytes()).unwrap();
        windows_path(&p)
    };
    let good = marker("good.marker", windows_path(&noop));
    let missing = marker("missing.marker", ".kpack/none_@GFXARCH@.kpack".into());
    let rel = marker("rel.marker", ".kpack/test_@GFXARCH@.kpack".into());

    let dll = dir.join("rocm_kpack.dll");
    std::fs::copy(lib.join("rocm_kpack.dll"), &dll).unwrap();
    let exe = dir.join("test_windows.exe");
    let out = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/test_windows.c"))
        .arg("-o")
        .arg(&exe)
        .arg(lib.join("librocm_kpack.dll.a"))
        .output()
        .unwrap_or_else(|e| {
            panic!("x86_64-w64-mingw32-gcc is required (gcc-mingw-w64-x86-64): {e}")
        });
    assert!(
        out.status.success(),
        "cross-compiling test_windows.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Rust's std imports ProcessPrng from bcryptprimitives.dll, which wine
    // 8.0 lacks; a stand-in beside the program fills the gap.
    let out = Command::new("x86_64-w64-mingw32-gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-shared"])
        .arg(crate_dir.join("tests/c/wine_bcryptprimitives.c"))
        .arg("-o")
        .arg(dir.join("bcryptprimitives.dll"))
        .arg("-ladvapi32")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the bcryptprimitives stand-in failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let kpack_path = format!(
        "{};{}",
        windows_path(&dir.join("none.kpack")),
        windows_path(&noop)
    );
    let prefix = dir.join("wineprefix");
    let out = Command::new(wine64())
        .arg(&exe)
        .args([windows_path(&noop), windows_path(&dll), good, missing, rel])
        .current_dir(&dir)
        .env("WINEPREFIX", &prefix)
        .env("WINEDEBUG", "-all")
        // No wine-mono/gecko install dialogs on a fresh prefix.
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
        .env("ROCM_KPACK_PATH", &kpack_path)
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .env_remove("DISPLAY")
        .output()
        .unwrap_or_else(|e| panic!("wine64 is required for this test (Debian's wine64): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(" passed, 0 failed"),
        "{}\n{stdout}\n{stderr}",
        out.status
    );
    // The EXE named itself with its Windows path.
    assert!(
        stdout.contains(&format!("exe {} offset", windows_path(&exe))),
        "{stdout}"
    );
}
