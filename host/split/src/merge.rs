//! One archive per artifact and target (AMD's naming, `--archive-per
//! artifact` and AMD's wheel layout): the per-binary archives a split
//! writes, merged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_format::{Archive, ArchiveWriter, Compression, WriterOptions};
use kpack_fsafe::Tree;
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Replace the per-binary archives `parts` (processor, path) with one
/// archive per target id and processor, `<group>_<target id>.kpack` in
/// the same directory, storing with `compression`. Processors are merged
/// in parallel; each archive's bytes depend only on its entries.
pub fn merge_archives(
    parts: &[(String, PathBuf)],
    group: &str,
    compression: Compression,
    scratch: &Path,
) -> Result<()> {
    let mut by_processor: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
    for (p, path) in parts {
        by_processor.entry(p).or_default().push(path);
    }
    by_processor
        .par_iter()
        .map(|(p, files)| merge_processor(p, files, group, compression, scratch))
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// [`merge_archives`] for one processor's archives `files` (one directory).
fn merge_processor(
    processor: &str,
    files: &[&Path],
    group: &str,
    compression: Compression,
    scratch: &Path,
) -> Result<()> {
    let Some(dir) = files.first().and_then(|f| f.parent()) else {
        return Ok(());
    };
    let stage = scratch.join(processor);
    Tree::create(scratch)
        .and_then(|t| t.create_dir_all(Path::new(processor)))
        .map_err(|e| Error::io(&stage, "cannot create", e))?;
    let mut writers: BTreeMap<String, ArchiveWriter> = BTreeMap::new();
    for f in files {
        let a = Archive::open(f)
            .map_err(|e| Error::invalid(*f, "cannot read a split archive").with_source(e))?;
        for e in a.entries() {
            let arch = e.arch().to_string();
            let w = match writers.entry(arch.clone()) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let dest = stage.join(kpack_format::archive_file_name(group, &arch));
                    let options = WriterOptions {
                        group_name: group.to_string(),
                        gfx_arch_family: arch.clone(),
                        gfx_arches: Some(vec![arch.clone()]),
                        compression,
                        ..Default::default()
                    };
                    v.insert(ArchiveWriter::create(&dest, options).map_err(|e| {
                        Error::invalid(&dest, "cannot create the archive").with_source(e)
                    })?)
                }
            };
            let bytes = a
                .read(e)
                .map_err(|x| Error::invalid(*f, format!("entry {}", e.key())).with_source(x))?;
            w.add(e.key(), e.arch(), &bytes)
                .map_err(|x| Error::invalid(*f, format!("entry {}", e.key())).with_source(x))?;
        }
    }
    let mut done = Vec::new();
    for w in writers.into_values() {
        let written = w
            .finish()
            .map_err(|e| Error::invalid(&stage, "cannot write an archive").with_source(e))?;
        done.push(written.path);
    }
    for f in files {
        std::fs::remove_file(f).map_err(|e| Error::io(*f, "cannot remove", e))?;
    }
    let into = Tree::open(dir).map_err(|e| Error::io(dir, "cannot open", e))?;
    for p in done {
        let Some(name) = p.file_name() else { continue };
        let dest = dir.join(name);
        into.adopt(&p, Path::new(name))
            .map_err(|e| Error::io(&dest, "cannot move into place", e))?;
    }
    Ok(())
}
