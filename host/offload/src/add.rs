//! Adding a binary's code objects to its archive set: bundles streamed in
//! parallel under the memory budget, each kept code object compressed by
//! the worker that inflated it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use kpack_binary::HostBinary;
use kpack_bundle::MemoryBudget;
use kpack_format::{ArchiveWriter, DeltaCompressor, EntryOrder, FileRange, KernelCompressor};
use rayon::prelude::*;

use crate::{ArchiveSet, Error};

/// What [`add_code_objects`] added.
#[derive(Debug, Clone, Default)]
pub struct Added {
    /// Code objects added.
    pub count: usize,
    /// Target ids added, sorted, each once.
    pub targets: Vec<String>,
    /// Target ids left out by the filter, one per code object left out.
    pub excluded: Vec<String>,
}

/// Where one entry goes: (key, target id text, archive group: the processor
/// unless `--archive-group` is coarser).
type Dest = (String, String, String);

/// Add every device code object of `bin` whose target id passes `keep` to
/// `archives` under `<kernel_name>#<bundle index>`. See [`add_items`] for
/// how bundles are read.
pub fn add_code_objects(
    input: &Path,
    bin: &HostBinary,
    kernel_name: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    archives: &mut ArchiveSet,
) -> Result<Added, Error> {
    add_items(
        input,
        bin.bundles(),
        bin.source(),
        kernel_name,
        keep,
        archives,
    )
}

/// A kept entry that is portable SPIR-V (named so, or starting with its
/// magic) must be a whole module (magic, version, whole words): a broken
/// one is an error naming it, never archived for a loader to fail on.
fn check_spirv(
    input: &Path,
    bundle: usize,
    entry: &kpack_bundle::Entry,
    src: &dyn kpack_bundle::ReadAt,
    at: u64,
    len: u64,
) -> Result<(), Error> {
    match kpack_bundle::inspect_spirv(&entry.id, src, at, len) {
        Some(Err(source)) => Err(Error::BrokenSpirv {
            path: input.to_path_buf(),
            bundle,
            entry: entry.id.raw().to_owned(),
            source: Box::new(source),
        }),
        _ => Ok(()),
    }
}

/// A failure inside one bundle's stream: the bundle's own, or the archive's.
enum StreamError {
    Bundle(kpack_bundle::Error),
    Other(Error),
}

impl From<kpack_bundle::Error> for StreamError {
    fn from(e: kpack_bundle::Error) -> Self {
        StreamError::Bundle(e)
    }
}

impl From<kpack_format::Error> for StreamError {
    fn from(e: kpack_format::Error) -> Self {
        StreamError::Other(Error::Archive(e))
    }
}

/// [`add_code_objects`] for the bundles of any host binary format.
///
/// Bundles are processed in parallel (the current rayon pool), each read
/// once by [`kpack_bundle::Item::stream_entries`] under the set's memory
/// budget: a worker inflates one bundle, compresses each kept code object
/// itself and hands the finished frame to its processor's writer, so
/// inflating one bundle overlaps with compressing another's entries. The
/// writers lay entries out in sorted (key, arch) order on `finish`, so the
/// archives do not depend on the order frames arrive in (nor on `-j`).
/// Without compression the writers first reserve every kernel's final
/// place ([`ArchiveWriter::reserve`]), so each one is written once, where
/// it stays. A bundle none of whose entries is kept is not inflated.
fn add_items(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    source: &kpack_bundle::SizedFile,
    kernel_name: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    archives: &mut ArchiveSet,
) -> Result<Added, Error> {
    let (dests, added) = plan_dests(bundles, kernel_name, keep, archives);
    for processor in dests.iter().flatten().flatten().map(|d| d.2.as_str()) {
        archives.writer(processor)?;
    }
    let compression = archives.options.compression;
    let budget = archives.budget.clone();
    check_fits(input, bundles, &dests, &budget)?;
    let delta = DeltaCompressor::new(compression)?
        .filter(|_| archives.options.order == EntryOrder::Sorted)
        .map(|c| c.with_plan(archives.options.delta_plan));
    if delta.is_none() {
        if !bundles
            .iter()
            .any(|b| matches!(b.format, kpack_bundle::Format::Compressed(_)))
        {
            add_plain(input, bundles, source, &dests, archives)?;
            return Ok(added);
        }
        if compression == kpack_format::Compression::None {
            reserve(bundles, &dests, archives)?;
        }
    }
    let writers = writer_locks(archives);
    let streams = Streams {
        input,
        bundles,
        source,
        dests: &dests,
        writers: &writers,
        budget: &budget,
    };
    match delta {
        Some(delta) => streams.add_delta(delta)?,
        None => streams.add_streamed(compression)?,
    }
    Ok(added)
}

/// Where each entry of each bundle goes (`None`: host code or left out
/// by `keep`), and the figures of what will be added.
fn plan_dests(
    bundles: &[kpack_bundle::Item],
    kernel_name: &str,
    keep: &(dyn Fn(&str) -> bool + Sync),
    archives: &ArchiveSet,
) -> (Vec<Vec<Option<Dest>>>, Added) {
    let mut dests: Vec<Vec<Option<Dest>>> = Vec::with_capacity(bundles.len());
    let mut targets = Vec::new();
    let mut excluded = Vec::new();
    let mut count = 0;
    for (b, item) in bundles.iter().enumerate() {
        let mut row = Vec::with_capacity(item.entries.len());
        for entry in &item.entries {
            let mut dest = None;
            if let Some(target) = entry.id.target().filter(|_| !entry.id.is_host()) {
                let name = target.to_string();
                if keep(&name) {
                    targets.push(name.clone());
                    dest = Some((
                        format!("{kernel_name}#{b}"),
                        name,
                        archives.group_of(target),
                    ));
                    count += 1;
                } else {
                    excluded.push(name);
                }
            }
            row.push(dest);
        }
        dests.push(row);
    }
    targets.sort();
    targets.dedup();
    let added = Added {
        count,
        targets,
        excluded,
    };
    (dests, added)
}

/// Every bundle with a kept entry must fit `budget`. Checked in order, so
/// the error names the first bundle that cannot fit whatever the thread
/// timing.
fn check_fits(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    dests: &[Vec<Option<Dest>>],
    budget: &MemoryBudget,
) -> Result<(), Error> {
    for (b, (item, row)) in bundles.iter().zip(dests).enumerate() {
        if row.iter().any(Option::is_some) {
            item.check_fits(budget).map_err(|source| Error::Bundle {
                path: input.to_path_buf(),
                bundle: b,
                source,
            })?;
        }
    }
    Ok(())
}

/// The writers' locks, keyed by processor or archive group.
type WriterLocks<'w, 'a> = BTreeMap<&'w str, Mutex<&'a mut ArchiveWriter>>;

/// What the bundle workers of [`Streams::add_streamed`] and
/// [`Streams::add_delta`] share: the bundles, where their kept entries go,
/// the writers and the memory budget.
struct Streams<'s, 'w, 'a> {
    input: &'s Path,
    bundles: &'s [kpack_bundle::Item],
    source: &'s kpack_bundle::SizedFile,
    dests: &'s [Vec<Option<Dest>>],
    writers: &'s WriterLocks<'w, 'a>,
    budget: &'s MemoryBudget,
}

impl<'s, 'a> Streams<'s, '_, 'a> {
    /// The writer of `group` (`what`: processor or group); none is an
    /// internal error.
    fn writer(
        &self,
        group: &str,
        what: &str,
    ) -> Result<&'s Mutex<&'a mut ArchiveWriter>, StreamError> {
        self.writers.get(group).ok_or_else(|| {
            StreamError::Other(Error::io(
                self.input,
                "internal error",
                std::io::Error::other(format!("no archive writer for a {what}")),
            ))
        })
    }

    /// A failure while streaming bundle `b`.
    fn stream_error(&self, b: usize, e: StreamError) -> Error {
        match e {
            StreamError::Bundle(source) => Error::Bundle {
                path: self.input.to_path_buf(),
                bundle: b,
                source,
            },
            StreamError::Other(e) => e,
        }
    }

    /// [`add_items`] for compressed bundles and per-kernel compression: each
    /// worker inflates a bundle, compresses each kept entry with its own
    /// compressor and hands the frame to its writer.
    fn add_streamed(&self, compression: kpack_format::Compression) -> Result<(), Error> {
        largest_first(self.bundles, self.dests)
            .into_par_iter()
            .try_for_each_init(
                || KernelCompressor::new(compression),
                |compressor, (b, (item, row))| -> Result<(), Error> {
                    if row.iter().all(Option::is_none) {
                        return Ok(());
                    }
                    let compressor = match compressor {
                        Ok(c) => c,
                        Err(e) => {
                            return Err(Error::io(
                                self.input,
                                "cannot start compressing",
                                std::io::Error::other(e.to_string()),
                            ));
                        }
                    };
                    item.stream_entries(self.source, self.budget, |i, entry, bytes| {
                        let Some(Some((key, name, processor))) = row.get(i) else {
                            return Ok(());
                        };
                        check_spirv(self.input, b, entry, &bytes, 0, bytes.len() as u64)
                            .map_err(StreamError::Other)?;
                        let digest = kpack_format::sha256(bytes);
                        let stored = match compressor {
                            Some(c) => c.compress(bytes, key, name)?,
                            None => bytes,
                        };
                        self.writer(processor, "processor")?
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .add_precompressed(key, name, stored, bytes.len() as u64, digest)?;
                        Ok::<(), StreamError>(())
                    })
                    .map_err(|e| self.stream_error(b, e))
                },
            )
    }

    /// [`add_items`] for `zstd-delta`: the bundles are streamed in parallel as
    /// for `zstd`, and each worker encodes whole kernel keys itself. A key is
    /// `<kernel_name>#<bundle>`, so one bundle holds every target of its key;
    /// the worker keeps a copy of each kept entry (in its stream's arena) until
    /// the last entry of its archive group in this bundle has arrived, then
    /// chooses the bases and
    /// compresses the frames ([`DeltaCompressor::compress_key`], on plain
    /// threads, `-j` of them: see there) and hands them to the writer
    /// ([`ArchiveWriter::add_delta_key`]). Nothing raw is spooled, and the
    /// archive is the one the writer's `finish` would encode from raw kernels,
    /// at any `-j`. (Should another binary of the same set reuse a key, the
    /// writer falls back to encoding that key at `finish`.)
    ///
    /// Memory: a worker takes from `budget`, before reading, what
    /// [`kpack_bundle::Item::stream_entries`] needs plus an arena for the
    /// copies it will hold ([`arena_peak`]), all at once
    /// ([`kpack_bundle::Item::stream_entries_with_arena`]); the arena is
    /// emptied whenever no copy is held, and kept for the next bundle.
    fn add_delta(&self, delta: DeltaCompressor) -> Result<(), Error> {
        largest_first(self.bundles, self.dests)
            .into_par_iter()
            .try_for_each(|(b, (item, row))| -> Result<(), Error> {
                if row.iter().all(Option::is_none) {
                    return Ok(());
                }
                let mut left = kept_per_group(row);
                // Each held copy: its target and where it lies in the arena.
                let mut held: BTreeMap<&str, Vec<(&str, std::ops::Range<usize>)>> = BTreeMap::new();
                // A big bundle's memory often keeps it alone in the budget: its
                // keys then use every thread of `-j`, not just this worker.
                let threads = rayon::current_num_threads();
                item.stream_entries_with_arena(
                    self.source,
                    self.budget,
                    arena_peak(item, row),
                    |arena, i, entry, bytes| -> Result<(), StreamError> {
                        let Some(Some((key, name, group))) = row.get(i) else {
                            return Ok(());
                        };
                        check_spirv(self.input, b, entry, &bytes, 0, bytes.len() as u64)
                            .map_err(StreamError::Other)?;
                        let group = group.as_str();
                        let left = left.entry(group).or_default();
                        *left = left.saturating_sub(1);
                        if *left > 0 {
                            let at = arena.len();
                            arena.extend_from_slice(bytes);
                            held.entry(group).or_default().push((name, at..arena.len()));
                            arena.extend_from_slice(&[0; ARENA_GAP]);
                            return Ok(());
                        }
                        let copies = held.remove(group).unwrap_or_default();
                        let mut members: Vec<(&str, &[u8])> = copies
                            .iter()
                            .map(|(a, at)| (*a, &arena[at.clone()]))
                            .collect();
                        members.push((name, bytes));
                        let dk = delta.compress_key(key, &members, threads)?;
                        drop(members);
                        if held.is_empty() {
                            arena.clear();
                        }
                        self.writer(group, "group")?
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .add_delta_key(dk)?;
                        Ok(())
                    },
                )
                .map_err(|e| self.stream_error(b, e))
            })
    }
}

/// `bundles` with their `rows` and indices, largest inflated size first
/// (ties: file order): each worker takes them in that order, so a decoder
/// (and arena) kept from one bundle is big enough for the next and zstd
/// reuses its window instead of allocating a larger one. The archives do
/// not depend on the order.
fn largest_first<'a, R>(
    bundles: &'a [kpack_bundle::Item],
    rows: &'a [R],
) -> Vec<(usize, (&'a kpack_bundle::Item, &'a R))> {
    let inflated = |item: &kpack_bundle::Item| match &item.format {
        kpack_bundle::Format::Compressed(header) => header.uncompressed_size,
        _ => item.len,
    };
    let mut order: Vec<_> = bundles.iter().zip(rows).enumerate().collect();
    order.sort_by_key(|(b, (item, _))| (std::cmp::Reverse(inflated(item)), *b));
    order
}

/// Each archive's writer behind a lock of its own, for the bundle workers.
fn writer_locks(archives: &mut ArchiveSet) -> BTreeMap<&str, Mutex<&mut ArchiveWriter>> {
    archives
        .writers
        .iter_mut()
        .map(|(p, w)| (p.as_str(), Mutex::new(w)))
        .collect()
}

/// Give every archive its whole layout before any bundle is read (see
/// [`ArchiveWriter::reserve`]): without compression a stored kernel is its
/// code object, whose size the bundle header gives, so each kernel can be
/// written once, into its final place, whatever order bundles finish in.
fn reserve(
    bundles: &[kpack_bundle::Item],
    dests: &[Vec<Option<Dest>>],
    archives: &mut ArchiveSet,
) -> Result<(), Error> {
    let mut per_group: BTreeMap<&str, Vec<(&str, &str, u64)>> = BTreeMap::new();
    for (item, row) in bundles.iter().zip(dests) {
        for (entry, dest) in item.entries.iter().zip(row) {
            if let Some((key, name, group)) = dest {
                per_group.entry(group.as_str()).or_default().push((
                    key.as_str(),
                    name.as_str(),
                    entry.size,
                ));
            }
        }
    }
    for (group, entries) in per_group {
        archives.writer(group)?.reserve(entries)?;
    }
    Ok(())
}

/// Bytes left between two copies in [`add_delta`]'s arena. zstd treats a
/// prefix that ends exactly where the data starts as one contiguous
/// stream, and then finds other matches than against a prefix elsewhere:
/// with a gap, a frame is the same wherever its members lie in memory
/// (as the writer's own encoding at `finish` and `archive convert` place
/// them).
const ARENA_GAP: usize = 1;

/// The arena [`add_delta`] needs for `item`'s copies: it replays the order
/// [`kpack_bundle::Item::stream_entries`] hands entries in (by offset, then
/// size, then index), appending each kept entry that is not its group's
/// last in the bundle, releasing a group's copies when its last entry
/// arrives (that one is read in place) and emptying the arena when no
/// copy is held; the arena's longest stretch is the answer. (With every
/// group's entries together, as bundles list targets in order, that is
/// the largest group's copies.)
fn arena_peak(item: &kpack_bundle::Item, row: &[Option<Dest>]) -> u64 {
    let mut left = kept_per_group(row);
    let mut order: Vec<usize> = (0..item.entries.len()).collect();
    order.sort_by_key(|&i| (item.entries[i].offset, item.entries[i].size, i));
    let mut holding: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    let (mut len, mut peak) = (0u64, 0u64);
    for i in order {
        let Some(Some((_, _, group))) = row.get(i) else {
            continue;
        };
        let group = group.as_str();
        let left = left.entry(group).or_default();
        *left = left.saturating_sub(1);
        if *left > 0 {
            holding.insert(group);
            len += item.entries[i].size + ARENA_GAP as u64;
            peak = peak.max(len);
        } else {
            holding.remove(group);
            if holding.is_empty() {
                len = 0;
            }
        }
    }
    peak
}

/// How many of a bundle's entries (`row`) each archive group keeps.
fn kept_per_group(row: &[Option<Dest>]) -> BTreeMap<&str, usize> {
    let mut kept: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, group) in row.iter().flatten() {
        *kept.entry(group.as_str()).or_default() += 1;
    }
    kept
}

/// [`add_items`] for inputs without compressed bundles: nothing to
/// inflate, so each archive is filled by its own thread in its final
/// (key, arch) order straight from the file, and the writer's spool
/// becomes the archive without a reordering copy (what keeps a plain
/// 1.3 GB library close to `cp`).
fn add_plain(
    input: &Path,
    bundles: &[kpack_bundle::Item],
    source: &kpack_bundle::SizedFile,
    dests: &[Vec<Option<Dest>>],
    archives: &mut ArchiveSet,
) -> Result<(), Error> {
    let mut jobs: BTreeMap<&str, Vec<(&str, &str, usize, usize)>> = BTreeMap::new();
    for (b, row) in dests.iter().enumerate() {
        for (i, dest) in row.iter().enumerate() {
            if let Some((key, name, group)) = dest {
                jobs.entry(group.as_str())
                    .or_default()
                    .push((key.as_str(), name.as_str(), b, i));
            }
        }
    }
    for list in jobs.values_mut() {
        list.sort_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
    }
    archives
        .writers
        .par_iter_mut()
        .try_for_each(|(group, writer)| -> Result<(), Error> {
            // Each thread its own descriptor: the copies move its position
            // (a `try_clone` would share one position between threads).
            let mut file = std::fs::File::open(input)
                .map_err(|source| Error::io(input, "cannot open", source))?;
            // Consecutive file ranges go to the writer together, which
            // copies and hashes them on every thread of the pool.
            let mut ranges = Vec::new();
            for &(key, name, b, i) in jobs
                .get(group.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let bundle = |source| Error::Bundle {
                    path: input.to_path_buf(),
                    bundle: b,
                    source,
                };
                let entry = &bundles[b].entries[i];
                match bundles[b].stored_range(source, i).map_err(bundle)? {
                    Some((offset, len)) => {
                        check_spirv(input, b, entry, source, offset, len)?;
                        ranges.push(FileRange {
                            key,
                            arch: name,
                            offset,
                            len,
                        });
                    }
                    None => {
                        writer.add_file_ranges(&mut file, &ranges)?;
                        ranges.clear();
                        let data = bundles[b].read_entry(source, i).map_err(bundle)?;
                        check_spirv(input, b, entry, &data, 0, data.len() as u64)?;
                        writer.add(key, name, &data)?;
                    }
                }
            }
            writer.add_file_ranges(&mut file, &ranges)?;
            Ok(())
        })
}
