//! `kpack prune`'s ELF path without the CLI around it, for
//! `bench/prune.sh` when a release `kpack` is not at hand (the CLI embeds
//! wasmtime, whose release build takes long): read the fat binary, prune it
//! to the targets `KEEP` names (as `--keep` does) and write the result.
//!
//! `cargo run --release -p kpack-elf --example prune_bench -- INPUT OUTPUT KEEP[,KEEP...]`

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let (Some(input), Some(output), Some(keep)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: prune_bench INPUT OUTPUT KEEP[,KEEP...]".into());
    };
    let (input, output) = (PathBuf::from(input), PathBuf::from(output));
    let keep: Vec<String> = keep
        .to_string_lossy()
        .split(',')
        .map(str::to_owned)
        .collect();
    let filter = kpack_amdgpu::TargetFilter::from_lists(&keep, &[])?;
    let fat = kpack_elf::read_fat_binary(&input, kpack_bundle::WalkOptions::default())?;
    // Streamed into the file, as the CLI does.
    let file = std::fs::File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&output)?;
    let (_, report) = kpack_elf::prune_to(
        &input,
        &fat,
        &|id| id.target().is_some_and(|t| filter.keeps_id(t)),
        file,
        &kpack_bundle::MemoryBudget::new(kpack_bundle::DEFAULT_MEMORY_LIMIT),
    )?;
    eprintln!(
        "{} -> {} bytes, {} bundles, layout {:?}, {} run(s)",
        report.input_size, report.output_size, report.bundles, report.layout, report.runs
    );
    Ok(())
}
