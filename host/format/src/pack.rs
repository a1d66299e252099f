//! Packing loose code objects into archives (`kpack archive pack`): the
//! items come from a directory laid out as `archive extract` writes it
//! ([`scan_dir`], `DIR/<arch>/<key>.hsaco`) or from a descriptor listing
//! each entry's TOC key, arch, file and sha256 ([`read_descriptor`]);
//! [`group`] assigns them to archives by [`Layout`] (one archive, or one
//! per processor at `arch_content/<gfx>/kpack/<lib>_<gfx>.kpack`), and
//! [`write_archive`] writes one, each file checked against its sha256,
//! returning what the [`Manifest`] says of it. Where the archives are
//! staged and committed is the caller's (`kpack_fsafe::Outputs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::{from_hex, to_hex};
use crate::{ArchiveWriter, Error, ErrorKind, Result, WriterOptions, Written};

/// Version of the manifest [`Manifest`] is written as.
pub const MANIFEST_VERSION: u32 = 1;
/// Suffix of code object files in a pack directory.
pub const SUFFIX: &str = ".hsaco";

/// How packed items are laid out in archives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One archive, named `name` (its gfx_arch_family the one processor,
    /// unless given).
    Single {
        /// The archive's file name.
        name: String,
    },
    /// One archive per processor: `arch_content/<gfx>/kpack/<lib>_<gfx>.kpack`.
    ArchContent {
        /// The library name.
        lib: String,
    },
}

/// One code object to pack.
#[derive(Debug, Clone)]
pub struct Item {
    /// The TOC key.
    pub key: String,
    /// The target id.
    pub arch: String,
    /// The file holding it.
    pub path: PathBuf,
    /// The sha256 the descriptor promises (checked), if it came from one.
    pub sha256: Option<[u8; 32]>,
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// One entry of a descriptor.
#[derive(Debug, Deserialize)]
pub struct DescribedEntry {
    /// The TOC key (`toc_key` is accepted too).
    #[serde(alias = "toc_key")]
    pub key: String,
    /// The target id.
    pub arch: String,
    /// The file, relative to the descriptor's directory.
    pub path: String,
    /// Its sha256, 64 hex digits.
    pub sha256: String,
}

/// A descriptor: a list of entries, or an object holding them.
/// Deserialize it from JSON (a library build writes it) and check it
/// with [`descriptor_items`].
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Descriptor {
    /// A bare list.
    List(Vec<DescribedEntry>),
    /// `{"entries": [...]}`.
    Object {
        /// The entries.
        entries: Vec<DescribedEntry>,
    },
}

/// The manifest: what was packed where.
#[derive(Debug, Serialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub schema_version: u32,
    /// The program that packed (`kpack <version>`).
    pub tool: String,
    /// The archives.
    pub archives: Vec<ManifestArchive>,
}

/// One archive of the [`Manifest`].
#[derive(Debug, Serialize)]
pub struct ManifestArchive {
    /// Relative to the manifest's directory.
    pub path: String,
    /// Its TOC's gfx_arch_family.
    pub gfx_arch_family: String,
    /// Its size.
    pub bytes: u64,
    /// Its sha256, hex.
    pub sha256: String,
    /// What it holds.
    pub entries: Vec<ManifestEntry>,
}

/// One entry of a [`ManifestArchive`].
#[derive(Debug, Serialize)]
pub struct ManifestEntry {
    /// The TOC key.
    pub key: String,
    /// The target id.
    pub arch: String,
    /// The code object's size.
    pub size: u64,
    /// Its sha256, hex.
    pub sha256: String,
    /// The file it was read from.
    pub source: String,
}

/// The archives to write, by path relative to the output root: each one's
/// gfx_arch_family and items (sorted by key and arch).
pub type Planned = BTreeMap<String, (String, Vec<Item>)>;

/// Where each item goes under `layout`; `family` overrides each archive's
/// gfx_arch_family (required for one archive of several processors). An
/// item listed twice is refused.
pub fn group(layout: &Layout, family: Option<&str>, items: &[Item]) -> Result<Planned> {
    let mut out: Planned = BTreeMap::new();
    match layout {
        Layout::Single { name } => {
            let mut procs: Vec<&str> = items
                .iter()
                .map(|i| kpack_amdgpu::processor_of(&i.arch))
                .collect();
            procs.sort_unstable();
            procs.dedup();
            let family = match (family, procs.as_slice()) {
                (Some(f), _) => f.to_owned(),
                (None, [one]) => (*one).to_owned(),
                (None, _) => {
                    return Err(bad(format!(
                        "--gfx-arch-family is required when packing {} processors into one archive",
                        procs.len()
                    )));
                }
            };
            out.insert(name.clone(), (family, items.to_vec()));
        }
        Layout::ArchContent { lib } => {
            kpack_fsafe::input_name(Path::new("the command line"), "--lib", lib)
                .map_err(|e| bad(e.to_string()))?;
            for it in items {
                let gfx = kpack_amdgpu::processor_of(&it.arch).to_owned();
                let rel = format!(
                    "arch_content/{gfx}/kpack/{}",
                    crate::archive_file_name(lib, &gfx)
                );
                let family = family.map_or_else(|| gfx.clone(), str::to_owned);
                out.entry(rel)
                    .or_insert_with(|| (family, Vec::new()))
                    .1
                    .push(it.clone());
            }
        }
    }
    for (_, list) in out.values_mut() {
        no_twice(list)?;
    }
    Ok(out)
}

/// Sort `list` by key and arch, refusing one listed twice.
fn no_twice(list: &mut [Item]) -> Result<()> {
    list.sort_by(|a, b| (&a.key, &a.arch).cmp(&(&b.key, &b.arch)));
    if let Some(w) = list
        .windows(2)
        .find(|w| (&w[0].key, &w[0].arch) == (&w[1].key, &w[1].arch))
    {
        return Err(bad(format!(
            "{} for {} is listed twice ({} and {})",
            w[0].key,
            w[0].arch,
            w[0].path.display(),
            w[1].path.display()
        )));
    }
    Ok(())
}

/// Write `list` into the archive `staged` (planned as `rel`), each file's
/// sha256 checked against the descriptor's; what the manifest says of it
/// (its `path` left for the caller to fill in).
pub fn write_archive(
    staged: &Path,
    rel: &str,
    options: WriterOptions,
    list: &[Item],
    on_item: &mut dyn FnMut(&Item),
) -> Result<(Written, ManifestArchive)> {
    let family = options.gfx_arch_family.clone();
    let mut w = ArchiveWriter::create(staged, options)?;
    let mut entries = Vec::new();
    for it in list {
        let bytes = std::fs::read(&it.path)
            .map_err(|e| Error::io(format!("cannot read {}", it.path.display()), e))?;
        let digest = crate::sha256(&bytes);
        if let Some(want) = it.sha256.filter(|w| *w != digest) {
            return Err(bad(format!(
                "{}: sha256 is {}, the descriptor says {} ({} for {})",
                it.path.display(),
                to_hex(&digest),
                to_hex(&want),
                it.key,
                it.arch
            )));
        }
        w.add(&it.key, &it.arch, &bytes)?;
        entries.push(ManifestEntry {
            key: it.key.clone(),
            arch: it.arch.clone(),
            size: bytes.len() as u64,
            sha256: to_hex(&digest),
            source: it.path.display().to_string(),
        });
        on_item(it);
    }
    let done = w.finish()?;
    let archive_bytes = std::fs::read(staged)
        .map_err(|e| Error::io(format!("cannot read {}", staged.display()), e))?;
    crate::Archive::open(staged).map_err(|e| {
        Error::new(
            e.kind(),
            format!("{rel}: the archive just written does not read"),
        )
        .with_source(e)
    })?;
    let listed = ManifestArchive {
        path: String::new(),
        gfx_arch_family: family,
        bytes: archive_bytes.len() as u64,
        sha256: to_hex(&crate::sha256(&archive_bytes)),
        entries,
    };
    Ok((done, listed))
}

/// The entries of `parsed`, the descriptor at `path`, their files
/// resolved against its directory; every field checked (keys and arches
/// as the TOC takes them, sha256 as 64 hex digits, files present).
pub fn descriptor_items(path: &Path, parsed: Descriptor) -> Result<Vec<Item>> {
    let entries = match parsed {
        Descriptor::List(l) | Descriptor::Object { entries: l } => l,
    };
    let base = parent_of(path);
    let mut items = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let at = |what: &str| format!("{}: entry {i}: {what}", path.display());
        if e.key.is_empty() {
            return Err(bad(at("empty key")));
        }
        kpack_amdgpu::TargetId::parse_qualified(&e.arch)
            .map_err(|err| bad(at(&format!("arch {:?}", e.arch))).with_source(err))?;
        let Some(sha256) = from_hex(&e.sha256) else {
            return Err(bad(at(&format!(
                "sha256 {:?} is not 64 hex digits",
                e.sha256
            ))));
        };
        let file = base.join(&e.path);
        if !file.is_file() {
            return Err(bad(at(&format!("{} is not a file", file.display()))));
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
pub fn scan_dir(dir: &Path) -> Result<Vec<Item>> {
    let read = |d: &Path| {
        let cannot = |e| Error::io(format!("cannot read {}", d.display()), e);
        std::fs::read_dir(d)
            .and_then(|rd| rd.collect::<std::io::Result<Vec<_>>>())
            .map_err(cannot)
    };
    let mut found = Vec::new();
    let mut arch_dirs = read(dir)?;
    arch_dirs.sort_by_key(|e| e.file_name());
    for entry in arch_dirs {
        let path = entry.path();
        if !path.is_dir() || path.is_symlink() {
            return Err(bad(format!(
                "{} is not an arch directory (expected DIR/<arch>/<key>{SUFFIX})",
                path.display()
            )));
        }
        let arch = entry
            .file_name()
            .into_string()
            .map_err(|n| bad(format!("arch directory {n:?} is not UTF-8")))?;
        let mut stack = vec![path.clone()];
        while let Some(d) = stack.pop() {
            for f in read(&d)? {
                let p = f.path();
                if p.is_dir() && !p.is_symlink() {
                    stack.push(p);
                    continue;
                }
                let rel = p
                    .strip_prefix(&path)
                    .ok()
                    .and_then(Path::to_str)
                    .ok_or_else(|| bad(format!("{} is not UTF-8", p.display())))?;
                let Some(key) = rel.strip_suffix(SUFFIX) else {
                    return Err(bad(format!("{} does not end in {SUFFIX}", p.display())));
                };
                found.push(Item {
                    key: key.replace('\\', "/"),
                    arch: arch.clone(),
                    path: p.clone(),
                    sha256: None,
                });
            }
        }
    }
    found.sort_by(|a, b| (&a.key, &a.arch, &a.path).cmp(&(&b.key, &b.arch, &b.path)));
    Ok(found)
}

/// The directory `path` is in (`.` for a bare name).
pub fn parent_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, arch: &str) -> Item {
        Item {
            key: key.into(),
            arch: arch.into(),
            path: PathBuf::from(format!("{arch}/{key}.hsaco")),
            sha256: None,
        }
    }

    #[test]
    fn groups_one_archive_per_processor_under_arch_content() {
        let items = [
            item("b", "gfx90a:xnack+"),
            item("a", "gfx1100"),
            item("a", "gfx90a"),
        ];
        let plan = group(&Layout::ArchContent { lib: "blas".into() }, None, &items).expect("group");
        let names: Vec<&str> = plan.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "arch_content/gfx1100/kpack/blas_gfx1100.kpack",
                "arch_content/gfx90a/kpack/blas_gfx90a.kpack"
            ]
        );
        let (family, list) = &plan["arch_content/gfx90a/kpack/blas_gfx90a.kpack"];
        assert_eq!(family, "gfx90a");
        assert_eq!(
            list.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn refuses_one_archive_of_two_processors_without_a_family_and_duplicates() {
        let single = Layout::Single {
            name: "x.kpack".into(),
        };
        let two = [item("a", "gfx1100"), item("a", "gfx90a")];
        let e = group(&single, None, &two).expect_err("two processors");
        assert!(e.to_string().contains("--gfx-arch-family"), "{e}");
        assert!(group(&single, Some("mixed"), &two).is_ok());
        let twice = [item("a", "gfx90a"), item("a", "gfx90a")];
        let e = group(&single, None, &twice).expect_err("twice");
        assert!(e.to_string().contains("listed twice"), "{e}");
    }
}
