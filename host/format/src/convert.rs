//! Re-encode archives without losing a byte of any code object
//! (`kpack archive convert`).
//!
//! - `zstd-delta`: every entry of every input goes into one KPAK v2 archive,
//!   `OUTDIR/<group>_<label>.kpack`, where `label` is the narrowest level of
//!   ROCm's packaging hierarchy all the arches share (`gfx1100` alone, then
//!   the sub-family `gfx110x`, then the family `gfx11`, else `all`).
//! - `zstd` / `none`: one archive per processor, `OUTDIR/<group>_<processor>.kpack`
//!   with `gfx_arch_family` = the processor: the names and TOC `kpack
//!   offload` writes and markers' `@GFXARCH@` paths find, so a per-target
//!   archive converted to delta and back is byte-identical to the original.
//!
//! The group comes from the inputs' TOC `group_name` (they must agree).
//! Entry metadata is carried over; the outputs go through
//! [`kpack_fsafe::Outputs`] (staged, committed whole), refused when they
//! exist unless the options replace them, and never the same file as an
//! input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_amdgpu::{Level, processor_of};
use kpack_fsafe::{Existing, Order, Outputs};

use crate::read::Archive;
use crate::write::{ArchiveWriter, Compression, WriterOptions, Written};

/// Where and how [`convert`] writes.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// The directory the archives go into.
    pub output_dir: PathBuf,
    /// The scheme (and level) they are written with.
    pub compression: Compression,
    /// What an existing output means: refused, or replaced.
    pub existing: Existing,
}

/// Why [`convert`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// An input or output path was refused, or staging failed.
    #[error(transparent)]
    Fsafe(#[from] kpack_fsafe::Error),
    /// An archive could not be read or written.
    #[error(transparent)]
    Format(#[from] crate::Error),
    /// The inputs name different groups.
    #[error(
        "{}: group_name {found:?} differs from {expected:?} of the inputs before it; \
         convert one group at a time",
        path.display()
    )]
    GroupDiffers {
        /// The input whose group differs.
        path: PathBuf,
        /// Its group.
        found: String,
        /// The group of the inputs before it.
        expected: String,
    },
    /// An entry did not decode.
    #[error("{}: cannot decode {key} {arch}", path.display())]
    Decode {
        /// The input.
        path: PathBuf,
        /// The entry's key.
        key: String,
        /// The entry's arch.
        arch: String,
        /// Why.
        #[source]
        source: Box<crate::Error>,
    },
    /// The inputs' group is empty: nothing names the outputs.
    #[error("the inputs have an empty group_name: no archive name to write")]
    EmptyGroup,
}

/// One code object read from an input.
struct Item {
    key: String,
    arch: String,
    bytes: Vec<u8>,
    metadata: Vec<(String, String)>,
}

/// The file-name label of a family archive holding `arches`.
fn family_label(arches: &[String]) -> String {
    for level in [Level::Target, Level::SubFamily, Level::Family] {
        let keys: Vec<Option<String>> = arches
            .iter()
            .map(|a| kpack_amdgpu::bundle_key(a, level))
            .collect();
        if let Some(Some(first)) = keys.first()
            && keys.iter().all(|k| k.as_ref() == Some(first))
        {
            return first.clone();
        }
    }
    "all".to_owned()
}

/// Re-encode every entry of `files` into the archives of
/// `options.output_dir`; what each archive written holds, at its final
/// path.
pub fn convert(files: &[PathBuf], options: &ConvertOptions) -> Result<Vec<Written>, ConvertError> {
    let out = options.output_dir.as_path();
    let (group, listed, items) = read_inputs(files)?;
    // The group name comes from the inputs' TOCs and names the outputs.
    let origin = files.first().map_or(out, PathBuf::as_path);
    kpack_fsafe::input_name(origin, "TOC group_name", &group)?;
    let planned = plan(out, &group, &listed, &items, options.compression)?;
    for o in &planned {
        for file in files {
            kpack_fsafe::not_same_file(file, &o.path)?;
        }
    }
    let mut outputs = Outputs::create(out, "convert", options.existing)?;
    let mut written = Vec::new();
    for o in &planned {
        let name = o.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let writer_options = WriterOptions {
            group_name: group.clone(),
            gfx_arch_family: o.family.clone(),
            gfx_arches: Some(o.arches.clone()),
            compression: options.compression,
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(outputs.plan(name, Order::First)?, writer_options)?;
        outputs.check_existing()?;
        for item in &o.members {
            let metadata: Vec<(&str, &str)> = item
                .metadata
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            w.add_with_metadata(&item.key, &item.arch, &item.bytes, &metadata)?;
        }
        written.push(w.finish()?);
    }
    for (w, dest) in written.iter_mut().zip(outputs.commit()?) {
        w.path = dest;
    }
    Ok(written)
}

/// The inputs' common group name, the arches their TOCs list (with those
/// of the entries; sorted, each once), and every entry, decoded.
type Inputs = (String, Vec<String>, Vec<Item>);

/// Every entry of every input, decoded ([`Inputs`]).
fn read_inputs(files: &[PathBuf]) -> Result<Inputs, ConvertError> {
    let mut group: Option<String> = None;
    let mut listed: Vec<String> = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    for file in files {
        kpack_fsafe::regular_file(file)?;
        let a = Archive::open(file)?;
        match &group {
            None => group = Some(a.group_name().to_owned()),
            Some(g) if g != a.group_name() => {
                return Err(ConvertError::GroupDiffers {
                    path: file.clone(),
                    found: a.group_name().to_owned(),
                    expected: g.clone(),
                });
            }
            Some(_) => {}
        }
        listed.extend(a.arches().iter().cloned());
        for e in a.entries() {
            let bytes = a
                .read(e)
                .map_err(|source| ConvertError::Decode {
                    path: file.clone(),
                    key: e.key().to_owned(),
                    arch: e.arch().to_owned(),
                    source: Box::new(source),
                })?
                .into_owned();
            items.push(Item {
                key: e.key().to_owned(),
                arch: e.arch().to_owned(),
                bytes,
                metadata: e.metadata().to_vec(),
            });
        }
    }
    let group = group.unwrap_or_default();
    if group.is_empty() {
        return Err(ConvertError::EmptyGroup);
    }
    kpack_fsafe::plain_name("group_name", &group)?;
    listed.extend(items.iter().map(|i| i.arch.clone()));
    listed.sort();
    listed.dedup();
    Ok((group, listed, items))
}

/// One archive to write.
struct Output<'a> {
    path: PathBuf,
    /// Its `gfx_arch_family`.
    family: String,
    /// Its `gfx_arches`.
    arches: Vec<String>,
    members: Vec<&'a Item>,
}

/// The archives to write into `out`: one family archive for `zstd-delta`,
/// else one per processor.
fn plan<'a>(
    out: &Path,
    group: &str,
    listed: &[String],
    items: &'a [Item],
    compression: Compression,
) -> Result<Vec<Output<'a>>, ConvertError> {
    let mut outputs = Vec::new();
    if let Compression::ZstdDelta { .. } = compression {
        let label = family_label(listed);
        let path = out.join(crate::archive_file_name(group, &label));
        outputs.push(Output {
            path,
            family: label,
            arches: listed.to_vec(),
            members: items.iter().collect(),
        });
        return Ok(outputs);
    }
    let mut by_processor: BTreeMap<&str, Vec<&Item>> = BTreeMap::new();
    for item in items {
        by_processor
            .entry(processor_of(&item.arch))
            .or_default()
            .push(item);
    }
    for (p, members) in by_processor {
        kpack_fsafe::plain_name("processor", p)?;
        let arches: Vec<String> = listed
            .iter()
            .filter(|a| processor_of(a) == p)
            .cloned()
            .collect();
        let path = out.join(crate::archive_file_name(group, p));
        outputs.push(Output {
            path,
            family: p.to_owned(),
            arches,
            members,
        });
    }
    Ok(outputs)
}
