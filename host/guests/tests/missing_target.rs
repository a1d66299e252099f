//! Without the `wasm32-wasip2` target (`cargo install` or an sdist build on
//! a toolchain that lacks it), the build of the handlers the `kpack` binary
//! embeds stops with the command that fixes it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

#[test]
fn build_without_the_wasm_target_says_rustup_target_add() {
    let tmp = tempfile::tempdir().unwrap();
    let sysroot = tmp.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("lib/rustlib")).unwrap();
    // A rustc whose sysroot has no wasm32-wasip2; everything else goes to
    // the real one.
    let fake = tmp.path().join("rustc");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --print ] && [ \"$2\" = sysroot ]; then echo '{}'; exit 0; fi\nexec rustc \"$@\"\n",
            sysroot.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // The `embed` feature is what kpack-cli builds; its own target
    // directory, so the outer build's lock and artifacts are not touched.
    let out = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--locked",
            "-p",
            "kpack-guests",
            "--features",
            "embed",
        ])
        .arg("--target-dir")
        .arg(tmp.path().join("target"))
        .env("RUSTC", &fake)
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "built without the target: {stderr}");
    assert!(
        stderr.contains("run `rustup target add wasm32-wasip2`"),
        "{stderr}"
    );
}
