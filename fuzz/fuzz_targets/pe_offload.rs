//! Arbitrary bytes (seeded with the PE fixtures, `tests/fixtures/pe`) as a
//! Windows DLL/EXE: read its fat binary, offload it with a fixed marker and
//! verify the result; verify the raw input too. Nothing may panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use kpack_bundle::WalkOptions;
use libfuzzer_sys::fuzz_target;

/// One scratch file per fuzzing process (`read_fat_binary` takes a path).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("kpack-fuzz-pe-offload-{}.dll", std::process::id()))
    })
}

/// The marker every transform gets, as `kpack offload` would write it.
fn marker() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        kpack_format::Marker {
            kernel_name: "bin/fuzz.dll".into(),
            search_paths: vec![".kpack/fuzz_@GFXARCH@.kpack".into()],
        }
        .to_bytes()
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = kpack_pe::looks_like_pe(data);
    let _ = kpack_pe::verify_image(data);

    let path = scratch();
    if std::fs::write(path, data).is_err() {
        return;
    }
    for verify_hash in [false, true] {
        let Ok(fat) = kpack_pe::read_fat_binary(path, WalkOptions { verify_hash }) else {
            return;
        };
        let _ = (fat.targets(), fat.is_host_only());
        if fat.is_host_only() || fat.is_transformed() {
            return;
        }
        if let Ok((image, _report)) = kpack_pe::transform(path, &fat, marker()) {
            let _ = kpack_pe::verify_image(&image);
            let _ = kpack_pe::looks_like_pe(&image);
        }
    }
});
