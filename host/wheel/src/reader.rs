//! Reading a wheel: validate its name, `.dist-info` (WHEEL, METADATA,
//! RECORD), every entry's path and RECORD hash, and unpack it into a
//! directory with one subtree per install scheme ([`Unpacked`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::Digest;

use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::name::{WheelName, normalize};
use crate::progress::Progress;
use crate::record::{format_sha256, hash_matches, parse_record};

/// The install schemes whose trees are split (their files install relative
/// to one another, so a marker's relative search path keeps working).
/// `root` is the wheel's root (purelib or platlib per `Root-Is-Purelib`).
pub(crate) const SPLIT_SCHEMES: [&str; 3] = ["root", "purelib", "platlib"];

/// One file of the input wheel.
#[derive(Debug, Clone)]
pub(crate) struct FileMeta {
    /// Unix permission bits from the zip's external attributes (0o644 if none).
    pub mode: u32,
    /// Index of the entry in the input zip.
    pub index: usize,
    /// Uncompressed size.
    pub size: u64,
    /// Its RECORD hash (sha256), as checked.
    pub hash: String,
}

/// Where an entry was unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Into the split tree of a scheme (`root`, `purelib`, `platlib`), at `rel`.
    Split(&'static str, String),
    /// Kept as is (`.dist-info`, other `.data` schemes), at its wheel path.
    Keep,
}

/// A wheel unpacked into `dir`: `dir/<scheme>/…` per split scheme;
/// everything else is only checked, not written out.
#[derive(Debug)]
pub(crate) struct Unpacked {
    pub name: WheelName,
    /// `<name>-<version>.dist-info`
    pub dist_info: String,
    /// `<name>-<version>.data`
    pub data_dir: String,
    pub wheel: Headers,
    pub metadata: Headers,
    /// METADATA as written (AMD's layout inserts its lines into the text).
    pub metadata_text: String,
    /// Every file, by wheel path.
    pub files: BTreeMap<String, FileMeta>,
    /// Directory entries (without the trailing `/`) and their modes.
    pub dirs: BTreeMap<String, u32>,
    /// Problems that do not stop the split.
    pub warnings: Vec<String>,
    /// Bytes of the input file.
    pub bytes: u64,
}

impl Unpacked {
    /// Where a wheel path goes.
    pub fn route(&self, path: &str) -> Route {
        if let Some(rest) = path
            .strip_prefix(&self.data_dir)
            .and_then(|r| r.strip_prefix('/'))
        {
            if let Some((scheme, rel)) = rest.split_once('/')
                && let Some(s) = SPLIT_SCHEMES[1..].iter().find(|s| **s == scheme)
            {
                return Route::Split(s, rel.to_string());
            }
            return Route::Keep;
        }
        if path.starts_with(&format!("{}/", self.dist_info)) {
            return Route::Keep;
        }
        Route::Split("root", path.to_string())
    }

    /// The wheel path of a file at `rel` in split scheme `scheme`, for a
    /// wheel whose `.data` directory is `data_dir`.
    pub fn wheel_path(data_dir: &str, scheme: &str, rel: &str) -> String {
        if scheme == "root" {
            rel.to_string()
        } else {
            format!("{data_dir}/{scheme}/{rel}")
        }
    }

    /// `Root-Is-Purelib` as written in WHEEL.
    pub fn root_is_purelib(&self) -> &str {
        self.wheel.get("Root-Is-Purelib").unwrap_or("false")
    }
}

/// Most bytes `WHEEL` and `METADATA` may inflate to (real ones are a few
/// KiB; a long description a few hundred).
pub(crate) const MAX_METADATA: u64 = 4 << 20;
/// Most bytes `RECORD` may inflate to (about 100 bytes a row: some 160,000
/// files).
pub(crate) const MAX_RECORD: u64 = 16 << 20;

/// Entry `name` as text, read only up to `cap` bytes: a larger one is
/// refused before more of it is inflated.
fn read_small(
    zip: &mut zip::ZipArchive<File>,
    input: &Path,
    name: &str,
    cap: u64,
) -> Result<String> {
    let f = zip
        .by_name(name)
        .map_err(|e| Error::zip(input, &format!("entry {name}"), e))?;
    let mut text = String::new();
    f.take(cap + 1).read_to_string(&mut text).map_err(|e| {
        Error::invalid(input, format!("entry {name}: cannot read as UTF-8 text")).with_source(e)
    })?;
    if text.len() as u64 > cap {
        return Err(Error::invalid(
            input,
            format!("entry {name} is larger than {cap} bytes, the most kpack reads of it"),
        ));
    }
    Ok(text)
}

/// Limits on what unpacking a wheel may inflate, so a small crafted zip
/// (a 2 MB wheel holding a 2 GiB entry of zeros) cannot fill the disk or
/// spend minutes inflating. Raise them for genuinely huge wheels
/// (`kpack wheel split --max-unpacked-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes all entries together may inflate to (default 64 GiB).
    pub max_unpacked_size: u64,
    /// Most an entry larger than [`Limits::RATIO_FLOOR`] may inflate per
    /// byte stored (default 200: real libraries and data compress far
    /// less; deflate's own ceiling is about 1030).
    pub max_ratio: u64,
    /// Most all entries together may inflate per byte of the wheel file
    /// (default 50: real wheels inflate 2 to 10 times), so many small
    /// entries, each under [`Limits::RATIO_FLOOR`], cannot add up to a
    /// bomb. Wheels up to [`Limits::WHEEL_RATIO_FLOOR`] unpacked are never
    /// refused for it.
    pub max_wheel_ratio: u64,
}

impl Limits {
    /// Entries up to this size are never refused for their ratio (a small
    /// file of zeros is harmless).
    pub const RATIO_FLOOR: u64 = 16 << 20;

    /// A wheel may always inflate to this much, whatever its ratio.
    pub const WHEEL_RATIO_FLOOR: u64 = 64 << 20;

    /// Most bytes a wheel file of `bytes` bytes may inflate to: the smaller
    /// of [`Limits::max_unpacked_size`] and [`Limits::max_wheel_ratio`]
    /// times its size (at least [`Limits::WHEEL_RATIO_FLOOR`]).
    pub fn budget(&self, bytes: u64) -> u64 {
        self.max_wheel_ratio
            .saturating_mul(bytes)
            .max(Self::WHEEL_RATIO_FLOOR)
            .min(self.max_unpacked_size)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_unpacked_size: 64 << 30,
            max_ratio: 200,
            max_wheel_ratio: 50,
        }
    }
}

/// A wheel path that is safe and canonical: a plain relative path
/// ([`kpack_fsafe::is_plain_relative`]; a directory's trailing `/` aside),
/// and no `:` in its first component (`C:x` is drive-relative on Windows).
fn check_path(name: &str) -> std::result::Result<(), UnsafePath> {
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    let drive = trimmed.split('/').next().is_some_and(|c| c.contains(':'));
    if drive || !kpack_fsafe::is_plain_relative(trimmed) {
        return Err(UnsafePath { name: name.into() });
    }
    Ok(())
}

/// A wheel entry name [`check_path`] refuses.
#[derive(Debug, thiserror::Error)]
#[error("unsafe or non-canonical path {}", crate::error::quote(name))]
struct UnsafePath {
    /// The entry name as the zip holds it.
    name: String,
}

/// Open and unpack `input` into `dir` (which must exist and be empty):
/// the wheel's name and zip directory, its `.dist-info`, then every entry
/// inflated, checked and (for the split schemes) written.
pub(crate) fn unpack(
    input: &Path,
    dir: &Path,
    limits: &Limits,
    progress: Option<&dyn Progress>,
) -> Result<Unpacked> {
    let (name, bytes, mut zip) = open_wheel(input)?;
    let (dist_info, data_dir) = find_dist_info(input, &zip, &name)?;
    let meta = read_dist_info(&mut zip, input, &dist_info)?;
    check_metadata_names(input, &dist_info, &meta.metadata, &name)?;
    let mut un = Unpacked {
        name,
        dist_info,
        data_dir,
        wheel: meta.wheel,
        metadata: meta.metadata,
        metadata_text: meta.metadata_text,
        files: BTreeMap::new(),
        dirs: BTreeMap::new(),
        warnings: Vec::new(),
        bytes,
    };
    let tree = kpack_fsafe::Tree::open(dir).map_err(|e| Error::io(dir, "cannot open", e))?;
    let mut inflater = Inflater {
        input,
        tree: &tree,
        limits,
        buf: vec![0u8; 1 << 20],
        total: 0,
        wheel_bytes: bytes,
        budget: limits.budget(bytes),
        progress,
    };
    // What the central directory says it inflates to: only shown.
    let declared: u64 = (0..zip.len())
        .filter_map(|i| zip.by_index_raw(i).ok().map(|e| e.size()))
        .fold(0, u64::saturating_add);
    crate::progress::phase(progress, &format!("unpacking {}", un.name), declared);
    for i in 0..zip.len() {
        inflater.entry(&mut zip, i, &mut un, &meta.expected, &meta.record_name)?;
    }
    let unhashed_rows = meta
        .expected
        .iter()
        .filter(|(p, (hash, _))| hash.is_empty() && !unhashed(&meta.record_name, p))
        .count();
    if unhashed_rows > 0 {
        un.warnings.push(format!(
            "{unhashed_rows} RECORD rows carry no hash; accepted, as pip does (the wheels written list every file's sha256)"
        ));
    }
    for p in meta.expected.keys() {
        if !un.files.contains_key(p) {
            un.warnings
                .push(format!("RECORD lists {p}, which is not in the wheel"));
        }
    }
    if !un.files.contains_key(&meta.record_name) {
        return Err(Error::invalid(input, format!("no {}", meta.record_name)));
    }
    Ok(un)
}

/// The parsed file name and METADATA (text) of the wheel at `input`, read
/// without unpacking it (for the extras a host wheel provides).
pub(crate) fn read_metadata(input: &Path) -> Result<(WheelName, String)> {
    let (name, _, mut zip) = open_wheel(input)?;
    let (dist_info, _) = find_dist_info(input, &zip, &name)?;
    let text = read_small(
        &mut zip,
        input,
        &format!("{dist_info}/METADATA"),
        MAX_METADATA,
    )?;
    Ok((name, text))
}

/// The wheel's parsed file name, its size, and its zip directory, whose
/// entry names are all distinct.
fn open_wheel(input: &Path) -> Result<(WheelName, u64, zip::ZipArchive<File>)> {
    let file_name = input
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::invalid(input, "file name is not UTF-8"))?;
    let name = WheelName::parse(file_name).map_err(|e| Error::invalid(input, e.to_string()))?;
    let file = File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    let bytes = file
        .metadata()
        .map_err(|e| Error::io(input, "cannot stat", e))?
        .len();
    let zip = zip::ZipArchive::new(file).map_err(|e| Error::zip(input, "not a zip file", e))?;
    // The zip crate indexes entries by name, so of two entries with one
    // name it keeps the last; which one an installer unpacks is undefined.
    // Compare with the count the central directory itself declares.
    let declared = declared_entries(input)?;
    if declared != Some(zip.len() as u64) {
        return Err(Error::invalid(
            input,
            format!(
                "the central directory declares {} entries but holds {} distinct names: duplicate entry names",
                declared.map_or_else(|| "?".to_string(), |n| n.to_string()),
                zip.len()
            ),
        ));
    }
    Ok((name, bytes, zip))
}

/// The one top-level `.dist-info` directory, which must belong to the
/// wheel's distribution, and the matching `.data` directory.
fn find_dist_info(
    input: &Path,
    zip: &zip::ZipArchive<File>,
    name: &WheelName,
) -> Result<(String, String)> {
    let mut dist_infos: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.split_once('/').map(|(top, _)| top))
        .filter(|top| top.ends_with(".dist-info"))
        .map(str::to_string)
        .collect();
    dist_infos.sort();
    dist_infos.dedup();
    let dist_info = match dist_infos.as_slice() {
        [one] => one.clone(),
        [] => return Err(Error::invalid(input, "no .dist-info directory")),
        many => {
            return Err(Error::invalid(
                input,
                format!("several .dist-info directories: {}", many.join(", ")),
            ));
        }
    };
    let stem = dist_info.trim_end_matches(".dist-info");
    let dist_name = stem.split('-').next().unwrap_or(stem);
    if normalize(dist_name) != normalize(&name.distribution) {
        return Err(Error::invalid(
            input,
            format!(
                "{dist_info} does not belong to distribution {:?}",
                name.distribution
            ),
        ));
    }
    let data_dir = format!("{stem}.data");
    Ok((dist_info, data_dir))
}

/// METADATA's `Name` and `Version` name every output of a split, so they
/// are checked as pip checks them: `Name` a valid distribution name that
/// normalises to the wheel file's own, `Version` of PEP 440's characters
/// (neither can then leave the output directory).
fn check_metadata_names(
    input: &Path,
    dist_info: &str,
    metadata: &Headers,
    name: &WheelName,
) -> Result<()> {
    let field = |f: &str| format!("{dist_info}/METADATA {f}");
    let dist = metadata.get("Name").unwrap_or_default();
    let version = metadata.get("Version").unwrap_or_default();
    kpack_fsafe::input_name(input, &field("Name"), dist).map_err(Error::from)?;
    kpack_fsafe::input_name(input, &field("Version"), version).map_err(Error::from)?;
    if !crate::name::is_valid_name(dist) || normalize(dist) != normalize(&name.distribution) {
        return Err(Error::invalid(
            input,
            format!(
                "{} {dist:?} is not the distribution the file is named for ({:?}); pip refuses such a wheel",
                field("Name"),
                name.distribution
            ),
        ));
    }
    let pep440 = |c: char| c.is_ascii_alphanumeric() || "._+!-".contains(c);
    if !version.chars().all(pep440) {
        return Err(Error::invalid(
            input,
            format!("{} {version:?} is not a version", field("Version")),
        ));
    }
    Ok(())
}

/// WHEEL, METADATA and RECORD of a wheel, checked.
struct DistInfo {
    wheel: Headers,
    metadata: Headers,
    metadata_text: String,
    /// RECORD's rows: path → (hash, size).
    expected: BTreeMap<String, (String, Option<u64>)>,
    /// `<dist-info>/RECORD`.
    record_name: String,
}

fn read_dist_info(
    zip: &mut zip::ZipArchive<File>,
    input: &Path,
    dist_info: &str,
) -> Result<DistInfo> {
    let wheel_text = read_small(zip, input, &format!("{dist_info}/WHEEL"), MAX_METADATA)?;
    let wheel = Headers::parse(&wheel_text)
        .map_err(|e| Error::invalid(input, format!("{dist_info}/WHEEL")).with_source(e))?;
    let version = wheel
        .get("Wheel-Version")
        .ok_or_else(|| Error::invalid(input, format!("{dist_info}/WHEEL has no Wheel-Version")))?;
    if version.split('.').next() != Some("1") {
        return Err(Error::invalid(
            input,
            format!("Wheel-Version {version} is not supported (major version 1 only)"),
        ));
    }
    let metadata_text = read_small(zip, input, &format!("{dist_info}/METADATA"), MAX_METADATA)?;
    let metadata = Headers::parse(&metadata_text)
        .map_err(|e| Error::invalid(input, format!("{dist_info}/METADATA")).with_source(e))?;
    for field in ["Name", "Version"] {
        if metadata.get(field).is_none() {
            return Err(Error::invalid(
                input,
                format!("{dist_info}/METADATA has no {field}"),
            ));
        }
    }
    let record_name = format!("{dist_info}/RECORD");
    let record_text = read_small(zip, input, &record_name, MAX_RECORD)?;
    let record = parse_record(&record_text)
        .map_err(|e| Error::invalid(input, record_name.as_str()).with_source(e))?;
    let mut expected = BTreeMap::new();
    for r in record {
        if expected.insert(r.path.clone(), (r.hash, r.size)).is_some() {
            return Err(Error::invalid(
                input,
                format!("RECORD lists {} twice", r.path),
            ));
        }
    }
    Ok(DistInfo {
        wheel,
        metadata,
        metadata_text,
        expected,
        record_name,
    })
}

/// RECORD itself and its signatures carry no hash.
fn unhashed(record_name: &str, p: &str) -> bool {
    p == record_name || p == format!("{record_name}.jws") || p == format!("{record_name}.p7s")
}

/// What inflating one entry gave.
struct Inflated {
    size: u64,
    crc: u32,
    digest: [u8; 32],
}

/// Entries from this size on are inflated beside a helper thread that
/// hashes and writes them.
#[cfg(not(test))]
const PIPELINE_MIN: u64 = 4 << 20;
#[cfg(test)]
const PIPELINE_MIN: u64 = 64 << 10;

/// Where an entry's inflated bytes go: its hashes, and the file (if any).
struct Sink {
    out: Option<(File, PathBuf)>,
    hasher: sha2::Sha256,
    crc: crc32fast::Hasher,
    size: u64,
}

impl Sink {
    fn take(&mut self, chunk: &[u8]) -> Result<()> {
        self.hasher.update(chunk);
        self.crc.update(chunk);
        self.size += chunk.len() as u64;
        if let Some((out, d)) = &mut self.out {
            out.write_all(chunk)
                .map_err(|e| Error::io(&*d, "cannot write", e))?;
        }
        Ok(())
    }

    fn finish(self) -> Inflated {
        Inflated {
            size: self.size,
            crc: self.crc.finalize(),
            digest: self.hasher.finalize().into(),
        }
    }
}

/// One entry being inflated: its name, its size limit, the bytes so far.
struct EntryRead<'p> {
    path: &'p str,
    max_entry: u64,
    size: u64,
}

/// Inflates entries one by one, counting every byte against the limits.
struct Inflater<'a> {
    input: &'a Path,
    /// The unpack directory: entries are written below it, never through
    /// a symlink.
    tree: &'a kpack_fsafe::Tree,
    limits: &'a Limits,
    buf: Vec<u8>,
    /// Bytes inflated so far, all entries.
    total: u64,
    /// Size of the wheel file.
    wheel_bytes: u64,
    /// Most bytes all entries may inflate to ([`Limits::budget`]).
    budget: u64,
    progress: Option<&'a dyn Progress>,
}

impl Inflater<'_> {
    /// Check, inflate and record entry `i`.
    fn entry(
        &mut self,
        zip: &mut zip::ZipArchive<File>,
        i: usize,
        un: &mut Unpacked,
        expected: &BTreeMap<String, (String, Option<u64>)>,
        record_name: &str,
    ) -> Result<()> {
        let input = self.input;
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::zip(input, &format!("entry #{i}"), e))?;
        let path = entry.name().to_string();
        let Some(mode) = entry_mode(input, &entry, &path, un)? else {
            return Ok(());
        };
        // Kept entries are only hashed: the host wheel copies their
        // compressed bytes straight from the input.
        let dest = match un.route(&path) {
            Route::Split(scheme, rel) => Some((Path::new(scheme).join(&rel), mode | 0o600)),
            Route::Keep => None,
        };
        let got = self.inflate(&mut entry, &path, dest)?;
        // Kept entries are copied as raw compressed bytes with the input's
        // size and CRC fields: they must describe what the bytes inflate to,
        // or the host wheel is one that `zipfile` refuses ("Bad CRC-32").
        let (want_size, want_crc) = (entry.size(), entry.crc32());
        if got.size != want_size || got.crc != want_crc {
            return Err(Error::invalid(
                input,
                format!(
                    "entry {path} inflates to {} bytes with CRC-32 {:08x}, its header says {want_size} bytes with {want_crc:08x}",
                    got.size, got.crc
                ),
            ));
        }
        if !unhashed(record_name, &path)
            && let Some(w) = check_record(input, &path, expected.get(&path), &got)?
        {
            un.warnings.push(w);
        }
        un.files.insert(
            path,
            FileMeta {
                mode,
                index: i,
                size: got.size,
                hash: format_sha256(&got.digest),
            },
        );
        Ok(())
    }

    /// Inflate `entry` into `dest` (if any: a path in the unpack tree and
    /// the file's mode), hashing it, within the limits. On a pool of more than one thread, a helper thread hashes and writes
    /// each buffer while this one inflates the next (the bytes and their
    /// order are the same either way).
    fn inflate(
        &mut self,
        entry: &mut zip::read::ZipFile<'_, File>,
        path: &str,
        dest: Option<(PathBuf, u32)>,
    ) -> Result<Inflated> {
        let out = match dest {
            Some((rel, mode)) => {
                let full = self.tree.path().join(&rel);
                let file = self
                    .tree
                    .create_file(&rel, mode)
                    .map_err(|e| Error::io(&full, "cannot create", e))?;
                Some((file, full))
            }
            None => None,
        };
        let mut sink = Sink {
            out,
            hasher: sha2::Sha256::new(),
            crc: crc32fast::Hasher::new(),
            size: 0,
        };
        let max_entry = self
            .limits
            .max_ratio
            .saturating_mul(entry.compressed_size())
            .max(Limits::RATIO_FLOOR);
        let mut read = EntryRead {
            path,
            max_entry,
            size: 0,
        };
        // A helper thread pays off on large entries only.
        if rayon::current_num_threads() < 2 || entry.size() < PIPELINE_MIN {
            let mut buf = std::mem::take(&mut self.buf);
            let r = self.inflate_serial(entry, &mut read, &mut buf, &mut sink);
            self.buf = buf;
            r?;
            return Ok(sink.finish());
        }
        self.inflate_pipelined(entry, &mut read, sink)
    }

    fn inflate_serial(
        &mut self,
        entry: &mut zip::read::ZipFile<'_, File>,
        read: &mut EntryRead<'_>,
        buf: &mut [u8],
        sink: &mut Sink,
    ) -> Result<()> {
        loop {
            let n = self.read_some(entry, read, buf)?;
            if n == 0 {
                return Ok(());
            }
            sink.take(&buf[..n])?;
        }
    }

    /// Inflate here, hash and write on a helper thread: buffers go there
    /// full and come back empty.
    fn inflate_pipelined(
        &mut self,
        entry: &mut zip::read::ZipFile<'_, File>,
        read: &mut EntryRead<'_>,
        mut sink: Sink,
    ) -> Result<Inflated> {
        let len = self.buf.len();
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<(Vec<u8>, usize)>(1);
        let (empty_tx, empty_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(3);
        std::thread::scope(|s| {
            let helper = s.spawn(move || -> Result<Sink> {
                for (buf, n) in full_rx {
                    sink.take(&buf[..n])?;
                    // Gone only when the inflating side stopped.
                    let _ = empty_tx.send(buf);
                }
                Ok(sink)
            });
            let mut spare = vec![std::mem::take(&mut self.buf), vec![0; len]];
            let produced = loop {
                let mut buf = match spare.pop() {
                    Some(b) => b,
                    // The helper stopped (on an error it returns): a fresh
                    // buffer, whose send then fails.
                    None => empty_rx.recv().unwrap_or_else(|_| vec![0; len]),
                };
                match self.read_some(entry, read, &mut buf) {
                    Ok(0) => break Ok(()),
                    Ok(n) => {
                        if full_tx.send((buf, n)).is_err() {
                            break Ok(());
                        }
                    }
                    Err(e) => break Err(e),
                }
            };
            drop(full_tx);
            let sunk = helper.join().map_err(|_| {
                Error::invalid(
                    self.input,
                    format!("entry {}: the writing thread panicked", read.path),
                )
            })?;
            produced?;
            self.buf = empty_rx.try_recv().unwrap_or_else(|_| vec![0; len]);
            Ok(sunk?.finish())
        })
    }

    /// The next bytes of `entry` into `buf`, counted against the limits
    /// before anything is written.
    fn read_some(
        &mut self,
        entry: &mut zip::read::ZipFile<'_, File>,
        read: &mut EntryRead<'_>,
        buf: &mut [u8],
    ) -> Result<usize> {
        let n = entry.read(buf).map_err(|e| {
            Error::invalid(
                self.input,
                format!("entry {}: cannot decompress", read.path),
            )
            .with_source(e)
        })?;
        read.size += n as u64;
        self.total += n as u64;
        self.check_limits(
            read.path,
            read.size,
            read.max_entry,
            entry.compressed_size(),
        )?;
        crate::progress::advance(self.progress, n as u64);
        Ok(n)
    }

    fn check_limits(&self, path: &str, size: u64, max_entry: u64, stored: u64) -> Result<()> {
        if self.total > self.budget && self.budget < self.limits.max_unpacked_size {
            return Err(Error::invalid(
                self.input,
                format!(
                    "entry {path}: the wheel inflates to more than {} bytes, {} times its {} bytes: a zip bomb? (raise the limit with --max-unpacked-size)",
                    self.budget, self.limits.max_wheel_ratio, self.wheel_bytes
                ),
            ));
        }
        if self.total > self.limits.max_unpacked_size {
            return Err(Error::invalid(
                self.input,
                format!(
                    "entry {path}: the wheel inflates to more than {} bytes (raise the limit with --max-unpacked-size)",
                    self.limits.max_unpacked_size
                ),
            ));
        }
        if size > max_entry {
            return Err(Error::invalid(
                self.input,
                format!(
                    "entry {path} inflates to more than {} times its {stored} stored bytes: a zip bomb?",
                    self.limits.max_ratio,
                ),
            ));
        }
        Ok(())
    }
}

/// The checks on an entry before it is inflated: a safe path, no symlink.
/// Directory entries are recorded in `un.dirs` (`None`); a file's Unix
/// mode is returned.
fn entry_mode(
    input: &Path,
    entry: &zip::read::ZipFile<'_, File>,
    path: &str,
    un: &mut Unpacked,
) -> Result<Option<u32>> {
    check_path(path).map_err(|e| Error::invalid(input, e.to_string()))?;
    // A symlink entry would become a regular file holding the target's
    // name; installers disagree on them, so a wheel may not hold any.
    if entry
        .unix_mode()
        .is_some_and(|m| m & 0o170_000 == 0o120_000)
    {
        return Err(Error::invalid(
            input,
            format!("entry {path} is a symbolic link"),
        ));
    }
    let mode = entry
        .unix_mode()
        .map(|m| m & 0o777)
        .filter(|m| *m != 0)
        .unwrap_or(0o644);
    if entry.is_dir() {
        un.dirs.insert(path.trim_end_matches('/').to_string(), mode);
        return Ok(None);
    }
    if un.files.contains_key(path) {
        return Err(Error::invalid(input, format!("entry {path} appears twice")));
    }
    Ok(Some(mode))
}

/// An inflated entry against its RECORD row (hash and size). A row
/// without a hash is taken as pip takes it (only its size, if any, is
/// checked). A stale row (a wheel retagged or edited without updating its
/// RECORD) is what pip installs without a word: accepted here too, with a
/// warning naming the row, what it says and what the entry is; the zip's
/// CRC-32 still guards the bytes, and every output RECORD is regenerated
/// from the bytes themselves. An entry RECORD does not list, or a hash of
/// an algorithm a wheel may not use, is refused.
fn check_record(
    input: &Path,
    path: &str,
    row: Option<&(String, Option<u64>)>,
    got: &Inflated,
) -> Result<Option<String>> {
    let Some((hash, want_size)) = row else {
        return Err(Error::invalid(
            input,
            format!("entry {path} is not listed in RECORD"),
        ));
    };
    let hash_ok = hash.is_empty()
        || hash_matches(hash, &got.digest, |algo| rehash(input, path, algo))
            .map_err(|e| Error::invalid(input, format!("RECORD entry {path}")).with_source(e))?;
    let size_ok = want_size.is_none_or(|s| s == got.size);
    if hash_ok && size_ok {
        return Ok(None);
    }
    Ok(Some(crate::record::stale_row(
        path,
        hash,
        *want_size,
        &format_sha256(&got.digest),
        got.size,
    )))
}

/// The entry count the end-of-central-directory record (or its zip64
/// twin) declares; `None` if it cannot be found (the zip crate, which
/// found it, would have failed first).
fn declared_entries(input: &Path) -> Result<Option<u64>> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    let len = f
        .seek(SeekFrom::End(0))
        .map_err(|e| Error::io(input, "cannot seek", e))?;
    // The record is 22 bytes plus a comment of at most 65535.
    let tail_len = len.min(22 + 65_535);
    let mut tail = vec![0u8; tail_len as usize];
    f.seek(SeekFrom::Start(len - tail_len))
        .and_then(|_| f.read_exact(&mut tail))
        .map_err(|e| Error::io(input, "cannot read the end of central directory", e))?;
    let u16_at = |b: &[u8], o: usize| b.get(o..o + 2).map(|x| u16::from_le_bytes([x[0], x[1]]));
    let Some(eocd) = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(b"PK\x05\x06"))
    else {
        return Ok(None);
    };
    let count = u16_at(&tail, eocd + 10);
    if count != Some(0xFFFF) {
        return Ok(count.map(u64::from));
    }
    // Zip64: the locator sits just before the record and points at the
    // zip64 record, whose total entry count is at +32.
    let loc = eocd.checked_sub(20).and_then(|l| tail.get(l..l + 20));
    let Some(loc) = loc.filter(|l| l.starts_with(b"PK\x06\x07")) else {
        return Ok(None);
    };
    let mut off = [0u8; 8];
    off.copy_from_slice(&loc[8..16]);
    let mut rec = [0u8; 40];
    f.seek(SeekFrom::Start(u64::from_le_bytes(off)))
        .and_then(|_| f.read_exact(&mut rec))
        .map_err(|e| Error::io(input, "cannot read the zip64 end of central directory", e))?;
    if !rec.starts_with(b"PK\x06\x06") {
        return Ok(None);
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&rec[32..40]);
    Ok(Some(u64::from_le_bytes(n)))
}

/// The sha384 / sha512 digest of entry `name` (RECORDs may use them; rare
/// enough to read the entry a second time).
fn rehash(input: &Path, name: &str, algo: &str) -> Option<Vec<u8>> {
    let mut zip = zip::ZipArchive::new(File::open(input).ok()?).ok()?;
    let mut bytes = Vec::new();
    zip.by_name(name).ok()?.read_to_end(&mut bytes).ok()?;
    match algo {
        "sha384" => Some(sha2::Sha384::digest(&bytes).to_vec()),
        "sha512" => Some(sha2::Sha512::digest(&bytes).to_vec()),
        _ => None,
    }
}

/// Every regular file under `root`, as sorted `/`-separated relative paths.
pub(crate) fn list_files(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    if !root.exists() {
        return Ok(out);
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, "cannot list", e))? {
            let e = e.map_err(|e| Error::io(&d, "cannot list", e))?;
            let p = e.path();
            let ft = e.file_type().map_err(|e| Error::io(&p, "cannot stat", e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(root).unwrap_or(&p);
                let rel = rel
                    .to_str()
                    .ok_or_else(|| Error::invalid(&p, "path is not UTF-8"))?
                    .replace(std::path::MAIN_SEPARATOR, "/");
                out.push((rel, p));
            } else {
                return Err(Error::invalid(&p, "a wheel can hold only regular files"));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn refuses_unsafe_paths() {
        for bad in [
            "../x", "/abs", "a/../b", "a//b", "a\\b", "./a", "", "C:/x", "c:x", "C:",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path("pkg/lib/x.so").is_ok());
        assert!(check_path("pkg/lib/").is_ok());
    }

    use zip::write::SimpleFileOptions;

    const WHEEL_FILE: &str = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n";
    const METADATA: &str = "Metadata-Version: 2.1\nName: p\nVersion: 1\n";

    /// A wheel `p-1-py3-none-any.whl` in `dir` holding `files` (name,
    /// content, unix mode) plus a correct dist-info; `big` adds an entry of
    /// `big` zero bytes at `p/zeros`, written streaming.
    /// A wheel `p-1` holding `files` (name, bytes, mode; mode `0o120777`
    /// makes a symlink entry) and, when `big` > 0, `p/zeros` of that size.
    pub(crate) fn wheel(dir: &Path, files: &[(&str, &[u8], u32)], big: u64) -> PathBuf {
        let path = dir.join("p-1-py3-none-any.whl");
        let mut z = zip::ZipWriter::new(File::create(&path).unwrap());
        let mut record = String::new();
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes, mode) in files {
            if *mode == 0o120_777 {
                let target = std::str::from_utf8(bytes).unwrap();
                z.add_symlink(*name, target, opts).unwrap();
            } else {
                z.start_file(*name, opts.unix_permissions(*mode)).unwrap();
                z.write_all(bytes).unwrap();
            }
            record += &format!(
                "{name},{},{}\n",
                crate::record::record_hash(bytes),
                bytes.len()
            );
        }
        if big > 0 {
            z.start_file("p/zeros", opts.large_file(big > u32::MAX as u64))
                .unwrap();
            let chunk = vec![0u8; 1 << 20];
            let mut h = sha2::Sha256::new();
            let mut left = big;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                z.write_all(&chunk[..n]).unwrap();
                h.update(&chunk[..n]);
                left -= n as u64;
            }
            let d: [u8; 32] = h.finalize().into();
            record += &format!("p/zeros,{},{big}\n", format_sha256(&d));
        }
        for (name, text) in [
            ("p-1.dist-info/WHEEL", WHEEL_FILE),
            ("p-1.dist-info/METADATA", METADATA),
        ] {
            z.start_file(name, opts).unwrap();
            z.write_all(text.as_bytes()).unwrap();
            record += &format!(
                "{name},{},{}\n",
                crate::record::record_hash(text.as_bytes()),
                text.len()
            );
        }
        record += "p-1.dist-info/RECORD,,\n";
        z.start_file("p-1.dist-info/RECORD", opts).unwrap();
        z.write_all(record.as_bytes()).unwrap();
        z.finish().unwrap();
        path
    }

    #[test]
    #[cfg(unix)]
    fn never_unpacks_through_a_symlink_in_the_unpack_directory() {
        let d = tempfile::tempdir().unwrap();
        let w = wheel(d.path(), &[("p/x.so", b"x", 0o755)], 0);
        let (out, victim) = (d.path().join("out"), d.path().join("victim"));
        std::fs::create_dir(&out).unwrap();
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, out.join("root")).unwrap();
        let e = unpack(&w, &out, &Limits::default(), None).unwrap_err();
        assert!(e.to_string().contains("root/p/x.so"), "{e}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }

    fn unpack_err(input: &Path, limits: &Limits) -> String {
        let out = tempfile::tempdir().unwrap();
        let e = unpack(input, out.path(), limits, None).expect_err("must be refused");
        assert_eq!(e.kind(), crate::ErrorKind::Invalid, "{e}");
        e.to_string()
    }

    #[test]
    fn unpacks_a_plain_wheel() {
        let tmp = tempfile::tempdir().unwrap();
        let w = wheel(tmp.path(), &[("p/__init__.py", b"x = 1\n", 0o644)], 0);
        let out = tempfile::tempdir().unwrap();
        let un = unpack(&w, out.path(), &Limits::default(), None).unwrap();
        assert!(un.files.contains_key("p/__init__.py"));
    }

    /// A large entry unpacks to the same bytes and RECORD hash whether a
    /// helper thread hashes and writes it or not; a corrupted one is
    /// refused either way.
    #[test]
    fn unpacks_large_entries_alike_on_one_thread_and_on_several() {
        let tmp = tempfile::tempdir().unwrap();
        let mut x = 0x9e37_79b9u32;
        let body: Vec<u8> = (0..(PIPELINE_MIN as usize) * 5 + 777)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 5 == 0 { x as u8 } else { (i / 11) as u8 }
            })
            .collect();
        let w = wheel(tmp.path(), &[("p/lib.so", &body, 0o755)], 0);
        let mut hashes = Vec::new();
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let out = tempfile::tempdir().unwrap();
            let un = pool
                .install(|| unpack(&w, out.path(), &Limits::default(), None))
                .unwrap();
            let got = std::fs::read(out.path().join("root/p/lib.so")).unwrap();
            assert!(got == body, "{threads} threads: content differs");
            hashes.push(un.files["p/lib.so"].hash.clone());
        }
        assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");
        // The entry's CRC-32 changed: refused, not half-accepted.
        let mut bytes = std::fs::read(&w).unwrap();
        let crc = crc32fast::hash(&body).to_le_bytes();
        assert!(patch(&mut bytes, &crc, &[0, 0, 0, 0]) > 0);
        std::fs::write(&w, &bytes).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let out = tempfile::tempdir().unwrap();
        let e = pool
            .install(|| unpack(&w, out.path(), &Limits::default(), None))
            .expect_err("a bad CRC-32 must be refused");
        assert!(e.to_string().contains("p/lib.so"), "{e}");
    }

    #[test]
    fn refuses_a_wheel_over_the_unpacked_size_limit() {
        let tmp = tempfile::tempdir().unwrap();
        // 40 MiB of zeros: under the ratio floor's reach only if the ratio
        // guard is off, so the total limit is what refuses it here.
        let w = wheel(tmp.path(), &[], 40 << 20);
        let limits = Limits {
            max_unpacked_size: 8 << 20,
            max_ratio: u64::MAX,
            max_wheel_ratio: u64::MAX,
        };
        let e = unpack_err(&w, &limits);
        assert!(
            e.contains("inflates to more than 8388608 bytes") && e.contains("--max-unpacked-size"),
            "{e}"
        );
        // The default limits refuse it for its ratio (about 1000:1).
        let e = unpack_err(&w, &Limits::default());
        assert!(e.contains("p/zeros inflates to more than 200 times"), "{e}");
        // Raised, it unpacks.
        let out = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_unpacked_size: 64 << 20,
            max_ratio: u64::MAX,
            max_wheel_ratio: u64::MAX,
        };
        unpack(&w, out.path(), &limits, None).unwrap();
    }

    /// Rewrite every `from` in `bytes` to `to` (same length).
    fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
        assert_eq!(from.len(), to.len());
        let mut n = 0;
        let mut i = 0;
        while i + from.len() <= bytes.len() {
            if &bytes[i..i + from.len()] == from {
                bytes[i..i + from.len()].copy_from_slice(to);
                n += 1;
            }
            i += 1;
        }
        n
    }

    #[test]
    fn refuses_an_entry_whose_header_size_is_not_what_it_inflates_to() {
        let tmp = tempfile::tempdir().unwrap();
        let body = vec![b'a'; 3000];
        let w = wheel(tmp.path(), &[("p-1.dist-info/big.txt", &body, 0o644)], 0);
        // The size fields (local and central) say 1000, the data inflates
        // to 3000 (a kept dist-info entry, copied as raw bytes).
        let mut bytes = std::fs::read(&w).unwrap();
        assert_eq!(
            patch(&mut bytes, &3000u32.to_le_bytes(), &1000u32.to_le_bytes()),
            2
        );
        std::fs::write(&w, &bytes).unwrap();
        let e = unpack_err(&w, &Limits::default());
        assert!(
            e.contains("big.txt")
                && (e.contains("header says 1000 bytes") || e.contains("cannot decompress")),
            "{e}"
        );
    }

    #[test]
    fn refuses_duplicate_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let w = wheel(
            tmp.path(),
            &[("p/a.py", b"1", 0o644), ("p/b.py", b"1", 0o644)],
            0,
        );
        let mut bytes = std::fs::read(&w).unwrap();
        // Both names (local headers, central directory, RECORD) become p/a.py.
        assert!(patch(&mut bytes, b"p/b.py", b"p/a.py") >= 2);
        std::fs::write(&w, &bytes).unwrap();
        let e = unpack_err(&w, &Limits::default());
        assert!(
            e.contains("declares 5 entries but holds 4 distinct names"),
            "{e}"
        );
    }

    #[test]
    fn refuses_symlink_entries_and_drive_letter_names() {
        let tmp = tempfile::tempdir().unwrap();
        let w = wheel(tmp.path(), &[("p/link", b"/etc/passwd", 0o120_777)], 0);
        let e = unpack_err(&w, &Limits::default());
        assert!(e.contains("p/link is a symbolic link"), "{e}");
        let tmp = tempfile::tempdir().unwrap();
        let w = wheel(tmp.path(), &[("C:/x", b"1", 0o644)], 0);
        let e = unpack_err(&w, &Limits::default());
        assert!(e.contains("unsafe or non-canonical path \"C:/x\""), "{e}");
    }

    /// A wheel whose METADATA is `metadata` (every hash right).
    fn wheel_with_metadata(dir: &Path, metadata: &[u8]) -> PathBuf {
        let path = dir.join("p-1-py3-none-any.whl");
        let mut z = zip::ZipWriter::new(File::create(&path).unwrap());
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        let mut record = String::new();
        for (name, bytes) in [
            ("p-1.dist-info/WHEEL", WHEEL_FILE.as_bytes()),
            ("p-1.dist-info/METADATA", metadata),
        ] {
            z.start_file(name, opts.large_file(true)).unwrap();
            z.write_all(bytes).unwrap();
            let hash = crate::record::record_hash(bytes);
            record += &format!("{name},{hash},{}\n", bytes.len());
        }
        record += "p-1.dist-info/RECORD,,\n";
        z.start_file("p-1.dist-info/RECORD", opts).unwrap();
        z.write_all(record.as_bytes()).unwrap();
        z.finish().unwrap();
        path
    }

    #[test]
    fn refuses_metadata_over_its_cap_with_a_short_message() {
        let tmp = tempfile::tempdir().unwrap();
        // One 24 MiB line: over the cap, and a message that quoted it
        // whole would be megabytes long.
        let mut metadata = b"Metadata-Version: 2.1\nName: p\nVersion: 1\n".to_vec();
        metadata.resize(metadata.len() + (24 << 20), b'x');
        let w = wheel_with_metadata(tmp.path(), &metadata);
        let e = unpack_err(&w, &Limits::default());
        assert!(e.len() < 300, "{} bytes: {}", e.len(), &e[..300]);
        assert!(e.contains("METADATA is larger than 4194304 bytes"), "{e}");
        // Under the cap, a bad line is quoted by a short prefix only.
        let mut metadata = b"Metadata-Version: 2.1\n".to_vec();
        metadata.resize(metadata.len() + (1 << 20), b'x');
        let w = wheel_with_metadata(tmp.path(), &metadata);
        let e = unpack_err(&w, &Limits::default());
        assert!(e.len() < 300, "{} bytes", e.len());
    }

    #[test]
    fn refuses_a_wheel_whose_small_entries_add_up_to_a_bomb() {
        let tmp = tempfile::tempdir().unwrap();
        // Eight entries of 16 MiB zeros: each under the entry ratio's
        // floor, 128 MiB from a wheel of some 130 KB.
        let path = tmp.path().join("one.zip");
        let mut one = zip::ZipWriter::new(File::create(&path).unwrap());
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        one.start_file("z", opts).unwrap();
        let zeros = vec![0u8; 16 << 20];
        one.write_all(&zeros).unwrap();
        one.finish().unwrap();
        let mut one = zip::ZipArchive::new(File::open(&path).unwrap()).unwrap();
        let w = tmp.path().join("p-1-py3-none-any.whl");
        let mut z = zip::ZipWriter::new(File::create(&w).unwrap());
        let mut record = String::new();
        let hash = crate::record::record_hash(&zeros);
        for i in 0..8 {
            let name = format!("p/z{i}");
            z.raw_copy_file_rename(one.by_index_raw(0).unwrap(), &name)
                .unwrap();
            record += &format!("{name},{hash},{}\n", zeros.len());
        }
        for (name, text) in [
            ("p-1.dist-info/WHEEL", WHEEL_FILE),
            ("p-1.dist-info/METADATA", METADATA),
        ] {
            z.start_file(name, opts).unwrap();
            z.write_all(text.as_bytes()).unwrap();
            let hash = crate::record::record_hash(text.as_bytes());
            record += &format!("{name},{hash},{}\n", text.len());
        }
        record += "p-1.dist-info/RECORD,,\n";
        z.start_file("p-1.dist-info/RECORD", opts).unwrap();
        z.write_all(record.as_bytes()).unwrap();
        z.finish().unwrap();
        let e = unpack_err(&w, &Limits::default());
        assert!(
            e.contains("the wheel inflates to more than 67108864 bytes, 50 times its"),
            "{e}"
        );
        // Raised (as --max-unpacked-size does), it unpacks.
        let out = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_unpacked_size: 1 << 30,
            max_ratio: u64::MAX,
            max_wheel_ratio: u64::MAX,
        };
        unpack(&w, out.path(), &limits, None).unwrap();
    }
}
