//! Writing a wheel reproducibly ([`WheelWriter`]): entries in the order
//! given (the caller sorts), one fixed timestamp, Unix modes from the
//! caller, no extra fields, deflate at a fixed level (`.kpack` archives
//! stored: they are zstd already) or an input entry's compressed bytes
//! copied as they are, and RECORD generated from what was written, last.
//!
//! Large files are deflated on every thread of the pool ([`CHUNK`]s, each
//! with a fresh compressor ending on a sync flush, joined in order into one
//! stream, the way pigz does it), so the bytes do not depend on the thread
//! count.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::Digest;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use crate::error::{Error, Result};
use crate::record::{RecordEntry, format_sha256, write_record};

/// The deflate level of every compressed entry.
const DEFLATE_LEVEL: i64 = 6;

/// Files from this size on are deflated in [`CHUNK`]s in parallel.
#[cfg(not(test))]
const PARALLEL_MIN: u64 = 4 << 20;
#[cfg(test)]
const PARALLEL_MIN: u64 = 64 << 10;

/// What one thread deflates independently: no back-reference crosses a
/// chunk's start (the ratio lost is a fraction of a percent).
#[cfg(not(test))]
const CHUNK: usize = 1 << 20;
#[cfg(test)]
const CHUNK: usize = 16 << 10;

/// Seconds since the Unix epoch of 1980-01-01T00:00:00Z, the earliest zip
/// timestamp and the default one.
pub const ZIP_EPOCH: u64 = 315_532_800;

/// The zip timestamp for `secs` since the Unix epoch (UTC), clamped to the
/// range zip can store (1980-01-01 to 2107-12-31).
pub fn zip_time(secs: u64) -> DateTime {
    // Civil-from-days (Howard Hinnant), in i64 so nothing can overflow.
    let secs = secs.clamp(ZIP_EPOCH, 4_354_819_198) as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let fields = (
        u16::try_from(year),
        u8::try_from(month),
        u8::try_from(day),
        u8::try_from(sod / 3600),
        u8::try_from(sod % 3600 / 60),
        u8::try_from(sod % 60),
    );
    match fields {
        (Ok(y), Ok(mo), Ok(d), Ok(h), Ok(mi), Ok(s)) => {
            DateTime::from_date_and_time(y, mo, d, h, mi, s).unwrap_or_default()
        }
        _ => DateTime::default(),
    }
}

/// A wheel being written to `path`.
pub(crate) struct WheelWriter<'p> {
    /// Where bytes written are reported.
    pub progress: Option<&'p dyn crate::progress::Progress>,
    path: PathBuf,
    zip: ZipWriter<BufWriter<File>>,
    rows: Vec<RecordEntry>,
    time: DateTime,
    buf: Vec<u8>,
}

impl<'p> WheelWriter<'p> {
    /// Create `path` (truncating it).
    pub fn create(path: &Path, time: DateTime) -> Result<WheelWriter<'p>> {
        let f = File::create(path).map_err(|e| Error::io(path, "cannot create", e))?;
        Ok(WheelWriter {
            progress: None,
            path: path.to_path_buf(),
            zip: ZipWriter::new(BufWriter::new(f)),
            rows: Vec::new(),
            time,
            buf: vec![0; 1 << 20],
        })
    }

    fn options(&self, name: &str, mode: u32, size: u64) -> SimpleFileOptions {
        let method = if name.ends_with(".kpack") {
            CompressionMethod::Stored
        } else {
            CompressionMethod::Deflated
        };
        let level = (method == CompressionMethod::Deflated).then_some(DEFLATE_LEVEL);
        SimpleFileOptions::default()
            .compression_method(method)
            .compression_level(level)
            .last_modified_time(self.time)
            .unix_permissions(mode & 0o777)
            .large_file(size >= 0xFFFF_FFFF)
    }

    fn zip_err(&self, name: &str, e: zip::result::ZipError) -> Error {
        Error::zip(&self.path, &format!("cannot write entry {name}"), e)
    }

    /// Add a directory entry.
    pub fn add_dir(&mut self, name: &str, mode: u32) -> Result<()> {
        let opts = self.options(name, mode, 0);
        self.zip
            .add_directory(format!("{name}/"), opts)
            .map_err(|e| self.zip_err(name, e))
    }

    /// Add the file at `src` as `name`, hashing it for RECORD.
    pub fn add_file(&mut self, name: &str, src: &Path, mode: u32) -> Result<()> {
        let mut f = File::open(src).map_err(|e| Error::io(src, "cannot open", e))?;
        let size = f
            .metadata()
            .map_err(|e| Error::io(src, "cannot stat", e))?
            .len();
        let opts = self.options(name, mode, size);
        if size >= PARALLEL_MIN && !name.ends_with(".kpack") {
            return self.add_deflated(name, src, f, mode);
        }
        self.zip
            .start_file(name, opts)
            .map_err(|e| self.zip_err(name, e))?;
        let mut hasher = sha2::Sha256::new();
        let mut written = 0u64;
        loop {
            let n = f
                .read(&mut self.buf)
                .map_err(|e| Error::io(src, "cannot read", e))?;
            if n == 0 {
                break;
            }
            hasher.update(&self.buf[..n]);
            self.zip
                .write_all(&self.buf[..n])
                .map_err(|e| Error::io(&self.path, "cannot write", e))?;
            written += n as u64;
            crate::progress::advance(self.progress, n as u64);
        }
        self.rows.push(RecordEntry {
            path: name.to_string(),
            hash: format_sha256(&hasher.finalize().into()),
            size: Some(written),
        });
        Ok(())
    }

    /// Add `f` (read from `src`) as `name`, deflated in parallel
    /// [`CHUNK`]s: the stream goes to a temporary file behind a local
    /// header written for it, which the zip crate reads back and copies raw.
    fn add_deflated(&mut self, name: &str, src: &Path, mut f: File, mode: u32) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::tempfile_in(dir)
            .map_err(|e| Error::io(dir, "cannot create a temp file", e))?;
        let header_len = local_header(name, 0, 0, 0).len();
        let io = |e| Error::io(&self.path, "cannot write", e);
        tmp.seek(SeekFrom::Start(header_len as u64)).map_err(io)?;
        let mut out = BufWriter::new(&mut tmp);
        let stream = deflate_chunks(&mut f, src, &mut out, self.progress)?;
        out.flush().map_err(io)?;
        drop(out);
        let header = local_header(name, stream.crc, stream.size, stream.compressed);
        tmp.seek(SeekFrom::Start(0))
            .and_then(|_| tmp.write_all(&header))
            .and_then(|_| tmp.seek(SeekFrom::Start(0)))
            .map_err(io)?;
        let mut reader = BufReader::new(tmp);
        let entry = zip::read::read_zipfile_from_stream(&mut reader)
            .map_err(|e| self.zip_err(name, e))?
            .ok_or_else(|| Error::invalid(&self.path, format!("entry {name}: no local header")))?;
        self.zip
            .raw_copy_file_touch(entry, self.time, Some(mode & 0o777))
            .map_err(|e| self.zip_err(name, e))?;
        self.rows.push(RecordEntry {
            path: name.to_string(),
            hash: format_sha256(&stream.sha256),
            size: Some(stream.size),
        });
        Ok(())
    }

    /// Copy entry `index` of `input` (read from `input_path`) as is: same
    /// name and compressed bytes, this writer's timestamp and `mode`. The
    /// caller vouches for `hash` and `size` (checked against the input's
    /// RECORD when it was unpacked).
    pub fn add_raw(
        &mut self,
        input: &mut zip::ZipArchive<File>,
        input_path: &Path,
        index: usize,
        mode: u32,
        hash: &str,
        size: u64,
    ) -> Result<()> {
        let file = input
            .by_index_raw(index)
            .map_err(|e| Error::zip(input_path, &format!("entry #{index}"), e))?;
        let name = file.name().to_string();
        self.zip
            .raw_copy_file_touch(file, self.time, Some(mode & 0o777))
            .map_err(|e| self.zip_err(&name, e))?;
        self.rows.push(RecordEntry {
            path: name,
            hash: hash.to_string(),
            size: Some(size),
        });
        Ok(())
    }

    /// Add `bytes` as `name`.
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        let opts = self.options(name, mode, bytes.len() as u64);
        self.zip
            .start_file(name, opts)
            .map_err(|e| self.zip_err(name, e))?;
        self.zip
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, "cannot write", e))?;
        self.rows.push(RecordEntry {
            path: name.to_string(),
            hash: crate::record::record_hash(bytes),
            size: Some(bytes.len() as u64),
        });
        Ok(())
    }

    /// The RECORD rows of the entries written so far.
    pub fn rows(&self) -> &[RecordEntry] {
        &self.rows
    }

    /// Write `record_path` (every entry so far, then itself without hash)
    /// and close the archive; returns its size.
    pub fn finish(mut self, record_path: &str) -> Result<u64> {
        self.rows.push(RecordEntry {
            path: record_path.to_string(),
            hash: String::new(),
            size: None,
        });
        let text = write_record(&self.rows);
        let opts = self.options(record_path, 0o644, text.len() as u64);
        self.zip
            .start_file(record_path, opts)
            .map_err(|e| self.zip_err(record_path, e))?;
        self.zip
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(&self.path, "cannot write", e))?;
        let w = self
            .zip
            .finish()
            .map_err(|e| Error::zip(&self.path, "cannot finish", e))?;
        let f = w
            .into_inner()
            .map_err(|e| Error::io(&self.path, "cannot flush", e.into_error()))?;
        f.sync_all()
            .map_err(|e| Error::io(&self.path, "cannot sync", e))?;
        Ok(f.metadata()
            .map_err(|e| Error::io(&self.path, "cannot stat", e))?
            .len())
    }
}

/// A deflate stream written by [`deflate_chunks`].
struct Deflated {
    /// Bytes read.
    size: u64,
    /// Bytes written.
    compressed: u64,
    crc: u32,
    sha256: [u8; 32],
}

/// Deflate all of `f` into `out` in [`CHUNK`]s, a batch of them at a time
/// on the pool's threads, hashing the input beside them.
fn deflate_chunks(
    f: &mut File,
    src: &Path,
    out: &mut impl Write,
    progress: Option<&dyn crate::progress::Progress>,
) -> Result<Deflated> {
    let batch_len = 2 * rayon::current_num_threads().max(1);
    let mut d = Deflated {
        size: 0,
        compressed: 0,
        crc: 0,
        sha256: [0; 32],
    };
    let mut sha = sha2::Sha256::new();
    let mut crc = crc32fast::Hasher::new();
    let mut next = read_chunk(f, src)?;
    loop {
        let mut batch = Vec::with_capacity(batch_len);
        while batch.len() < batch_len && !next.is_empty() {
            let chunk = std::mem::replace(&mut next, read_chunk(f, src)?);
            batch.push(chunk);
        }
        // The stream's last block ends it; an empty file is one empty block.
        let ends = next.is_empty();
        let n = batch.len();
        let (deflated, ()) = rayon::join(
            || {
                if n == 0 {
                    return vec![deflate_chunk(&[], true)];
                }
                batch
                    .par_iter()
                    .enumerate()
                    .map(|(i, c)| deflate_chunk(c, ends && i + 1 == n))
                    .collect::<Vec<_>>()
            },
            || {
                for c in &batch {
                    sha.update(c);
                    crc.update(c);
                }
            },
        );
        for block in deflated {
            let block = block.map_err(|e| Error::io(src, "cannot deflate", e))?;
            out.write_all(&block)
                .map_err(|e| Error::io(src, "cannot write its deflated bytes", e))?;
            d.compressed += block.len() as u64;
        }
        let read: u64 = batch.iter().map(|c| c.len() as u64).sum();
        d.size += read;
        crate::progress::advance(progress, read);
        if ends {
            break;
        }
    }
    d.crc = crc.finalize();
    d.sha256 = sha.finalize().into();
    Ok(d)
}

/// Up to [`CHUNK`] bytes of `f` (fewer only at its end).
fn read_chunk(f: &mut File, src: &Path) -> Result<Vec<u8>> {
    let mut chunk = Vec::with_capacity(CHUNK);
    Read::by_ref(f)
        .take(CHUNK as u64)
        .read_to_end(&mut chunk)
        .map_err(|e| Error::io(src, "cannot read", e))?;
    Ok(chunk)
}

/// `data` as raw deflate blocks from a fresh compressor: ending on a sync
/// flush (an empty stored block: byte-aligned, not final) unless `last`.
fn deflate_chunk(data: &[u8], last: bool) -> std::io::Result<Vec<u8>> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut c = Compress::new(Compression::new(DEFLATE_LEVEL as u32), false);
    let mut out = Vec::with_capacity(data.len() + data.len() / 16 + 64);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    loop {
        let done = usize::try_from(c.total_in()).unwrap_or(data.len());
        let status = c
            .compress_vec(&data[done.min(data.len())..], &mut out, flush)
            .map_err(std::io::Error::other)?;
        let consumed = c.total_in() == data.len() as u64;
        let finished = if last {
            status == Status::StreamEnd
        } else {
            out.len() < out.capacity()
        };
        if consumed && finished {
            return Ok(out);
        }
        out.reserve(64 << 10);
    }
}

/// A local file header for one deflated entry `name` (UTF-8), its sizes in
/// a zip64 extra field (so its length does not depend on them); read back
/// by the zip crate, which writes the entry's real headers.
fn local_header(name: &str, crc: u32, size: u64, compressed: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(50 + name.len());
    h.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
    h.extend_from_slice(&45u16.to_le_bytes()); // version needed: zip64
    h.extend_from_slice(&0x0800u16.to_le_bytes()); // UTF-8 name
    h.extend_from_slice(&8u16.to_le_bytes()); // deflated
    h.extend_from_slice(&0u16.to_le_bytes()); // time 00:00:00
    h.extend_from_slice(&0x21u16.to_le_bytes()); // date 1980-01-01
    h.extend_from_slice(&crc.to_le_bytes());
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h.extend_from_slice(&(name.len() as u16).to_le_bytes());
    h.extend_from_slice(&20u16.to_le_bytes());
    h.extend_from_slice(name.as_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // zip64 extended information
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&compressed.to_le_bytes());
    h
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;

    #[test]
    fn converts_epoch_seconds_to_zip_time() {
        let t = zip_time(ZIP_EPOCH);
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (1980, 1, 1, 0, 0, 0)
        );
        // date -u -d @1700000000: 2023-11-14 22:13:20
        let t = zip_time(1_700_000_000);
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (2023, 11, 14, 22, 13, 20)
        );
        // Leap day, and before 1980 clamps.
        let t = zip_time(951_782_400);
        assert_eq!((t.year(), t.month(), t.day()), (2000, 2, 29));
        assert_eq!(zip_time(0).year(), 1980);
        assert_eq!(zip_time(u64::MAX).year(), 2107);
    }

    /// `len` bytes that deflate some but not all the way.
    fn data(len: usize) -> Vec<u8> {
        let mut x = 0x2545_f491u32;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 3 == 0 {
                    (x >> 24) as u8
                } else {
                    (i / 7) as u8
                }
            })
            .collect()
    }

    /// A wheel holding `files`, written on a pool of `threads`.
    fn write(dir: &Path, files: &[(&str, &[u8])], threads: usize) -> Vec<u8> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let out = dir.join(format!("w{threads}.whl"));
        pool.install(|| {
            let mut w = WheelWriter::create(&out, zip_time(ZIP_EPOCH)).unwrap();
            for (name, bytes) in files {
                let src = dir.join(name.replace('/', "_"));
                std::fs::write(&src, bytes).unwrap();
                w.add_file(name, &src, 0o755).unwrap();
            }
            w.finish("p-1.dist-info/RECORD").unwrap();
        });
        std::fs::read(&out).unwrap()
    }

    #[test]
    fn deflates_large_files_in_parallel_to_the_same_bytes_at_any_thread_count() {
        let tmp = tempfile::tempdir().unwrap();
        // Chunk-aligned, unaligned, and exactly the parallel threshold.
        let big = data(CHUNK * 21 + 12_345);
        let aligned = data(PARALLEL_MIN as usize);
        let small = data(1000);
        let files: [(&str, &[u8]); 3] = [
            ("p/big.so", &big),
            ("p/aligned.so", &aligned),
            ("p/small.py", &small),
        ];
        let one = write(tmp.path(), &files, 1);
        let two = write(tmp.path(), &files, 2);
        let three = write(tmp.path(), &files, 3);
        assert!(
            one == two && two == three,
            "output depends on the thread count"
        );
        // The zip crate inflates every entry and checks its CRC-32.
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(one)).unwrap();
        for (name, bytes) in files {
            let mut e = z.by_name(name).unwrap();
            assert_eq!(e.compression(), CompressionMethod::Deflated);
            assert_eq!(e.unix_mode().map(|m| m & 0o777), Some(0o755), "{name}");
            assert_eq!(e.last_modified().map(|t| t.year()), Some(1980));
            let mut got = Vec::new();
            e.read_to_end(&mut got).unwrap();
            assert!(got == bytes, "{name}: content differs");
            if e.size() >= PARALLEL_MIN {
                assert!(e.compressed_size() < e.size(), "{name} did not deflate");
            }
        }
        let mut record = String::new();
        z.by_name("p-1.dist-info/RECORD")
            .unwrap()
            .read_to_string(&mut record)
            .unwrap();
        let row = crate::record::record_hash(&big);
        assert!(
            record.contains(&format!("p/big.so,{row},{}\n", big.len())),
            "{record}"
        );
    }
}
