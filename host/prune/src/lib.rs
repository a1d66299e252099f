//! Keep only chosen GPU targets inside one file, so any HIP runtime (with
//! or without kpack support) loads the smaller file unchanged: the core of
//! `kpack prune` and `kpack wheel prune`.
//!
//! [`open`] tells what a file is and which targets it holds; [`Prunable::write`]
//! writes the pruned file atomically (temp file, then rename):
//! - linked ELF executables and shared libraries: every bundle of
//!   `.hip_fatbin` rewritten in place by [`kpack_elf::prune_to`];
//! - relocatable objects and static archives (link inputs of the new or the
//!   old offload driver): read whole (they are small next to linked
//!   libraries) and pruned by [`kpack_llvm_offload`].
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use kpack_amdgpu::TargetFilter;
use kpack_binary::FileKind;
use kpack_bundle::WalkOptions;
use serde::Serialize;

/// Why a file could not be read or pruned. Display names the file; the
/// cause is the `source`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file.
    #[error(transparent)]
    Io(#[from] kpack_fsafe::IoError),
    /// A linked binary that `kpack_elf` cannot read or rewrite.
    #[error("{}: cannot prune", path.display())]
    Elf {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<kpack_elf::Error>,
    },
    /// An object or static archive that `kpack_llvm_offload` cannot read or
    /// rewrite.
    #[error("{}: cannot prune", path.display())]
    LinkInput {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<kpack_llvm_offload::Error>,
    },
    /// A PE image (DLL, EXE): `kpack offload` splits those; pruning keeps
    /// to ELF files for now.
    #[error(
        "{}: PE images (DLL, EXE) cannot be pruned yet; `kpack offload` moves their device code into archives",
        path.display()
    )]
    PeUnsupported {
        /// The file.
        path: PathBuf,
    },
    /// A `--keep` item that is not a target id.
    #[error("invalid --keep target {item:?}")]
    InvalidKeep {
        /// The item as given.
        item: String,
        /// The cause.
        #[source]
        source: kpack_amdgpu::TargetIdError,
    },
    /// A `--keep` list without any target.
    #[error("--keep names no target: pruning would keep nothing")]
    EmptyKeep,
    /// Staging or renaming the output.
    #[error("{}: cannot write", path.display())]
    Output {
        /// The output file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<kpack_fsafe::IoError>,
    },
}

/// The targets to keep (`--keep`, repeatable, comma-separated), matched as
/// `--gpu-targets` is: `gfx90a` keeps every gfx90a variant, `gfx90a:xnack+`
/// only that one; generic and `-strict` ids are targets of their own. Each
/// item is also kept on its own, to tell which of them a file lacks.
#[derive(Debug, Clone)]
pub struct KeepList {
    items: Vec<(String, TargetFilter)>,
    filter: TargetFilter,
}

impl KeepList {
    /// Parse `--keep` values as clap hands them over (each may hold commas;
    /// blanks are ignored). No target at all is [`Error::EmptyKeep`].
    pub fn parse(values: &[String]) -> Result<KeepList, Error> {
        let names: Vec<String> = values
            .iter()
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        if names.is_empty() {
            return Err(Error::EmptyKeep);
        }
        let invalid = |item: &str| {
            let item = item.to_owned();
            move |source| Error::InvalidKeep { item, source }
        };
        let items = names
            .iter()
            .map(|t| {
                kpack_amdgpu::TargetPattern::parse(t)
                    .and_then(|_| TargetFilter::new(t, ""))
                    .map(|f| (t.clone(), f))
                    .map_err(invalid(t))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let filter = TargetFilter::from_lists(&names, &[]).map_err(invalid(&names.join(",")))?;
        Ok(KeepList { items, filter })
    }

    /// The filter of the whole list.
    pub fn filter(&self) -> &TargetFilter {
        &self.filter
    }

    /// The items as given, in order.
    pub fn names(&self) -> Vec<&str> {
        self.items.iter().map(|(t, _)| t.as_str()).collect()
    }

    /// The items that keep none of `targets` (what a file lacks).
    pub fn missing(&self, targets: &[String]) -> Vec<String> {
        self.items
            .iter()
            .filter(|(_, f)| !targets.iter().any(|t| f.keeps(t)))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// `targets` split into the kept and the dropped ones.
    pub fn partition(&self, targets: &[String]) -> (Vec<String>, Vec<String>) {
        targets.iter().cloned().partition(|t| self.filter.keeps(t))
    }
}

/// A file with device code that [`Prunable::write`] can slim.
pub struct Prunable {
    path: PathBuf,
    kind: Kind,
    targets: Vec<String>,
}

enum Kind {
    /// A linked executable or shared library.
    Linked(Box<kpack_elf::FatBinary>),
    /// A relocatable object or static archive, read whole.
    LinkInput { data: Vec<u8>, archive: bool },
}

/// What [`Prunable::write`] did: the report of the layer that pruned.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Pruned {
    /// A linked binary (`kpack_elf`).
    Linked(kpack_elf::PruneReport),
    /// An object or static archive (`kpack_llvm_offload`).
    LinkInput(kpack_llvm_offload::PruneReport),
}

impl Pruned {
    /// Size of the input in bytes.
    pub fn input_size(&self) -> u64 {
        match self {
            Pruned::Linked(r) => r.input_size,
            Pruned::LinkInput(r) => r.input_size,
        }
    }

    /// Size of the output in bytes.
    pub fn output_size(&self) -> u64 {
        match self {
            Pruned::Linked(r) => r.output_size,
            Pruned::LinkInput(r) => r.output_size,
        }
    }

    /// The layout a linked binary took (`in-place`, or `unchanged` when no
    /// page left the file); `sections-moved` for a link input.
    pub fn layout(&self) -> &'static str {
        match self {
            Pruned::Linked(r) => r.layout.map_or("unchanged", |l| l.name()),
            Pruned::LinkInput(_) => "sections-moved",
        }
    }

    /// Why each layout a linked binary did not take was refused, and how
    /// the one taken was bent to its segments' alignment.
    pub fn layout_notes(&self) -> &[String] {
        match self {
            Pruned::Linked(r) => &r.layout_notes,
            Pruned::LinkInput(_) => &[],
        }
    }

    /// One line saying what happened, `input -> output: ...`.
    pub fn summary(&self, input: &Path, output: &Path) -> String {
        let (input, output) = (input.display(), output.display());
        match self {
            Pruned::Linked(r) => format!(
                "{input} -> {output}: {} -> {} bytes ({} bytes left the file), {} bundle(s) rewritten, layout {}",
                r.input_size,
                r.output_size,
                r.bytes_removed,
                r.bundles,
                self.layout(),
            ),
            Pruned::LinkInput(r) => format!(
                "{input} -> {output}: {} -> {} bytes, {} section(s) rewritten in {} member(s), {} entries dropped",
                r.input_size, r.output_size, r.sections, r.members, r.entries_dropped,
            ),
        }
    }
}

/// Read `path` far enough to know whether it holds device code to prune.
/// `None` for anything else: a file that is neither ELF nor a static
/// archive, a host-only binary, one already offloaded by kpack (its device
/// code is in archives, not in the file), or a link input without device
/// code.
pub fn open(path: &Path, walk: WalkOptions) -> Result<Option<Prunable>, Error> {
    let io = |what| move |source| Error::Io(kpack_fsafe::IoError::new(path, what, source));
    let kind = FileKind::of_path(path).map_err(io("cannot read"))?;
    let archive = kind == FileKind::StaticArchive;
    match kind {
        FileKind::StaticArchive | FileKind::HostElf { linked: false, .. } => {}
        FileKind::HostElf { linked: true, .. } => return open_linked(path, walk),
        FileKind::Pe => {
            return Err(Error::PeUnsupported {
                path: path.to_path_buf(),
            });
        }
        _ => return Ok(None),
    }
    let data = std::fs::read(path).map_err(io("cannot read"))?;
    let targets = kpack_llvm_offload::device_targets(&data).map_err(|source| Error::LinkInput {
        path: path.to_path_buf(),
        source: Box::new(source),
    })?;
    Ok((!targets.is_empty()).then(|| Prunable {
        path: path.to_path_buf(),
        kind: Kind::LinkInput { data, archive },
        targets,
    }))
}

/// [`open`] for a linked ELF executable or shared library.
fn open_linked(path: &Path, walk: WalkOptions) -> Result<Option<Prunable>, Error> {
    let fat = match kpack_elf::read_fat_binary(path, walk) {
        Ok(fat) => fat,
        Err(e) if e.kind() == kpack_elf::ErrorKind::Unsupported => return Ok(None),
        Err(source) => {
            return Err(Error::Elf {
                path: path.to_path_buf(),
                source: Box::new(source),
            });
        }
    };
    if fat.is_transformed() || fat.bundles.is_empty() {
        return Ok(None);
    }
    Ok(Some(Prunable {
        path: path.to_path_buf(),
        targets: fat.targets(),
        kind: Kind::Linked(Box::new(fat)),
    }))
}

impl Prunable {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every GPU target of its device code, sorted.
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// Whether it is a relocatable object or static archive (a link
    /// input) rather than a linked binary.
    pub fn is_link_input(&self) -> bool {
        matches!(self.kind, Kind::LinkInput { .. })
    }

    /// Write the file to `output` (temp file beside it, then rename; the
    /// mode is the input's) keeping the host code and the device code of
    /// the targets `keep` accepts. Keeping none of them leaves host-only
    /// bundles (callers that refuse that check [`targets`](Self::targets)
    /// first).
    /// Bundles are inflated under `budget`, the run's.
    pub fn write(
        &self,
        output: &Path,
        keep: &TargetFilter,
        budget: &kpack_bundle::MemoryBudget,
    ) -> Result<Pruned, Error> {
        let out_err = |source: kpack_fsafe::IoError| Error::Output {
            path: output.to_path_buf(),
            source: Box::new(source),
        };
        match &self.kind {
            Kind::LinkInput { data, archive } => {
                let keep = |t: &str| keep.keeps(t);
                let pruned = if *archive {
                    kpack_llvm_offload::prune_archive(data, &keep, budget)
                } else {
                    kpack_llvm_offload::prune_object(data, &keep, budget)
                };
                let (image, report) = pruned.map_err(|source| Error::LinkInput {
                    path: self.path.clone(),
                    source: Box::new(source),
                })?;
                kpack_fsafe::write_atomically(output, "host", &image, Some(&self.path))
                    .map_err(out_err)?;
                Ok(Pruned::LinkInput(report))
            }
            Kind::Linked(fat) => {
                let mut staged = kpack_fsafe::Staged::new(output, "host").map_err(out_err)?;
                let (_, report) = kpack_elf::prune_to(
                    &self.path,
                    fat,
                    &|id| id.target().is_some_and(|t| keep.keeps_id(t)),
                    staged.file_mut(),
                    budget,
                )
                .map_err(|source| Error::Elf {
                    path: self.path.clone(),
                    source: Box::new(source),
                })?;
                staged.commit(Some(&self.path)).map_err(out_err)?;
                Ok(Pruned::Linked(report))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(values: &[&str]) -> Result<KeepList, Error> {
        KeepList::parse(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn keep_lists_split_commas_and_tell_what_a_file_lacks() {
        let keep = list(&["gfx90a, gfx1100", "gfx942:sramecc+"]).unwrap();
        assert_eq!(keep.names(), ["gfx90a", "gfx1100", "gfx942:sramecc+"]);
        let targets: Vec<String> = ["gfx90a:xnack+", "gfx942:sramecc-", "gfx1030"]
            .map(String::from)
            .to_vec();
        assert_eq!(keep.missing(&targets), ["gfx1100", "gfx942:sramecc+"]);
        let (kept, dropped) = keep.partition(&targets);
        assert_eq!(kept, ["gfx90a:xnack+"]);
        assert_eq!(dropped, ["gfx942:sramecc-", "gfx1030"]);
    }

    #[test]
    fn empty_and_invalid_keep_lists_are_errors() {
        assert!(matches!(list(&[" , "]), Err(Error::EmptyKeep)));
        match list(&["gfx90a", "gfx90a:xnack"]) {
            Err(Error::InvalidKeep { item, .. }) => assert_eq!(item, "gfx90a:xnack"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn files_without_device_code_are_not_prunable() {
        let dir = std::env::temp_dir().join(format!("kpack-prune-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("notes.txt");
        std::fs::write(&text, b"not a binary").unwrap();
        assert!(open(&text, WalkOptions::default()).unwrap().is_none());
        let missing = dir.join("missing.so");
        assert!(matches!(
            open(&missing, WalkOptions::default()),
            Err(Error::Io(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
