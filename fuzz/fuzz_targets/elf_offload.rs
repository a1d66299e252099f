//! Arbitrary bytes (seeded with the fixture ELFs) as a host binary: read its
//! fat binary, offload it with a fixed marker and verify the result; verify
//! the raw input too. Nothing may panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use kpack_bundle::WalkOptions;
use libfuzzer_sys::fuzz_target;

/// One scratch file per fuzzing process (`read_fat_binary` takes a path).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("kpack-fuzz-elf-offload-{}.bin", std::process::id()))
    })
}

/// The marker every transform gets, as `kpack offload` would write it.
fn marker() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        kpack_format::Marker {
            kernel_name: "lib/libfuzz.so".into(),
            search_paths: vec!["libfuzz.kpack".into()],
        }
        .to_bytes()
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = kpack_elf::verify_image(data);

    let path = scratch();
    if std::fs::write(path, data).is_err() {
        return;
    }
    let Ok(fat) = kpack_elf::read_fat_binary(path, WalkOptions { verify_hash: false }) else {
        return;
    };
    for w in &fat.wrappers {
        let _ = (w.index, w.bundle, &w.via);
    }
    if fat.is_host_only() || fat.is_transformed() {
        return;
    }
    if let Ok((image, report)) = kpack_elf::transform(path, &fat, marker()) {
        assert_eq!(report.output_size, image.len() as u64);
        let _ = kpack_elf::verify_image(&image[..]);
    }
});
