//! `inspect` and `extract` for what the new offload driver leaves in
//! objects and static archives: `.llvm.offloading` (LLVM OffloadBinary)
//! sections, plus old-driver `.hip_fatbin` bundles in archive members. The
//! listing and its images are `kpack-llvm-offload`'s
//! ([`kpack_llvm_offload::list`], its text [`Listing::text`]); this module
//! routes files to it and writes the images.
//!
//! Handled here, by content: static archives (`!<arch>\n`, `!<thin>\n`),
//! ELF files with an `SHT_LLVM_OFFLOADING` section, and bare OffloadBinary
//! files (`10 FF 10 AD`). Every other input goes the fat-binary way.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use kpack_amdgpu::TargetId;
use kpack_binary::FileKind;
use kpack_fsafe::{Existing, Order, Outputs};
use kpack_llvm_offload::{Container, ListedImage, Listing, ReadOptions};

/// Sniff `path`: `Some` if this module handles it.
pub fn detect(path: &Path) -> anyhow::Result<Option<Container>> {
    let kind =
        FileKind::of_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    match kind {
        FileKind::StaticArchive => return Ok(Some(Container::Archive)),
        FileKind::OffloadBinary => return Ok(Some(Container::OffloadBinary)),
        FileKind::HostElf { .. } | FileKind::OtherElf { .. } | FileKind::CodeObject => {}
        _ => return Ok(None),
    }
    // Section headers only: fat binaries can be gigabytes. A malformed
    // ELF is left to the fat-binary reader and its errors.
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let cache = object::ReadCache::new(f);
    let has_offloading = kpack_llvm_offload::has_offloading_section(&cache);
    Ok(has_offloading.then_some(Container::Elf))
}

fn options(verify_hash: bool) -> ReadOptions {
    ReadOptions {
        verify_hash,
        ..ReadOptions::default()
    }
}

/// The listing `kpack inspect` prints for one input.
pub fn inspect(path: &Path, input: Container, verify_hash: bool) -> anyhow::Result<Listing> {
    Ok(kpack_llvm_offload::list(path, input, options(verify_hash))?)
}

/// `kpack extract` for one input: write every image (or those of
/// `targets`) into `output`, staged then moved into place.
pub fn extract(
    path: &Path,
    input: Container,
    all: bool,
    targets: &[TargetId],
    output: &Path,
    verify_hash: bool,
    force: bool,
) -> crate::exit::CliResult {
    let (_, images) = kpack_llvm_offload::list_with_images(path, input, options(verify_hash))?;
    if images.is_empty() {
        return Err(anyhow::anyhow!("{}: no device code", path.display()).into());
    }
    let present: BTreeSet<String> = images.iter().filter_map(|i| i.arch.clone()).collect();
    let matches = |arch: &Option<String>| {
        all || arch.as_deref().is_some_and(|a| {
            targets
                .iter()
                .any(|t| TargetId::parse(a).is_ok_and(|p| &p == t) || a == t.to_string())
        })
    };
    for t in targets {
        if !images.iter().any(|i| {
            i.arch
                .as_deref()
                .is_some_and(|a| TargetId::parse(a).is_ok_and(|p| &p == t) || a == t.to_string())
        }) {
            return Err(anyhow::anyhow!(
                "{}: no image for target {t}; present: {}",
                path.display(),
                present.iter().cloned().collect::<Vec<_>>().join(", ")
            )
            .into());
        }
    }
    let chosen: Vec<&ListedImage> = images.iter().filter(|i| matches(&i.arch)).collect();
    let mut outputs = crate::safety::create_outputs(
        Outputs::builder(output, "extract", Existing::from_force(force)).inputs(&[path]),
    )?;
    for img in &chosen {
        let p = outputs.plan(&img.file_name, Order::First)?;
        outputs.check_existing()?;
        std::fs::write(&p, &img.bytes).with_context(|| format!("cannot write {}", p.display()))?;
    }
    for (dest, img) in outputs.commit()?.iter().zip(&chosen) {
        println!("{}\t{}", dest.display(), img.bytes.len());
    }
    Ok(())
}
