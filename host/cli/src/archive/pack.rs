//! `kpack archive pack`: loose code objects into archives, from a
//! directory laid out as `archive extract` writes it (`DIR/<arch>/<key>.hsaco`)
//! or from a descriptor listing each entry's TOC key, arch, file and
//! sha256 (what a library's build writes when it packs its own kernels).
//! One archive (`-o FILE`), or with `--layout arch-content` one per
//! processor at `OUT/arch_content/<gfx>/kpack/<lib>_<gfx>.kpack`; beside
//! them a manifest of what was packed. Every file goes through one
//! [`Outputs`]: all of it appears, or nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kpack_format::digest::{from_hex, to_hex};
use kpack_format::{ArchiveWriter, Compression, WriterOptions};
use kpack_fsafe::{Existing, Order, Outputs};
use serde::{Deserialize, Serialize};

use super::{SUFFIX, Scheme};
use crate::exit::CliResult;

/// Version of the manifest `archive pack` writes.
const MANIFEST_VERSION: u32 = 1;

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

/// One code object to pack.
#[derive(Debug, Clone)]
struct Item {
    key: String,
    arch: String,
    path: PathBuf,
    /// The sha256 the descriptor promises (checked), if it came from one.
    sha256: Option<[u8; 32]>,
}

/// One entry of a descriptor.
#[derive(Deserialize)]
struct DescribedEntry {
    #[serde(alias = "toc_key")]
    key: String,
    arch: String,
    path: String,
    sha256: String,
}

/// A descriptor: a list of entries, or an object holding them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Descriptor {
    List(Vec<DescribedEntry>),
    Object { entries: Vec<DescribedEntry> },
}

/// The manifest: what was packed where.
#[derive(Serialize)]
struct Manifest {
    schema_version: u32,
    tool: String,
    archives: Vec<ManifestArchive>,
}

#[derive(Serialize)]
struct ManifestArchive {
    /// Relative to the manifest's directory.
    path: String,
    gfx_arch_family: String,
    bytes: u64,
    sha256: String,
    entries: Vec<ManifestEntry>,
}

#[derive(Serialize)]
struct ManifestEntry {
    key: String,
    arch: String,
    size: u64,
    sha256: String,
    source: String,
}

/// Run `kpack archive pack`.
pub(super) fn run(args: PackArgs) -> CliResult {
    crate::safety::not_stdout(&args.output, "archive pack")?;
    let items = match (&args.dir, &args.descriptor) {
        (_, Some(d)) => read_descriptor(d)?,
        (Some(dir), None) => scan_pack_dir(dir)?
            .into_iter()
            .map(|(key, arch, path)| Item {
                key,
                arch,
                path,
                sha256: None,
            })
            .collect(),
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

/// The archives to write, by path relative to the output root: each one's
/// gfx_arch_family and items (sorted by key and arch).
type Planned = BTreeMap<String, (String, Vec<Item>)>;

/// Where each item goes, with the layout's names.
fn group(args: &PackArgs, items: &[Item]) -> anyhow::Result<Planned> {
    let mut out: Planned = BTreeMap::new();
    match args.layout {
        Layout::Single => {
            let name = file_name(&args.output)?;
            let mut procs: Vec<&str> = items
                .iter()
                .map(|i| kpack_amdgpu::processor_of(&i.arch))
                .collect();
            procs.sort_unstable();
            procs.dedup();
            let family = match (&args.gfx_arch_family, procs.as_slice()) {
                (Some(f), _) => f.clone(),
                (None, [one]) => (*one).to_owned(),
                (None, _) => bail!(
                    "--gfx-arch-family is required when packing {} processors into one archive",
                    procs.len()
                ),
            };
            out.insert(name, (family, items.to_vec()));
        }
        Layout::ArchContent => {
            let lib = args.lib.as_deref().unwrap_or_default();
            kpack_fsafe::input_name(Path::new("the command line"), "--lib", lib)?;
            for it in items {
                let gfx = kpack_amdgpu::processor_of(&it.arch).to_owned();
                let rel = format!("arch_content/{gfx}/kpack/{lib}_{gfx}.kpack");
                let family = args.gfx_arch_family.clone().unwrap_or_else(|| gfx.clone());
                out.entry(rel)
                    .or_insert_with(|| (family, Vec::new()))
                    .1
                    .push(it.clone());
            }
        }
    }
    for (_, list) in out.values_mut() {
        list.sort_by(|a, b| (&a.key, &a.arch).cmp(&(&b.key, &b.arch)));
        if let Some(w) = list
            .windows(2)
            .find(|w| (&w[0].key, &w[0].arch) == (&w[1].key, &w[1].arch))
        {
            bail!(
                "{} for {} is listed twice ({} and {})",
                w[0].key,
                w[0].arch,
                w[0].path.display(),
                w[1].path.display()
            );
        }
    }
    Ok(out)
}

/// Stage every archive and the manifest, check them, commit.
fn write(args: &PackArgs, archives: &Planned) -> CliResult {
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
    for it in archives.values().flat_map(|(_, l)| l) {
        for rel in archives.keys() {
            crate::safety::not_same_file(&it.path, &root.join(rel))?;
        }
    }
    let created = crate::safety::CreatedDir::create(&root)?;
    let mut outputs = Outputs::create(&root, "pack", Existing::from_force(args.force))?;
    let compression: Compression = args.compression.compression(args.level.level);
    let bar = crate::ui::progress(
        archives.values().map(|(_, l)| l.len() as u64).sum(),
        crate::ui::Unit::Items,
    );
    let mut manifest = Manifest {
        schema_version: MANIFEST_VERSION,
        tool: format!("kpack {}", env!("CARGO_PKG_VERSION")),
        archives: Vec::new(),
    };
    let manifest_dir = manifest_rel
        .as_deref()
        .and_then(|m| Path::new(m).parent())
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let mut written = Vec::new();
    for (rel, (family, list)) in archives {
        let staged = outputs.plan(rel, Order::First)?;
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
        let (done, mut listed) = write_archive(&staged, rel, options, list, bar.as_ref())?;
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
    created.keep();
    Ok(())
}

/// Write `list` into the archive `staged` (planned as `rel`), each file's
/// sha256 checked against the descriptor's; what the manifest says of it
/// (its `path` left for the caller to fill in).
fn write_archive(
    staged: &Path,
    rel: &str,
    options: WriterOptions,
    list: &[Item],
    bar: Option<&indicatif::ProgressBar>,
) -> anyhow::Result<(kpack_format::Written, ManifestArchive)> {
    let family = options.gfx_arch_family.clone();
    let mut w = ArchiveWriter::create(staged, options)?;
    let mut entries = Vec::new();
    for it in list {
        let bytes = std::fs::read(&it.path)
            .with_context(|| format!("cannot read {}", it.path.display()))?;
        let digest = kpack_format::sha256(&bytes);
        if let Some(want) = it.sha256.filter(|w| *w != digest) {
            bail!(
                "{}: sha256 is {}, the descriptor says {} ({} for {})",
                it.path.display(),
                to_hex(&digest),
                to_hex(&want),
                it.key,
                it.arch
            );
        }
        w.add(&it.key, &it.arch, &bytes)?;
        entries.push(ManifestEntry {
            key: it.key.clone(),
            arch: it.arch.clone(),
            size: bytes.len() as u64,
            sha256: to_hex(&digest),
            source: it.path.display().to_string(),
        });
        if let Some(b) = bar {
            b.inc(1);
        }
    }
    let done = w.finish()?;
    let archive_bytes =
        std::fs::read(staged).with_context(|| format!("cannot read {}", staged.display()))?;
    kpack_format::Archive::open(staged)
        .with_context(|| format!("{rel}: the archive just written does not read"))?;
    let listed = ManifestArchive {
        path: String::new(),
        gfx_arch_family: family,
        bytes: archive_bytes.len() as u64,
        sha256: to_hex(&kpack_format::sha256(&archive_bytes)),
        entries,
    };
    Ok((done, listed))
}

/// The entries of the descriptor at `path`, their files resolved against
/// its directory; every field checked (keys and arches as the TOC takes
/// them, sha256 as 64 hex digits).
fn read_descriptor(path: &Path) -> anyhow::Result<Vec<Item>> {
    crate::safety::regular_file(path)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed: Descriptor = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a descriptor (a JSON list of {{key, arch, path, sha256}}, or {{\"entries\": [...]}})",
            path.display()
        )
    })?;
    let entries = match parsed {
        Descriptor::List(l) | Descriptor::Object { entries: l } => l,
    };
    let base = parent_of(path);
    let mut items = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let at = |what: &str| format!("{}: entry {i}: {what}", path.display());
        if e.key.is_empty() {
            bail!(at("empty key"));
        }
        kpack_amdgpu::TargetId::parse_qualified(&e.arch)
            .with_context(|| at(&format!("arch {:?}", e.arch)))?;
        let Some(sha256) = from_hex(&e.sha256) else {
            bail!(at(&format!("sha256 {:?} is not 64 hex digits", e.sha256)));
        };
        let file = base.join(&e.path);
        if !file.is_file() {
            bail!(at(&format!("{} is not a file", file.display())));
        }
        items.push(Item {
            key: e.key,
            arch: e.arch,
            path: file,
            sha256: Some(sha256),
        });
    }
    Ok(items)
}

/// Every `*.hsaco` under `dir/<arch>/`, as (key, arch, path), sorted.
pub(super) fn scan_pack_dir(dir: &Path) -> anyhow::Result<Vec<(String, String, PathBuf)>> {
    let mut found = Vec::new();
    let mut arch_dirs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    arch_dirs.sort_by_key(|e| e.file_name());
    for entry in arch_dirs {
        let path = entry.path();
        if !entry.file_type()?.is_dir() {
            bail!(
                "{} is not an arch directory (expected DIR/<arch>/<key>{SUFFIX})",
                path.display()
            );
        }
        let arch = entry
            .file_name()
            .into_string()
            .map_err(|n| anyhow::anyhow!("arch directory {n:?} is not UTF-8"))?;
        let mut stack = vec![path.clone()];
        while let Some(d) = stack.pop() {
            for f in
                std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))?
            {
                let f = f?;
                let p = f.path();
                let ty = f.file_type()?;
                if ty.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p
                    .strip_prefix(&path)?
                    .to_str()
                    .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", p.display()))?;
                let Some(key) = rel.strip_suffix(SUFFIX) else {
                    bail!("{} does not end in {SUFFIX}", p.display());
                };
                found.push((key.replace('\\', "/"), arch.clone(), p));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The directory `path` is in (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The file name of `path`, as UTF-8.
fn file_name(path: &Path) -> anyhow::Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("{}: not a file name", path.display()))
}
