//! `kpack archive list|extract|pack|convert|replace|merge|verify`: work
//! with `.kpack` files.
//!
//! File naming convention shared by `extract` and `pack` (one is the inverse
//! of the other): a code object for TOC key `K` and arch `A` lives at
//! `DIR/A/K.hsaco`. The key's `/` become directories, so
//! `lib/libfoo.so#0` for `gfx1100` is `DIR/gfx1100/lib/libfoo.so#0.hsaco`.
//! Keys that would escape `DIR` (absolute, `..`, empty components) are
//! refused.

mod convert;
mod edit;
mod pack;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use kpack_format::{Archive, Compression, Verification, VerifiedArchive};
use kpack_fsafe::{Existing, Order, Outputs};

use crate::exit::{CliError, CliResult};

/// Version of the `--json` output of `archive list` and `archive verify`.
/// Suffix of code object files in `extract`/`pack` directories.
const SUFFIX: &str = ".hsaco";

/// Arguments of `kpack archive`.
#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// List the entries of an archive (key, arch, sizes).
    #[command(after_long_help = "\
Compatibility with AMD's rocm-kpack flags (kpack_tool list): also accepted, hidden \
from this list: --summary/-s (name, group, arch family, binary and kernel counts, \
total uncompressed bytes).")]
    List {
        /// The .kpack file.
        file: PathBuf,
        /// Machine-readable output (schema_version 1).
        #[arg(long)]
        json: bool,
        /// Print the full deterministic text dump instead of the table.
        #[arg(long, conflicts_with = "json")]
        dump: bool,
        /// AMD's `kpack_tool list --summary`: totals instead of the table.
        #[arg(short, long, hide = true, conflicts_with_all = ["json", "dump"])]
        summary: bool,
    },
    /// Write code objects to DIR/<arch>/<key>.hsaco.
    Extract {
        /// The .kpack file.
        file: PathBuf,
        /// Output directory (created if missing); `-` writes the one entry
        /// that --key/--arch select to stdout.
        #[arg(short, long)]
        output: PathBuf,
        /// Only this TOC key (exact).
        #[arg(long)]
        key: Option<String>,
        /// Only this architecture (exact).
        #[arg(long)]
        arch: Option<String>,
        /// Replace existing files in the output directory.
        #[arg(long)]
        force: bool,
    },
    /// Build archives from DIR/<arch>/<key>.hsaco files or a descriptor
    /// (key, arch, path, sha256 per entry), with a manifest.
    Pack(pack::PackArgs),
    /// Re-encode archives losslessly: `zstd-delta` joins the inputs into one
    /// family archive `OUTDIR/<group>_<family>.kpack`; `zstd`
    /// (`zstd-per-kernel`) and `none` write one archive per processor,
    /// `OUTDIR/<group>_<processor>.kpack`, the names markers expect.
    Convert {
        /// The .kpack files (one group_name).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output directory (created if missing).
        #[arg(short, long)]
        output: PathBuf,
        /// Storage scheme of the outputs.
        #[arg(long, value_enum)]
        compression: Scheme,
        #[command(flatten)]
        level: crate::archive_args::LevelArg,
        /// Replace existing output archives.
        #[arg(long)]
        force: bool,
    },
    /// Put the entries of NEW whose keys match in place of BASE's (a
    /// coverage build's kernels into a normal build's archive), writing OUT.
    Replace {
        /// The archive to start from.
        base: PathBuf,
        /// The archive whose entries go in.
        #[arg(long = "from", value_name = "NEW")]
        from: PathBuf,
        /// Globs over NEW's TOC keys (`*` also matches `/`); each must match.
        #[arg(long, required = true, num_args = 1.., value_name = "GLOB")]
        keys: Vec<String>,
        /// Allow entries BASE does not have (their arch must still be one
        /// BASE lists).
        #[arg(long)]
        add: bool,
        /// The archive to write.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        level: crate::archive_args::LevelArg,
        /// Replace an existing output archive.
        #[arg(long)]
        force: bool,
        /// Most bytes of one decoded code object held in memory (512M, 2G,
        /// or bytes); a larger entry is copied as its zstd frame into a
        /// zstd-per-kernel output, and refused otherwise.
        #[arg(long, value_name = "SIZE", default_value = "256M",
              value_parser = kpack_bundle::parse_size)]
        max_memory: u64,
    },
    /// Join archives with disjoint (key, arch) entries into one, with the
    /// first one's group, family and scheme.
    Merge {
        /// The .kpack files.
        #[arg(required = true, num_args = 2..)]
        files: Vec<PathBuf>,
        /// The archive to write.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        level: crate::archive_args::LevelArg,
        /// Replace an existing output archive.
        #[arg(long)]
        force: bool,
        /// Most bytes of one decoded code object held in memory (512M, 2G,
        /// or bytes); a larger entry is copied as its zstd frame into a
        /// zstd-per-kernel output, and refused otherwise.
        #[arg(long, value_name = "SIZE", default_value = "256M",
              value_parser = kpack_bundle::parse_size)]
        max_memory: u64,
    },
    /// Check archives strictly and decode every kernel; exit 1 on findings.
    Verify {
        /// The .kpack files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Machine-readable output (schema_version 1).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Scheme {
    /// Scheme "none".
    None,
    /// Scheme "zstd-per-kernel".
    #[value(alias = "zstd-per-kernel")]
    Zstd,
    /// Scheme "zstd-delta" (KPAK v2; AMD's loader cannot read it).
    ZstdDelta,
}

impl Scheme {
    fn compression(self, level: i32) -> Compression {
        match self {
            Scheme::None => Compression::None,
            Scheme::Zstd => Compression::Zstd { level },
            Scheme::ZstdDelta => Compression::ZstdDelta { level },
        }
    }
}

/// Run `kpack archive`.
pub fn run(args: Args) -> CliResult {
    match args.action {
        Action::List {
            file,
            json,
            dump,
            summary,
        } => {
            if summary {
                summarise(&file)
            } else {
                list(&file, json, dump)
            }
        }
        Action::Extract {
            file,
            output,
            key,
            arch,
            force,
        } => extract(&file, &output, key.as_deref(), arch.as_deref(), force),
        Action::Pack(args) => pack::run(args),
        Action::Convert {
            files,
            output,
            compression,
            level,
            force,
        } => convert::convert(&files, &output, compression.compression(level.level), force),
        Action::Replace {
            base,
            from,
            keys,
            add,
            output,
            level,
            force,
            max_memory,
        } => {
            let out = edit::Out {
                path: &output,
                level: level.level,
                force,
                max_memory,
            };
            edit::replace(&base, &from, &keys, add, &out)
        }
        Action::Merge {
            files,
            output,
            level,
            force,
            max_memory,
        } => {
            let out = edit::Out {
                path: &output,
                level: level.level,
                force,
                max_memory,
            };
            edit::merge(&files, &out)
        }
        Action::Verify { files, json } => verify(&files, json),
    }
}

pub(crate) fn open(file: &Path) -> anyhow::Result<Archive> {
    crate::safety::regular_file(file)?;
    Ok(Archive::open(file)?)
}

/// AMD's `list --summary` lines; sizes from the TOC (what decoding yields:
/// `archive verify` is the command that decodes and checks every entry).
fn summarise(file: &Path) -> CliResult {
    let a = open(file)?;
    print!("{}", kpack_format::listing::summary(file, &a));
    Ok(())
}

fn list(file: &Path, json: bool, dump: bool) -> CliResult {
    let a = open(file)?;
    if dump {
        print!("{}", a.dump());
    } else if json {
        crate::json::print(&kpack_format::listing::Listing::of(file, &a))?;
    } else {
        print!("{}", kpack_format::listing::table(file, &a));
    }
    Ok(())
}

fn entry_path(dir: &Path, key: &str, arch: &str) -> anyhow::Result<PathBuf> {
    if !kpack_fsafe::is_plain_relative(key) || !kpack_fsafe::is_plain_name(arch) {
        bail!(
            "entry {key:?} {arch:?} cannot be a file name under {}",
            dir.display()
        );
    }
    Ok(dir.join(arch).join(format!("{key}{SUFFIX}")))
}

fn extract(
    file: &Path,
    out: &Path,
    key: Option<&str>,
    arch: Option<&str>,
    force: bool,
) -> CliResult {
    let a = open(file)?;
    let mut chosen = Vec::new();
    for e in a.entries() {
        if key.is_some_and(|k| k != e.key()) || arch.is_some_and(|ar| ar != e.arch()) {
            continue;
        }
        if crate::safety::is_stdout(out) {
            chosen.push((e, PathBuf::new()));
            continue;
        }
        let rel = entry_path(Path::new(""), e.key(), e.arch())?;
        crate::safety::not_existing(&out.join(&rel), force)?;
        chosen.push((e, rel));
    }
    let written = chosen.len();
    if written == 0 {
        let mut hint = String::new();
        if let Some(k) = key {
            let keys: Vec<_> = a.binaries().take(10).collect();
            hint = format!(
                " (key {k:?}; available keys: {keys:?}; arches: {:?})",
                a.arches()
            );
        } else if let Some(ar) = arch {
            hint = format!(" (arch {ar:?}; available arches: {:?})", a.arches());
        }
        return Err(anyhow::anyhow!("nothing to extract from {}{hint}", file.display()).into());
    }
    if crate::safety::is_stdout(out) {
        // `-o -`: one entry's code object to stdout, for pipes.
        let [(e, _)] = chosen.as_slice() else {
            return Err(anyhow::anyhow!(
                "-o -: {}: --key/--arch matched {written} entries; stdout takes exactly one",
                file.display()
            )
            .into());
        };
        crate::safety::write_stdout(&a.read(e)?)?;
        return Ok(());
    }
    write_entries(&a, &chosen, (file, out), force)
}

/// Decode `chosen` from the archive `file` into the staged outputs of
/// `out` (never onto `file` itself), then commit them whole: a corrupt
/// entry leaves nothing behind, not the entries before it.
fn write_entries(
    a: &Archive,
    chosen: &[(&kpack_format::Entry, PathBuf)],
    (file, out): (&Path, &Path),
    force: bool,
) -> CliResult {
    let mut outputs = crate::safety::create_outputs(
        Outputs::builder(out, "extract", Existing::from_force(force)).inputs(&[file]),
    )?;
    let mut sizes = Vec::new();
    for (e, rel) in chosen {
        let rel = rel
            .to_str()
            .map(|r| r.replace('\\', "/"))
            .unwrap_or_default();
        let path = outputs.plan(&rel, Order::First)?;
        let bytes = a.read(e)?;
        std::fs::write(&path, &bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
        sizes.push(bytes.len());
    }
    for (dest, size) in outputs.commit()?.iter().zip(sizes) {
        println!("{}\t{size}", dest.display());
    }
    Ok(())
}

/// The line `archive pack` and `archive convert` print per archive written.
pub(crate) fn print_written(written: &kpack_format::Written) {
    println!(
        "{}\t{} entries\t{} bytes",
        written.path.display(),
        written.entries,
        written.file_size
    );
}

/// Check every archive strictly (`kpack_format`'s rules, shared with
/// `kpack verify`), printing each one's lines as it is checked.
fn verify(files: &[PathBuf], json: bool) -> CliResult {
    let mut doc = Verification::default();
    for file in files {
        crate::safety::regular_file(file)?;
        let verified = VerifiedArchive::check(file)?;
        if !json {
            print!("{}", verified.text());
        }
        doc.archives.push(verified);
    }
    if json {
        crate::json::print(&doc)?;
    }
    if doc.ok() {
        Ok(())
    } else {
        Err(CliError::Findings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_path_refuses_keys_that_escape_the_directory() {
        let d = Path::new("/out");
        assert_eq!(
            entry_path(d, "lib/a.so#0", "gfx900").unwrap(),
            Path::new("/out/gfx900/lib/a.so#0.hsaco")
        );
        for (k, a) in [
            ("../x#0", "gfx900"),
            ("/abs#0", "gfx900"),
            ("a/./b#0", "gfx900"),
            ("k#0", "../x"),
            ("k#0", "a/b"),
            ("", "g"),
            ("a//b", "g"),
        ] {
            assert!(entry_path(d, k, a).is_err(), "{k:?} {a:?}");
        }
    }
}
