//! `kpack fetch --index URL|DIR [--gpu auto|T,...] TREE`: install into
//! TREE only the archives the chosen GPUs need (the loader's own order:
//! native, then generic), hash-checked and atomically, then check the
//! result as `kpack verify --gpu` does.

use std::path::PathBuf;

use anyhow::Context;
use kpack_fetch::{Source, fetch};

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
    /// The largest archive downloaded, whatever the listing says (8G,
    /// 512M, or bytes); a larger listed archive is refused before any byte
    /// of it is read.
    #[arg(long, value_name = "SIZE", default_value = "8G", value_parser = kpack_bundle::parse_size)]
    max_archive_size: u64,
    /// Seconds an archive download may wait for a byte; it also fails when
    /// it brings less than 1 KiB/s on average over that long.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack fetch`.
pub fn run(args: Args) -> CliResult {
    let gpus = kpack_detect::expand_auto(&args.gpu, &crate::environment::detect_options(None))
        .context("--gpu")?;
    for g in &gpus {
        kpack_amdgpu::TargetId::parse(kpack_amdgpu::strip_target_prefix(g))
            .with_context(|| format!("--gpu {g:?}"))?;
    }
    let source = Source::parse(&args.index);
    let options = kpack_fetch::Options {
        max_archive_size: args.max_archive_size,
        pace: kpack_http::Pace {
            idle: std::time::Duration::from_secs(args.idle_timeout),
            ..kpack_http::Pace::DEFAULT
        },
    };
    let rep = fetch(&args.tree, &source, &gpus, &options)?;
    for p in &rep.removed_temps {
        crate::ui::note(format_args!(
            "removed {}, left by a kpack run that died",
            p.display()
        ));
    }
    let check = kpack_split::explain_machine(std::slice::from_ref(&args.tree), &gpus)?;
    let (checks, missing) = (&check.reports, check.missing);
    if args.json {
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a, F, C> {
            gpus: &'a [String],
            fetch: &'a F,
            downloaded_bytes: u64,
            missing: usize,
            check: &'a [C],
        }
        crate::json::print(&Document {
            gpus: &gpus,
            fetch: &rep,
            downloaded_bytes: rep.downloaded(),
            missing,
            check: checks,
        })?;
    } else {
        print_text(&rep, checks, &gpus, missing);
    }
    if rep.binaries == 0 {
        eprintln!(
            "nothing to check: no offloaded binary (one with a .rocm_kpack_ref marker) under {}",
            args.tree.display()
        );
        return Err(CliError::Findings);
    }
    if missing > 0 {
        return Err(CliError::Findings);
    }
    Ok(())
}

/// The text report: each archive, warnings, the summary line and, for a
/// GPU still missing kernels, which archives would serve it.
fn print_text(
    rep: &kpack_fetch::Report,
    checks: &[kpack_split::GpuReport],
    gpus: &[String],
    missing: usize,
) {
    for line in rep.archive_lines() {
        println!("{line}");
    }
    for w in rep.warnings() {
        eprintln!("warning: {w}");
    }
    println!(
        "{} binaries, {} archives needed, {} bytes downloaded; {missing} kernels missing for {}",
        rep.binaries,
        rep.archives.len(),
        rep.downloaded(),
        gpus.join(", ")
    );
    for c in checks.iter().filter(|c| c.missing() > 0) {
        let providers = c.providers();
        for p in &providers {
            println!("  {}: {p}", c.gpu);
        }
        if providers.is_empty() {
            println!(
                "  {}: the index has no archive that serves it (tried {}); this tree was not built for {}: fetch from an index built for it, or name another --gpu",
                c.gpu,
                c.arch_list.join(", "),
                c.gpu
            );
        }
    }
}
