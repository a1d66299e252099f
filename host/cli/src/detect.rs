//! `kpack detect`: the AMD GPUs of this machine (KFD topology, or
//! rocm-bootstrap's overrides), each with the device packages that hold
//! its code.

use std::path::PathBuf;

use anyhow::Context;
use kpack_detect::{Detection, Options, Source, detect};

use crate::exit::CliResult;

/// Arguments of `kpack detect`.
#[derive(clap::Args)]
#[command(after_long_help = "\
Overrides (rocm-bootstrap's, so scripts using either tool agree):
  ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx942,gfx1100   these targets instead of the topology
  ROCM_BOOTSTRAP_DISABLE_DETECTION=1             no GPUs
  KPACK_SYSFS_ROOT=DIR                           sysfs mount (default /sys), as --sysfs-root

`--gpu auto`, `--keep auto` and `--gpu-targets auto` elsewhere mean what this prints.")]
pub struct Args {
    /// The sysfs mount to read (`/sys`; for containers and tests).
    #[arg(long, value_name = "DIR")]
    sysfs_root: Option<PathBuf>,
    /// One target per line, nothing else (rocm-bootstrap-detect's output).
    #[arg(long, conflicts_with_all = ["json", "chain"])]
    plain: bool,
    /// One line per target: target, sub-family, family
    /// (rocm-bootstrap-detect --hierarchy).
    #[arg(long, conflicts_with = "json")]
    chain: bool,
    /// Print the GPUs as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack detect`.
pub fn run(args: Args) -> CliResult {
    let det = detect(&Options::from_env(args.sysfs_root.clone()))?;
    for n in &det.notes {
        eprintln!("warning: {n}");
    }
    if det.gpus.is_empty() || det.source != Source::Kfd {
        eprintln!("note: {}", det.source.describe());
    }
    if args.json {
        let v = crate::json::envelope(serde_json::json!({
            "targets": det.targets(),
            "detection": det,
        }));
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
    } else if args.plain {
        for t in det.targets() {
            println!("{t}");
        }
    } else if args.chain {
        for t in det.targets() {
            match kpack_detect::Chain::of(&t) {
                Some(c) => println!("{} {} {}", c.target, c.sub_family, c.family),
                None => println!("{t}"),
            }
        }
    } else {
        human(&det);
    }
    Ok(())
}

/// The readable listing: one block per GPU.
fn human(det: &Detection) {
    if det.gpus.is_empty() {
        println!("No AMD GPUs detected.");
        return;
    }
    for g in &det.gpus {
        let mut line = format!("node {}: {}", g.node, g.target);
        if let Some(p) = &g.pci_id {
            line.push_str(&format!("  PCI {p}"));
        }
        if let Some(id) = g.gpu_id {
            line.push_str(&format!("  gpu_id {id}"));
        }
        println!("{line}");
        if let Some(gen_) = &g.generic {
            println!("  generic target: {gen_}");
        }
        match &g.chain {
            Some(c) => println!(
                "  packages: {} -> {} -> {}",
                c.target,
                kpack_amdgpu::dist_name(&c.sub_family),
                c.family
            ),
            None => println!("  packages: none (ROCm does not package {})", g.target),
        }
    }
}
