//! `kpack archive replace` and `kpack archive merge`: archive surgery.
//!
//! - `replace BASE --from NEW --keys GLOB... [--add] -o OUT`: BASE with the
//!   entries of NEW whose key matches a glob put in place of its own (a
//!   code-coverage build's kernels swapped into a normal build's archive);
//!   every such entry's arch must be one BASE lists, and its (key, arch)
//!   one BASE has unless `--add`.
//! - `merge A B... -o OUT`: every entry of every input in one archive;
//!   the same (key, arch) twice is an error naming both files.
//!
//! The output keeps the first input's TOC header (group, family, arches
//! with any new ones appended, scheme) and is written in sorted order at
//! the given zstd level, so it depends only on the entries: replacing and
//! replacing back gives the original bytes of an archive kpack wrote at
//! that level. Every code object is decoded and re-encoded (v1 or v2
//! alike), so its recorded sha256 is its own. Written through the
//! archive writer's temp file and rename; never over an input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kpack_format::{Archive, ArchiveWriter, Compression, Scheme, WriterOptions};

use crate::exit::CliResult;

/// One entry of the output: its bytes and metadata, and the file it comes
/// from (for messages).
struct Item {
    bytes: Vec<u8>,
    metadata: Vec<(String, String)>,
    from: PathBuf,
}

/// The output's entries by (key, arch), sorted.
type Items = BTreeMap<(String, String), Item>;

/// Run `kpack archive replace`.
pub fn replace(
    base: &Path,
    from: &Path,
    keys: &[String],
    add: bool,
    output: &Path,
    level: i32,
    force: bool,
) -> CliResult {
    let out = Out {
        path: output,
        level,
        force,
    };
    Ok(replace_entries(base, from, keys, add, &out)?)
}

/// Where and how the output is written.
struct Out<'a> {
    path: &'a Path,
    level: i32,
    force: bool,
}

fn replace_entries(
    base: &Path,
    from: &Path,
    keys: &[String],
    add: bool,
    out: &Out<'_>,
) -> anyhow::Result<()> {
    let (output, level, force) = (out.path, out.level, out.force);
    let patterns: Vec<glob::Pattern> = keys
        .iter()
        .map(|k| glob::Pattern::new(k).with_context(|| format!("--keys {k:?}")))
        .collect::<anyhow::Result<_>>()?;
    check_output(&[base, from], output, force)?;
    let base_archive = super::open(base)?;
    let new = super::open(from)?;
    let mut items = Items::new();
    add_all(&mut items, &base_archive, base, false)?;
    let mut used = vec![false; patterns.len()];
    let mut replaced = 0usize;
    for e in new.entries() {
        let hits: Vec<usize> = (0..patterns.len())
            .filter(|&i| patterns[i].matches(e.key()))
            .collect();
        if hits.is_empty() {
            continue;
        }
        for i in hits {
            used[i] = true;
        }
        if !base_archive.has_arch(e.arch()) {
            bail!(
                "{}: entry {:?} is for arch {:?}, which {} does not list (its arches: {})",
                from.display(),
                e.key(),
                e.arch(),
                base.display(),
                base_archive.arches().join(", ")
            );
        }
        let slot = (e.key().to_owned(), e.arch().to_owned());
        if !items.contains_key(&slot) && !add {
            bail!(
                "{}: entry {:?} {:?} is not in {}; pass --add to add it",
                from.display(),
                e.key(),
                e.arch(),
                base.display()
            );
        }
        items.insert(slot, decode(&new, e, from)?);
        replaced += 1;
    }
    if let Some(i) = used.iter().position(|u| !u) {
        bail!(
            "--keys {:?} matches no entry of {}",
            keys[i],
            from.display()
        );
    }
    let arches = base_archive.arches().to_vec();
    write(&base_archive, arches, &items, output, level)?;
    eprintln!(
        "replaced {replaced} of {} entries from {}",
        items.len(),
        from.display()
    );
    Ok(())
}

/// Run `kpack archive merge`.
pub fn merge(files: &[PathBuf], output: &Path, level: i32, force: bool) -> CliResult {
    Ok(merge_all(files, output, level, force)?)
}

fn merge_all(files: &[PathBuf], output: &Path, level: i32, force: bool) -> anyhow::Result<()> {
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    check_output(&inputs, output, force)?;
    let archives: Vec<Archive> = files
        .iter()
        .map(|f| super::open(f))
        .collect::<anyhow::Result<_>>()?;
    let mut items = Items::new();
    let mut arches: Vec<String> = Vec::new();
    for (a, file) in archives.iter().zip(files) {
        add_all(&mut items, a, file, true)?;
        for arch in a.arches() {
            if !arches.contains(arch) {
                arches.push(arch.clone());
            }
        }
    }
    write(&archives[0], arches, &items, output, level)?;
    Ok(())
}

/// Refuse an output that is an input or exists (unless `force`).
fn check_output(inputs: &[&Path], output: &Path, force: bool) -> anyhow::Result<()> {
    crate::safety::not_stdout(output, "archive replace/merge")?;
    for i in inputs {
        crate::safety::not_same_file(i, output)?;
    }
    crate::safety::not_existing(output, force)?;
    Ok(())
}

/// Every entry of `a` (read from `file`) into `items`; with `disjoint`, a
/// (key, arch) already there is an error naming both files.
fn add_all(items: &mut Items, a: &Archive, file: &Path, disjoint: bool) -> anyhow::Result<()> {
    for e in a.entries() {
        let slot = (e.key().to_owned(), e.arch().to_owned());
        if disjoint && let Some(there) = items.get(&slot) {
            bail!(
                "{}: entry {:?} {:?} is also in {}; merge needs disjoint entries",
                file.display(),
                e.key(),
                e.arch(),
                there.from.display()
            );
        }
        items.insert(slot, decode(a, e, file)?);
    }
    Ok(())
}

/// The decoded code object of `e` and its metadata.
fn decode(a: &Archive, e: &kpack_format::Entry, file: &Path) -> anyhow::Result<Item> {
    let bytes = a
        .read(e)
        .with_context(|| {
            format!(
                "{}: cannot decode {:?} {:?}",
                file.display(),
                e.key(),
                e.arch()
            )
        })?
        .into_owned();
    Ok(Item {
        bytes,
        metadata: e.metadata().to_vec(),
        from: file.to_path_buf(),
    })
}

/// Write `items` to `output` with `first`'s header and scheme.
fn write(
    first: &Archive,
    arches: Vec<String>,
    items: &Items,
    output: &Path,
    level: i32,
) -> anyhow::Result<()> {
    let compression = match first.scheme() {
        Scheme::None => Compression::None,
        Scheme::ZstdPerKernel => Compression::Zstd { level },
        Scheme::ZstdDelta => Compression::ZstdDelta { level },
    };
    let options = WriterOptions {
        group_name: first.group_name().to_owned(),
        gfx_arch_family: first.gfx_arch_family().to_owned(),
        gfx_arches: Some(arches),
        compression,
        ..Default::default()
    };
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut w = ArchiveWriter::create(output, options)?;
    for ((key, arch), item) in items {
        let metadata: Vec<(&str, &str)> = item
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        w.add_with_metadata(key, arch, &item.bytes, &metadata)?;
    }
    super::print_written(&w.finish()?);
    Ok(())
}
