//! `kpack prune INPUT -o OUTPUT --keep T...`: keep only the chosen GPU
//! targets inside a fat executable, shared library, relocatable object or
//! static archive, so any HIP runtime
//! (with or without kpack support) loads the smaller file unchanged.
//! The pruning itself (linked binaries, objects, static archives) is
//! `kpack_prune`'s; this module parses `--keep` and reports.

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use kpack_bundle::WalkOptions;
use kpack_fsafe::{Existing, Order, Outputs};

use crate::exit::CliResult;
use crate::safety;

/// `--keep` and `--strict`, shared by `kpack prune` and `kpack wheel prune`.
#[derive(clap::Args)]
pub struct KeepArgs {
    /// GPU targets to keep, repeatable and comma-separated, matched as
    /// `--gpu-targets`: `gfx90a` keeps every gfx90a variant,
    /// `gfx90a:xnack+` only that one; generic and `-strict` ids are
    /// targets of their own; `auto` stands for this machine's GPUs.
    #[arg(long, value_name = "T,...", value_delimiter = ',', required = true)]
    keep: Vec<String>,
    /// A requested target the input lacks is an error, not a warning.
    #[arg(long)]
    pub strict: bool,
}

impl KeepArgs {
    /// The parsed `--keep` list.
    pub fn list(&self) -> anyhow::Result<kpack_prune::KeepList> {
        let keep = kpack_detect::expand_auto(&self.keep, &crate::environment::detect_options(None))
            .context("--keep")?;
        Ok(kpack_prune::KeepList::parse(&keep)?)
    }
}

/// Arguments of `kpack prune`.
#[derive(clap::Args)]
pub struct Args {
    /// ELF executable, shared library, relocatable object or static
    /// archive with device code (never modified).
    input: PathBuf,
    /// Pruned binary to write.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    keep: KeepArgs,
    /// Replace an existing OUTPUT.
    #[arg(long)]
    force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

/// Run `kpack prune`.
pub fn run(args: Args) -> CliResult {
    let keep = args.keep.list()?;
    safety::regular_file(&args.input)?;
    // Staged, then committed (a new parent directory appears with it).
    let (out_dir, out_name) = crate::offload::split_output(&args.output)?;
    let mut outputs = safety::create_outputs(
        Outputs::builder(&out_dir, "prune", Existing::from_force(args.force))
            .inputs(&[&args.input]),
    )?;
    let staged = outputs.plan(&out_name, Order::Last)?;
    safety::not_existing(&args.output, args.force)?;

    let prunable = kpack_prune::open(&args.input, WalkOptions::default())?.ok_or_else(|| {
        anyhow!(
            "{}: no device code to prune (not a fat binary, object or static archive with device code, or already offloaded by kpack)",
            args.input.display()
        )
    })?;
    if !prunable.is_link_input() {
        input_verifies(&args.input)?;
    }
    let targets = prunable.targets();
    let input = args.input.display();
    // Each requested target the binary lacks: a warning, or with --strict
    // an error before anything is written.
    let missing = keep.missing(targets);
    if args.keep.strict && !missing.is_empty() {
        return Err(anyhow!(
            "{input}: has no code object for {} (it has {})",
            missing.join(", "),
            targets.join(", ")
        )
        .into());
    }
    let (kept, dropped) = keep.partition(targets);
    if kept.is_empty() {
        return Err(anyhow!(
            "{input}: --keep {} matches none of its targets ({}): pruning would keep nothing",
            keep.names().join(","),
            targets.join(", ")
        )
        .into());
    }
    for t in &missing {
        eprintln!("warning: {input}: has no code object for {t}");
    }
    let budget = args.memory.budget(kpack_bundle::DEFAULT_MEMORY_LIMIT);
    let report = prunable.write(&staged, keep.filter(), &budget)?;
    outputs.commit()?;
    let targets = Targets {
        kept: &kept,
        dropped: &dropped,
        missing: &missing,
    };
    let summary = report.summary(&args.input, &args.output);
    if !args.json {
        for note in report.layout_notes() {
            crate::ui::info(format_args!("  layout {note}"));
        }
    }
    print_report(&args, &targets, report.layout(), &report, &summary)
}

/// A linked input must pass `verify-elf --pruned` (the checks of a fat
/// binary) before it is pruned: pruning a binary that is already broken
/// would hand on a file that looks fine.
fn input_verifies(input: &std::path::Path) -> anyhow::Result<()> {
    let file =
        std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let mut findings = kpack_elf::verify_pruned_image(&object::ReadCache::new(file))
        .map_err(|e| e.in_file(input))?;
    findings.retain(|f| f.severity == kpack_format::Severity::Error);
    if let Some(first) = findings.first() {
        return Err(anyhow!(
            "{}: fails `kpack verify-elf --pruned` ({first}{}); nothing written",
            input.display(),
            match findings.len() {
                1 => String::new(),
                n => format!(", and {} more", n - 1),
            }
        ));
    }
    Ok(())
}

/// The target lists every prune report carries.
struct Targets<'a> {
    kept: &'a [String],
    dropped: &'a [String],
    missing: &'a [String],
}

/// The `--json` document.
#[derive(serde::Serialize)]
struct Document<'a> {
    input: &'a std::path::Path,
    output: &'a std::path::Path,
    kept: &'a [String],
    dropped: &'a [String],
    missing: &'a [String],
    layout: &'a str,
    result: serde_json::Value,
}

/// Print a prune report: the `--json` document, or `summary` and the
/// kept and dropped targets.
fn print_report(
    args: &Args,
    targets: &Targets<'_>,
    layout: &str,
    result: &impl serde::Serialize,
    summary: &str,
) -> CliResult {
    if args.json {
        let mut result = serde_json::to_value(result).context("json")?;
        // A linked binary whose layout did not change says so, as the text does.
        if let Some(l) = result.get_mut("layout").filter(|l| l.is_null()) {
            *l = serde_json::Value::from(layout);
        }
        crate::json::print(&Document {
            input: &args.input,
            output: &args.output,
            kept: targets.kept,
            dropped: targets.dropped,
            missing: targets.missing,
            layout,
            result,
        })?;
        return Ok(());
    }
    println!("{summary}");
    println!("  kept {}", targets.kept.join(", "));
    if !targets.dropped.is_empty() {
        println!("  dropped {}", targets.dropped.join(", "));
    }
    Ok(())
}
