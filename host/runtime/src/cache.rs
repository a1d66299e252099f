//! The loader: [`Cache`] resolves a marker to archives (spec §10.5) and
//! keeps archives open for its lifetime.
//!
//! Order (rocm-systems #9953, which replaced e348328's "the first archive
//! that lists a target is final"): a resolution collects every compatible
//! (archive, target) pair — arches in list order, each arch's targets most
//! specific first, archives in candidate order — and a load takes the key
//! from the first pair whose archive holds it, so a feature overlay
//! (`torch_gfx90a:xnack+.kpack`, a few kernels) falls through to its base
//! (`torch_gfx90a.kpack`).
//!
//! Hot path: a resolution (candidate paths → valid archives → ordered
//! pairs) is memoised per (binary path, search paths, arch list) once it
//! found at least one archive, so a warm load is one hash, a read lock, one
//! TOC lookup per pair tried and one decode/copy: no syscalls, no global
//! mutex. Failed resolutions are recomputed every time (an archive
//! installed later is found, as with AMD's loader).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use kpack_amdgpu::strip_target_prefix;
use kpack_format::{Archive, GFXARCH, Marker};

use crate::config::Config;
use crate::error::{Error, ErrorKind, Result};
use crate::isa::compatible_targets;

/// Most distinct (binary, search paths, arch list) resolutions memoised.
const MAX_MEMOISED: usize = 4096;

/// Where a candidate path came from, for diagnostics.
#[derive(Debug, Clone)]
struct Candidate {
    path: PathBuf,
    origin: String,
}

/// A memoised resolution.
#[derive(Debug)]
struct Resolution {
    binary_path: PathBuf,
    search_paths: Vec<String>,
    arches: Vec<String>,
    /// Archives that opened, in candidate order.
    valid: Vec<(PathBuf, Arc<Archive>)>,
    /// Every compatible (index into `valid`, target) pair in the order a
    /// load tries them (rocm-systems #9953): arches in list order, targets
    /// most specific first, archives in candidate order; each archive and
    /// target at most once.
    pairs: Vec<(usize, String)>,
    /// What was tried, one line each.
    diagnostic: String,
}

impl Resolution {
    fn matches(&self, binary_path: &Path, search_paths: &[String], arches: &[&str]) -> bool {
        self.binary_path == binary_path
            && self.search_paths == search_paths
            && self.arches.len() == arches.len()
            && self.arches.iter().zip(arches).all(|(a, b)| a == b)
    }
}

/// Where a code object would load from ([`Cache::locate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The archive holding the key.
    pub archive: PathBuf,
    /// The TOC target it is stored under.
    pub target: String,
    /// The TOC key, `<kernel_name>#<co_index>`.
    pub key: String,
    /// Compatible (archive, target) pairs tried first that lacked the key.
    pub lacking: Vec<(PathBuf, String)>,
}

/// A thread-safe cache of open archives and resolutions; AMD's
/// `kpack_cache_t`.
#[derive(Debug)]
pub struct Cache {
    config: Config,
    archives: RwLock<HashMap<PathBuf, Arc<Archive>>>,
    resolutions: RwLock<HashMap<u64, Vec<Arc<Resolution>>>>,
    last_diagnostic: Mutex<Option<String>>,
    /// Decoded `zstd-delta` bases, bounded (see [`crate::bases`]).
    bases: crate::bases::Bases,
    /// What loads cost (printed on drop with `ROCM_KPACK_STATS`).
    stats: crate::stats::Stats,
}

impl Drop for Cache {
    fn drop(&mut self) {
        if self.config.stats {
            eprintln!("{}", self.stats.snapshot());
        }
    }
}

impl Cache {
    /// A cache using `config` (normally [`Config::from_env`], read once here).
    pub fn new(config: Config) -> Cache {
        let cache = Cache {
            config,
            archives: RwLock::default(),
            resolutions: RwLock::default(),
            last_diagnostic: Mutex::new(None),
            bases: crate::bases::Bases::default(),
            stats: crate::stats::Stats::default(),
        };
        cache.debug(|| format!("cache created: {:?}", cache.config));
        cache
    }

    /// The configuration the cache was created with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the cache's loads have cost so far (counted whether or not
    /// `ROCM_KPACK_STATS` is set).
    pub fn stats(&self) -> crate::StatsSnapshot {
        self.stats.snapshot()
    }

    /// Number of archives held open.
    pub fn open_archive_count(&self) -> usize {
        self.archives.read().map(|m| m.len()).unwrap_or(0)
    }

    /// The diagnostic of the most recent failed load, or of the most recent
    /// fresh resolution: which paths were tried for which targets and why
    /// each failed. Warm (memoised) successful loads do not change it.
    pub fn last_diagnostic(&self) -> Option<String> {
        self.last_diagnostic.lock().ok().and_then(|g| g.clone())
    }

    fn set_diagnostic(&self, text: String) {
        if let Ok(mut g) = self.last_diagnostic.lock() {
            *g = Some(text);
        }
    }

    fn debug(&self, msg: impl FnOnce() -> String) {
        if self.config.debug {
            for line in msg().lines() {
                eprintln!("kpack: {line}");
            }
        }
    }

    /// Load the code object for `marker`, `binary_path` and `co_index`,
    /// returning a copy: from the first compatible (archive, target) pair
    /// that holds the key (arches in order, targets most specific first,
    /// archives in candidate order; rocm-systems #9953). `KernelNotFound`
    /// only when no pair holds it; `ArchNotFound` when no found archive
    /// lists any compatible target.
    pub fn load(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
    ) -> Result<Vec<u8>> {
        self.load_with(marker, binary_path, co_index, arches, |b| b.to_vec())
    }

    /// [`load`](Self::load) handing the bytes to `f` instead of copying
    /// (raw archives lend them straight from the mapping).
    pub fn load_with<R>(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        self.counted(|| self.load_with_timed(marker, binary_path, co_index, arches, f))
    }

    /// Run one load, counting it in the statistics with its (stored,
    /// inflated) bytes and its time.
    fn counted<R>(&self, load: impl FnOnce() -> Result<(R, (u64, u64))>) -> Result<R> {
        let start = Instant::now();
        let done = load();
        let counts = done.as_ref().ok().map(|(_, read)| *read);
        self.stats.loaded(counts, start.elapsed());
        done.map(|(r, _)| r)
    }

    /// [`load_with`](Self::load_with), with the (stored, inflated) bytes.
    fn load_with_timed<R>(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<(R, (u64, u64))> {
        let (res, key) = self.resolve_key(marker, binary_path, co_index, arches)?;
        let (pair, entry) = self.pick(&res, &key, arches)?;
        let (path, archive) = &res.valid[res.pairs[pair].0];
        let read = match entry.base() {
            None => archive.read(entry),
            Some(ordinal) => self
                .base(path, archive, entry, ordinal)
                .and_then(|base| archive.read_with_base(entry, &base))
                .map(std::borrow::Cow::Owned),
        };
        match read {
            Ok(bytes) => {
                self.check_digest(&res, pair, entry, &bytes)?;
                let counts = read_counts(archive, entry, bytes.len());
                Ok((f(&bytes), counts))
            }
            Err(e) => Err(self.read_failed(&res, pair, entry, e)),
        }
    }

    /// [`load`](Self::load) decoding straight into a buffer of the code
    /// object's size from `alloc` (`None`: out of memory), the C ABI's
    /// `malloc`ed one: one allocation and no copy of the decoded bytes,
    /// where [`load_with`](Self::load_with) decodes into a buffer of its own.
    /// The buffer is written, never read, before it is filled: it need not
    /// be zeroed. On an error the buffer is dropped.
    pub fn load_into<B: kpack_format::DecodeTarget>(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
        alloc: impl FnOnce(usize) -> Option<B>,
    ) -> Result<B> {
        self.counted(|| self.load_into_timed(marker, binary_path, co_index, arches, alloc))
    }

    /// [`load_into`](Self::load_into), with the (stored, inflated) bytes.
    fn load_into_timed<B: kpack_format::DecodeTarget>(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
        alloc: impl FnOnce(usize) -> Option<B>,
    ) -> Result<(B, (u64, u64))> {
        let (res, key) = self.resolve_key(marker, binary_path, co_index, arches)?;
        let (pair, entry) = self.pick(&res, &key, arches)?;
        let (path, archive) = &res.valid[res.pairs[pair].0];
        let size = archive
            .decoded_size(entry)
            .map_err(|e| self.read_failed(&res, pair, entry, e))?;
        let mut out = alloc(size).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                format!("cannot allocate {size} bytes for {:?}", entry.key()),
            )
        })?;
        let read = match entry.base() {
            None => archive.read_into(entry, &mut out),
            Some(ordinal) => self
                .base(path, archive, entry, ordinal)
                .and_then(|base| archive.read_with_base_into(entry, &base, &mut out)),
        };
        match read {
            Ok(()) => {
                self.check_digest(&res, pair, entry, out.as_slice())?;
                let counts = read_counts(archive, entry, size);
                Ok((out, counts))
            }
            Err(e) => Err(self.read_failed(&res, pair, entry, e)),
        }
    }

    /// With `ROCM_KPACK_VERIFY`: the decoded `bytes` of `entry` must have
    /// the sha256 its TOC records (entries without one pass). A mismatch
    /// is `DecompressionFailed`, its message and the diagnostic naming the
    /// archive, key and target.
    fn check_digest(
        &self,
        res: &Resolution,
        pair: usize,
        entry: &kpack_format::Entry,
        bytes: &[u8],
    ) -> Result<()> {
        let Some(recorded) = entry.sha256().filter(|_| self.config.verify) else {
            return Ok(());
        };
        let actual = kpack_format::sha256(bytes);
        if actual == *recorded {
            return Ok(());
        }
        let (path, target) = (&res.valid[res.pairs[pair].0].0, &res.pairs[pair].1);
        let msg = format!(
            "archive {} entry {:?} for target {target:?}: the decoded code object has sha256 {}, \
             the TOC records {} (ROCM_KPACK_VERIFY)",
            path.display(),
            entry.key(),
            kpack_format::digest::to_hex(&actual),
            kpack_format::digest::to_hex(recorded),
        );
        self.debug(|| msg.clone());
        self.set_diagnostic(msg.clone());
        Err(Error::new(ErrorKind::DecompressionFailed, msg))
    }

    /// Check the arguments and resolve: the resolution and the TOC key.
    fn resolve_key(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
    ) -> Result<(Arc<Resolution>, String)> {
        if arches.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "empty arch list"));
        }
        // An arch is substituted into `@GFXARCH@` paths: `../../x` would
        // name a file anywhere. Only a target id may get there.
        if let Some(bad) = arches.iter().find(|a| !is_agent_isa(a)) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("arch {bad:?} is not an AMDGPU target id (gfx<processor>[:feature±]...)"),
            ));
        }
        if self.config.disabled {
            return Err(Error::new(
                ErrorKind::NotImplemented,
                "kpack loading is disabled by ROCM_KPACK_DISABLE",
            ));
        }
        let key = format!("{}#{co_index}", marker.kernel_name);
        let res = self.resolve(marker, binary_path, arches)?;
        Ok((res, key))
    }

    /// The error (and diagnostic) for a listed entry that failed to decode.
    fn read_failed(
        &self,
        res: &Resolution,
        pair: usize,
        entry: &kpack_format::Entry,
        e: kpack_format::Error,
    ) -> Error {
        let (path, target) = (&res.valid[res.pairs[pair].0].0, &res.pairs[pair].1);
        let msg = format!(
            "archive {} lists {:?} for target {target:?} but reading it failed: {}\n{}",
            path.display(),
            entry.key(),
            crate::error::error_chain(&e),
            res.diagnostic
        );
        self.debug(|| msg.clone());
        self.set_diagnostic(msg);
        e.into()
    }

    /// The decoded base `ordinal` of the `zstd-delta` delta `entry`, from
    /// the memo (or decoded and kept).
    fn base(
        &self,
        path: &Path,
        archive: &Archive,
        entry: &kpack_format::Entry,
        ordinal: u64,
    ) -> kpack_format::Result<Arc<Vec<u8>>> {
        if let Some(b) = self.bases.get(path, ordinal) {
            self.stats.base(false);
            return Ok(b);
        }
        self.stats.base(true);
        let decoded = Arc::new(archive.read_base(entry)?.unwrap_or_default());
        self.bases.insert(path, ordinal, Arc::clone(&decoded));
        Ok(decoded)
    }

    /// Where [`load`](Self::load) would take the code object from, without
    /// decoding it: the same resolution and fall-through, so `kpack verify
    /// --gpu` reports exactly what the loader does.
    pub fn locate(
        &self,
        marker: &Marker,
        binary_path: &Path,
        co_index: u32,
        arches: &[&str],
    ) -> Result<Location> {
        if arches.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "empty arch list"));
        }
        let key = format!("{}#{co_index}", marker.kernel_name);
        let res = self.resolve(marker, binary_path, arches)?;
        let (pair, _) = self.pick(&res, &key, arches)?;
        let lacking = res.pairs[..pair]
            .iter()
            .map(|(i, t)| (res.valid[*i].0.clone(), t.clone()))
            .collect();
        let (i, target) = &res.pairs[pair];
        Ok(Location {
            archive: res.valid[*i].0.clone(),
            target: target.clone(),
            key,
            lacking,
        })
    }

    /// The first (archive, target) pair of `res` whose archive holds `key`
    /// for that target: index into `res.pairs` and the entry. Lock-free:
    /// one TOC lookup per pair tried.
    fn pick<'r>(
        &self,
        res: &'r Resolution,
        key: &str,
        arches: &[&str],
    ) -> Result<(usize, &'r kpack_format::Entry)> {
        if res.pairs.is_empty() {
            let msg = format!(
                "no archive serves any target compatible with {arches:?} (key {key:?})\n{}",
                res.diagnostic
            );
            self.debug(|| msg.clone());
            self.set_diagnostic(msg.clone());
            return Err(Error::new(ErrorKind::ArchNotFound, msg));
        }
        for (n, (i, target)) in res.pairs.iter().enumerate() {
            let (path, archive) = &res.valid[*i];
            if let Some(entry) = archive.entry(key, target) {
                if n > 0 {
                    // An overlay lacking the key is normal (a base archive
                    // holds the rest); only worth a line when debugging.
                    self.debug(|| {
                        format!(
                            "{key:?}: found in {} as target {target:?} after {n} archive/target pair(s) lacking it",
                            path.display()
                        )
                    });
                }
                return Ok((n, entry));
            }
        }
        let mut msg =
            format!("no compatible archive holds {key:?} for {arches:?}; tried in order:\n");
        for (i, target) in &res.pairs {
            let _ = writeln!(
                msg,
                "  {} target {target:?}: no such key",
                res.valid[*i].0.display()
            );
        }
        msg.push_str(&res.diagnostic);
        self.debug(|| msg.clone());
        self.set_diagnostic(msg.clone());
        Err(Error::new(ErrorKind::KernelNotFound, msg))
    }

    fn resolve(
        &self,
        marker: &Marker,
        binary_path: &Path,
        arches: &[&str],
    ) -> Result<Arc<Resolution>> {
        // Portable SPIR-V, when named, after every native and generic target.
        let ordered = kpack_amdgpu::loader_order(arches);
        let arches = &ordered[..];
        let mut h = DefaultHasher::new();
        binary_path.hash(&mut h);
        marker.search_paths.hash(&mut h);
        arches.hash(&mut h);
        let hash = h.finish();
        if let Ok(map) = self.resolutions.read()
            && let Some(found) = memoised(&map, hash, binary_path, marker, arches)
        {
            self.stats.resolved(true);
            return Ok(found);
        }
        self.stats.resolved(false);

        let mut diag = String::new();
        let valid = self.open_candidates(marker, binary_path, arches, &mut diag);
        if valid.is_empty() {
            return Err(self.no_archive(marker, binary_path, arches, diag));
        }
        let pairs = compatible_pairs(&valid, arches, &mut diag);
        self.debug(|| {
            format!(
                "resolved {:?} for {}:\n{diag}",
                marker.kernel_name,
                binary_path.display()
            )
        });
        self.set_diagnostic(diag.clone());
        let res = Arc::new(Resolution {
            binary_path: binary_path.to_path_buf(),
            search_paths: marker.search_paths.clone(),
            arches: arches.iter().map(|a| (*a).to_owned()).collect(),
            valid,
            pairs,
            diagnostic: diag,
        });
        if let Ok(mut map) = self.resolutions.write() {
            if let Some(existing) = memoised(&map, hash, binary_path, marker, arches) {
                return Ok(existing);
            }
            // Markers come from loaded binaries, so real processes need few
            // entries; the cap keeps hostile or endless distinct markers
            // from growing the memo without bound (they resolve afresh).
            if map.len() < MAX_MEMOISED {
                map.entry(hash).or_default().push(Arc::clone(&res));
            }
        }
        Ok(res)
    }

    /// Every candidate archive that opens, in candidate order; one line of
    /// `diag` per candidate.
    fn open_candidates(
        &self,
        marker: &Marker,
        binary_path: &Path,
        arches: &[&str],
        diag: &mut String,
    ) -> Vec<(PathBuf, Arc<Archive>)> {
        let mut valid = Vec::new();
        for c in &self.candidates(marker, binary_path, arches) {
            match self.open_cached(&c.path) {
                Ok(a) => {
                    let _ = writeln!(
                        diag,
                        "  {} ({}): opened, arches {:?}",
                        c.path.display(),
                        c.origin,
                        a.arches()
                    );
                    valid.push((c.path.clone(), a));
                }
                Err(why) => {
                    let why = crate::error::error_chain(&why);
                    let _ = writeln!(diag, "  {} ({}): {why}", c.path.display(), c.origin);
                }
            }
        }
        valid
    }

    /// The `ArchiveNotFound` error (and diagnostic) when no candidate
    /// opened: what was tried and, unless `ROCM_KPACK_PATH` replaced the
    /// search, which targets are shipped beside each search path.
    fn no_archive(
        &self,
        marker: &Marker,
        binary_path: &Path,
        arches: &[&str],
        diag: String,
    ) -> Error {
        let mut msg = format!(
            "no archive found for {:?} (binary {}, arches {arches:?}); tried:\n{}",
            marker.kernel_name,
            binary_path.display(),
            if diag.is_empty() {
                "  (no candidate paths)\n".to_owned()
            } else {
                diag
            }
        );
        if self.config.path.is_none() {
            for (pattern, targets) in self.shipped_targets(marker, binary_path) {
                let _ = writeln!(
                    msg,
                    "  archives present for {pattern}: {}",
                    if targets.is_empty() {
                        "none".to_owned()
                    } else {
                        targets.join(", ")
                    }
                );
            }
        }
        self.debug(|| msg.clone());
        self.set_diagnostic(msg.clone());
        Error::new(ErrorKind::ArchiveNotFound, msg)
    }

    /// For a failed search only (reads directories): per marker search
    /// path whose file name holds `@GFXARCH@`, the targets that archives
    /// next to it are named for, so "not shipped" and "not installed" can
    /// be told apart. Sorted; at most 64 per pattern.
    fn shipped_targets(&self, marker: &Marker, binary_path: &Path) -> Vec<(String, Vec<String>)> {
        let dir = binary_path.parent().unwrap_or(Path::new(""));
        let mut out = Vec::new();
        for sp in &marker.search_paths {
            let resolved = resolve_search_path(dir, sp);
            let Some(mut targets) = pattern_targets(&resolved) else {
                continue;
            };
            targets.truncate(64);
            out.push((resolved.display().to_string(), targets));
        }
        out
    }

    /// Every archive the loader could open for `marker` and `binary_path`
    /// on any GPU, in candidate order: the candidates of
    /// [`load`](Self::load) with `@GFXARCH@` expanded to every target an
    /// archive beside the pattern is named for (a directory listing, where
    /// a load expands it with the device's compatible targets), and the
    /// search paths that name nothing at all. For listing what a
    /// host-only binary would load (`kpack inspect`, `kpack extract`); a
    /// load itself never lists directories.
    pub fn marker_archives(&self, marker: &Marker, binary_path: &Path) -> Vec<MarkerArchive> {
        let mut out = Vec::new();
        let mut push = |path: PathBuf, origin: String, target: Option<String>| {
            let archive = self
                .open_cached(&path)
                .map_err(|e| crate::error::error_chain(&e));
            out.push(MarkerArchive {
                path,
                origin,
                target,
                archive,
            });
        };
        if let Some(paths) = &self.config.path {
            for p in paths {
                push(p.clone(), "ROCM_KPACK_PATH".into(), None);
            }
            return out;
        }
        for p in &self.config.path_prefix {
            push(p.clone(), "ROCM_KPACK_PATH_PREFIX".into(), None);
        }
        let dir = binary_path.parent().unwrap_or(Path::new(""));
        for sp in &marker.search_paths {
            let resolved = resolve_search_path(dir, sp);
            let Some(targets) = pattern_targets(&resolved) else {
                push(resolved, format!("search path {sp:?}"), None);
                continue;
            };
            if targets.is_empty() {
                push(
                    resolved.clone(),
                    format!("search path {sp:?}"),
                    Some(String::new()),
                );
            }
            let text = resolved.to_string_lossy();
            for target in targets {
                push(
                    PathBuf::from(text.replacen(GFXARCH, &target, 1)),
                    format!("search path {sp:?}, target {target:?}"),
                    Some(target),
                );
            }
        }
        out
    }

    /// Candidate archive paths in AMD's order (§10.5 step 5).
    fn candidates(&self, marker: &Marker, binary_path: &Path, arches: &[&str]) -> Vec<Candidate> {
        if let Some(paths) = &self.config.path {
            return paths
                .iter()
                .map(|p| Candidate {
                    path: p.clone(),
                    origin: "ROCM_KPACK_PATH".into(),
                })
                .collect();
        }
        let mut out: Vec<Candidate> = self
            .config
            .path_prefix
            .iter()
            .map(|p| Candidate {
                path: p.clone(),
                origin: "ROCM_KPACK_PATH_PREFIX".into(),
            })
            .collect();
        let dir = binary_path.parent().unwrap_or(Path::new(""));
        for sp in &marker.search_paths {
            let resolved = resolve_search_path(dir, sp);
            let text = resolved.to_string_lossy();
            if text.contains(GFXARCH) {
                for arch in arches {
                    for target in compatible_targets(arch) {
                        out.push(Candidate {
                            path: PathBuf::from(text.replacen(GFXARCH, &target, 1)),
                            origin: format!(
                                "search path {sp:?}, target {target:?} of {:?}",
                                strip_target_prefix(arch)
                            ),
                        });
                    }
                }
            } else {
                out.push(Candidate {
                    path: resolved.clone(),
                    origin: format!("search path {sp:?}"),
                });
            }
        }
        out
    }

    /// The open archive at `path` (canonical path as cache key), opening it
    /// on first use. The error is the reason for the diagnostic.
    fn open_cached(&self, path: &Path) -> std::result::Result<Arc<Archive>, Unopened> {
        // Most candidates (one per compatible target) do not exist: one stat
        // tells, where canonicalising first cost a readlink per component.
        let meta = std::fs::metadata(path);
        let key = match &meta {
            Ok(_) => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            // Gone since it was opened under this (already canonical) path:
            // served from the cache, as AMD's loader does.
            Err(_) => path.to_path_buf(),
        };
        if let Ok(map) = self.archives.read()
            && let Some(a) = map.get(&key)
        {
            return Ok(Arc::clone(a));
        }
        match meta {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(Unopened::NotAFile),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Unopened::Missing);
            }
            Err(e) => return Err(Unopened::Stat(e)),
        }
        let archive = Arc::new(Archive::open(&key).map_err(Unopened::Open)?);
        self.stats.archive_opened(archive.file_size());
        self.debug(|| {
            format!(
                "opened {} with arches {:?}",
                key.display(),
                archive.arches()
            )
        });
        let mut map = self.archives.write().map_err(|_| Unopened::Poisoned)?;
        Ok(Arc::clone(map.entry(key).or_insert(archive)))
    }
}

/// Why a candidate archive could not be opened: the reason the loader's
/// diagnostic (and [`MarkerArchive::archive`]) gives, with its cause.
#[derive(Debug)]
enum Unopened {
    /// Something other than a regular file.
    NotAFile,
    /// Nothing at the path.
    Missing,
    /// The path cannot be looked at.
    Stat(std::io::Error),
    /// The file is no readable archive.
    Open(kpack_format::Error),
    /// Another thread panicked while holding the cache.
    Poisoned,
}

// By hand, as `Error` is: the loader links no derive macros' crates.
impl std::fmt::Display for Unopened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unopened::NotAFile => "not a regular file",
            Unopened::Missing => "does not exist",
            Unopened::Stat(_) => "cannot stat",
            Unopened::Open(_) => "cannot open",
            Unopened::Poisoned => "archive cache lock poisoned",
        })
    }
}

impl std::error::Error for Unopened {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unopened::Stat(e) => Some(e),
            Unopened::Open(e) => Some(e),
            _ => None,
        }
    }
}

/// One archive [`Cache::marker_archives`] found (or looked for).
#[derive(Debug, Clone)]
pub struct MarkerArchive {
    /// The candidate path, as the loader forms it.
    pub path: PathBuf,
    /// Where it came from (`search path "..."`, `ROCM_KPACK_PATH`).
    pub origin: String,
    /// For a `@GFXARCH@` search path, the target the file is named for;
    /// `Some("")` when no file beside the pattern matches it (`path` is
    /// then the pattern itself).
    pub target: Option<String>,
    /// The open archive, or why the loader could not open it.
    pub archive: std::result::Result<Arc<Archive>, String>,
}

/// The stored bytes a load of `entry` read and the bytes it inflated
/// (`decoded`, or 0 for an entry stored as it is).
fn read_counts(archive: &Archive, entry: &kpack_format::Entry, decoded: usize) -> (u64, u64) {
    let inflated = match archive.scheme() {
        kpack_format::Scheme::None => 0,
        _ => decoded as u64,
    };
    (entry.stored_size(), inflated)
}

/// A marker search path `sp` as the loader resolves it: absolute as it
/// is, else relative to `dir` (the binary's directory), weakly
/// canonicalised.
fn resolve_search_path(dir: &Path, sp: &str) -> PathBuf {
    let raw = Path::new(sp);
    if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        weakly_canonical(&dir.join(raw)).unwrap_or_else(|| raw.to_path_buf())
    }
}

/// For a resolved search path whose file name holds `@GFXARCH@`, the
/// targets the files beside it are named for, sorted (`None`: no
/// placeholder in the file name). Only what the loader could open counts:
/// a regular file that starts with the KPAK magic. A search path such as
/// `/etc/@GFXARCH@` must not turn a directory listing (and each file's
/// first bytes) into "archives".
fn pattern_targets(resolved: &Path) -> Option<Vec<String>> {
    let (parent, name) = (resolved.parent()?, resolved.file_name()?);
    let name = name.to_string_lossy();
    let (prefix, suffix) = name.split_once(GFXARCH)?;
    let mut targets: Vec<String> = std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let file = e.ok()?.file_name();
            let file = file.to_str()?;
            let t = file.strip_prefix(prefix)?.strip_suffix(suffix)?;
            (!t.is_empty() && is_kpak_file(&parent.join(file))).then(|| t.to_owned())
        })
        .collect();
    targets.sort();
    Some(targets)
}

/// Whether `path` is a regular file (symlinks followed) that starts with
/// the KPAK magic.
fn is_kpak_file(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == kpack_format::MAGIC)
}

/// `std::filesystem::weakly_canonical`: resolve the longest existing prefix
/// through symlinks, then fold `.` and `..` in the rest lexically.
pub(crate) fn weakly_canonical(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let comps: Vec<Component<'_>> = path.components().collect();
    for split in (0..comps.len()).rev() {
        let head: PathBuf = comps[..split].iter().collect();
        let base = if head.as_os_str().is_empty() {
            std::env::current_dir().ok()?
        } else {
            match std::fs::canonicalize(&head) {
                Ok(b) => b,
                Err(_) => continue,
            }
        };
        let mut out = base;
        for c in &comps[split..] {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other.as_os_str()),
            }
        }
        return Some(out);
    }
    None
}

/// The memoised resolution for (`binary_path`, `marker`'s search paths,
/// `arches`), if any.
fn memoised(
    map: &HashMap<u64, Vec<Arc<Resolution>>>,
    hash: u64,
    binary_path: &Path,
    marker: &Marker,
    arches: &[&str],
) -> Option<Arc<Resolution>> {
    map.get(&hash)?
        .iter()
        .find(|r| r.matches(binary_path, &marker.search_paths, arches))
        .map(Arc::clone)
}

/// Every compatible (index into `valid`, target) pair in the order a load
/// tries them (rocm-systems #9953): arches in list order, each arch's
/// targets most specific first, archives in candidate order; the same
/// archive reached twice (two search paths, a symlink) is tried once per
/// target. One line of `diag` per pair.
fn compatible_pairs(
    valid: &[(PathBuf, Arc<Archive>)],
    arches: &[&str],
    diag: &mut String,
) -> Vec<(usize, String)> {
    let mut pairs: Vec<(usize, String)> = Vec::new();
    for arch in arches {
        for target in compatible_targets(arch) {
            for (i, (path, a)) in valid.iter().enumerate() {
                let dup = pairs
                    .iter()
                    .any(|(j, t)| *t == target && Arc::ptr_eq(&valid[*j].1, a));
                if a.has_arch(&target) && !dup {
                    let _ = writeln!(
                        diag,
                        "  candidate {}: {} as target {target:?} (device arch {arch:?})",
                        pairs.len() + 1,
                        path.display()
                    );
                    pairs.push((i, target.clone()));
                }
            }
        }
    }
    pairs
}

/// `arch` (an agent ISA name, prefix optional) follows the target-id
/// grammar with a `gfx` processor, as loosely as [`compatible_targets`]
/// reads it (empty features skipped), or names portable SPIR-V.
fn is_agent_isa(arch: &str) -> bool {
    if kpack_amdgpu::is_spirv_target(arch) {
        return true;
    }
    let s = strip_target_prefix(arch);
    let canonical: Vec<&str> = std::iter::once(kpack_amdgpu::processor_of(s))
        .chain(kpack_amdgpu::features_of(s))
        .collect();
    s.starts_with("gfx") && kpack_amdgpu::TargetId::parse(&canonical.join(":")).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_that_does_not_open_keeps_its_cause_for_the_diagnostic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a_gfx942.kpack");
        std::fs::write(&path, b"not an archive").unwrap();
        let cache = Cache::new(Config::default());
        let why = cache.open_cached(&path).unwrap_err();
        assert_eq!(why.to_string(), "cannot open");
        let cause = std::error::Error::source(&why).expect("the archive error is the source");
        assert!(
            cause.downcast_ref::<kpack_format::Error>().is_some(),
            "{cause}"
        );
        assert_eq!(
            crate::error::error_chain(&why),
            format!("cannot open: {}", crate::error::error_chain(cause))
        );
        let missing = cache
            .open_cached(&dir.path().join("none.kpack"))
            .unwrap_err();
        assert_eq!(crate::error::error_chain(&missing), "does not exist");
    }

    #[test]
    fn memo_of_resolutions_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a_gfx942.kpack");
        let mut w =
            kpack_format::ArchiveWriter::create(&archive, kpack_format::WriterOptions::default())
                .unwrap();
        w.add("k#0", "gfx942", b"code").unwrap();
        w.finish().unwrap();
        let cache = Cache::new(Config::default());
        let binary = dir.path().join("bin");
        for i in 0..MAX_MEMOISED + 50 {
            let marker = Marker {
                kernel_name: "k".into(),
                search_paths: vec![
                    format!("missing-{i}.kpack"),
                    archive.to_string_lossy().into_owned(),
                ],
            };
            assert_eq!(
                cache.load(&marker, &binary, 0, &["gfx942"]).unwrap(),
                b"code"
            );
        }
        assert_eq!(cache.resolutions.read().unwrap().len(), MAX_MEMOISED);
        assert_eq!(cache.open_archive_count(), 1);
    }

    fn archive(path: &Path, entries: &[(&str, &str, &[u8])]) {
        let mut w =
            kpack_format::ArchiveWriter::create(path, kpack_format::WriterOptions::default())
                .unwrap();
        for (k, t, b) in entries {
            w.add(k, t, b).unwrap();
        }
        w.finish().unwrap();
    }

    /// AMD's overlay layout: a base archive for the bare processor and a
    /// feature archive holding a few kernels on top.
    fn overlay_tree() -> (tempfile::TempDir, Marker, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        archive(
            &dir.path().join("torch_gfx90a.kpack"),
            &[("k#0", "gfx90a", b"base0"), ("k#1", "gfx90a", b"base1")],
        );
        archive(
            &dir.path().join("torch_gfx90a:xnack+.kpack"),
            &[
                ("k#1", "gfx90a:xnack+", b"over1"),
                ("k#2", "gfx90a:xnack+", b"over2"),
            ],
        );
        let marker = Marker {
            kernel_name: "k".into(),
            search_paths: vec!["torch_@GFXARCH@.kpack".into()],
        };
        let binary = dir.path().join("libtorch.so");
        (dir, marker, binary)
    }

    #[test]
    fn overlay_falls_through_to_base() {
        let (_dir, marker, binary) = overlay_tree();
        let cache = Cache::new(Config::default());
        let dev = ["amdgcn-amd-amdhsa--gfx90a:xnack+"];
        // Only in the base: the overlay lacks it, the base serves it.
        assert_eq!(cache.load(&marker, &binary, 0, &dev).unwrap(), b"base0");
        // In both: the overlay (more specific target) wins.
        assert_eq!(cache.load(&marker, &binary, 1, &dev).unwrap(), b"over1");
        // Only in the overlay.
        assert_eq!(cache.load(&marker, &binary, 2, &dev).unwrap(), b"over2");
        // Warm (memoised) loads give the same answers.
        assert_eq!(cache.load(&marker, &binary, 0, &dev).unwrap(), b"base0");
        assert_eq!(cache.load(&marker, &binary, 1, &dev).unwrap(), b"over1");
        let loc = cache.locate(&marker, &binary, 0, &dev).unwrap();
        assert!(loc.archive.ends_with("torch_gfx90a.kpack"));
        assert_eq!(loc.target, "gfx90a");
        assert_eq!(loc.lacking.len(), 1);
        assert!(loc.lacking[0].0.ends_with("torch_gfx90a:xnack+.kpack"));
        // A device without xnack+ never sees the overlay.
        let plain = ["gfx90a:xnack-"];
        assert_eq!(cache.load(&marker, &binary, 1, &plain).unwrap(), b"base1");
        let err = cache.load(&marker, &binary, 2, &plain).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::KernelNotFound);
    }

    #[test]
    fn kernel_missing_everywhere_names_every_archive_tried() {
        let (_dir, marker, binary) = overlay_tree();
        let cache = Cache::new(Config::default());
        let err = cache
            .load(&marker, &binary, 7, &["gfx90a:xnack+"])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::KernelNotFound);
        let diag = cache.last_diagnostic().unwrap();
        assert!(
            diag.contains("torch_gfx90a:xnack+.kpack target \"gfx90a:xnack+\": no such key"),
            "{diag}"
        );
        assert!(
            diag.contains("torch_gfx90a.kpack target \"gfx90a\": no such key"),
            "{diag}"
        );
    }

    #[test]
    fn a_listed_entry_that_fails_to_decode_does_not_fall_through() {
        let (dir, marker, binary) = overlay_tree();
        let overlay = dir.path().join("torch_gfx90a:xnack+.kpack");
        let mut w = kpack_format::ArchiveWriter::create(
            &overlay,
            kpack_format::WriterOptions {
                compression: kpack_format::Compression::Zstd { level: 3 },
                ..Default::default()
            },
        )
        .unwrap();
        w.add("k#1", "gfx90a:xnack+", &[7u8; 4096]).unwrap();
        w.finish().unwrap();
        // Damage the frame's payload (after its 4-byte size word and the
        // zstd magic); the TOC still lists the entry.
        let a = Archive::open(&overlay).unwrap();
        let off = a.entry("k#1", "gfx90a:xnack+").unwrap().stored_offset() as usize;
        drop(a);
        let mut bytes = std::fs::read(&overlay).unwrap();
        for b in &mut bytes[off + 8..off + 16] {
            *b ^= 0xff;
        }
        std::fs::write(&overlay, bytes).unwrap();
        let cache = Cache::new(Config::default());
        let err = cache
            .load(&marker, &binary, 1, &["gfx90a:xnack+"])
            .unwrap_err();
        assert_ne!(err.kind(), ErrorKind::KernelNotFound, "{err}");
        assert!(
            cache
                .last_diagnostic()
                .unwrap()
                .contains("but reading it failed"),
            "{err}"
        );
        // The base still serves what the overlay does not list.
        assert_eq!(
            cache.load(&marker, &binary, 0, &["gfx90a:xnack+"]).unwrap(),
            b"base0"
        );
    }

    #[test]
    fn one_archive_per_processor_falls_through_its_targets() {
        // kpack's own layout: one archive per processor, variants as TOC
        // arches inside it.
        let dir = tempfile::tempdir().unwrap();
        archive(
            &dir.path().join("x_gfx90a.kpack"),
            &[
                ("k#0", "gfx90a", b"bare0"),
                ("k#1", "gfx90a", b"bare1"),
                ("k#1", "gfx90a:xnack+", b"plus1"),
            ],
        );
        let marker = Marker {
            kernel_name: "k".into(),
            search_paths: vec!["x_@GFXARCH@.kpack".into()],
        };
        let binary = dir.path().join("bin");
        let cache = Cache::new(Config::default());
        let dev = ["gfx90a:xnack+"];
        assert_eq!(cache.load(&marker, &binary, 0, &dev).unwrap(), b"bare0");
        assert_eq!(cache.load(&marker, &binary, 1, &dev).unwrap(), b"plus1");
    }

    #[test]
    fn later_arch_in_the_list_serves_a_key_the_first_lacks() {
        let dir = tempfile::tempdir().unwrap();
        archive(
            &dir.path().join("x_gfx1101.kpack"),
            &[("k#0", "gfx1101", b"native")],
        );
        archive(
            &dir.path().join("x_gfx11-generic.kpack"),
            &[
                ("k#0", "gfx11-generic", b"g0"),
                ("k#1", "gfx11-generic", b"g1"),
            ],
        );
        let marker = Marker {
            kernel_name: "k".into(),
            search_paths: vec!["x_@GFXARCH@.kpack".into()],
        };
        let binary = dir.path().join("bin");
        let cache = Cache::new(Config::default());
        let dev = ["gfx1101", "gfx11-generic"];
        assert_eq!(cache.load(&marker, &binary, 0, &dev).unwrap(), b"native");
        assert_eq!(cache.load(&marker, &binary, 1, &dev).unwrap(), b"g1");
    }

    #[test]
    fn refuses_arches_that_are_not_target_ids() {
        let cache = Cache::new(Config::default());
        let marker = Marker {
            kernel_name: "k".into(),
            search_paths: vec!["../.kpack/x_@GFXARCH@.kpack".into()],
        };
        for bad in [
            "../../../../etc/x",
            "gfx90a/../x",
            "gfx90a:xnack",
            "x86_64",
            "gfx90a\0",
        ] {
            let e = cache
                .load(&marker, Path::new("/nonexistent/lib/a.so"), 0, &[bad])
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}: {e}");
            assert!(e.to_string().contains("is not an AMDGPU target id"), "{e}");
        }
        for good in [
            "gfx90a",
            "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
            "gfx9-4-generic",
            "gfx90a::xnack+",
        ] {
            assert!(is_agent_isa(good), "{good}");
        }
    }

    #[test]
    fn load_into_gives_what_load_gives_for_every_scheme() {
        let dir = tempfile::tempdir().unwrap();
        let sibling = |seed: u8| -> Vec<u8> {
            let mut v: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
            v[seed as usize * 100..][..50].fill(seed);
            v
        };
        for (name, compression) in [
            ("n", kpack_format::Compression::None),
            ("z", kpack_format::Compression::Zstd { level: 3 }),
            ("d", kpack_format::Compression::ZstdDelta { level: 3 }),
        ] {
            let path = dir.path().join(format!("{name}_gfx1100.kpack"));
            let options = kpack_format::WriterOptions {
                compression,
                ..Default::default()
            };
            let mut w = kpack_format::ArchiveWriter::create(&path, options).unwrap();
            for (i, t) in ["gfx1100", "gfx1101", "gfx1102"].iter().enumerate() {
                w.add("k#0", t, &sibling(i as u8 + 1)).unwrap();
            }
            w.finish().unwrap();
            let deltas = Archive::open(&path)
                .unwrap()
                .entries()
                .filter(|e| e.base().is_some())
                .count();
            assert_eq!(deltas > 0, name == "d", "{name}");
            let marker = Marker {
                kernel_name: "k".into(),
                search_paths: vec![path.to_string_lossy().into_owned()],
            };
            let binary = dir.path().join("bin");
            let cache = Cache::new(Config::default());
            for (i, dev) in ["gfx1100", "gfx1101", "gfx1102"].iter().enumerate() {
                // Twice: the second load of a delta takes its base from the memo.
                for _ in 0..2 {
                    let mut asked = 0;
                    let got = cache
                        .load_into(&marker, &binary, 0, &[dev], |n| {
                            asked = n;
                            Some(vec![0xa5; n])
                        })
                        .unwrap();
                    assert_eq!(got, sibling(i as u8 + 1), "{name} {dev}");
                    assert_eq!(asked, got.len());
                    assert_eq!(got, cache.load(&marker, &binary, 0, &[dev]).unwrap());
                }
            }
            // No buffer: out of memory, and nothing decoded.
            let err = cache
                .load_into(&marker, &binary, 0, &["gfx1101"], |_| None::<Vec<u8>>)
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::OutOfMemory, "{name}: {err}");
            // A missing key is the same error as from `load`.
            let err = cache
                .load_into(&marker, &binary, 9, &["gfx1101"], |n| Some(vec![0; n]))
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::KernelNotFound, "{name}: {err}");
        }
    }

    #[test]
    fn weakly_canonical_folds_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("lib")).unwrap();
        let p = weakly_canonical(&base.join("lib/../.kpack/x_@GFXARCH@.kpack")).unwrap();
        assert_eq!(p, base.join(".kpack/x_@GFXARCH@.kpack"));
        let p = weakly_canonical(&base.join("lib/./a/../b.kpack")).unwrap();
        assert_eq!(p, base.join("lib/b.kpack"));
    }
}
