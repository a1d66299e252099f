//! Build a torch-scale compressed fat binary from a real plain one.
//!
//! `kpack-bench-torch-scale IN OUT [TARGETS]` copies `IN` (a host ELF whose
//! `.hip_fatbin` holds plain offload bundles, such as Debian's
//! `librocsparse.so.0.1`) to `OUT` and rewrites every bundle *in place* as a
//! CCOB v3 (zstd) of a larger bundle: the host entry, the original device
//! entries, and copies of those code objects under further real target ids
//! until each bundle names `TARGETS` (default 48) device targets. The
//! compressed bundle starts where the plain one did and is far smaller, so
//! every wrapper still points at it; the rest of the old bundle is zeros.
//!
//! The copies are relabelled, not recompiled: their ELF headers still name
//! the original processor (`kpack inspect` reports the mismatch). That is
//! enough for what the benchmark measures: how memory and time scale with
//! the inflated size of a library, which here is about 9 GB from 1.3 GB.
//! zstd runs with long-distance matching (window 2^27, which every zstd
//! decoder accepts by default), so copies of multi-megabyte objects compress
//! to almost nothing and each bundle fits where the plain one was.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use anyhow::{Context, bail};
use kpack_bundle::{CcobHeader, Format, Method, md5_low, write_bundle};
use zstd::zstd_safe::CParameter;

/// Offload-kind prefix of a HIP device entry id.
const HIP_PREFIX: &str = "hipv4-amdgcn-amd-amdhsa--";

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        bail!("usage: kpack-bench-torch-scale IN OUT [TARGETS]");
    };
    let (input, output) = (PathBuf::from(input), PathBuf::from(output));
    let want: usize = match args.next() {
        Some(n) => n
            .to_string_lossy()
            .parse()
            .context("TARGETS must be a number")?,
        None => 48,
    };
    let fat = kpack_elf::read_fat_binary(&input, Default::default())
        .with_context(|| format!("{}: cannot read", input.display()))?;
    let Some(fatbin) = fat.fatbin else {
        bail!("{}: no .hip_fatbin section", input.display());
    };
    let present: BTreeSet<String> = fat.targets().into_iter().collect();
    let mut targets: Vec<String> = present.iter().cloned().collect();
    for (_, processor) in kpack_amdgpu::MACH_TABLE.iter().rev() {
        if targets.len() >= want {
            break;
        }
        let known = present
            .iter()
            .any(|t| t.split(':').next() == Some(*processor));
        if processor.starts_with("gfx") && !known {
            targets.push((*processor).to_string());
        }
    }
    if targets.len() < want {
        bail!("only {} distinct targets available", targets.len());
    }

    let tmp = output.with_extension("partial");
    std::fs::copy(&input, &tmp)
        .with_context(|| format!("cannot copy {} to {}", input.display(), tmp.display()))?;
    let out = OpenOptions::new().write(true).open(&tmp)?;
    let mut compressor = zstd::bulk::Compressor::new(3)?;
    compressor.include_contentsize(true)?;
    compressor.set_parameter(CParameter::EnableLongDistanceMatching(true))?;
    compressor.set_parameter(CParameter::WindowLog(27))?;
    let (mut inflated_total, mut written_total) = (0u64, 0u64);
    for (index, item) in fat.bundles.iter().enumerate() {
        if !matches!(item.format, Format::Plain) {
            bail!("bundle {index} is not a plain bundle");
        }
        let mut host = None;
        let mut device = Vec::new();
        for (i, entry) in item.entries.iter().enumerate() {
            let bytes = item.read_entry(&fat.source, i)?;
            if entry.id.is_host() {
                host = Some((entry.id.raw().to_string(), bytes));
            } else {
                device.push(bytes);
            }
        }
        if device.is_empty() {
            bail!("bundle {index} has no device entry");
        }
        let mut entries: Vec<(String, &[u8])> = Vec::new();
        if let Some((id, bytes)) = &host {
            entries.push((id.clone(), bytes));
        }
        for (n, target) in targets.iter().enumerate() {
            entries.push((format!("{HIP_PREFIX}{target}"), &device[n % device.len()]));
        }
        let refs: Vec<(&str, &[u8])> = entries.iter().map(|(i, b)| (i.as_str(), *b)).collect();
        let bundle = write_bundle(&refs, 4096);
        let payload = compressor.compress(&bundle)?;
        let mut header = CcobHeader {
            version: 3,
            method: Method::Zstd,
            total_size: Some(0),
            uncompressed_size: bundle.len() as u64,
            hash: md5_low(&bundle),
        };
        let total = header.header_len() + payload.len() as u64;
        header.total_size = Some(total);
        if total > item.len {
            bail!(
                "bundle {index}: compressed {total} bytes do not fit in its {} bytes",
                item.len
            );
        }
        let at = fatbin.offset + item.offset;
        let mut bytes = header.to_bytes();
        bytes.extend_from_slice(&payload);
        bytes.resize(item.len as usize, 0);
        out.write_all_at(&bytes, at)?;
        inflated_total += bundle.len() as u64;
        written_total += total;
        eprintln!(
            "bundle {index:3}: {} -> {} bytes ({} entries)",
            bundle.len(),
            total,
            refs.len()
        );
    }
    out.sync_all()?;
    std::fs::rename(&tmp, &output)?;
    println!(
        "{}: {} bundles, {} targets, {inflated_total} bytes inflated in {written_total} compressed",
        output.display(),
        fat.bundles.len(),
        targets.len()
    );
    Ok(())
}
