//! The committed header equals what cbindgen generates from the source
//! (bless with `KPACK_BLESS=1`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

#[test]
fn committed_header_matches_cbindgen_output() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .unwrap()
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = crate_dir.join("include/rocm_kpack/kpack.h");
    if std::env::var_os("KPACK_BLESS").is_some() {
        // Blessing rewrites the expectation and passes: in CI that would
        // turn a real difference into a green run.
        assert!(
            std::env::var_os("CI").is_none(),
            "KPACK_BLESS is set together with CI; blessing is for local runs only"
        );
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale; regenerate with KPACK_BLESS=1 cargo test -p kpack-capi --test header",
        path.display()
    );
}
