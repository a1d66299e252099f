//! Many code objects of one file added at once
//! ([`ArchiveWriter::add_file_ranges`]): without compression, each is
//! copied from the file into its final place in the spool and hashed on
//! the way, two at a time, on every thread of the pool.

use std::fs::File;
use std::io::{Seek, SeekFrom};

use rayon::prelude::*;

use super::{ArchiveWriter, Compression, HASH_CHUNK, Pending};
use crate::error::{Error, ErrorKind, Result};
use crate::sha256x2::{Sha256, update2};

/// One code object for [`ArchiveWriter::add_file_ranges`]: the `len`
/// bytes of the source file at `offset`, added as `key` for `arch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange<'a> {
    /// The binary key (as for [`ArchiveWriter::add`]).
    pub key: &'a str,
    /// The architecture.
    pub arch: &'a str,
    /// Where the code object starts in the source file.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// Bytes of a piece of work: the ranges of one call are cut into pieces of
/// about this many bytes (at least two ranges each when it can), spread
/// over the pool; small enough that two threads finish together, large
/// enough that each piece has two lanes to hash.
const PIECE: u64 = 64 << 20;

/// A range and its place in the spool.
struct Job<'r> {
    range: &'r FileRange<'r>,
    at: u64,
}

impl ArchiveWriter {
    /// [`add_file_range`](Self::add_file_range) for each of `ranges`, in
    /// order: the archive is the one those calls write.
    ///
    /// A sorted archive without compression, of a source that holds every
    /// range (on Unix), takes a faster way: each code object goes through
    /// a buffer in the cache, read into it from the file, hashed there and
    /// written into its final place in the spool, so its bytes come from
    /// memory once. The ranges are hashed two at a time, interleaved
    /// (`sha256x2`: 1.25× the bytes per CPU-second of one at a time): they
    /// are cut into pieces of about [`PIECE`] bytes spread over the
    /// current rayon pool, and in each piece two lanes take the ranges
    /// largest first. On an error nothing of `ranges` is added.
    pub fn add_file_ranges(&mut self, src: &mut File, ranges: &[FileRange<'_>]) -> Result<()> {
        self.add_file_ranges_in(src, ranges, PIECE)
    }

    /// [`add_file_ranges`](Self::add_file_ranges) with pieces of `piece`
    /// bytes.
    fn add_file_ranges_in(
        &mut self,
        src: &mut File,
        ranges: &[FileRange<'_>],
        piece: u64,
    ) -> Result<()> {
        if ranges.is_empty() {
            return Ok(());
        }
        let size = src.metadata().map(|m| m.len()).ok();
        let fits = |r: &FileRange<'_>| {
            size.is_some_and(|n| r.offset.checked_add(r.len).is_some_and(|end| end <= n))
        };
        if !self.batchable() || !ranges.iter().all(fits) {
            for r in ranges {
                self.add_file_range(r.key, r.arch, src, r.offset, r.len)?;
            }
            return Ok(());
        }
        let mut keys = Vec::with_capacity(ranges.len());
        let mut at = self.spool_len;
        let mut jobs = Vec::with_capacity(ranges.len());
        let laid_out = ranges.iter().try_for_each(|r| {
            keys.push(self.check_new(r.key, r.arch)?);
            jobs.push(Job { range: r, at });
            at = at
                .checked_add(r.len)
                .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "kernel sizes overflow"))?;
            Ok(())
        });
        let digests = laid_out.and_then(|()| self.write_hashing(src, &jobs, piece));
        let digests = match digests {
            Ok(d) => d,
            Err(e) => {
                // As if none was added: each may be added again.
                for (key, job) in keys.into_iter().zip(&jobs) {
                    self.seen.remove(&(key, job.range.arch.to_owned()));
                }
                return Err(e);
            }
        };
        for ((key, job), sha256) in keys.into_iter().zip(&jobs).zip(digests) {
            self.pending.push(Pending {
                key,
                arch: job.range.arch.to_owned(),
                spool_offset: job.at,
                stored_len: job.range.len,
                original_size: job.range.len,
                metadata: Vec::new(),
                sha256: Some(sha256),
                framed: None,
            });
        }
        self.spool_len = at;
        // The writes did not move the spool's position; the next append
        // goes after them.
        (self.spool.file_mut())
            .seek(SeekFrom::Start(self.spool_len))
            .map_err(|e| Error::io("cannot seek spool file", e))?;
        Ok(())
    }

    /// Whether [`add_file_ranges`](Self::add_file_ranges) can take its
    /// fast way, the source aside.
    fn batchable(&self) -> bool {
        cfg!(unix)
            && self.options.compression == Compression::None
            && self.digests()
            && self.reserved.is_none()
    }

    /// Write each job's bytes at its place in the spool and return their
    /// sha256s, in order. See [`add_file_ranges`](Self::add_file_ranges).
    fn write_hashing(&self, src: &File, jobs: &[Job<'_>], piece: u64) -> Result<Vec<[u8; 32]>> {
        let spool = self.spool.file();
        let pieces = pieces(jobs, piece);
        let done = pieces
            .par_iter()
            .map(|piece| hash_piece(src, spool, piece))
            .collect::<Result<Vec<_>>>()?;
        Ok(done.into_iter().flatten().collect())
    }
}

/// `jobs` cut into consecutive pieces of about `size` bytes, each of at
/// least two jobs while two are left.
fn pieces<'j, 'r>(jobs: &'j [Job<'r>], size: u64) -> Vec<&'j [Job<'r>]> {
    let mut out = Vec::new();
    let mut rest = jobs;
    while !rest.is_empty() {
        let mut bytes = 0;
        let mut n = 0;
        while n < rest.len() && (n < 2 || bytes < size) {
            bytes += rest[n].range.len;
            n += 1;
        }
        let (piece, more) = rest.split_at(n);
        out.push(piece);
        rest = more;
    }
    out
}

/// A lane of [`hash_piece`]: the job in hand (its index in the piece),
/// how far into it, its hash so far, and the buffer its bytes pass
/// through.
struct Lane {
    job: Option<usize>,
    done: u64,
    hash: Sha256,
    buf: Vec<u8>,
}

impl Lane {
    /// Bytes of the job in hand not done yet; `None`: no job in hand.
    fn left(&self, piece: &[Job<'_>]) -> Option<u64> {
        self.job.map(|j| piece[j].range.len - self.done)
    }

    /// Read the next `n` bytes of the job in hand from `src` into the
    /// buffer; they are `&self.buf[..n]` (empty without a job).
    fn read(&mut self, src: &File, piece: &[Job<'_>], n: usize) -> Result<()> {
        let Some(j) = self.job else {
            return Ok(());
        };
        let r = piece[j].range;
        read_at(src, &mut self.buf[..n], r.offset + self.done).map_err(|e| {
            Error::io(
                format!(
                    "cannot read kernel {:?} {:?} at {:#x}",
                    r.key, r.arch, r.offset
                ),
                e,
            )
        })
    }

    /// Write the `n` bytes read to the spool, in the job's place, and count
    /// them done; at the job's end, record its digest and free the lane.
    fn write(
        &mut self,
        spool: &File,
        piece: &[Job<'_>],
        n: usize,
        digests: &mut [[u8; 32]],
    ) -> Result<()> {
        let Some(j) = self.job else {
            return Ok(());
        };
        let job = &piece[j];
        write_at(spool, &self.buf[..n], job.at + self.done).map_err(|e| {
            let r = job.range;
            Error::io(
                format!(
                    "cannot copy kernel {:?} {:?} from input offset {:#x} into the spool file",
                    r.key, r.arch, r.offset
                ),
                e,
            )
        })?;
        self.done += n as u64;
        if self.done == job.range.len {
            let hash = std::mem::replace(&mut self.hash, Sha256::new());
            digests[j] = hash.finalize();
            self.job = None;
            self.done = 0;
        }
        Ok(())
    }
}

/// Copy the jobs of `piece` from `src` to `spool` and hash them, two at a
/// time; their digests in order. Two lanes take the jobs largest first,
/// each the next one when its own ends, so they end close together and
/// little is left to hash alone. Each step reads a chunk of each lane's
/// job into its buffer (the kernel copies it from the page cache: no
/// mapping to fault in and tear down), hashes the two from the cache, and
/// writes them.
fn hash_piece(src: &File, spool: &File, piece: &[Job<'_>]) -> Result<Vec<[u8; 32]>> {
    let mut queue: Vec<usize> = (0..piece.len()).collect();
    // Popped from the end: smallest last, ties in file order.
    queue.sort_by_key(|&i| (piece[i].range.len, std::cmp::Reverse(i)));
    let mut digests = vec![[0u8; 32]; piece.len()];
    let mut lanes = [(); 2].map(|()| Lane {
        job: None,
        done: 0,
        hash: Sha256::new(),
        buf: vec![0; HASH_CHUNK],
    });
    loop {
        for lane in &mut lanes {
            if lane.job.is_none() {
                lane.job = queue.pop();
            }
        }
        // Equal steps while both lanes have a job, so the two are hashed
        // interleaved; a job that ends (even empty) ends the step.
        let chunk = HASH_CHUNK as u64;
        let step = match (lanes[0].left(piece), lanes[1].left(piece)) {
            (Some(a), Some(b)) => chunk.min(a).min(b),
            (Some(x), None) | (None, Some(x)) => chunk.min(x),
            (None, None) => break,
        };
        // At most HASH_CHUNK.
        let step = step as usize;
        for lane in &mut lanes {
            lane.read(src, piece, step)?;
        }
        let [a, b] = &mut lanes;
        let na = if a.job.is_some() { step } else { 0 };
        let nb = if b.job.is_some() { step } else { 0 };
        update2(&mut a.hash, &a.buf[..na], &mut b.hash, &b.buf[..nb]);
        for lane in &mut lanes {
            lane.write(spool, piece, step, &mut digests)?;
        }
    }
    Ok(digests)
}

/// Read `buf.len()` bytes at `offset` of `file`, its position unmoved.
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Not reached: [`ArchiveWriter::add_file_ranges`] takes this way on Unix
/// only.
#[cfg(not(unix))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Write all of `bytes` at `offset` of `file`, its position unmoved.
#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

/// Not reached: [`ArchiveWriter::add_file_ranges`] takes this way on Unix
/// only.
#[cfg(not(unix))]
fn write_at(_: &File, _: &[u8], _: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Archive;
    use crate::write::tests::opts;
    use sha2::Digest;

    /// An input file of pseudo-random bytes, and ranges of it at the sizes
    /// sha256's padding and the hash chunks turn on, keyed in `order`.
    fn input(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>, Vec<(String, u64, u64)>) {
        let lens = [
            0,
            1,
            55,
            56,
            63,
            64,
            65,
            1000,
            HASH_CHUNK - 1,
            HASH_CHUNK + 64,
            3 * HASH_CHUNK + 7,
        ];
        let total: usize = lens.iter().sum::<usize>() + 13;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..total)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let path = dir.join("input");
        std::fs::write(&path, &bytes).unwrap();
        let mut at = 13u64;
        let ranges = (lens.iter().enumerate())
            .map(|(i, &n)| {
                let r = (format!("k#{i:02}"), at, n as u64);
                at += n as u64;
                r
            })
            .collect();
        (path, bytes, ranges)
    }

    /// The archive written by `fill` into a fresh writer.
    fn archive(
        dir: &std::path::Path,
        name: &str,
        c: Compression,
        fill: impl FnOnce(&mut ArchiveWriter, &mut File),
    ) -> Vec<u8> {
        let path = dir.join(name);
        let mut w = ArchiveWriter::create(&path, opts(c)).unwrap();
        let mut src = File::open(dir.join("input")).unwrap();
        fill(&mut w, &mut src);
        w.finish().unwrap();
        std::fs::read(&path).unwrap()
    }

    fn as_ranges(list: &[(String, u64, u64)]) -> Vec<FileRange<'_>> {
        (list.iter())
            .map(|(key, offset, len)| FileRange {
                key,
                arch: "gfx900",
                offset: *offset,
                len: *len,
            })
            .collect()
    }

    #[test]
    fn many_ranges_store_what_one_range_at_a_time_stores() {
        let dir = tempfile::tempdir().unwrap();
        let (_, bytes, list) = input(dir.path());
        let mut reversed = list.clone();
        reversed.reverse();
        for c in [Compression::None, Compression::default()] {
            for (n, order) in [&list, &reversed].into_iter().enumerate() {
                let one = archive(dir.path(), "one.kpack", c, |w, src| {
                    w.add("a#0", "gfx900", b"first").unwrap();
                    for (key, offset, len) in order {
                        w.add_file_range(key, "gfx900", src, *offset, *len).unwrap();
                    }
                    w.add("z#0", "gfx900", b"last").unwrap();
                });
                // Pieces smaller than one range, of a few, of all.
                for piece in [1, 2 * HASH_CHUNK as u64, 1 << 30] {
                    let many = archive(dir.path(), "many.kpack", c, |w, src| {
                        w.add("a#0", "gfx900", b"first").unwrap();
                        w.add_file_ranges_in(src, &as_ranges(order), piece).unwrap();
                        w.add("z#0", "gfx900", b"last").unwrap();
                    });
                    assert!(one == many, "{c:?}, order {n}, pieces of {piece}");
                }
            }
        }
        // And the digests are sha256's (the `sha2` crate as the oracle).
        let many = archive(dir.path(), "many.kpack", Compression::None, |w, src| {
            w.add_file_ranges_in(src, &as_ranges(&list), HASH_CHUNK as u64)
                .unwrap();
        });
        let a = Archive::from_bytes(many).unwrap();
        for (key, offset, len) in &list {
            let want: [u8; 32] =
                sha2::Sha256::digest(&bytes[*offset as usize..][..*len as usize]).into();
            let e = a.entry(key, "gfx900").unwrap();
            assert_eq!(e.sha256(), Some(&want), "{key}");
        }
    }

    #[test]
    fn a_range_past_the_end_is_the_one_range_error() {
        let dir = tempfile::tempdir().unwrap();
        let (path, bytes, _) = input(dir.path());
        let mut w =
            ArchiveWriter::create(dir.path().join("a.kpack"), opts(Compression::None)).unwrap();
        let mut src = File::open(&path).unwrap();
        let past = bytes.len() as u64 - 5;
        let ranges = [("k#0", 0, 10), ("k#1", past, 10)].map(|(key, offset, len)| FileRange {
            key,
            arch: "gfx900",
            offset,
            len,
        });
        let e = w.add_file_ranges(&mut src, &ranges).unwrap_err();
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert!(
            cause
                .as_deref()
                .is_some_and(|c| c.contains("only 5 of 10 bytes")),
            "{e}: {cause:?}"
        );
    }

    #[test]
    fn a_failed_batch_adds_none_of_its_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _, list) = input(dir.path());
        let mut w =
            ArchiveWriter::create(dir.path().join("a.kpack"), opts(Compression::None)).unwrap();
        let mut src = File::open(&path).unwrap();
        let mut ranges = as_ranges(&list[..3]);
        ranges.push(ranges[0]);
        let e = w.add_file_ranges(&mut src, &ranges).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert!(w.is_empty());
        // None of them counts as added: the batch without its duplicate
        // goes in afterwards.
        w.add_file_ranges(&mut src, &ranges[..3]).unwrap();
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn pieces_hold_two_ranges_while_two_are_left() {
        let ranges: Vec<FileRange<'_>> = [4, 4, 4, 1, 1]
            .map(|len| FileRange {
                key: "k",
                arch: "a",
                offset: 0,
                len,
            })
            .to_vec();
        let jobs: Vec<Job<'_>> = (ranges.iter()).map(|r| Job { range: r, at: 0 }).collect();
        let sizes = |size| -> Vec<usize> { pieces(&jobs, size).iter().map(|p| p.len()).collect() };
        assert_eq!(sizes(1), [2, 2, 1]);
        assert_eq!(sizes(9), [3, 2]);
        assert_eq!(sizes(100), [5]);
    }
}
