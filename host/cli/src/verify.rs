//! `kpack verify DIR...`: check split or recombined artifacts: manifests,
//! no fat binary left in a generic artifact, arch artifacts holding only
//! their arch, every archive valid, and every marker resolving in the
//! flattened install (exit 1 on findings).

use std::path::PathBuf;

use anyhow::Context;
use kpack_split::{explain_gpu, verify};

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack verify`.
#[derive(clap::Args)]
#[command(after_long_help = crate::amd_compat::VERIFY_HELP)]
pub struct Args {
    /// Artifact directories, directories of artifacts, or installed trees
    /// (a prefix whose binaries' markers must resolve to its archives).
    #[arg(required_unless_present = "artifacts_dir")]
    dirs: Vec<PathBuf>,
    /// AMD's name for DIR.
    #[arg(long, value_name = "DIR", hide = true)]
    artifacts_dir: Vec<PathBuf>,
    #[command(flatten)]
    amd: crate::amd_compat::Ignored,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Instead of the layout checks: for this GPU (`gfx1101`,
    /// `gfx90a:xnack+`), which archive and target every kernel would load
    /// from, as the runtime resolves it, or what is missing (exit 1).
    /// `auto`: every GPU of this machine, and what to install for them.
    #[arg(long, value_name = "GPU")]
    gpu: Option<String>,
}

/// A `--json` document: a report with its count of errors (a tree) or of
/// missing kernels (`--gpu`).
#[derive(serde::Serialize)]
struct Counted<'a, R> {
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<usize>,
    report: &'a R,
}

/// Run `kpack verify`.
pub fn run(mut args: Args) -> CliResult {
    args.amd.note();
    let extra = std::mem::take(&mut args.artifacts_dir);
    args.dirs.extend(extra);
    // An artifact archive is an artifact; any other file is not a tree.
    let not_tree = |d: &&PathBuf| d.is_file() && kpack_split::Codec::sniff(d).is_none();
    if let Some(file) = args.dirs.iter().find(not_tree) {
        return Err(anyhow::anyhow!(
            "{}: a file; `kpack verify` checks a directory: an installed tree (the prefix holding lib/), an artifact, or a directory of artifacts (for one binary, `kpack verify-elf FILE`)",
            file.display()
        )
        .into());
    }
    if let Some(gpu) = &args.gpu {
        return run_gpu(&args, gpu);
    }
    let rep = verify(&args.dirs)?;
    let stale = kpack_split::stale_temps_under(&args.dirs);
    if args.json {
        crate::json::print(&Counted {
            errors: Some(rep.errors()),
            missing: None,
            report: &rep,
        })?;
    } else {
        print!("{rep}");
    }
    // Flagged, not removed: verify only reads.
    for p in &stale {
        eprintln!(
            "error: [stale-temp] {}: left by a kpack run that died; remove it",
            p.display()
        );
    }
    if rep.binaries == 0
        && rep.archives == 0
        && rep.findings.is_empty()
        && !args.dirs.iter().any(|d| kpack_split::holds_artifact(d))
    {
        // An empty or mistyped directory must not read as a pass.
        eprintln!(
            "error: nothing to verify in {}: no artifact, binary with a marker or .kpack archive found",
            args.dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Err(CliError::Findings);
    }
    if rep.errors() > 0 || !stale.is_empty() {
        return Err(CliError::Findings);
    }
    Ok(())
}

/// `kpack verify --gpu GPU DIR...`; `--gpu auto` is the doctor: every
/// GPU of this machine, then what would fill the gaps.
fn run_gpu(args: &Args, gpu: &str) -> CliResult {
    if gpu.trim() == kpack_detect::AUTO {
        return run_doctor(args);
    }
    let id =
        kpack_amdgpu::TargetId::parse_qualified(gpu).with_context(|| format!("--gpu {gpu:?}"))?;
    if !kpack_amdgpu::is_known_target(&id) {
        return Err(anyhow::anyhow!(
            "--gpu {gpu:?}: {} is not a known AMD GPU (name one such as gfx90a, gfx942 or gfx1100)",
            id.processor()
        )
        .into());
    }
    let rep = explain_gpu(&args.dirs, gpu)?;
    for w in rep.stepping_warnings() {
        eprintln!("warning: {w}");
    }
    if args.json {
        crate::json::print(&Counted {
            errors: None,
            missing: Some(rep.missing()),
            report: &rep,
        })?;
    } else {
        print!("{rep}");
    }
    if rep.missing() > 0 {
        return Err(CliError::Findings);
    }
    Ok(())
}

/// `kpack verify --gpu auto DIR...`: for each detected GPU, where its
/// kernels load from; then the packages this machine needs, and the
/// commands that install what is missing (exit 1 while anything is).
fn run_doctor(args: &Args) -> CliResult {
    let det = kpack_detect::detect(&crate::environment::detect_options(None))?;
    let targets = det.targets();
    if targets.is_empty() {
        return Err(kpack_detect::Error::NoGpu(det.source.describe().to_owned()).into());
    }
    let rep = kpack_split::explain_machine(&args.dirs, &targets)?;
    if args.json {
        /// The `verify --gpu auto --json` document.
        #[derive(serde::Serialize)]
        struct Doctor<'a> {
            targets: &'a [String],
            detection: &'a kpack_detect::Detection,
            #[serde(flatten)]
            report: &'a kpack_split::MachineReport,
        }
        crate::json::print(&Doctor {
            targets: &targets,
            detection: &det,
            report: &rep,
        })?;
    } else {
        det.machine_lines().iter().for_each(|l| println!("{l}"));
        print!("{rep}");
    }
    if rep.missing > 0 || !rep.checked() {
        return Err(CliError::Findings);
    }
    Ok(())
}
