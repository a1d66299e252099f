//! Link arguments for the shared library: the SONAME distributions and
//! AMD's CMake package expect (`librocm_kpack.so.0`, AMD's SOVERSION 0), and
//! a version script so only the `kpack_*` C ABI is exported.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let script = manifest.join("librocm_kpack.map");
    println!("cargo:rerun-if-changed={}", script.display());
    // Only ELF linkers know -soname and GNU version scripts.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocm_kpack.so.0");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
    }
}
