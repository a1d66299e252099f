//! Sandbox test guest: `classify` tries to allocate 4 GB in 16 MiB pieces; the host's memory cap must stop it.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct Alloc4g;

impl Handler for Alloc4g {
    const NAME: &'static str = "alloc-4g";
    const VERSION: &'static str = "0.1.0";

    fn classify(file: &File<'_>) -> Classification {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        for _ in 0..256 {
            let mut piece = Vec::<u8>::with_capacity(16 << 20);
            piece.push(1);
            hoard.push(piece);
        }
        std::hint::black_box(&hoard);
        let _ = file;
        Classification::Generic
    }
}

export_handler!(Alloc4g);
