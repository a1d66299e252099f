//! Running Windows builds under Debian's `wine64`: the runtime DLL built
//! for `x86_64-pc-windows-gnu`, the wine loader, and the Windows path of
//! a Unix path. `scripts/test.sh` installs wine64 and mingw-w64 and adds
//! the Rust target.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo target directory of the running test binary (it is in
/// `<target>/debug/deps/`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

/// `rocm_kpack.dll` and its import library, built by cargo for Windows
/// into the test's target directory; the directory that holds them.
pub fn windows_runtime() -> PathBuf {
    let target = target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "-q", "-p", "kpack-capi", "--lib"])
        .args(["--target", "x86_64-pc-windows-gnu"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "building librocm_kpack for x86_64-pc-windows-gnu failed (scripts/test.sh adds the target \
         and installs gcc-mingw-w64-x86-64):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("x86_64-pc-windows-gnu/debug")
}

/// The wine loader: Debian's wine64 package puts it in /usr/lib/wine (the
/// `wine` package adds the PATH wrappers).
pub fn wine64() -> PathBuf {
    let lib = Path::new("/usr/lib/wine/wine64");
    if lib.exists() {
        return lib.to_path_buf();
    }
    PathBuf::from("wine64")
}

/// The Windows path wine gives a Unix path: drive Z: is `/`.
pub fn windows_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}
