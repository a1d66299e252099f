//! `kpack deploy APP... --gpu LIST|auto -o DIR`: copy an application and
//! the libraries it needs into DIR (executables in `bin`, libraries in
//! `lib`, RUNPATH `$ORIGIN`-relative; Windows images side by side in DIR,
//! with `rocm_kpack.dll`), with only the archives and
//! database files the listed GPUs load; then check DIR as `kpack verify
//! --gpu` does. `kpack deploy --check DIR`: nothing in DIR points outside
//! it.

use std::path::PathBuf;

use anyhow::Context;

use crate::exit::{CliError, CliResult};
use crate::handlers::HandlerArgs;

/// The handlers that classify database directories when
/// `--split-databases` names none.
const DEFAULT_HANDLERS: &[&str] = &["rocblas", "hipblaslt", "miopen", "aotriton"];

/// Arguments of `kpack deploy`.
#[derive(clap::Args)]
pub struct Args {
    /// Executables, shared libraries, or directories of them (never modified).
    #[arg(required_unless_present = "check")]
    apps: Vec<PathBuf>,
    /// GPUs the directory is for, comma-separated; `auto`: this machine's.
    #[arg(
        long,
        value_name = "auto|T,...",
        value_delimiter = ',',
        required_unless_present = "check"
    )]
    gpu: Vec<String>,
    /// The directory to write (refused if it exists, unless --force).
    #[arg(short, long, value_name = "DIR", required_unless_present = "check")]
    output: Option<PathBuf>,
    /// Directory searched for needed libraries after each library's own
    /// RUNPATH/RPATH (repeatable).
    #[arg(long, value_name = "DIR")]
    library_path: Vec<PathBuf>,
    /// Install prefix whose `lib`, `lib64` and multiarch `lib/<triple>`
    /// are searched (Windows images: its `bin`; repeatable).
    #[arg(long, value_name = "PREFIX")]
    rocm_path: Vec<PathBuf>,
    /// A library the application loads by name at run time (`dlopen`),
    /// deployed with what it needs (repeatable).
    #[arg(long, value_name = "NAME")]
    also: Vec<String>,
    /// Leave out libraries whose name matches GLOB, beside the default
    /// list of system libraries (libc, libm, libstdc++, libgcc_s, ...;
    /// Windows: kernel32, ucrtbase, api-ms-win-*, vcruntime*, ...).
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// Prune fat libraries to the listed GPUs' code (default: kept fat).
    #[arg(long)]
    prune: bool,
    /// Offload fat libraries in the copy: the listed GPUs' code into
    /// `.kpack` archives beside them, for a kpack-aware HIP runtime (the
    /// kpack runtime comes along).
    #[arg(long, conflicts_with = "prune")]
    offload: bool,
    /// A database directory to deploy (e.g. `<rocm>/lib/rocblas/library`;
    /// repeatable), beside those found next to the closure's libraries
    /// (`rocblas/library`, `hipblaslt/library`, `aotriton.images`,
    /// `../share/miopen/db`): generic files always, other GPUs' left out.
    #[arg(long, value_name = "DIR")]
    databases: Vec<PathBuf>,
    #[command(flatten)]
    handlers: HandlerArgs,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
    /// Exit 0 even when a binary lacks code for a listed GPU.
    #[arg(long)]
    allow_missing: bool,
    /// Replace DIR if it exists.
    #[arg(long)]
    force: bool,
    /// Check DIR instead: every RUNPATH `$ORIGIN`-relative, every needed
    /// library and every marker's archive found inside it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["apps", "gpu", "output"])]
    check: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack deploy`.
pub fn run(args: Args) -> CliResult {
    if let Some(dir) = &args.check {
        return check(dir, args.json);
    }
    let gpus = kpack_detect::expand_auto(&args.gpu, &crate::environment::detect_options(None))
        .context("--gpu")?;
    for g in &gpus {
        kpack_amdgpu::TargetId::parse(kpack_amdgpu::strip_target_prefix(g))
            .with_context(|| format!("--gpu {g:?}"))?;
    }
    let out = args.output.clone().context("-o DIR is required")?;
    let options = kpack_deploy::Options {
        apps: args.apps.clone(),
        gpus: gpus.clone(),
        library_path: args.library_path.clone(),
        rocm_path: args.rocm_path.clone(),
        also: args.also.clone(),
        exclude: args.exclude.clone(),
        prune: args.prune,
        offload: args.offload,
        databases: args.databases.clone(),
        no_system_dirs: false,
    };
    let budget = args.memory.budget(kpack_bundle::DEFAULT_MEMORY_LIMIT);
    let run = crate::job::build(
        budget,
        None,
        kpack_fsafe::Existing::from_force(args.force),
        false,
    )?;
    let mut handlers = args.handlers.clone();
    if handlers.is_empty() {
        handlers.split_databases = DEFAULT_HANDLERS.iter().map(|s| s.to_string()).collect();
    }
    let load = || -> Result<Option<Box<dyn kpack_split::Databases>>, kpack_split::ClassifyError> {
        if cfg!(not(feature = "handlers")) && args.handlers.is_empty() {
            return Ok(None);
        }
        handlers.databases().map_err(Into::into)
    };
    let done = kpack_deploy::deploy_with(&run.job, &options, &out, Some(&load));
    drop(run);
    let done = done?;
    let mut checks = Vec::new();
    for g in &gpus {
        checks.push(kpack_split::explain_gpu(std::slice::from_ref(&out), g)?);
    }
    let missing: usize = checks.iter().map(|c| c.missing()).sum();
    let layout = kpack_deploy::check(&out)?;
    if args.json {
        crate::json::print(&DeployDocument {
            dir: &out,
            deploy: &done.manifest,
            total_bytes: done.manifest.total_bytes(),
            missing,
            layout_problems: &layout.problems,
            check: &checks,
        })?;
    } else {
        print_summary(&done, &checks, missing, &layout);
    }
    if !layout.problems.is_empty() || (missing > 0 && !args.allow_missing) {
        return Err(CliError::Findings);
    }
    Ok(())
}

fn print_summary(
    done: &kpack_deploy::Deployed,
    checks: &[kpack_split::GpuReport],
    missing: usize,
    layout: &kpack_deploy::CheckReport,
) {
    let m = &done.manifest;
    let is_db = |f: &&kpack_deploy::FileRecord| f.kind == "database";
    for f in m.files.iter().filter(|f| !is_db(f)) {
        match &f.link {
            Some(t) => println!("{} -> {t}", f.path),
            None if f.serves.is_empty() => println!("{} ({} bytes)", f.path, f.size),
            None => println!("{} ({} bytes; {})", f.path, f.size, f.serves.join(", ")),
        }
    }
    let dbs: Vec<_> = m.files.iter().filter(is_db).collect();
    if !dbs.is_empty() {
        let bytes: u64 = dbs.iter().map(|f| f.size).sum();
        println!("{} database files ({bytes} bytes)", dbs.len());
    }
    let db_left = m.left_out.iter().filter(|l| l.name.contains('/')).count();
    for l in m.left_out.iter().filter(|l| !l.name.contains('/')) {
        println!("left out {}: {}", l.name, l.reason);
    }
    if db_left > 0 {
        println!("left out {db_left} database files for other GPUs only");
    }
    for s in &m.sizes {
        let pct = 100.0 * s.deployed_bytes as f64 / s.fat_closure_bytes.max(1) as f64;
        println!(
            "{}: {} bytes, against {} bytes for the fat closure ({pct:.1}%)",
            s.gpu, s.deployed_bytes, s.fat_closure_bytes
        );
    }
    for c in checks.iter().filter(|c| c.missing() > 0) {
        println!(
            "  {}: {} kernels or fat binaries without code for it",
            c.gpu,
            c.missing()
        );
    }
    for p in &layout.problems {
        println!("problem: {p}");
    }
    println!(
        "{} files, {} bytes in {}; {missing} missing for {}",
        m.files.len(),
        m.total_bytes(),
        done.dir.display(),
        m.gpus.join(", ")
    );
}

fn check(dir: &std::path::Path, json: bool) -> CliResult {
    let rep = kpack_deploy::check(dir)?;
    if json {
        crate::json::print(&CheckDocument { dir, check: &rep })?;
    } else {
        for p in &rep.problems {
            println!("problem: {p}");
        }
        println!(
            "{}: {} binaries, {} markers, {} problems",
            dir.display(),
            rep.binaries,
            rep.markers,
            rep.problems.len()
        );
    }
    if rep.problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Findings)
    }
}

/// `kpack deploy --json`.
#[derive(serde::Serialize)]
struct DeployDocument<'a> {
    dir: &'a std::path::Path,
    deploy: &'a kpack_deploy::Manifest,
    total_bytes: u64,
    missing: usize,
    layout_problems: &'a [String],
    check: &'a [kpack_split::GpuReport],
}

/// `kpack deploy --check DIR --json`.
#[derive(serde::Serialize)]
struct CheckDocument<'a> {
    dir: &'a std::path::Path,
    check: &'a kpack_deploy::CheckReport,
}
