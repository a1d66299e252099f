//! Writing a wheel reproducibly ([`WheelWriter`]): entries in the order
//! given (the caller sorts), one fixed timestamp, Unix modes from the
//! caller, no extra fields, deflate at a fixed level (`.kpack` archives
//! stored: they are zstd already) or an input entry's compressed bytes
//! copied as they are, and RECORD generated from what was written, last.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::Digest;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use crate::error::{Error, Result};
use crate::record::{RecordEntry, format_sha256, write_record};

/// The deflate level of every compressed entry.
const DEFLATE_LEVEL: i64 = 6;

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
    pub progress: Option<&'p dyn crate::pipeline::Progress>,
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
            crate::pipeline::advance(self.progress, n as u64);
        }
        self.rows.push(RecordEntry {
            path: name.to_string(),
            hash: format_sha256(&hasher.finalize().into()),
            size: Some(written),
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
}
