//! Offloading a Windows PE image (DLL, EXE): the same flow as for ELF, with
//! `kpack-pe` reading, transforming and verifying.

use std::path::Path;

use kpack_amdgpu::TargetFilter;
use kpack_bundle::WalkOptions;
use kpack_format::Marker;

use crate::{
    ArchiveSet, Error, OffloadOptions, Outcome, add_items, check_filter, copy_atomically,
    write_atomically,
};

/// [`crate::offload_binary`] for a PE image.
pub(crate) fn offload_binary(
    input: &Path,
    output: &Path,
    opts: &OffloadOptions,
    filter: &TargetFilter,
    archives: &mut ArchiveSet,
) -> Result<Outcome, Error> {
    let fat = kpack_pe::read_fat_binary(
        input,
        WalkOptions {
            verify_hash: opts.verify_hash,
        },
    )?;
    if fat.is_transformed() {
        if fat.marker.is_none() {
            return Err(Error::NoMarker {
                path: input.to_path_buf(),
                section: kpack_pe::MARKER_SECTION,
            });
        }
        copy_atomically(input, output)?;
        return Ok(Outcome::AlreadyOffloaded);
    }
    if fat.bundles.is_empty() {
        copy_atomically(input, output)?;
        return Ok(Outcome::HostOnly);
    }
    check_filter(input, &fat.bundles, filter)?;
    let marker = Marker {
        kernel_name: opts.kernel_name.clone(),
        search_paths: archives
            .marker_search_paths_for(&opts.search_paths, &fat.bundles, &|t| filter.keeps(t)),
    }
    .to_bytes();
    let (image, transform) = kpack_pe::transform(input, &fat, &marker)?;
    let findings = kpack_pe::verify_image(&image);
    if !findings.is_empty() {
        return Err(Error::Verify {
            path: input.to_path_buf(),
            findings,
        });
    }
    let added = add_items(
        input,
        &fat.bundles,
        &fat.source,
        &opts.kernel_name,
        &|t: &str| filter.keeps(t),
        archives,
    )?;
    write_atomically(output, &image, input)?;
    Ok(Outcome::OffloadedPe {
        format: "pe",
        transform,
        code_objects: added.count,
        targets: added.targets,
        excluded: added.excluded,
    })
}
