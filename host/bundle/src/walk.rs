//! Walk a `.hip_fatbin` section (or a whole bundle file): plain bundles,
//! compressed bundles and raw AMDGPU ELF images back to back, with zero
//! padding between them.

use std::io::Write;

use crate::budget::{KitUse, MemoryBudget, StreamKit, ZstdDecoder};
use crate::bundle::{BUNDLE_MAGIC, Entry, parse_bundle};
use crate::ccob::{CCOB_MAGIC, CcobHeader, Method, check_ratio, parse_header};
use crate::codeobject;
use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, copy_range, read_vec};
use crate::stream::{Inflater, Inflation, v1_payload_len};

/// How to walk.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions {
    /// Check each compressed bundle's MD5 (on by default; LLVM only checks
    /// in verbose mode).
    pub verify_hash: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions { verify_hash: true }
    }
}

/// The container format of one item found in a section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum Format {
    /// An uncompressed `__CLANG_OFFLOAD_BUNDLE__`.
    Plain,
    /// A compressed bundle.
    Compressed(CcobHeader),
    /// A bare AMDGPU ELF image (no bundle around it).
    Elf,
}

/// One bundle (or bare code object) in a section, with its entries.
///
/// Walking reads headers only: a compressed bundle is inflated just far
/// enough to read its inner bundle header. The code objects are read by
/// [`Item::stream_entries`] (every entry, one pass, bounded memory) or one
/// at a time by [`Item::read_entry`].
#[derive(Debug, Clone)]
pub struct Item {
    /// Offset from the start of the walked region.
    pub offset: u64,
    /// Length in the region (compressed length for CCOB).
    pub len: u64,
    /// The container format.
    pub format: Format,
    /// Entries in file order; host entries included, nothing deduplicated.
    /// Offsets are from the start of the bundle (of the inflated bytes for
    /// a compressed one).
    pub entries: Vec<Entry>,
    /// Absolute offset of the item in the source.
    abs: u64,
    /// Compressed payload `(absolute offset, length)` of a CCOB.
    payload: Option<(u64, u64)>,
    /// Check the CCOB's MD5 when its entries are streamed.
    verify_hash: bool,
}

impl Item {
    /// Absolute offset of the item in the source it was walked from.
    pub fn abs_offset(&self) -> u64 {
        self.abs
    }

    /// Hand every entry to `f` as `(index, entry, bytes)`, in offset order,
    /// reading the item once: a compressed bundle is inflated as a stream
    /// on a second thread (its MD5 computed on this one as the bytes
    /// arrive, checked at the end when the walk asked for it, so decoding
    /// overlaps hashing and `f`), a plain one read entry by entry. Entries
    /// that overlap share one buffer.
    ///
    /// Memory: before reading, the item takes from `budget` its decoder's
    /// memory (for zstd the window its frame declares; LLVM's
    /// single-segment frames declare the whole inflated bundle) plus its
    /// largest entry buffer, and holds it until done; a zstd decoder is
    /// then kept in the budget for the next bundle (its window buffer
    /// reused: see [`MemoryBudget::acquire_kit`]). A bundle that does
    /// not fit beside others waits; one that exceeds the whole ceiling only
    /// through its window waits to run alone; an entry larger than the
    /// whole ceiling is an [`ErrorKind::MemoryLimit`] error.
    ///
    /// A hash mismatch is reported after `f` has seen every entry: callers
    /// that write must not commit before this returns `Ok`.
    pub fn stream_entries<E: From<Error>>(
        &self,
        src: &dyn ReadAt,
        budget: &MemoryBudget,
        mut f: impl FnMut(usize, &Entry, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.stream_entries_with_arena(src, budget, 0, |_, i, e, bytes| f(i, e, bytes))
    }

    /// [`stream_entries`](Self::stream_entries) with an arena for the
    /// caller: `f` also gets a buffer of at least `arena` bytes' capacity
    /// (empty at the start), for copies of entries it keeps while
    /// streaming. The arena is held in the same reservation as the stream's
    /// own memory, taken all at once (taking more while holding some could
    /// deadlock two workers that each wait for the other's bytes), and kept
    /// with the decoder for the next bundle (a [`StreamKit`]), so its pages
    /// are not faulted in afresh each time.
    pub fn stream_entries_with_arena<E: From<Error>>(
        &self,
        src: &dyn ReadAt,
        budget: &MemoryBudget,
        arena: u64,
        mut f: impl FnMut(&mut Vec<u8>, usize, &Entry, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.check_fits(budget)?;
        let runs = self.runs();
        let run_bytes = self.largest_run(&runs).1;
        let inflation = self.decoder_bytes(src)?;
        let compressed = match (&self.format, self.payload) {
            (Format::Compressed(header), Some(payload)) => Some((*header, payload)),
            _ => None,
        };
        // Inflated whole only where two such bundles fit in the budget, so
        // that bundles overlap each other (a whole inflation hashes after
        // decoding; a stream overlaps the two).
        let whole = matches!(inflation, Inflation::Whole(b)
            if (b + run_bytes + arena).saturating_mul(2) <= budget.limit());
        // Only the decoder's buffers (or the whole-bundle buffer) come back
        // with a kit: not the pipe's chunks, nor the compressed payload a
        // whole inflation reads beside it.
        let beside = match (inflation, compressed) {
            (Inflation::Whole(_), Some((_, (_, len)))) => len.max(crate::stream::PIPE_BYTES),
            (Inflation::Stream(_), Some(_)) => crate::stream::PIPE_BYTES,
            _ => 0,
        };
        let usage = match compressed {
            Some(_) if whole => KitUse::Whole,
            Some((header, _)) if header.method == Method::Zstd => KitUse::Decoder,
            _ => KitUse::ArenaOnly,
        };
        let (mut kit, held) = budget.acquire_kit(
            usage,
            inflation.bytes().saturating_sub(beside),
            arena,
            beside + run_bytes,
        );
        let StreamKit {
            decoder,
            inflated,
            arena: scratch,
        } = &mut kit;
        reserve_arena(scratch, arena, self.abs)?;
        if usage != KitUse::ArenaOnly && decoder.is_none() {
            *decoder = ZstdDecoder::try_create();
        }
        let mut f = |i: usize, e: &Entry, bytes: &[u8]| f(scratch, i, e, bytes);
        let done = match compressed {
            None => self.read_runs(&runs, None, src, &mut f),
            Some((header, payload)) if whole => match decoder {
                Some(dctx) => self.read_whole(src, header, payload, dctx, inflated, &runs, &mut f),
                None => Err(Error::at(
                    ErrorKind::MemoryLimit,
                    self.abs,
                    "cannot allocate a zstd decoder",
                )
                .into()),
            },
            Some((header, payload)) => {
                // zlib has no decoder in the kit: its usage dropped it.
                let dctx = decoder.as_mut();
                let dec = crate::stream::decoder(src, &header, payload.0, payload.1, dctx)?;
                std::thread::scope(|scope| {
                    let pipe = crate::stream::Pipe::spawn(scope, dec, self.verify_hash);
                    let inflater = Inflater::over_hashed_pipe(pipe, self.abs, header, payload.0);
                    self.read_runs(&runs, Some(inflater), src, &mut f)
                })
            }
        };
        budget.recycle_kit(kit, held);
        done
    }

    /// The [`ErrorKind::MemoryLimit`] error [`stream_entries`](Self::stream_entries)
    /// would return for an entry larger than the whole ceiling; callers
    /// that stream bundles in parallel check every bundle first, so the
    /// error names the first such bundle whatever the thread timing.
    pub fn check_fits(&self, budget: &MemoryBudget) -> Result<(), Error> {
        let runs = self.runs();
        let (biggest, run_bytes) = self.largest_run(&runs);
        if run_bytes > budget.limit() || usize::try_from(run_bytes).is_err() {
            return Err(self.too_big(biggest, run_bytes, budget));
        }
        Ok(())
    }

    /// The memory [`stream_entries`](Self::stream_entries) takes from its
    /// budget for this item: the decoder's (see there) plus the largest
    /// entry buffer.
    pub fn memory_needed(&self, src: &dyn ReadAt) -> Result<u64, Error> {
        Ok(self.decoder_bytes(src)?.bytes() + self.largest_run(&self.runs()).1)
    }

    fn decoder_bytes(&self, src: &dyn ReadAt) -> Result<Inflation, Error> {
        match (&self.format, self.payload) {
            (Format::Compressed(header), Some((at, len))) => {
                crate::stream::decoder_bytes(src, header, at, len)
            }
            _ => Ok(Inflation::Stream(0)),
        }
    }

    /// The body of [`stream_entries`](Self::stream_entries) for a bundle
    /// inflated whole ([`Inflation::Whole`]): one call into `buf`, then
    /// every run's entries handed on as slices of it, in the order
    /// [`read_runs`](Self::read_runs) hands them, while a second thread
    /// computes the MD5 (when the walk checks it; a mismatch is reported
    /// after `f` has seen every entry, as when streaming).
    #[allow(
        clippy::too_many_arguments,
        reason = "the stream's parts, borrowed apart"
    )]
    fn read_whole<E: From<Error>>(
        &self,
        src: &dyn ReadAt,
        header: CcobHeader,
        payload: (u64, u64),
        dctx: &mut ZstdDecoder,
        buf: &mut Vec<u8>,
        runs: &[Vec<usize>],
        f: &mut impl FnMut(usize, &Entry, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = crate::stream::inflate_whole(src, &header, payload, self.abs, dctx, buf)?;
        let data = &buf[..n];
        let verify = self.verify_hash;
        std::thread::scope(|scope| {
            let md5 = verify.then(|| scope.spawn(|| fast_md5::digest(data)));
            let handed = runs.iter().try_for_each(|run| -> Result<(), E> {
                let (from, to) = run_range(&self.entries, run);
                let bytes = usize::try_from(from)
                    .ok()
                    .zip(usize::try_from(to).ok())
                    .and_then(|(from, to)| data.get(from..to))
                    .ok_or_else(|| {
                        Error::at(
                            ErrorKind::BadRange,
                            self.abs,
                            format!("entries lie past the inflated bundle's {n} bytes"),
                        )
                    })?;
                self.hand_run(run, from, bytes, f)
            });
            let digest = md5.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            handed?;
            if let Some(digest) = digest {
                crate::stream::check_md5(digest, header.hash, self.abs)?;
            }
            Ok(())
        })
    }

    /// The run of entries with the largest buffer, and its size.
    fn largest_run<'r>(&self, runs: &'r [Vec<usize>]) -> (&'r [usize], u64) {
        let mut largest: (&[usize], u64) = (&[], 0);
        for run in runs {
            let (from, to) = run_range(&self.entries, run);
            if to - from > largest.1 {
                largest = (run, to - from);
            }
        }
        largest
    }

    /// The body of [`stream_entries`](Self::stream_entries): each run read
    /// into one buffer and handed on.
    fn read_runs<E: From<Error>>(
        &self,
        runs: &[Vec<usize>],
        mut inflater: Option<Inflater<'_>>,
        src: &dyn ReadAt,
        f: &mut impl FnMut(usize, &Entry, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        // One buffer for every run, sized for the largest (checked against
        // the budget by the caller): allocating one per code object
        // fragments the allocator's heaps, which then keep tens of MB that
        // nothing uses.
        let mut whole = vec![0u8; self.largest_run(runs).1 as usize];
        for run in runs {
            let (from, to) = run_range(&self.entries, run);
            let buf = &mut whole[..(to - from) as usize];
            match &mut inflater {
                Some(inf) => {
                    inf.skip_to(from)?;
                    inf.read_exact(buf)?;
                }
                None => src
                    .read_exact_at(self.abs + from, buf)
                    .map_err(|e| Error::io(self.abs + from, e))?,
            }
            self.hand_run(run, from, buf, f)?;
        }
        if let Some(inf) = inflater {
            inf.finish()?;
        }
        Ok(())
    }

    /// Hand the entries of `run` to `f` from `buf`, the run's bytes from
    /// offset `from` on ([`run_range`]).
    fn hand_run<E>(
        &self,
        run: &[usize],
        from: u64,
        buf: &[u8],
        f: &mut impl FnMut(usize, &Entry, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for &i in run {
            let e = &self.entries[i];
            let at = (e.offset - from) as usize;
            f(i, e, &buf[at..at + e.size as usize])?;
        }
        Ok(())
    }

    /// The bytes of entry `i`. For a compressed bundle this inflates the
    /// stream up to the end of that entry (no MD5 check: use
    /// [`stream_entries`](Self::stream_entries) to read every entry once,
    /// checked); reading every entry this way costs quadratic time.
    pub fn read_entry(&self, src: &dyn ReadAt, i: usize) -> Result<Vec<u8>, Error> {
        let e = self.entry(i)?;
        match self.inflater(src, false)? {
            Some(mut inf) => {
                let n = usize::try_from(e.size).map_err(|_| {
                    Error::at(
                        ErrorKind::BadRange,
                        self.abs,
                        "entry does not fit in memory",
                    )
                })?;
                let mut buf = vec![0u8; n];
                inf.skip_to(e.offset)?;
                inf.read_exact(&mut buf)?;
                Ok(buf)
            }
            None => read_vec(src, self.abs + e.offset, e.size),
        }
    }

    /// Where entry `i`'s bytes lie in the source, `(absolute offset,
    /// length)`, when they are stored there as they are (a plain bundle or
    /// a bare code object); `None` for a compressed bundle. Lets a writer
    /// copy the entry file to file without reading it. The range is checked
    /// against the source's size.
    pub fn stored_range(&self, src: &dyn ReadAt, i: usize) -> Result<Option<(u64, u64)>, Error> {
        if self.payload.is_some() {
            return Ok(None);
        }
        let e = self.entry(i)?;
        let at = self.abs.checked_add(e.offset);
        if at
            .and_then(|a| a.checked_add(e.size))
            .is_none_or(|end| end > src.size())
        {
            return Err(Error::at(
                ErrorKind::Truncated,
                self.abs,
                format!(
                    "entry {i} ({} bytes at +{:#x}) runs past the end of the input ({} bytes)",
                    e.size,
                    e.offset,
                    src.size()
                ),
            ));
        }
        Ok(at.map(|a| (a, e.size)))
    }

    /// Copy the bytes of entry `i` to `out`; a plain entry in bounded
    /// chunks, a compressed one as [`read_entry`](Self::read_entry) does.
    pub fn copy_entry(&self, src: &dyn ReadAt, i: usize, out: &mut dyn Write) -> Result<(), Error> {
        if self.payload.is_some() {
            let bytes = self.read_entry(src, i)?;
            return out.write_all(&bytes).map_err(|e| Error::io(self.abs, e));
        }
        let e = self.entry(i)?;
        copy_range(src, self.abs + e.offset, e.size, out)
    }

    /// Inspect the code object of entry `i` (ELF header, flags, metadata);
    /// costs what [`read_entry`](Self::read_entry) costs for a compressed
    /// bundle.
    pub fn code_object(
        &self,
        src: &dyn ReadAt,
        i: usize,
    ) -> Result<codeobject::CodeObjectInfo, Error> {
        let e = self.entry(i)?;
        if self.payload.is_some() {
            let bytes = self.read_entry(src, i)?;
            return codeobject::inspect(&bytes, 0, e.size);
        }
        codeobject::inspect(src, self.abs + e.offset, e.size)
    }

    fn inflater<'a>(&self, src: &'a dyn ReadAt, hash: bool) -> Result<Option<Inflater<'a>>, Error> {
        match (&self.format, self.payload) {
            (Format::Compressed(header), Some((at, len))) => {
                Inflater::new(src, self.abs, *header, at, len, hash).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Entry indices grouped into runs of overlapping byte ranges, runs in
    /// offset order (entries within a run too).
    fn runs(&self) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        order.sort_by_key(|&i| (self.entries[i].offset, self.entries[i].size, i));
        let mut runs: Vec<Vec<usize>> = Vec::new();
        let mut run_end = 0u64;
        for i in order {
            let e = &self.entries[i];
            let end = e.offset + e.size;
            match runs.last_mut() {
                Some(run) if e.offset < run_end => {
                    run.push(i);
                    run_end = run_end.max(end);
                }
                _ => {
                    runs.push(vec![i]);
                    run_end = end;
                }
            }
        }
        runs
    }

    fn too_big(&self, run: &[usize], len: u64, budget: &MemoryBudget) -> Error {
        let largest = run
            .iter()
            .map(|&i| &self.entries[i])
            .max_by_key(|e| e.size)
            .map(|e| e.id.raw().to_owned())
            .unwrap_or_default();
        Error::at(
            ErrorKind::MemoryLimit,
            self.abs,
            format!(
                "entry {largest} needs {len} bytes in memory, more than the memory ceiling of {} bytes; raise it with --max-memory",
                budget.limit()
            ),
        )
    }

    fn entry(&self, i: usize) -> Result<&Entry, Error> {
        self.entries.get(i).ok_or_else(|| {
            Error::new(
                ErrorKind::BadRange,
                format!("no entry {i} in bundle at {:#x}", self.abs),
            )
        })
    }
}

/// The byte range a run of entries covers.
fn run_range(entries: &[Entry], run: &[usize]) -> (u64, u64) {
    let from = run.iter().map(|&i| entries[i].offset).min().unwrap_or(0);
    let to = run
        .iter()
        .map(|&i| entries[i].offset + entries[i].size)
        .max()
        .unwrap_or(from);
    (from, to)
}

/// Walk the region `[start, start+len)` of `src`, one item at a time.
pub fn walk(src: &dyn ReadAt, start: u64, len: u64, opts: WalkOptions) -> Walker<'_> {
    Walker {
        src,
        start,
        end: start.saturating_add(len),
        pos: start,
        opts,
        failed: false,
    }
}

/// Iterator over the items of a region; see [`walk`].
pub struct Walker<'a> {
    src: &'a dyn ReadAt,
    start: u64,
    end: u64,
    pos: u64,
    opts: WalkOptions,
    failed: bool,
}

impl Iterator for Walker<'_> {
    type Item = Result<Item, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.step();
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }
}

impl Walker<'_> {
    fn step(&mut self) -> Option<Result<Item, Error>> {
        match skip_zeros(self.src, self.pos, self.end) {
            Ok(Some(p)) => self.pos = p,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        }
        let r = self.item_at(self.pos);
        if let Ok(item) = &r {
            self.pos += item.len;
        }
        Some(r)
    }

    /// The CCOB at `pos`: its header, its length and its inner bundle
    /// headers, inflating no further than those need.
    fn ccob_at(&self, pos: u64, offset: u64) -> Result<Item, Error> {
        let header = parse_header(self.src, pos, self.end)?;
        let hlen = header.header_len();
        let payload = pos + hlen;
        let payload_len = match header.total_size {
            Some(total) => total - hlen,
            None => v1_payload_len(self.src, &header, payload, self.end - payload)?,
        };
        check_ratio(&header, payload_len, pos)?;
        let mut inf = Inflater::new(self.src, pos, header, payload, payload_len, false)?;
        let entries = inf
            .inner_entries()
            .map_err(|e| Error::at(e.kind(), pos, "inside the compressed bundle").with_source(e))?;
        Ok(Item {
            offset,
            len: hlen + payload_len,
            format: Format::Compressed(header),
            entries,
            abs: pos,
            payload: Some((payload, payload_len)),
            verify_hash: self.opts.verify_hash,
        })
    }

    fn item_at(&self, pos: u64) -> Result<Item, Error> {
        let head = read_vec(self.src, pos, 24.min(self.end - pos))?;
        let offset = pos - self.start;
        if head.len() == 24 && head[..] == BUNDLE_MAGIC[..] {
            let h = parse_bundle(self.src, pos, self.end)?;
            return Ok(Item {
                offset,
                len: h.len,
                format: Format::Plain,
                entries: h.entries,
                abs: pos,
                payload: None,
                verify_hash: self.opts.verify_hash,
            });
        }
        if head.starts_with(CCOB_MAGIC) {
            return self.ccob_at(pos, offset);
        }
        if head.starts_with(b"\x7fELF") {
            let (len, entry) = codeobject::bare_elf_entry(self.src, pos, self.end)?;
            return Ok(Item {
                offset,
                len,
                format: Format::Elf,
                entries: vec![entry],
                abs: pos,
                payload: None,
                verify_hash: self.opts.verify_hash,
            });
        }
        Err(Error::at(
            ErrorKind::BadHeader,
            pos,
            format!(
                "expected an offload bundle, CCOB or AMDGPU ELF; found bytes {}",
                hex_prefix(&head)
            ),
        ))
    }
}

/// First non-zero byte at or after `pos`, or `None` at the end.
fn skip_zeros(src: &dyn ReadAt, mut pos: u64, end: u64) -> Result<Option<u64>, Error> {
    let mut buf = [0u8; 4096];
    while pos < end {
        let n = (end - pos).min(buf.len() as u64) as usize;
        src.read_exact_at(pos, &mut buf[..n])
            .map_err(|e| Error::io(pos, e))?;
        if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
            return Ok(Some(pos + i as u64));
        }
        pos += n as u64;
    }
    Ok(None)
}

fn hex_prefix(b: &[u8]) -> String {
    b.iter()
        .take(8)
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Give `scratch` a capacity of at least `arena` bytes (for the bundle at
/// `abs`), or say that it cannot be allocated.
fn reserve_arena(scratch: &mut Vec<u8>, arena: u64, abs: u64) -> Result<(), Error> {
    if (scratch.capacity() as u64) >= arena {
        return Ok(());
    }
    *scratch = Vec::new();
    let fits = usize::try_from(arena)
        .ok()
        .is_some_and(|n| scratch.try_reserve_exact(n).is_ok());
    if fits {
        Ok(())
    } else {
        Err(Error::at(
            ErrorKind::MemoryLimit,
            abs,
            format!("cannot allocate {arena} bytes to hold this bundle's entries"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::write_bundle;
    use crate::ccob::{Method, deflate};

    fn bundle(tag: u8) -> Vec<u8> {
        write_bundle(
            &[
                ("host-x86_64-unknown-linux", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx1030", &[tag; 3000]),
            ],
            4096,
        )
    }

    #[test]
    fn walks_mixed_bundles_with_padding() {
        let mut region = bundle(1);
        region.resize(region.len().next_multiple_of(4096), 0);
        region.extend(deflate(&bundle(2), 3, Method::Zstd, 3).unwrap());
        region.resize(region.len().next_multiple_of(4096), 0);
        region.extend(deflate(&bundle(3), 2, Method::Zlib, 6).unwrap());
        region.resize(region.len() + 100, 0);
        let items: Vec<Item> = walk(&region, 0, region.len() as u64, WalkOptions::default())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(items.len(), 3);
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item.entries.len(), 2);
            let data = item.read_entry(&region, 1).unwrap();
            assert_eq!(data, vec![i as u8 + 1; 3000]);
        }
        assert!(matches!(
            items[1].format,
            Format::Compressed(CcobHeader { version: 3, .. })
        ));
        assert_eq!(items[1].offset, 8192);
    }

    #[test]
    fn reports_garbage_with_its_offset() {
        let mut region = bundle(1);
        region.resize(8192, 0);
        region.extend_from_slice(b"garbage!");
        let results: Vec<_> =
            walk(&region, 0, region.len() as u64, WalkOptions::default()).collect();
        assert_eq!(results.len(), 2);
        let e = results[1].as_ref().unwrap_err();
        assert_eq!(e.offset(), Some(8192));
    }

    #[test]
    fn ccob_magic_inside_payload_does_not_split_the_bundle() {
        let mut payload = vec![0u8; 4000];
        payload[100..104].copy_from_slice(b"CCOB");
        payload[2000..2024].copy_from_slice(BUNDLE_MAGIC);
        let b = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1030", &payload)], 4096);
        let c = deflate(&b, 3, Method::Zstd, 3).unwrap();
        let items: Vec<Item> = walk(&c, 0, c.len() as u64, WalkOptions::default())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].read_entry(&c, 0).unwrap(), payload);
    }
}
