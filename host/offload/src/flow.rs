//! The offload flow, written once for every host format: read through the
//! front door, stage the host image beside adding the code objects, write
//! the archives, then commit the host binary.

use std::path::Path;

use kpack_amdgpu::TargetFilter;
use kpack_binary::{HostBinary, HostFormat, TransformReport};
use kpack_bundle::WalkOptions;
use kpack_format::{Marker, Written};

use kpack_fsafe::{Staged, copy_atomically};

use crate::{ArchiveSet, Error, OffloadOptions, Outcome, add_code_objects};

/// What [`offload`] did.
#[derive(Debug)]
pub struct Offload {
    /// What happened to the binary.
    pub outcome: Outcome,
    /// The archives written, by processor (or archive group), sorted.
    pub archives: Vec<(String, Written)>,
}

/// Offload `input` into `output`, its code objects (those `filter` keeps)
/// into `archives`. Host-only and already-offloaded inputs are copied
/// unchanged and reported. The input is only read; see [`offload_binary`]
/// for the order things are written in.
pub fn offload(
    input: &Path,
    output: &Path,
    opts: &OffloadOptions,
    filter: &TargetFilter,
    archives: ArchiveSet,
) -> Result<Offload, Error> {
    let walk = WalkOptions {
        verify_hash: opts.verify_hash,
    };
    let bin = HostBinary::read(input, walk)?;
    offload_binary(input, &bin, output, opts, filter, archives)
}

/// [`offload`] for a binary already read from `input`.
///
/// Nothing is left half-done: the host image is staged in a temp file
/// beside `output` (and checked) while the code objects stream into the
/// archives; the archives are written next, and the host binary is renamed
/// onto `output` last, because a host binary whose archives are missing
/// fails at run time while archives without their binary are inert. If
/// that rename fails, the archives just written are removed again.
pub fn offload_binary(
    input: &Path,
    bin: &HostBinary,
    output: &Path,
    opts: &OffloadOptions,
    filter: &TargetFilter,
    mut archives: ArchiveSet,
) -> Result<Offload, Error> {
    if bin.is_transformed() && bin.layout().marker().is_none() {
        return Err(Error::NoMarker {
            path: input.to_path_buf(),
            section: bin.marker_section(),
        });
    }
    if let Some(outcome) = unchanged(bin) {
        copy_atomically(input, output, "host")?;
        return Ok(Offload {
            outcome,
            archives: Vec::new(),
        });
    }
    check_filter(input, bin.bundles(), filter)?;
    archives.protect(input);
    archives.protect(output);
    let opts = &OffloadOptions {
        search_paths: archives
            .marker_search_paths_for(&opts.search_paths, bin.bundles(), &|t| filter.keeps(t)),
        ..opts.clone()
    };
    // The host image (mostly a copy of the input, done by the kernel) is
    // written beside the bundles' streaming, which keeps every core busy
    // on its own: one after the other, the copy was a serial stretch.
    let keep = |t: &str| filter.keeps(t);
    let (staged, added) = std::thread::scope(|scope| {
        let host = scope.spawn(|| stage_host(input, bin, opts, output));
        let added = add_code_objects(input, bin, &opts.kernel_name, &keep, &mut archives);
        let staged = host
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (staged, added)
    });
    let (staged, transform) = staged?;
    let added = added?;
    let written = archives.finish()?;
    commit(staged, input, &written)?;
    Ok(Offload {
        outcome: Outcome::Offloaded {
            format: (bin.format() == HostFormat::Pe).then_some("pe"),
            transform,
            code_objects: added.count,
            targets: added.targets,
            excluded: added.excluded,
        },
        archives: written,
    })
}

/// The outcome of a binary that is copied as it is: already offloaded, or
/// without device code.
fn unchanged(bin: &HostBinary) -> Option<Outcome> {
    if bin.is_transformed() {
        Some(Outcome::AlreadyOffloaded)
    } else if bin.bundles().is_empty() {
        Some(Outcome::HostOnly)
    } else {
        None
    }
}

/// Rename the staged host binary onto its output (the permissions of
/// `input`); on failure remove the archives `written` for it.
fn commit(staged: Staged, input: &Path, written: &[(String, Written)]) -> Result<(), Error> {
    staged
        .commit(Some(input))
        .map_err(Error::from)
        .inspect_err(|_| {
            for (_, w) in written {
                let _ = std::fs::remove_file(&w.path);
            }
        })
}

/// [`Error::AllTargetsFiltered`] when `bundles` hold device code and
/// `filter` keeps none of it. Checked before anything is written.
pub fn check_filter(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    filter: &TargetFilter,
) -> Result<(), Error> {
    if filter.is_empty() {
        return Ok(());
    }
    let mut targets: Vec<String> = bundles
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|e| !e.id.is_host())
        .filter_map(|e| e.id.target())
        .map(|t| t.to_string())
        .collect();
    targets.sort();
    targets.dedup();
    if targets.is_empty() || targets.iter().any(|t| filter.keeps(t)) {
        return Ok(());
    }
    Err(Error::AllTargetsFiltered {
        path: input.to_path_buf(),
        targets,
    })
}

/// Rewrite `bin` host-only, with a marker naming `opts`' key and search
/// paths, into a temp file beside `output`, checked by the format's
/// structural checks. The caller [`Staged::commit`]s it once the
/// archives are written; dropped, it is deleted.
pub fn stage_host(
    input: &Path,
    bin: &HostBinary,
    opts: &OffloadOptions,
    output: &Path,
) -> Result<(Staged, TransformReport), Error> {
    let marker = Marker {
        kernel_name: opts.kernel_name.clone(),
        search_paths: opts.search_paths.clone(),
    }
    .to_bytes();
    let mut staged = Staged::new(output, "host")?;
    let report = bin.transform_into(input, &marker, staged.file_mut())?;
    Ok((staged, report))
}
