//! What `kpack archive list` and `kpack archive list --summary` print of
//! an archive: the `--json` document ([`Listing`]), the table
//! ([`table`]) and the summary ([`summary`]).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::{Archive, Entry, Scheme};

/// Widest key column of the table: a format width over 65,535 panics, and
/// a longer key only pushes its own row's columns right.
const MAX_KEY_COLUMN: usize = 120;

/// One entry of the `archive list --json` document.
#[derive(Debug, Serialize)]
pub struct ListedEntry<'a> {
    key: &'a str,
    arch: &'a str,
    ordinal: u64,
    original_size: u64,
    stored_size: u64,
    /// Stored over original size, to 4 places: zstd-delta archives only.
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<f64>,
    /// The delta base (null for a base itself): zstd-delta archives only.
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<Option<ListedBase>>,
}

/// The delta base of a listed entry.
#[derive(Debug, Serialize)]
pub struct ListedBase {
    ordinal: u64,
    key: String,
    arch: String,
}

/// The `archive list --json` document of one archive.
#[derive(Debug, Serialize)]
pub struct Listing<'a> {
    path: String,
    group_name: &'a str,
    gfx_arch_family: &'a str,
    gfx_arches: &'a [String],
    compression_scheme: &'a str,
    file_size: u64,
    entries: Vec<ListedEntry<'a>>,
}

impl<'a> Listing<'a> {
    /// The document of `a`, read from `file`.
    pub fn of(file: &Path, a: &'a Archive) -> Listing<'a> {
        let delta = a.scheme() == Scheme::ZstdDelta;
        let entries = a
            .entries()
            .map(|e| ListedEntry {
                key: e.key(),
                arch: e.arch(),
                ordinal: e.ordinal(),
                original_size: e.original_size(),
                stored_size: e.stored_size(),
                ratio: delta.then(|| (ratio(e) * 10_000.0).round() / 10_000.0),
                base: delta.then(|| {
                    base_of(a, e).map(|(ordinal, key, arch)| ListedBase { ordinal, key, arch })
                }),
            })
            .collect();
        Listing {
            path: file.display().to_string(),
            group_name: a.group_name(),
            gfx_arch_family: a.gfx_arch_family(),
            gfx_arches: a.arches(),
            compression_scheme: a.scheme().as_str(),
            file_size: a.file_size(),
            entries,
        }
    }
}

/// The delta base of `e` in `a`: (ordinal, key, arch).
fn base_of(a: &Archive, e: &Entry) -> Option<(u64, String, String)> {
    e.base()
        .and_then(|o| a.entry_by_ordinal(o))
        .map(|b| (b.ordinal(), b.key().to_owned(), b.arch().to_owned()))
}

/// Stored size over original size.
fn ratio(e: &Entry) -> f64 {
    e.stored_size() as f64 / e.original_size().max(1) as f64
}

/// `archive list`'s text of `a`, read from `file`: a header line, then one
/// row per entry (zstd-delta archives also show each entry's ratio and
/// base; other schemes keep their established columns).
pub fn table(file: &Path, a: &Archive) -> String {
    let mut out = format!(
        "# {} group={:?} family={:?} arches={} scheme={} entries={}\n",
        file.display(),
        a.group_name(),
        a.gfx_arch_family(),
        a.arches().join(","),
        a.scheme().as_str(),
        a.entry_count()
    );
    let width = a
        .entries()
        .map(|e| e.key().len())
        .max()
        .unwrap_or(3)
        .clamp(3, MAX_KEY_COLUMN);
    if a.scheme() == Scheme::ZstdDelta {
        delta_rows(&mut out, a, width);
        return out;
    }
    let _ = writeln!(
        out,
        "{:width$}  {:16}  {:>12}  {:>12}",
        "KEY", "ARCH", "SIZE", "STORED"
    );
    for e in a.entries() {
        let _ = writeln!(
            out,
            "{:width$}  {:16}  {:>12}  {:>12}",
            e.key(),
            e.arch(),
            e.original_size(),
            e.stored_size()
        );
    }
    out
}

/// The rows of a zstd-delta archive: with stored/original ratio and base.
fn delta_rows(out: &mut String, a: &Archive, width: usize) {
    let _ = writeln!(
        out,
        "{:width$}  {:16}  {:>12}  {:>12}  {:>6}  BASE",
        "KEY", "ARCH", "SIZE", "STORED", "RATIO"
    );
    for e in a.entries() {
        let base = match base_of(a, e) {
            Some((_, key, arch)) if key == e.key() => arch,
            Some((_, key, arch)) => format!("{key} {arch}"),
            None => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:width$}  {:16}  {:>12}  {:>12}  {:>6.3}  {base}",
            e.key(),
            e.arch(),
            e.original_size(),
            e.stored_size(),
            ratio(e)
        );
    }
}

/// `archive list --summary`'s text of `a`, read from `file`: names,
/// arches, binaries, kernels and their total size.
pub fn summary(file: &Path, a: &Archive) -> String {
    let binaries: std::collections::BTreeSet<&str> = a
        .entries()
        .map(|e| e.key().split_once('#').map_or(e.key(), |(b, _)| b))
        .collect();
    let total: u64 = a.entries().map(|e| e.original_size()).sum();
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    format!(
        "Kpack: {name}\nGroup: {}\nArch family: {}\nArches: {}\nBinaries: {}\nTotal kernels: {}\nTotal size: {total} bytes\n",
        a.group_name(),
        a.gfx_arch_family(),
        a.arches().join(", "),
        binaries.len(),
        a.entry_count()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArchiveWriter, Compression, WriterOptions};

    fn archive(dir: &Path, compression: Compression) -> Archive {
        let path = dir.join("a_gfx1100.kpack");
        let options = WriterOptions {
            group_name: "a".into(),
            gfx_arch_family: "gfx1100".into(),
            compression,
            ..Default::default()
        };
        let mut w = ArchiveWriter::create(&path, options).unwrap();
        w.add("lib/liba.so#0", "gfx1100", &[7u8; 300]).unwrap();
        w.add("lib/liba.so#1", "gfx1100", &[9u8; 200]).unwrap();
        w.add("lib/libb.so#0", "gfx1100", &[1u8; 100]).unwrap();
        w.finish().unwrap();
        Archive::open(&path).unwrap()
    }

    #[test]
    fn the_summary_counts_binaries_kernels_and_bytes() {
        let d = tempfile::tempdir().unwrap();
        let a = archive(d.path(), Compression::None);
        let s = summary(Path::new("x/a_gfx1100.kpack"), &a);
        assert!(s.starts_with("Kpack: a_gfx1100.kpack\nGroup: a\n"), "{s}");
        assert!(
            s.contains("Binaries: 2\nTotal kernels: 3\nTotal size: 600 bytes\n"),
            "{s}"
        );
    }

    #[test]
    fn the_table_has_a_row_per_entry_and_delta_archives_their_bases() {
        let d = tempfile::tempdir().unwrap();
        let plain = archive(d.path(), Compression::None);
        let t = table(Path::new("a.kpack"), &plain);
        assert_eq!(t.lines().count(), 2 + 3, "{t}");
        assert!(!t.contains("BASE"), "{t}");
        let e = tempfile::tempdir().unwrap();
        let delta = archive(e.path(), Compression::ZstdDelta { level: 3 });
        let t = table(Path::new("a.kpack"), &delta);
        assert!(t.lines().nth(1).unwrap().ends_with("BASE"), "{t}");
        let doc = serde_json::to_value(Listing::of(Path::new("a.kpack"), &delta)).unwrap();
        assert_eq!(doc["compression_scheme"], "zstd-delta");
        assert!(doc["entries"][0].get("base").is_some(), "{doc}");
        let doc = serde_json::to_value(Listing::of(Path::new("a.kpack"), &plain)).unwrap();
        assert!(doc["entries"][0].get("base").is_none(), "{doc}");
    }
}
