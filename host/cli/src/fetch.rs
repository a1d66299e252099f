//! `kpack fetch --index URL|DIR [--gpu auto|T,...] TREE`: install into
//! TREE only the archives the chosen GPUs need (the loader's own order:
//! native, then generic), hash-checked and atomically, then check the
//! result as `kpack verify --gpu` does.

use std::path::PathBuf;

use anyhow::Context;
use kpack_fetch::{Action, Source, fetch};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack fetch`.
#[derive(clap::Args)]
pub struct Args {
    /// Tree of offloaded binaries (install prefix, unpacked tarball).
    tree: PathBuf,
    /// Where archives come from: a directory, or an HTTP(S) URL serving
    /// `kpack-index.json` (written by `kpack index`) and the archives.
    #[arg(long, value_name = "URL|DIR")]
    index: String,
    /// GPUs to fetch for, comma-separated; `auto`: this machine's.
    #[arg(
        long,
        value_name = "auto|T,...",
        value_delimiter = ',',
        default_value = "auto"
    )]
    gpu: Vec<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack fetch`.
pub fn run(args: Args) -> CliResult {
    let gpus = kpack_detect::expand_auto(&args.gpu).context("--gpu")?;
    for g in &gpus {
        kpack_amdgpu::TargetId::parse(kpack_amdgpu::strip_target_prefix(g))
            .with_context(|| format!("--gpu {g:?}"))?;
    }
    let source = Source::parse(&args.index);
    let rep = fetch(&args.tree, &source, &gpus)?;
    let mut checks = Vec::new();
    for g in &gpus {
        checks.push(kpack_split::explain_gpu(
            std::slice::from_ref(&args.tree),
            g,
        )?);
    }
    let missing: usize = checks.iter().map(|c| c.missing()).sum();
    if args.json {
        let v = crate::json::envelope(serde_json::json!({
            "gpus": gpus,
            "fetch": rep,
            "downloaded_bytes": rep.downloaded(),
            "missing": missing,
            "check": checks,
        }));
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
    } else {
        for a in &rep.archives {
            let what = match a.action {
                Action::Fetched => "fetched",
                Action::Replaced => "replaced",
                Action::Present => "present",
            };
            println!(
                "{what} {} -> {} ({} bytes)",
                a.name,
                a.path.display(),
                a.size
            );
        }
        for u in &rep.unreadable {
            eprintln!("warning: {u} (skipped)");
        }
        for p in &rep.outside {
            eprintln!(
                "warning: {}: a search path outside the tree; not written",
                p.display()
            );
        }
        println!(
            "{} binaries, {} archives needed, {} bytes downloaded; {missing} kernels missing for {}",
            rep.binaries,
            rep.archives.len(),
            rep.downloaded(),
            gpus.join(", ")
        );
        for c in checks.iter().filter(|c| c.missing() > 0) {
            for p in c.providers() {
                println!("  {}: {p}", c.gpu);
            }
        }
    }
    if missing > 0 {
        return Err(CliError::Findings);
    }
    Ok(())
}
