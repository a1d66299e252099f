//! What a file is, decided once from its first bytes: the one place every
//! command asks (in the spirit of `object::FileKind`).

use std::io::Read;
use std::path::Path;

use kpack_elf::Machine;

/// Bytes [`FileKind::detect`] looks at (a PE image also needs the four
/// bytes at `e_lfanew`, which [`FileKind::of_path`] reads).
pub const HEAD_LEN: usize = 64;

/// `e_machine` of an AMDGPU code object.
const EM_AMDGPU: u16 = 224;

/// What a file is, by content, never by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A host ELF file kpack can rewrite or prune.
    HostElf {
        /// x86-64 or aarch64.
        machine: Machine,
        /// `ET_EXEC`/`ET_DYN` (linked) or `ET_REL` (a link input).
        linked: bool,
    },
    /// An ELF file for another machine (not AMDGPU): read as host code
    /// without device code kpack can move.
    OtherElf {
        /// Its `e_machine`.
        e_machine: u16,
    },
    /// A Windows PE image (DLL, EXE, `.pyd`): `MZ`, then `PE\0\0` at
    /// `e_lfanew`.
    Pe,
    /// A bare AMDGPU code object (`.co`, `.hsaco`).
    CodeObject,
    /// A clang offload bundle (`__CLANG_OFFLOAD_BUNDLE__`).
    Bundle,
    /// A compressed offload bundle (`CCOB`).
    Ccob,
    /// An LLVM OffloadBinary (`0x10FF10AD`).
    OffloadBinary,
    /// A static archive (`!<arch>\n`, or a thin one, `!<thin>\n`).
    StaticArchive,
    /// A KPAK archive written by kpack or AMD's rocm-kpack.
    Kpack,
    /// A zip file (a Python wheel is one).
    Zip,
    /// Anything else.
    Other,
}

impl FileKind {
    /// The kind of a file whose first bytes are `head` (up to
    /// [`HEAD_LEN`]). A PE image is recognised only when `head` reaches
    /// its `PE\0\0` signature; [`FileKind::of_path`] always reads it.
    pub fn detect(head: &[u8]) -> FileKind {
        if head.starts_with(b"\x7fELF") {
            return elf_kind(head);
        }
        if kpack_pe::looks_like_pe(head) {
            return FileKind::Pe;
        }
        let magics: [(&[u8], FileKind); 7] = [
            (kpack_bundle::BUNDLE_MAGIC, FileKind::Bundle),
            (kpack_bundle::CCOB_MAGIC, FileKind::Ccob),
            (&[0x10, 0xFF, 0x10, 0xAD], FileKind::OffloadBinary),
            (b"!<arch>\n", FileKind::StaticArchive),
            (b"!<thin>\n", FileKind::StaticArchive),
            (&kpack_format::MAGIC, FileKind::Kpack),
            (b"PK\x03\x04", FileKind::Zip),
        ];
        magics
            .iter()
            .find(|(m, _)| head.starts_with(m))
            .map_or(FileKind::Other, |(_, k)| *k)
    }

    /// The kind of the file at `path` (reads its first bytes, and for `MZ`
    /// the PE signature wherever `e_lfanew` puts it).
    pub fn of_path(path: &Path) -> std::io::Result<FileKind> {
        let mut head = Vec::with_capacity(HEAD_LEN);
        std::fs::File::open(path)?
            .take(HEAD_LEN as u64)
            .read_to_end(&mut head)?;
        if FileKind::may_be_pe(&head) {
            // `e_lfanew` may point past the first bytes: ask the PE crate,
            // which reads the signature where it is.
            return Ok(match kpack_pe::is_pe_file(path) {
                Ok(true) => FileKind::Pe,
                _ => FileKind::Other,
            });
        }
        Ok(FileKind::detect(&head))
    }

    /// A host binary kpack reads with [`crate::HostBinary`]: ELF for a
    /// known machine, or PE.
    pub fn is_host_binary(self) -> bool {
        matches!(self, FileKind::HostElf { .. } | FileKind::Pe)
    }

    /// A file that is device code by itself: a bundle, a CCOB or a code
    /// object.
    pub fn is_device_file(self) -> bool {
        matches!(
            self,
            FileKind::Bundle | FileKind::Ccob | FileKind::CodeObject
        )
    }
}

/// A compressed stream, by its first bytes: what an artifact archive
/// (`.tar.zst`, `.tar.xz`, `.tar.gz`) is before its tar is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// zstd (`28 b5 2f fd`).
    Zstd,
    /// xz (`fd 37 7a 58 5a 00`).
    Xz,
    /// gzip (`1f 8b`).
    Gzip,
}

impl Compression {
    /// The compression of a stream whose first bytes are `head`, if any.
    pub fn detect(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Compression::Xz)
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else {
            None
        }
    }
}

impl FileKind {
    /// Whether a file whose first bytes are `head` may be a PE image
    /// (`MZ`): [`FileKind::detect`] says so only when `head` reaches the
    /// PE signature, so a reader holding fewer bytes asks this.
    pub fn may_be_pe(head: &[u8]) -> bool {
        head.starts_with(b"MZ")
    }
}

/// The ELF kinds: by `e_machine` (at byte 18, in the file's byte order)
/// and `e_type` (byte 16).
fn elf_kind(head: &[u8]) -> FileKind {
    if kpack_amdgpu::is_amdgpu_elf(head) {
        return FileKind::CodeObject;
    }
    let (Some(t), Some(m), Some(&data)) = (head.get(16..18), head.get(18..20), head.get(5)) else {
        return FileKind::OtherElf { e_machine: 0 };
    };
    let word = |b: &[u8]| {
        if data == 2 {
            u16::from_be_bytes([b[0], b[1]])
        } else {
            u16::from_le_bytes([b[0], b[1]])
        }
    };
    let (e_type, e_machine) = (word(t), word(m));
    if e_machine == EM_AMDGPU {
        return FileKind::CodeObject;
    }
    match Machine::from_e_machine(e_machine) {
        Some(machine) => FileKind::HostElf {
            machine,
            linked: e_type != object::elf::ET_REL,
        },
        None => FileKind::OtherElf { e_machine },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(e_type: u16, e_machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; HEAD_LEN];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16..18].copy_from_slice(&e_type.to_le_bytes());
        h[18..20].copy_from_slice(&e_machine.to_le_bytes());
        h
    }

    #[test]
    fn tells_elf_files_apart_by_machine_and_type() {
        assert_eq!(
            FileKind::detect(&elf(3, 62)),
            FileKind::HostElf {
                machine: Machine::X86_64,
                linked: true
            }
        );
        assert_eq!(
            FileKind::detect(&elf(1, 183)),
            FileKind::HostElf {
                machine: Machine::Aarch64,
                linked: false
            }
        );
        assert_eq!(
            FileKind::detect(&elf(3, 243)),
            FileKind::OtherElf { e_machine: 243 }
        );
        assert_eq!(FileKind::detect(&elf(3, 224)), FileKind::CodeObject);
        assert_eq!(
            FileKind::detect(b"\x7fELF"),
            FileKind::OtherElf { e_machine: 0 }
        );
    }

    #[test]
    fn tells_containers_apart_by_magic() {
        assert_eq!(
            FileKind::detect(b"__CLANG_OFFLOAD_BUNDLE__\x02"),
            FileKind::Bundle
        );
        assert_eq!(FileKind::detect(b"CCOB\x03\x00"), FileKind::Ccob);
        assert_eq!(
            FileKind::detect(&[0x10, 0xFF, 0x10, 0xAD, 1]),
            FileKind::OffloadBinary
        );
        assert_eq!(FileKind::detect(b"!<arch>\nx"), FileKind::StaticArchive);
        assert_eq!(FileKind::detect(b"!<thin>\nx"), FileKind::StaticArchive);
        assert_eq!(FileKind::detect(b"KPAK\x01"), FileKind::Kpack);
        assert_eq!(FileKind::detect(b"PK\x03\x04"), FileKind::Zip);
        assert_eq!(FileKind::detect(b""), FileKind::Other);
        assert_eq!(FileKind::detect(b"MZ"), FileKind::Other);
    }

    #[test]
    fn finds_a_pe_signature_beyond_the_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("far.dll");
        let mut b = vec![0u8; 0x200];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c..0x40].copy_from_slice(&0x100u32.to_le_bytes());
        b[0x100..0x104].copy_from_slice(b"PE\0\0");
        std::fs::write(&path, &b).unwrap();
        assert_eq!(FileKind::detect(&b[..HEAD_LEN]), FileKind::Other);
        assert_eq!(FileKind::of_path(&path).unwrap(), FileKind::Pe);
    }
}
