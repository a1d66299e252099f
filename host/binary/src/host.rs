//! One host-binary type over ELF (x86-64, aarch64) and PE: what every
//! command that reads, offloads, prunes or verifies a host binary takes.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kpack_bundle::{HostLayout, Item, ReadAt, SizedFile, WalkOptions};
use kpack_elf::{ElfKind, Machine};

use crate::kind::FileKind;

/// Why a host binary could not be read or rewritten. Each message names
/// the file; the cause is the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or rewriting an ELF file failed.
    #[error(transparent)]
    Elf(#[from] kpack_elf::Error),
    /// Reading or rewriting a PE image failed.
    #[error(transparent)]
    Pe(#[from] kpack_pe::Error),
    /// Reading the file's first bytes, or writing the output, failed.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// A bundle could not be read (`inspect`).
    #[error("{}: bundle {index}", path.display())]
    Bundle {
        /// The file.
        path: PathBuf,
        /// The bundle's position in the file.
        index: usize,
        /// The cause.
        #[source]
        source: kpack_bundle::Error,
    },
    /// A host-only binary's marker could not be read or parsed, or its
    /// real path resolved (`what` says which; `error` is the reason).
    #[error("{}: {what}: {error}", path.display())]
    Marker {
        /// The binary.
        path: PathBuf,
        /// `cannot read the marker`, `unreadable marker`, `cannot resolve`.
        what: &'static str,
        /// Why.
        error: String,
    },
    /// The rewritten image failed its own checks (a kpack bug: nothing is
    /// written).
    #[error("{}: the transformed binary failed verification: {}", path.display(), joined(findings))]
    Verify {
        /// The input binary.
        path: PathBuf,
        /// The findings.
        findings: Vec<kpack_format::Finding>,
    },
}

/// The messages of `findings`, `; `-separated.
fn joined(findings: &[kpack_format::Finding]) -> String {
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    messages.join("; ")
}

impl Error {
    /// The file's format is one kpack reads but cannot rewrite (32-bit,
    /// big-endian, another machine): such a file has no device code kpack
    /// can move, and is shipped as it is.
    pub fn is_unsupported(&self) -> bool {
        let kind = match self {
            Error::Elf(e) => e.kind(),
            Error::Pe(e) => e.kind(),
            _ => return false,
        };
        kind == kpack_bundle::HostErrorKind::Unsupported
    }
}

/// What [`HostBinary::host_only_marker`] finds.
#[derive(Debug, Clone)]
pub struct HostOnly {
    /// The binary's real path (symlinks resolved).
    pub real: PathBuf,
    /// Its marker.
    pub marker: kpack_format::Marker,
    /// The code-object indices its wrappers name, sorted, each once.
    pub indices: Vec<u32>,
}

/// The host formats kpack rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFormat {
    /// ELF for a known machine, or a bare bundle / code-object file read
    /// by the ELF reader (`machine` is `None` then).
    Elf(Option<Machine>),
    /// A Windows PE32+ image.
    Pe,
}

/// A host binary's device code, read by the reader of its format.
pub enum HostBinary {
    /// An ELF executable, shared library, object, or a bare bundle file.
    Elf(kpack_elf::FatBinary),
    /// A PE image (DLL, EXE).
    Pe(kpack_pe::FatBinary),
}

/// What rewriting a host binary did, in its format's terms. Serialized as
/// the format's own report (untagged).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum TransformReport {
    /// The ELF transform's report.
    Elf(kpack_elf::TransformReport),
    /// The PE transform's report.
    Pe(kpack_pe::TransformReport),
}

impl TransformReport {
    /// Input size in bytes.
    pub fn input_size(&self) -> u64 {
        match self {
            TransformReport::Elf(r) => r.input_size,
            TransformReport::Pe(r) => r.input_size,
        }
    }

    /// Output size in bytes.
    pub fn output_size(&self) -> u64 {
        match self {
            TransformReport::Elf(r) => r.output_size,
            TransformReport::Pe(r) => r.output_size,
        }
    }
}

impl HostBinary {
    /// Read `path`'s device code: a PE image by its magic, anything else
    /// through the ELF reader (host ELF files and bare bundle files).
    pub fn read(path: &Path, walk: WalkOptions) -> Result<HostBinary, Error> {
        let kind = FileKind::of_path(path)
            .map_err(|source| kpack_fsafe::IoError::new(path, "cannot read", source))?;
        Ok(match kind {
            FileKind::Pe => HostBinary::Pe(kpack_pe::read_fat_binary(path, walk)?),
            _ => HostBinary::Elf(kpack_elf::read_fat_binary(path, walk)?),
        })
    }

    /// Its format.
    pub fn format(&self) -> HostFormat {
        match self {
            HostBinary::Elf(f) => HostFormat::Elf(f.machine),
            HostBinary::Pe(_) => HostFormat::Pe,
        }
    }

    /// Its offload layout, the same for every format: wrappers, bundles,
    /// the device-code and marker sections, the file.
    pub fn layout(&self) -> &dyn HostLayout {
        match self {
            HostBinary::Elf(f) => f,
            HostBinary::Pe(f) => f,
        }
    }

    /// The bundles its wrappers (or the whole file) hold, in file order.
    pub fn bundles(&self) -> &[Item] {
        self.layout().bundles()
    }

    /// The file, to read bundles from.
    pub fn source(&self) -> &SizedFile {
        self.layout().source()
    }

    /// Every wrapper is HIPK: offloaded by kpack.
    pub fn is_transformed(&self) -> bool {
        self.layout().is_transformed()
    }

    /// Some wrapper is still HIPF (its device code in the file).
    pub fn has_pending_wrappers(&self) -> bool {
        self.layout().has_pending_wrappers()
    }

    /// The code-object index each wrapper's reserved word names (the
    /// `#<index>` of its TOC keys once offloaded).
    pub fn wrapper_indices(&self) -> Vec<u32> {
        self.layout().wrapper_indices()
    }

    /// Target ids of its device code, sorted, each once.
    pub fn targets(&self) -> Vec<String> {
        self.layout().targets()
    }

    /// A relocatable object or a bare bundle file: device code a linker
    /// (or the runtime, as a file) takes as it is, never rewritten here.
    pub fn is_link_input(&self) -> bool {
        matches!(
            self,
            HostBinary::Elf(kpack_elf::FatBinary {
                kind: ElfKind::Rel | ElfKind::BundleFile,
                ..
            })
        )
    }

    /// The name of its format's marker section: `.rocm_kpack_ref` (ELF),
    /// `.kpackrf` (PE).
    pub fn marker_section(&self) -> &'static str {
        match self {
            HostBinary::Elf(_) => kpack_elf::MARKER_SECTION,
            HostBinary::Pe(_) => kpack_pe::MARKER_SECTION,
        }
    }

    /// Of a host-only binary (read from `path`) with a marker: the file a
    /// process maps (its real path, which the loader is handed), the
    /// marker, and the code-object indices its wrappers name, sorted.
    /// `None` for a binary with device code in it, or without a marker.
    pub fn host_only_marker(&self, path: &Path) -> Result<Option<HostOnly>, Error> {
        if !self.is_transformed() || !self.bundles().is_empty() {
            return Ok(None);
        }
        let Some(bytes) = self.read_marker() else {
            return Ok(None);
        };
        let fail = |what, error: String| Error::Marker {
            path: path.to_path_buf(),
            what,
            error,
        };
        let bytes = bytes.map_err(|e| fail("cannot read the marker", e.to_string()))?;
        let marker = kpack_format::Marker::parse(&bytes)
            .map_err(|e| fail("unreadable marker", e.to_string()))?;
        let mut indices = self.wrapper_indices();
        indices.sort_unstable();
        indices.dedup();
        let real =
            std::fs::canonicalize(path).map_err(|e| fail("cannot resolve", e.to_string()))?;
        Ok(Some(HostOnly {
            real,
            marker,
            indices,
        }))
    }

    /// The marker section's file bytes (`.rocm_kpack_ref`, or `.kpackrf`
    /// in a PE image), at most [`kpack_format::MARKER_MAX_LEN`]: `None`
    /// without a marker section.
    pub fn read_marker(&self) -> Option<std::io::Result<Vec<u8>>> {
        let marker = self.layout().marker()?;
        let len =
            usize::try_from(marker.size.min(kpack_format::MARKER_MAX_LEN as u64)).unwrap_or(0);
        let mut bytes = vec![0u8; len];
        Some(
            self.source()
                .read_exact_at(marker.offset, &mut bytes)
                .map(|()| bytes),
        )
    }

    /// Rewrite `input` (the file this was read from) host-only into `out`
    /// with `marker` mapped in, and check the result with the format's
    /// structural checks ([`Error::Verify`] when they find anything).
    /// `out` is left at the end of the output.
    pub fn transform_into(
        &self,
        input: &Path,
        marker: &[u8],
        out: &mut std::fs::File,
    ) -> Result<TransformReport, Error> {
        let io = |what, source| kpack_fsafe::IoError::new(input, what, source);
        let verify_failed = |findings: Vec<kpack_format::Finding>| Error::Verify {
            path: input.to_path_buf(),
            findings,
        };
        match self {
            HostBinary::Elf(fat) => {
                let (_, report) = kpack_elf::transform_to(input, fat, marker, &mut *out)?;
                // Read back through a cache of the pages the checks touch,
                // never the whole image.
                let findings = kpack_elf::verify_image(&object::ReadCache::new(&*out))
                    .unwrap_or_else(|e| {
                        vec![kpack_format::Finding::error(
                            "elf",
                            kpack_format::error_chain(&e),
                        )]
                    });
                if findings
                    .iter()
                    .any(|f| f.severity == kpack_format::Severity::Error)
                {
                    return Err(verify_failed(findings));
                }
                out.seek(SeekFrom::End(0))
                    .map_err(|e| io("cannot write", e))?;
                Ok(TransformReport::Elf(report))
            }
            HostBinary::Pe(fat) => {
                let (image, report) = kpack_pe::transform(input, fat, marker)?;
                let findings = kpack_pe::verify_image(&image);
                if !findings.is_empty() {
                    return Err(verify_failed(findings));
                }
                out.write_all(&image).map_err(|e| io("cannot write", e))?;
                Ok(TransformReport::Pe(report))
            }
        }
    }
}
