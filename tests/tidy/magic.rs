//! Magic numbers and their homes: `FileKind` (`host/binary/src/kind.rs`)
//! decides what a file is, and a format's own reader checks its own magic
//! before parsing. Any other non-test file that spells a magic is listed
//! with `// known: <reason>`, to be asked of its home instead.

use super::homes::Rule;

/// Every magic number kpack tests, with its homes.
pub const MAGICS: &[Rule] = &[
    Rule {
        name: "KPAK archive magic",
        spellings: &["b\"KPAK", "0x4b, 0x50, 0x41, 0x4b", "0x4b41504b"],
        homes: &["host/format/src/lib.rs"],
        ask: "FileKind, or kpack_format::MAGIC",
    },
    Rule {
        name: "clang offload bundle magic",
        spellings: &["__CLANG_OFFLOAD_BUNDLE__"],
        homes: &[
            "host/bundle/src/bundle.rs",
            "sdk/src/sniff.rs", // known: the guest SDK builds for wasm32 without kpack-bundle
        ],
        ask: "FileKind, or kpack_bundle::BUNDLE_MAGIC",
    },
    Rule {
        name: "CCOB magic",
        spellings: &["b\"CCOB", "0x43, 0x43, 0x4f, 0x42", "0x424f4343"],
        homes: &[
            "host/bundle/src/ccob.rs",
            "sdk/src/sniff.rs", // known: the guest SDK builds for wasm32 without kpack-bundle
        ],
        ask: "FileKind, or kpack_bundle::CCOB_MAGIC",
    },
    Rule {
        name: "ELF magic",
        spellings: &[
            "\\x7fELF",
            "0x7f, b'E'",
            "0x7f, 0x45, 0x4c, 0x46",
            "0x464c457f",
            "ELFMAG",
        ],
        homes: &[
            "host/binary/src/kind.rs",
            "host/elf/src/read.rs",
            "host/amdgpu/src/code_object.rs",
            "host/bundle/src/walk.rs", // known: a bare code object in .hip_fatbin; could ask kpack_amdgpu's code-object header
            "host/llvm-offload/src/archive.rs", // known: classifies archive members; sits below kpack-binary
            "sdk/src/sniff.rs", // known: the guest SDK builds for wasm32 without kpack-binary
        ],
        ask: "FileKind, kpack_elf::looks_like_elf or kpack_amdgpu's code-object header",
    },
    Rule {
        name: "PE magic (MZ, PE\\0\\0)",
        spellings: &["b\"MZ", "0x5a4d", "b'M', b'Z'", "b\"PE\\0", "b\"PE\\x00"],
        homes: &[
            "host/binary/src/kind.rs",
            "host/pe/src/image.rs",
            "host/pe/src/read.rs",
        ],
        ask: "FileKind",
    },
    Rule {
        name: "zstd frame magic",
        spellings: &[
            "0x28, 0xb5, 0x2f, 0xfd",
            "\\x28\\xb5\\x2f\\xfd",
            "0xfd2fb528",
        ],
        homes: &[
            "host/binary/src/kind.rs",
            "host/bundle/src/stream.rs", // known: reads a CCOB payload's frame header for its window size
            "host/llvm-offload/src/binary.rs", // known: tells compressed images apart; sits below kpack-binary
        ],
        ask: "kpack_binary::Compression",
    },
    Rule {
        name: "xz magic",
        spellings: &["7zXZ", "0xfd, b'7'", "0xfd, 0x37, 0x7a"],
        homes: &["host/binary/src/kind.rs"],
        ask: "kpack_binary::Compression",
    },
    Rule {
        name: "gzip magic",
        spellings: &["0x1f, 0x8b", "\\x1f\\x8b", "0x8b1f"],
        homes: &["host/binary/src/kind.rs"],
        ask: "kpack_binary::Compression",
    },
    Rule {
        name: "HIP fat-binary wrapper magic (HIPF)",
        spellings: &["0x48495046", "b\"HIPF", "b\"FPIH"],
        homes: &["host/bundle/src/wrapper.rs"],
        ask: "kpack_bundle::HIPF",
    },
    Rule {
        name: "offloaded wrapper magic (HIPK)",
        spellings: &["0x4b504948", "b\"HIPK"],
        homes: &["host/bundle/src/wrapper.rs"],
        ask: "kpack_bundle::HIPK",
    },
    Rule {
        name: "OffloadBinary magic",
        spellings: &[
            "0x10ff10ad",
            "0x10, 0xff, 0x10, 0xad",
            "\\x10\\xff\\x10\\xad",
            "0xad10ff10",
        ],
        homes: &["host/binary/src/kind.rs", "host/llvm-offload/src/binary.rs"],
        ask: "FileKind",
    },
    Rule {
        name: "LLVM bitcode magic",
        spellings: &["BC\\xc0\\xde", "0xde, 0xc0, 0x17, 0x0b"],
        homes: &["host/llvm-offload/src/archive.rs"],
        ask: "kpack_llvm_offload's MemberKind",
    },
    Rule {
        name: "static archive magic",
        spellings: &["!<arch>", "!<thin>"],
        homes: &[
            "host/binary/src/kind.rs",
            "host/llvm-offload/src/archive.rs",
        ],
        ask: "FileKind",
    },
    Rule {
        name: "zip magic",
        spellings: &[
            "PK\\x03\\x04",
            "PK\\x05\\x06",
            "PK\\x06\\x06",
            "PK\\x06\\x07",
            "0x04034b50",
            "0x06054b50",
        ],
        homes: &[
            "host/binary/src/kind.rs",
            "host/wheel/src/reader.rs", // known: finds the zip64 end records itself to bound the central directory
            "host/wheel/src/writer.rs", // known: writes local headers itself for parallel deflate
        ],
        ask: "FileKind, or the zip crate",
    },
    Rule {
        name: "WebAssembly magic",
        spellings: &["\\0asm", "\\x00asm", "0x00, 0x61, 0x73, 0x6d"],
        homes: &["host/plugin-host/src/cache.rs"],
        ask: "the plugin host's component cache",
    },
    Rule {
        name: "SPIR-V magic",
        spellings: &["0x07230203", "0x03022307"],
        homes: &["host/amdgpu/src/spirv.rs"],
        ask: "kpack_amdgpu's SPIR-V header",
    },
];

#[cfg(test)]
mod tests {
    use super::super::homes::check;
    use super::super::source::SourceFile;
    use super::*;

    #[test]
    fn rejects_a_kpak_magic_planted_outside_kpack_format() {
        let files = [
            SourceFile::new(
                "host/format/src/lib.rs",
                "pub const MAGIC: [u8; 4] = *b\"KPAK\";",
            ),
            SourceFile::new(
                "host/split/src/prefix.rs",
                "if head.starts_with(b\"KPAK\") {",
            ),
        ];
        let problems: Vec<String> = check(MAGICS, &files)
            .into_iter()
            .filter(|p| !p.contains("no longer spells it"))
            .collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("host/split/src/prefix.rs:1: `b\"KPAK`"),
            "{problems:?}"
        );
    }
}
