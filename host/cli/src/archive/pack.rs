//! `kpack archive pack`: loose code objects into archives, from a
//! directory laid out as `archive extract` writes it (`DIR/<arch>/<key>.hsaco`)
//! or from a descriptor listing each entry's TOC key, arch, file and
//! sha256 (what a library's build writes when it packs its own kernels).
//! One archive (`-o FILE`), or with `--layout arch-content` one per
//! processor at `OUT/arch_content/<gfx>/kpack/<lib>_<gfx>.kpack`; beside
//! them a manifest of what was packed. Every file goes through one
//! [`Outputs`]: all of it appears, or nothing.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kpack_format::pack::{self, Item, Manifest, Planned, parent_of};
use kpack_format::{Compression, WriterOptions};
use kpack_fsafe::{Existing, Order, Outputs};

use super::Scheme;
use crate::exit::CliResult;

/// How `archive pack` lays out what it writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// One archive, the file `-o` names.
    Single,
    /// One archive per processor under `-o DIR`:
    /// `arch_content/<gfx>/kpack/<lib>_<gfx>.kpack` (rocm-libraries' layout).
    ArchContent,
}

/// Arguments of `kpack archive pack`.
#[derive(clap::Args)]
pub(super) struct PackArgs {
    /// Directory laid out as `extract` writes it (`DIR/<arch>/<key>.hsaco`).
    #[arg(required_unless_present = "descriptor", conflicts_with = "descriptor")]
    dir: Option<PathBuf>,
    /// A JSON descriptor instead of DIR: a list (or `{"entries": [...]}`)
    /// of `{"key", "arch", "path", "sha256"}` (`toc_key` is accepted for
    /// `key`); paths are relative to the descriptor's directory. Every
    /// file's sha256 is checked before anything is written.
    #[arg(long, value_name = "FILE")]
    descriptor: Option<PathBuf>,
    /// The .kpack file to write, or with `--layout arch-content` the
    /// directory to write `arch_content/` into (missing parents are created).
    #[arg(short, long)]
    output: PathBuf,
    /// `single`: one archive; `arch-content`: one per processor at
    /// `arch_content/<gfx>/kpack/<lib>_<gfx>.kpack` under `-o`.
    #[arg(long, value_enum, default_value_t = Layout::Single)]
    layout: Layout,
    /// The library name of `arch-content` archives (`<lib>_<gfx>.kpack`);
    /// also their group_name unless `--group-name` is given.
    #[arg(long, value_name = "NAME", required_if_eq("layout", "arch-content"))]
    lib: Option<String>,
    /// Where to write the manifest of what was packed (every archive, its
    /// sha256, and each entry's key, arch, size, sha256 and source file);
    /// default `<OUTPUT>.manifest.json`, or
    /// `arch_content/<lib>.kpack-manifest.json` under `-o` for `arch-content`.
    /// `-` for none.
    #[arg(long, value_name = "FILE")]
    manifest: Option<String>,
    /// The TOC's group_name.
    #[arg(long)]
    group_name: Option<String>,
    /// The TOC's gfx_arch_family (default: the processor, if the archive
    /// holds exactly one).
    #[arg(long)]
    gfx_arch_family: Option<String>,
    /// Storage scheme.
    #[arg(long, value_enum, default_value_t = Scheme::Zstd)]
    compression: Scheme,
    #[command(flatten)]
    level: crate::archive_args::LevelArg,
    /// Show what would be packed without writing.
    #[arg(long)]
    dry_run: bool,
    /// Replace existing output files.
    #[arg(long)]
    force: bool,
}

/// Run `kpack archive pack`.
pub(super) fn run(args: PackArgs) -> CliResult {
    crate::safety::not_stdout(&args.output, "archive pack")?;
    let items = match (&args.dir, &args.descriptor) {
        (_, Some(d)) => read_descriptor(d)?,
        (Some(dir), None) => pack::scan_dir(dir)?,
        (None, None) => return Err(anyhow::anyhow!("give DIR or --descriptor FILE").into()),
    };
    if items.is_empty() {
        return Err(anyhow::anyhow!("nothing to pack").into());
    }
    let archives = group(&args, &items)?;
    for (rel, (_, list)) in &archives {
        for it in list {
            let line = format!(
                "{}{} {} <- {} (into {rel})",
                if args.dry_run { "would pack " } else { "" },
                it.key,
                it.arch,
                it.path.display()
            );
            // The dry run's listing is its result; a real run's is chatter.
            if args.dry_run {
                eprintln!("{line}");
            } else {
                crate::ui::status(line);
            }
        }
    }
    if args.dry_run {
        return Ok(());
    }
    write(&args, &archives)
}

/// Where each item goes, with the layout's names.
fn group(args: &PackArgs, items: &[Item]) -> anyhow::Result<Planned> {
    let layout = match args.layout {
        Layout::Single => pack::Layout::Single {
            name: file_name(&args.output)?,
        },
        Layout::ArchContent => pack::Layout::ArchContent {
            lib: args.lib.clone().unwrap_or_default(),
        },
    };
    Ok(pack::group(
        &layout,
        args.gfx_arch_family.as_deref(),
        items,
    )?)
}

/// The output root and the manifest's path in it (`None`: no manifest).
fn destinations(args: &PackArgs) -> anyhow::Result<(PathBuf, Option<String>)> {
    let (root, manifest_rel) = match args.layout {
        Layout::Single => {
            let root = parent_of(&args.output);
            let manifest = format!("{}.manifest.json", file_name(&args.output)?);
            (root, manifest)
        }
        Layout::ArchContent => {
            let lib = args.lib.as_deref().unwrap_or_default();
            (
                args.output.clone(),
                format!("arch_content/{lib}.kpack-manifest.json"),
            )
        }
    };
    let manifest_rel = match args.manifest.as_deref() {
        Some("-") => None,
        Some(m) => Some(m.to_owned()),
        None => Some(manifest_rel),
    };
    Ok((root, manifest_rel))
}

/// Stage every archive and the manifest, check them, commit.
fn write(args: &PackArgs, archives: &Planned) -> CliResult {
    let (root, manifest_rel) = destinations(args)?;
    let inputs: Vec<&Path> = archives
        .values()
        .flat_map(|(_, l)| l)
        .map(|it| it.path.as_path())
        .collect();
    let mut outputs = crate::safety::create_outputs(
        Outputs::builder(&root, "pack", Existing::from_force(args.force)).inputs(&inputs),
    )?;
    // Every archive planned (and checked against the inputs) before the
    // first is written.
    let staged = archives
        .keys()
        .map(|rel| outputs.plan(rel, Order::First))
        .collect::<Result<Vec<_>, _>>()?;
    let compression: Compression = args.compression.compression(args.level.level);
    let bar = crate::ui::progress(
        archives.values().map(|(_, l)| l.len() as u64).sum(),
        crate::ui::Unit::Items,
    );
    let mut manifest = Manifest {
        schema_version: pack::MANIFEST_VERSION,
        tool: format!("kpack {}", env!("CARGO_PKG_VERSION")),
        archives: Vec::new(),
    };
    let manifest_dir = manifest_rel
        .as_deref()
        .and_then(|m| Path::new(m).parent())
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let mut written = Vec::new();
    for ((rel, (family, list)), staged) in archives.iter().zip(&staged) {
        let options = WriterOptions {
            group_name: args
                .group_name
                .clone()
                .or_else(|| args.lib.clone())
                .unwrap_or_default(),
            gfx_arch_family: family.clone(),
            compression,
            ..Default::default()
        };
        let (done, mut listed) = pack::write_archive(staged, rel, options, list, &mut |_| {
            if let Some(b) = &bar {
                b.inc(1);
            }
        })?;
        listed.path = kpack_fsafe::relative_path(&manifest_dir, Path::new(rel))
            .to_string_lossy()
            .replace('\\', "/");
        manifest.archives.push(listed);
        written.push(done);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(rel) = &manifest_rel {
        let staged = outputs.plan(rel, Order::Last)?;
        let text = serde_json::to_string_pretty(&manifest)? + "\n";
        std::fs::write(&staged, text).with_context(|| format!("cannot write {rel}"))?;
    }
    let dests = outputs.commit()?;
    for (w, dest) in written.iter().zip(&dests) {
        println!(
            "{}\t{} entries\t{} bytes",
            dest.display(),
            w.entries,
            w.file_size
        );
    }
    if let Some(m) = dests.get(written.len()) {
        println!("{}\tmanifest", m.display());
    }
    Ok(())
}

/// The entries of the descriptor at `path`, checked.
fn read_descriptor(path: &Path) -> anyhow::Result<Vec<Item>> {
    crate::safety::regular_file(path)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed: pack::Descriptor = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a descriptor (a JSON list of {{key, arch, path, sha256}}, or {{\"entries\": [...]}})",
            path.display()
        )
    })?;
    Ok(pack::descriptor_items(path, parsed)?)
}

/// The file name of `path`, as UTF-8.
fn file_name(path: &Path) -> anyhow::Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("{}: not a file name", path.display()))
}
