//! `kpack prune INPUT -o OUTPUT --keep T...`: keep only the chosen GPU
//! targets inside a fat executable or shared library, so any HIP runtime
//! (with or without kpack support) loads the smaller file unchanged.
//! Relocatable objects and static archives (link inputs, new or old
//! offload driver) are pruned by `kpack_offloading`.

use std::path::PathBuf;

use anyhow::{Context, anyhow};
use kpack_amdgpu::{TargetFilter, TargetPattern};
use kpack_bundle::WalkOptions;

use crate::exit::CliResult;
use crate::safety;

/// Arguments of `kpack prune`.
#[derive(clap::Args)]
pub struct Args {
    /// ELF executable, shared library, relocatable object or static
    /// archive with device code (never modified).
    input: PathBuf,
    /// Pruned binary to write.
    #[arg(short, long)]
    output: PathBuf,
    /// GPU targets to keep, repeatable and comma-separated, matched as
    /// `--gpu-targets`: `gfx90a` keeps every gfx90a variant,
    /// `gfx90a:xnack+` only that one; generic and `-strict` ids are
    /// targets of their own.
    #[arg(long, value_name = "T,...", value_delimiter = ',', required = true)]
    keep: Vec<String>,
    /// A requested target the input lacks is an error, not a warning.
    #[arg(long)]
    strict: bool,
    /// Replace an existing OUTPUT.
    #[arg(long)]
    force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `kpack prune`.
pub fn run(args: Args) -> CliResult {
    let keep: Vec<String> = args
        .keep
        .iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    if keep.is_empty() {
        return Err(anyhow!("--keep names no target: pruning would keep nothing").into());
    }
    // One filter per requested target, to tell which of them the input
    // lacks; a comma inside an item was split by clap already.
    let singles = keep
        .iter()
        .map(|t| {
            TargetPattern::parse(t)
                .and_then(|_| TargetFilter::new(t, ""))
                .with_context(|| format!("invalid --keep target {t:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let filter = TargetFilter::from_lists(&keep, &[]).context("invalid --keep")?;
    safety::regular_file(&args.input)?;
    safety::not_same_file(&args.input, &args.output)?;
    safety::not_existing(&args.output, args.force)?;
    if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        safety::clean_stale_temps(dir);
    }

    let link_input = LinkInput::read(&args.input)?;
    let fat = match &link_input {
        Some(_) => None,
        None => Some(kpack_elf::read_fat_binary(
            &args.input,
            WalkOptions::default(),
        )?),
    };
    let targets = match (&link_input, &fat) {
        (Some(l), _) => kpack_offloading::device_targets(&l.data)
            .with_context(|| format!("{}", args.input.display()))?,
        (None, Some(fat)) => fat.targets(),
        (None, None) => Vec::new(),
    };
    let input = args.input.display();
    // Each requested target the binary lacks: a warning, or with --strict
    // an error before anything is written.
    let mut missing = Vec::new();
    for (text, single) in keep.iter().zip(&singles) {
        if !targets.iter().any(|t| single.keeps(t)) {
            missing.push(text.clone());
        }
    }
    if args.strict && !missing.is_empty() {
        return Err(anyhow!(
            "{input}: has no code object for {} (it has {})",
            missing.join(", "),
            targets.join(", ")
        )
        .into());
    }
    let (kept, dropped): (Vec<String>, Vec<String>) =
        targets.iter().cloned().partition(|t| filter.keeps(t));
    if kept.is_empty() {
        return Err(anyhow!(
            "{input}: --keep {} matches none of its targets ({}): pruning would keep nothing",
            keep.join(","),
            targets.join(", ")
        )
        .into());
    }
    for t in &missing {
        eprintln!("warning: {input}: has no code object for {t}");
    }
    if let Some(l) = link_input {
        let keep = |t: &str| filter.keeps(t);
        let pruned = if l.archive {
            kpack_offloading::prune_archive(&l.data, &keep)
        } else {
            kpack_offloading::prune_object(&l.data, &keep)
        };
        let (image, report) = pruned.with_context(|| format!("{input}: cannot prune"))?;
        kpack_offload::write_atomically(&args.output, &image, &args.input)?;
        let summary = format!(
            "{input} -> {}: {} -> {} bytes, {} section(s) rewritten in {} member(s), {} entries dropped",
            args.output.display(),
            report.input_size,
            report.output_size,
            report.sections,
            report.members,
            report.entries_dropped,
        );
        let targets = Targets {
            kept: &kept,
            dropped: &dropped,
            missing: &missing,
        };
        return print_report(&args, &targets, "sections-moved", &report, &summary);
    }
    let Some(fat) = fat else {
        return Ok(());
    };
    let mut staged = kpack_offload::Staged::new(&args.output)?;
    let (_, report) = kpack_elf::prune_to(
        &args.input,
        &fat,
        &|id| id.target().is_some_and(|t| filter.keeps_id(t)),
        staged.file_mut(),
    )?;
    staged.persist(&args.input)?;

    let layout = report.layout.map_or("unchanged", |l| l.name());
    let summary = format!(
        "{input} -> {}: {} -> {} bytes ({} bytes left the file), {} bundle(s) rewritten, layout {layout}",
        args.output.display(),
        report.input_size,
        report.output_size,
        report.bytes_removed,
        report.bundles,
    );
    let targets = Targets {
        kept: &kept,
        dropped: &dropped,
        missing: &missing,
    };
    print_report(&args, &targets, layout, &report, &summary)
}

/// The target lists every prune report carries.
struct Targets<'a> {
    kept: &'a [String],
    dropped: &'a [String],
    missing: &'a [String],
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
        let v = serde_json::json!({
            "schema_version": 1,
            "input": args.input,
            "output": args.output,
            "kept": targets.kept,
            "dropped": targets.dropped,
            "missing": targets.missing,
            "layout": layout,
            "result": result,
        });
        println!("{}", serde_json::to_string_pretty(&v).context("json")?);
        return Ok(());
    }
    println!("{summary}");
    println!("  kept {}", targets.kept.join(", "));
    if !targets.dropped.is_empty() {
        println!("  dropped {}", targets.dropped.join(", "));
    }
    Ok(())
}

/// A relocatable object or static archive, read whole (link inputs are
/// small next to the linked libraries `kpack_elf::prune` streams).
struct LinkInput {
    data: Vec<u8>,
    archive: bool,
}

impl LinkInput {
    /// `Some` for a static archive or an ELF `ET_REL` object, `None` for
    /// anything else (left to `kpack_elf`).
    fn read(path: &std::path::Path) -> anyhow::Result<Option<LinkInput>> {
        let mut head = [0u8; 18];
        let n = {
            use std::io::Read as _;
            let mut f = std::fs::File::open(path)
                .with_context(|| format!("{}: cannot open", path.display()))?;
            let mut n = 0;
            while n < head.len() {
                match f.read(&mut head[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) => {
                        return Err(e).with_context(|| format!("{}: cannot read", path.display()));
                    }
                }
            }
            n
        };
        let head = &head[..n];
        let archive = kpack_offloading::is_archive(head);
        // e_type is at 16 in both classes, in the file's byte order.
        let rel = head.starts_with(b"\x7fELF")
            && head.len() >= 18
            && match head[5] {
                2 => head[16..18] == [0, 1],
                _ => head[16..18] == [1, 0],
            };
        if !archive && !rel {
            return Ok(None);
        }
        let data =
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        Ok(Some(LinkInput { data, archive }))
    }
}
