//! Arbitrary bytes as a `.llvm.offloading` section: read every
//! OffloadBinary (v1-v3, compressed v3) and touch every entry; every binary
//! that reads must write back (same version, uncompressed) and read again
//! to the same images. Errors must name an offset.
#![no_main]

use kpack_llvm_offload::{ReadOptions, Reader, WriteOptions, write_binary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        max_inflated_size: 1 << 22,
        verify_hash: true,
    };
    for binary in Reader::with_options(data, options).binaries() {
        let binary = match binary {
            Ok(b) => b,
            Err(e) => {
                assert!(e.to_string().contains("at 0x"), "error without an offset: {e}");
                break;
            }
        };
        let images: Vec<_> = binary.entries().iter().map(|e| e.to_image()).collect();
        for e in binary.entries() {
            let _ = (e.arch(), e.triple(), e.image_kind().name(), e.offload_kind().name());
        }
        if images.is_empty() {
            // A v2/v3 header may declare zero entries; LLVM cannot write that.
            continue;
        }
        let opts = WriteOptions {
            version: binary.version(),
            compression: None,
        };
        let bytes = write_binary(&images, &opts).expect("a binary that reads can be written");
        let again = Reader::new(&bytes).read_all().expect("written binary reads");
        assert_eq!(again.len(), 1);
        let back: Vec<_> = again[0].entries().iter().map(|e| e.to_image()).collect();
        assert_eq!(back, images, "write then read changed the images");
    }
});
