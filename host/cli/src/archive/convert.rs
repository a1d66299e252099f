//! `kpack archive convert IN... -o OUTDIR --compression S`: re-encode
//! archives without losing a byte of any code object.
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
//! Entry metadata is carried over; outputs are written to a temp file and
//! renamed (the writer's staging), refused when they exist unless
//! `--force`, and never the same file as an input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kpack_amdgpu::{Level, processor_of};
use kpack_format::{ArchiveWriter, Compression, WriterOptions};
use kpack_fsafe::{Existing, Order, Outputs};

use crate::exit::CliResult;

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

/// Run `kpack archive convert`.
pub fn convert(files: &[PathBuf], out: &Path, compression: Compression, force: bool) -> CliResult {
    Ok(run(files, out, compression, force)?)
}

fn run(files: &[PathBuf], out: &Path, compression: Compression, force: bool) -> anyhow::Result<()> {
    crate::safety::not_stdout(out, "archive convert")?;
    let (group, listed, items) = read_inputs(files)?;
    // The group name comes from the inputs' TOCs and names the outputs.
    let origin = files.first().map_or(out, PathBuf::as_path);
    kpack_fsafe::input_name(origin, "TOC group_name", &group)?;
    let planned = plan(out, &group, &listed, &items, compression)?;
    for o in &planned {
        for file in files {
            crate::safety::not_same_file(file, &o.path)?;
        }
    }
    let mut outputs = Outputs::create(out, "convert", Existing::from_force(force))?;
    let mut written = Vec::new();
    for o in &planned {
        let name = o.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let options = WriterOptions {
            group_name: group.clone(),
            gfx_arch_family: o.family.clone(),
            gfx_arches: Some(o.arches.clone()),
            compression,
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(outputs.plan(name, Order::First)?, options)?;
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
    for (mut w, dest) in written.into_iter().zip(outputs.commit()?) {
        w.path = dest;
        super::print_written(&w);
    }
    Ok(())
}

/// Every entry of every input, decoded: the inputs' common group name,
/// the arches their TOCs list (with those of the entries; sorted, each
/// once), and the entries.
fn read_inputs(files: &[PathBuf]) -> anyhow::Result<(String, Vec<String>, Vec<Item>)> {
    let mut group: Option<String> = None;
    let mut listed: Vec<String> = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    for file in files {
        let a = super::open(file)?;
        match &group {
            None => group = Some(a.group_name().to_owned()),
            Some(g) if g != a.group_name() => bail!(
                "{}: group_name {:?} differs from {g:?} of the inputs before it; \
                 convert one group at a time",
                file.display(),
                a.group_name()
            ),
            Some(_) => {}
        }
        listed.extend(a.arches().iter().cloned());
        for e in a.entries() {
            let bytes = a
                .read(e)
                .with_context(|| {
                    format!("{}: cannot decode {} {}", file.display(), e.key(), e.arch())
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
        bail!("the inputs have an empty group_name: no archive name to write");
    }
    crate::safety::plain_name("group_name", &group)?;
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
) -> anyhow::Result<Vec<Output<'a>>> {
    let mut outputs = Vec::new();
    if let Compression::ZstdDelta { .. } = compression {
        let label = family_label(listed);
        let path = out.join(kpack_format::archive_file_name(group, &label));
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
        crate::safety::plain_name("processor", p)?;
        let arches: Vec<String> = listed
            .iter()
            .filter(|a| processor_of(a) == p)
            .cloned()
            .collect();
        let path = out.join(kpack_format::archive_file_name(group, p));
        outputs.push(Output {
            path,
            family: p.to_owned(),
            arches,
            members,
        });
    }
    Ok(outputs)
}
