//! Strict archive checks: what `kpack archive verify` and the split tools'
//! `verify` report about a `.kpack` file, beyond what [`Archive::open`]
//! already refuses. One set of rules, so the two commands cannot disagree.

use std::fmt;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result, error_chain};
use crate::finding::Finding;
use crate::read::Archive;

/// One problem [`verify`] or [`Archive::verify`] found in an archive.
#[derive(Debug)]
#[non_exhaustive]
pub enum ArchiveProblem {
    /// The archive does not open: its header or TOC is invalid.
    Invalid(Error),
    /// An entry's stored bytes do not decode to its code object.
    Entry {
        /// The entry's binary key.
        key: String,
        /// The entry's architecture.
        arch: String,
        /// Why it does not decode.
        error: Error,
    },
    /// An architecture with TOC entries is missing from `gfx_arches`:
    /// AMD's loader decides from that list alone, so it never finds them.
    ArchNotListed {
        /// The architecture.
        arch: String,
    },
    /// A binary key without the `#<co_index>` suffix the loader looks up.
    KeyWithoutIndex {
        /// The key.
        key: String,
    },
    /// An architecture (in the TOC or `gfx_arches`) that is not a target id
    /// (`gfx90a`, `gfx942:xnack+`): it names a file (`@GFXARCH@` paths,
    /// `archive extract`'s directories), so `../../x` would escape.
    BadArch {
        /// The architecture as stored.
        arch: String,
    },
    /// An entry decodes, but not to the code object whose sha256 the TOC
    /// records: its bytes were changed after it was written.
    Digest {
        /// The entry's binary key.
        key: String,
        /// The entry's architecture.
        arch: String,
        /// The sha256 the TOC records (hex).
        recorded: String,
        /// The sha256 of the decoded bytes (hex).
        actual: String,
    },
    /// A binary key that is not a plain relative path (`..`, `.` or empty
    /// components, a leading `/`, a drive, a backslash, a NUL): `archive
    /// extract` refuses it.
    UnsafeKey {
        /// The key as stored.
        key: String,
    },
}

impl fmt::Display for ArchiveProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveProblem::Invalid(error) => write!(f, "{}", error_chain(error)),
            ArchiveProblem::Entry { key, arch, error } => {
                write!(f, "entry {key:?} {arch:?}: {}", error_chain(error))
            }
            ArchiveProblem::Digest {
                key,
                arch,
                recorded,
                actual,
            } => write!(
                f,
                "entry {key:?} {arch:?}: its bytes have sha256 {actual}, the TOC records {recorded}"
            ),
            ArchiveProblem::ArchNotListed { arch } => write!(
                f,
                "TOC arch {arch:?} is missing from gfx_arches, so AMD's loader never finds it"
            ),
            ArchiveProblem::KeyWithoutIndex { key } => write!(
                f,
                "key {key:?} has no #<co_index> suffix; the current loader cannot look it up"
            ),
            ArchiveProblem::BadArch { arch } => write!(
                f,
                "arch {arch:?} is not an AMDGPU target id; a reader would build paths from it"
            ),
            ArchiveProblem::UnsafeKey { key } => write!(
                f,
                "key {key:?} is not a plain relative path; it would escape an extraction directory"
            ),
        }
    }
}

impl ArchiveProblem {
    /// This problem as a [`Finding`] of the `archive` check (an error).
    pub fn finding(&self) -> Finding {
        Finding::error("archive", self.to_string())
    }
}

/// Open the archive at `path` and check it with [`Archive::verify`].
///
/// An archive that does not open is a [`ArchiveProblem::Invalid`]; only a file
/// that cannot be read at all ([`ErrorKind::FileNotFound`],
/// [`ErrorKind::Io`], which includes an empty file) is an error.
pub fn verify(path: impl AsRef<Path>) -> Result<Vec<ArchiveProblem>> {
    match Archive::open(path) {
        Ok(archive) => Ok(archive.verify()),
        Err(e) if matches!(e.kind(), ErrorKind::FileNotFound | ErrorKind::Io) => Err(e),
        Err(e) => Ok(vec![ArchiveProblem::Invalid(e)]),
    }
}

impl Archive {
    /// Check what opening does not: decode every entry (zstd frames to
    /// their `original_size`, and to the `sha256` the TOC records where
    /// it records one), every TOC architecture listed in
    /// `gfx_arches`, every key ending in `#<co_index>`. Findings come in
    /// that order; entries and keys in sorted order, architectures sorted;
    /// then every architecture (TOC and `gfx_arches`) a target id and every
    /// key a plain relative path.
    pub fn verify(&self) -> Vec<ArchiveProblem> {
        let mut findings = Vec::new();
        let mut toc_arches: Vec<&str> = Vec::new();
        for entry in self.entries() {
            toc_arches.push(entry.arch());
            match self.read(entry) {
                Err(error) => findings.push(ArchiveProblem::Entry {
                    key: entry.key().to_owned(),
                    arch: entry.arch().to_owned(),
                    error,
                }),
                Ok(bytes) => {
                    if let Some(recorded) = entry.sha256() {
                        let actual = crate::write::sha256(&bytes);
                        if actual != *recorded {
                            findings.push(ArchiveProblem::Digest {
                                key: entry.key().to_owned(),
                                arch: entry.arch().to_owned(),
                                recorded: crate::digest::to_hex(recorded),
                                actual: crate::digest::to_hex(&actual),
                            });
                        }
                    }
                }
            }
        }
        toc_arches.sort_unstable();
        toc_arches.dedup();
        for arch in toc_arches {
            if !self.has_arch(arch) {
                findings.push(ArchiveProblem::ArchNotListed {
                    arch: arch.to_owned(),
                });
            }
        }
        for key in self.binaries() {
            if !key_has_index(key) {
                findings.push(ArchiveProblem::KeyWithoutIndex {
                    key: key.to_owned(),
                });
            }
        }
        let mut all_arches: Vec<&str> = self
            .entries()
            .map(|e| e.arch())
            .chain(self.arches().iter().map(String::as_str))
            .collect();
        all_arches.sort_unstable();
        all_arches.dedup();
        for arch in all_arches {
            if !arch_is_target(arch) {
                findings.push(ArchiveProblem::BadArch {
                    arch: arch.to_owned(),
                });
            }
        }
        for key in self.binaries() {
            if !kpack_fsafe::is_plain_relative(key) {
                findings.push(ArchiveProblem::UnsafeKey {
                    key: key.to_owned(),
                });
            }
        }
        findings
    }
}

/// Whether `key` ends in the `#<co_index>` the loader looks up.
fn key_has_index(key: &str) -> bool {
    key.rsplit_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `arch` is a target id (what a reader may build paths from).
fn arch_is_target(arch: &str) -> bool {
    kpack_amdgpu::TargetId::parse(arch).is_ok()
}

/// What [`Archive::verify`] reports about an entry's key and arch alone
/// (and a `gfx_arches` element, with `key` `None`), in its order: for
/// writers that must not write what `verify` would reject.
pub(crate) fn name_problems(key: Option<&str>, arch: &str) -> Vec<ArchiveProblem> {
    let mut found = Vec::new();
    if let Some(key) = key
        && !key_has_index(key)
    {
        found.push(ArchiveProblem::KeyWithoutIndex {
            key: key.to_owned(),
        });
    }
    if !arch_is_target(arch) {
        found.push(ArchiveProblem::BadArch {
            arch: arch.to_owned(),
        });
    }
    if let Some(key) = key
        && !kpack_fsafe::is_plain_relative(key)
    {
        found.push(ArchiveProblem::UnsafeKey {
            key: key.to_owned(),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

    use super::*;
    use crate::{ArchiveWriter, Compression, WriterOptions};

    /// Write one archive holding `entries` (key, arch) of a fixed kernel.
    fn write(dir: &Path, entries: &[(&str, &str)], compression: Compression) -> Vec<u8> {
        let path = dir.join("a.kpack");
        let options = WriterOptions {
            group_name: "g".into(),
            gfx_arch_family: "fam".into(),
            compression,
            ..Default::default()
        };
        let mut writer = ArchiveWriter::create(&path, options).unwrap();
        for (key, arch) in entries {
            writer.add(key, arch, &[0x5a; 300]).unwrap();
        }
        writer.finish().unwrap();
        std::fs::read(&path).unwrap()
    }

    fn findings(bytes: Vec<u8>) -> Vec<String> {
        Archive::from_bytes(bytes)
            .unwrap()
            .verify()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_well_formed_archive_has_no_findings() {
        let dir = tempfile::tempdir().unwrap();
        for compression in [Compression::None, Compression::Zstd { level: 3 }] {
            let bytes = write(dir.path(), &[("lib/a.so#0", "gfx1100")], compression);
            assert_eq!(findings(bytes), Vec::<String>::new());
        }
    }

    #[test]
    fn reports_a_key_without_co_index() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write(
            dir.path(),
            &[("lib/a.so", "gfx1100"), ("lib/b.so#", "gfx1100")],
            Compression::None,
        );
        assert_eq!(
            findings(bytes),
            [
                "key \"lib/a.so\" has no #<co_index> suffix; the current loader cannot look it up",
                "key \"lib/b.so#\" has no #<co_index> suffix; the current loader cannot look it up",
            ]
        );
    }

    #[test]
    fn reports_an_arch_missing_from_gfx_arches() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = write(dir.path(), &[("a#0", "gfx1100")], Compression::None);
        // gfx_arches is the only one-element array of "gfx1100"; rename
        // its element so the TOC arch is no longer listed.
        let listed = b"\x91\xa7gfx1100";
        let at = bytes
            .windows(listed.len())
            .position(|w| w == listed)
            .unwrap();
        bytes[at + listed.len() - 1] = b'1';
        assert_eq!(
            findings(bytes),
            ["TOC arch \"gfx1100\" is missing from gfx_arches, so AMD's loader never finds it"]
        );
    }

    /// Replace every `from` in `bytes` by `to` (same length).
    fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
        assert_eq!(from.len(), to.len());
        let mut hits = 0;
        for i in 0..=bytes.len() - from.len() {
            if &bytes[i..i + from.len()] == from {
                bytes[i..i + from.len()].copy_from_slice(to);
                hits += 1;
            }
        }
        assert!(hits > 0);
    }

    #[test]
    fn reports_arches_that_are_not_target_ids_and_keys_that_escape() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write(dir.path(), &[("lib/a.so#0", "gfx1100")], Compression::None);
        let mut arch = bytes.clone();
        patch(&mut arch, b"gfx1100", b"../../X");
        assert_eq!(
            findings(arch),
            ["arch \"../../X\" is not an AMDGPU target id; a reader would build paths from it"]
        );
        for bad in [
            &b"../a.so#0X"[..],
            b"lib/\0.so#0",
            b"/lb/a.so#0",
            b"lib//a.s#0",
            // Windows: `..\` climbs, `C:/` is absolute.
            b"..\\a.so#0X",
            b"C:/a.so#0X",
        ] {
            let mut key = bytes.clone();
            patch(&mut key, b"lib/a.so#0", bad);
            let found = match Archive::from_bytes(key) {
                Ok(a) => a.verify().iter().map(ToString::to_string).collect(),
                Err(e) => vec![format!("refused on open: {e}")],
            };
            let want = format!(
                "key {:?} is not a plain relative path; it would escape an extraction directory",
                std::str::from_utf8(bad).unwrap()
            );
            assert!(found.contains(&want), "{bad:?}: {found:?}");
        }
    }

    #[test]
    fn reports_an_entry_that_does_not_decode() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = write(
            dir.path(),
            &[("a#0", "gfx1100")],
            Compression::Zstd { level: 3 },
        );
        let archive = Archive::from_bytes(bytes.clone()).unwrap();
        let entry = archive.entries().next().unwrap();
        // Corrupt the last byte of the frame (inside its compressed data).
        let last = (entry.stored_offset() + entry.stored_size() - 1) as usize;
        bytes[last] ^= 0xff;
        let found = findings(bytes);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("entry \"a#0\" \"gfx1100\": "),
            "{found:?}"
        );
    }

    #[test]
    fn an_archive_that_does_not_open_is_a_finding_and_a_missing_file_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = write(dir.path(), &[("a#0", "gfx1100")], Compression::None);
        let truncated = dir.path().join("truncated.kpack");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        let found = verify(&truncated).unwrap();
        assert!(
            matches!(found[..], [ArchiveProblem::Invalid(_)]),
            "{found:?}"
        );
        let missing = verify(dir.path().join("missing.kpack")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::FileNotFound);
        let empty = dir.path().join("empty.kpack");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(verify(&empty).unwrap_err().kind(), ErrorKind::Io);
    }
}
