//! The writer: [`ArchiveWriter`] compresses each kernel as it is added,
//! spools it to an anonymous temp file beside the output, and on
//! [`ArchiveWriter::finish`] lays the archive out in a temp file in the
//! destination directory and renames it into place. Memory stays bounded by
//! the largest kernel plus the TOC.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::delta;
use crate::mmap::Map;

mod delta_key;
mod ranges;
mod toc;
use crate::error::{Error, ErrorKind, Result};
use crate::{BLOB_START, MAGIC, Scheme, VERSION};
use delta_key::DeltaKeys;
pub use delta_key::{DeltaCompressor, DeltaKey};
pub use ranges::FileRange;

/// AMD's loader refuses zstd blobs of 4 GiB or more.
const MAX_ZSTD_BLOB: u64 = 1 << 32;

/// How the writer stores kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Scheme `"none"`: raw bytes, served zero-copy from a mapping.
    None,
    /// Scheme `"zstd-per-kernel"`: one zstd frame per kernel at `level`.
    Zstd {
        /// zstd compression level (AMD's default is 3).
        level: i32,
    },
    /// Scheme `"zstd-delta"` (KPAK header version 2, which AMD's loader
    /// refuses): per kernel key, some targets are bases (one zstd frame
    /// each) and the others zstd frames against a base's raw bytes as a
    /// prefix; see `docs/kpak-v2-zstd-delta.md`.
    ZstdDelta {
        /// zstd level of every frame, bases and deltas.
        level: i32,
    },
}

impl Compression {
    /// The TOC's `compression_scheme` string this writes.
    pub fn scheme_name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd { .. } => "zstd-per-kernel",
            Compression::ZstdDelta { .. } => "zstd-delta",
        }
    }
}

impl Default for Compression {
    fn default() -> Self {
        Compression::Zstd {
            level: DEFAULT_LEVEL,
        }
    }
}

/// In which order entries get their ordinals and TOC positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EntryOrder {
    /// Sorted by (key, arch), byte-wise: the output depends only on the set
    /// of entries, never on the order of `add` calls. The default.
    /// `zstd-per-kernel` archives get the `zstd_frame_offsets` index.
    #[default]
    Sorted,
    /// In `add` order, TOC keys in order of first appearance, like AMD's
    /// Python writer. Use it to reproduce an AMD archive byte for byte:
    /// it writes no `zstd_frame_offsets` index and no per-entry `sha256`
    /// (AMD's writer has neither).
    Insertion,
}

/// Settings for [`ArchiveWriter`].
#[derive(Debug, Clone, Default)]
pub struct WriterOptions {
    /// The TOC's `group_name` (build slice / artifact prefix).
    pub group_name: String,
    /// The TOC's `gfx_arch_family` label (AMD's split tool writes the arch).
    pub gfx_arch_family: String,
    /// The TOC's `gfx_arches`. `None`: the sorted set of arches added. When
    /// given, every added arch must be listed (AMD's loader only finds
    /// arches listed here); the list is written as given.
    pub gfx_arches: Option<Vec<String>>,
    /// Storage scheme; zstd level 3 by default.
    pub compression: Compression,
    /// Ordinal and TOC order.
    pub order: EntryOrder,
    /// How a `zstd-delta` archive chooses each entry's base (estimated
    /// unless a benchmark asks for every pair measured).
    pub delta_plan: crate::DeltaPlan,
}

/// What [`ArchiveWriter::finish`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The archive's path.
    pub path: PathBuf,
    /// Number of entries.
    pub entries: usize,
    /// Size of the archive in bytes.
    pub file_size: u64,
}

struct Pending {
    key: String,
    arch: String,
    spool_offset: u64,
    stored_len: u64,
    original_size: u64,
    metadata: Vec<(String, String)>,
    /// sha256 of the code object, written as the entry's `sha256` (sorted
    /// archives; `None` in [`EntryOrder::Insertion`], AMD's shape).
    sha256: Option<[u8; 32]>,
    /// zstd-delta only: the spooled bytes are this entry's final frame
    /// (from [`ArchiveWriter::add_delta_key`]), a delta against the entry
    /// of the same key for `Some(arch)`; `None`: raw bytes, encoded at
    /// finish.
    framed: Option<Option<String>>,
}

/// Builds a KPAK v1 archive at a path; nothing appears there until
/// [`finish`](ArchiveWriter::finish) succeeds, and dropping the writer
/// earlier leaves nothing behind.
pub struct ArchiveWriter {
    dest: PathBuf,
    options: WriterOptions,
    /// Named temp file beside the destination: header placeholder, then
    /// each stored kernel (with its size word for zstd) in insertion order.
    /// When insertion order is the final order it becomes the archive
    /// itself (no second copy of the blobs).
    spool: kpack_fsafe::Staged,
    spool_len: u64,
    pending: Vec<Pending>,
    seen: HashSet<(String, String)>,
    compressor: Option<KernelCompressor>,
    /// After [`ArchiveWriter::reserve`]: each reserved (key, arch)'s index
    /// in `pending` (whose spool offsets are then final) and whether its
    /// bytes were written yet.
    reserved: Option<Reserved>,
    /// zstd-delta: which keys arrived how (see `delta_key.rs`).
    delta_keys: DeltaKeys,
    /// [`add_file_range`](Self::add_file_range)'s read buffer, reused.
    scratch: Vec<u8>,
}

/// Final places, given out by [`ArchiveWriter::reserve`].
struct Reserved {
    slot: HashMap<(String, String), usize>,
    filled: Vec<bool>,
}

/// The compression levels the writer accepts: zstd's 1 (fastest) to 19
/// (smallest without zstd's "ultra" levels, whose windows some decoders
/// refuse).
pub const LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

pub use crate::frame::DEFAULT_LEVEL;

/// `level`, if the writer accepts it ([`LEVELS`]); else an
/// [`ErrorKind::InvalidArgument`] error.
pub fn check_level(level: i32) -> Result<i32> {
    if LEVELS.contains(&level) {
        return Ok(level);
    }
    Err(Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "zstd level {level} is outside {}..={}",
            LEVELS.start(),
            LEVELS.end()
        ),
    ))
}

/// A zstd compressor at `level`; a level outside [`LEVELS`] is an
/// [`ErrorKind::InvalidArgument`] error.
pub(crate) fn zstd_compressor(level: i32) -> Result<zstd::bulk::Compressor<'static>> {
    let invalid = |e: std::io::Error| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("zstd level {level}: {e}"),
        )
    };
    let mut c = zstd::bulk::Compressor::new(check_level(level)?).map_err(invalid)?;
    if let Some(log) = crate::frame::long_window(level) {
        c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(log))
            .map_err(invalid)?;
    }
    Ok(c)
}

/// Compresses code objects exactly as [`ArchiveWriter`] stores them, for
/// [`ArchiveWriter::add_precompressed`] from worker threads (one per
/// thread: it keeps its zstd context and its output buffer between calls,
/// so compressing a kernel allocates nothing once the buffer has grown to
/// the largest frame: a fresh multi-megabyte buffer per kernel costs a page
/// fault per 4 KiB, which on a plain 1.3 GB library was a third of the
/// offload's time).
pub struct KernelCompressor {
    zstd: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
}

impl std::fmt::Debug for KernelCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCompressor").finish_non_exhaustive()
    }
}

impl KernelCompressor {
    /// A compressor for `compression`; `None` for [`Compression::None`],
    /// which stores the raw bytes.
    pub fn new(compression: Compression) -> Result<Option<KernelCompressor>> {
        match compression {
            Compression::None => Ok(None),
            Compression::Zstd { level } => {
                let zstd = zstd_compressor(level)?;
                Ok(Some(KernelCompressor {
                    zstd,
                    out: Vec::new(),
                }))
            }
            Compression::ZstdDelta { level } => {
                // Kernels are spooled raw and delta-compressed at finish;
                // validate the level now, not after every kernel is spooled.
                zstd_compressor(level)?;
                Ok(None)
            }
        }
    }

    /// One zstd frame holding `data` (`key` and `arch` name it in errors),
    /// in the compressor's buffer until the next call.
    pub fn compress(&mut self, data: &[u8], key: &str, arch: &str) -> Result<&[u8]> {
        self.out.clear();
        self.out
            .reserve(zstd::zstd_safe::compress_bound(data.len()));
        self.zstd
            .compress_to_buffer(data, &mut self.out)
            .map_err(|e| Error::io(format!("zstd failed on {key:?} {arch:?}"), e))?;
        Ok(&self.out)
    }
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveWriter")
            .field("dest", &self.dest)
            .field("entries", &self.pending.len())
            .finish()
    }
}

impl ArchiveWriter {
    /// Start an archive that [`finish`](Self::finish) will write to `path`.
    /// The spool file is created (unlinked) in `path`'s directory.
    pub fn create(path: impl AsRef<Path>, options: WriterOptions) -> Result<ArchiveWriter> {
        let dest = path.as_ref().to_path_buf();
        let mut spool = kpack_fsafe::Staged::new(&dest, "spool").map_err(staged_error)?;
        // Only v1 zstd spools its frames in final form; zstd-delta spools raw
        // kernels and compresses at finish, when all targets of a key are known.
        let zstd = matches!(options.compression, Compression::Zstd { .. });
        let head = BLOB_START + if zstd { 4 } else { 0 };
        spool
            .file_mut()
            .write_all(&vec![0u8; head as usize])
            .map_err(|e| Error::io("cannot write spool file", e))?;
        let compressor = KernelCompressor::new(options.compression)?;
        Ok(ArchiveWriter {
            dest,
            options,
            spool,
            spool_len: head,
            pending: Vec::new(),
            seen: HashSet::new(),
            compressor,
            reserved: None,
            delta_keys: DeltaKeys::default(),
            scratch: Vec::new(),
        })
    }

    /// Add the code object `data` for binary key `key` (`\` becomes `/`, as
    /// in AMD's writer) and architecture `arch`. A second add of the same
    /// (key, arch) is an [`ErrorKind::InvalidArgument`] error.
    pub fn add(&mut self, key: &str, arch: &str, data: &[u8]) -> Result<()> {
        self.add_with_metadata(key, arch, data, &[])
    }

    /// [`add`](Self::add), reading the code object from `reader` to its end.
    pub fn add_from_reader(&mut self, key: &str, arch: &str, mut reader: impl Read) -> Result<()> {
        let mut data = Vec::new();
        reader
            .read_to_end(&mut data)
            .map_err(|e| Error::io(format!("cannot read kernel {key:?} {arch:?}"), e))?;
        self.add(key, arch, &data)
    }

    /// [`add`](Self::add) with the entry's optional `metadata` map (written
    /// in the given order when non-empty; AMD's split tool writes `target`
    /// and `source_prefix`).
    pub fn add_with_metadata(
        &mut self,
        key: &str,
        arch: &str,
        data: &[u8],
        metadata: &[(&str, &str)],
    ) -> Result<()> {
        let key = self.check_new(key, arch)?;
        self.raw_key_added(&key)?;
        // Hashed before compressing, from the bytes in hand: measured on
        // librocsparse and JAX's plugin, a `rayon::join` of the two gained
        // nothing (every core already compresses, inflates or hashes MD5)
        // and cost CPU in waits.
        let sha256 = self.digests().then(|| sha256(data));
        let Some(c) = self.compressor.as_mut() else {
            return self.store(key, arch, data, data.len() as u64, sha256, metadata);
        };
        c.compress(data, &key, arch)?;
        // The frame leaves the compressor while `store` borrows `self`, and
        // goes back with its capacity.
        let frame = std::mem::take(&mut c.out);
        let stored = self.store(key, arch, &frame, data.len() as u64, sha256, metadata);
        if let Some(c) = self.compressor.as_mut() {
            c.out = frame;
        }
        stored
    }

    /// Add a code object already stored as this writer stores it: the
    /// output of a [`KernelCompressor`] made with this writer's
    /// [`Compression`] (the raw bytes for [`Compression::None`]), of a code
    /// object `original_size` bytes long whose sha256 is `sha256` (see
    /// [`sha256`]). Lets worker threads compress and hash while the writer
    /// only appends; the archive is byte-identical to one built with
    /// [`add`](Self::add).
    pub fn add_precompressed(
        &mut self,
        key: &str,
        arch: &str,
        stored: &[u8],
        original_size: u64,
        sha256: [u8; 32],
    ) -> Result<()> {
        self.add_precompressed_with_metadata(key, arch, (stored, original_size, sha256), &[])
    }

    /// [`add_precompressed`](Self::add_precompressed) with the entry's
    /// `metadata` (as [`add_with_metadata`](Self::add_with_metadata)):
    /// `stored` is the stored bytes, then the code object's size and
    /// sha256. Lets an archive edit copy a frame without decoding it into
    /// memory.
    pub fn add_precompressed_with_metadata(
        &mut self,
        key: &str,
        arch: &str,
        (stored, original_size, sha256): (&[u8], u64, [u8; 32]),
        metadata: &[(&str, &str)],
    ) -> Result<()> {
        let key = self.check_new(key, arch)?;
        self.raw_key_added(&key)?;
        let sha256 = self.digests().then_some(sha256);
        self.store(key, arch, stored, original_size, sha256, metadata)
    }

    /// Whether entries carry their `sha256` (sorted archives).
    fn digests(&self) -> bool {
        self.options.order == EntryOrder::Sorted
    }

    /// Validate a new (key, arch); returns the normalised key.
    fn check_new(&mut self, key: &str, arch: &str) -> Result<String> {
        let key = key.replace('\\', "/");
        if key.is_empty() || arch.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("empty key or arch ({key:?}, {arch:?})"),
            ));
        }
        if let Some(listed) = &self.options.gfx_arches
            && !listed.iter().any(|a| a == arch)
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("arch {arch:?} of {key:?} is not in gfx_arches {listed:?}"),
            ));
        }
        // Reserved entries were checked for duplicates by `reserve`;
        // `put` refuses a second fill of one place.
        if self.reserved_slot(&key, arch).is_some() {
            return Ok(key);
        }
        if !self.seen.insert((key.clone(), arch.to_owned())) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("kernel {key:?} for {arch:?} already exists"),
            ));
        }
        Ok(key)
    }

    /// Append a stored kernel to the spool (or write it into its reserved
    /// place).
    fn store(
        &mut self,
        key: String,
        arch: &str,
        stored: &[u8],
        original_size: u64,
        sha256: Option<[u8; 32]>,
        metadata: &[(&str, &str)],
    ) -> Result<()> {
        let werr = |e| Error::io("cannot write spool file", e);
        self.put(
            key,
            arch,
            (stored.len() as u64, original_size),
            metadata,
            |f| f.write_all(stored).map_err(werr).map(|()| sha256),
        )
    }

    /// Store a kernel of `stored_len` bytes that `write` writes at the
    /// spool file's position: appended, or at its reserved place. `write`
    /// returns the entry's `sha256`, so it can hash while it writes.
    fn put(
        &mut self,
        key: String,
        arch: &str,
        (stored_len, original_size): (u64, u64),
        metadata: &[(&str, &str)],
        write: impl FnOnce(&mut File) -> Result<Option<[u8; 32]>>,
    ) -> Result<()> {
        if let Some(i) = self.reserved_slot(&key, arch)
            && let Some(r) = &mut self.reserved
        {
            let invalid = |m: String| Error::new(ErrorKind::InvalidArgument, m);
            let p = &mut self.pending[i];
            if r.filled[i] {
                return Err(invalid(format!(
                    "kernel {key:?} for {arch:?} already exists"
                )));
            }
            if p.stored_len != stored_len {
                return Err(invalid(format!(
                    "kernel {key:?} for {arch:?} is {stored_len} bytes, {} were reserved",
                    p.stored_len
                )));
            }
            r.filled[i] = true;
            p.original_size = original_size;
            p.metadata = metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let f = self.spool.file_mut();
            f.seek(SeekFrom::Start(p.spool_offset))
                .map_err(|e| Error::io("cannot seek spool file", e))?;
            p.sha256 = write(f)?;
            return Ok(());
        }
        if self.compressor.is_some() && stored_len >= MAX_ZSTD_BLOB {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("compressed kernel {key:?} {arch:?} exceeds 4 GiB"),
            ));
        }
        let werr = |e| Error::io("cannot write spool file", e);
        if self.reserved.is_some() {
            // Filling reserved places moved the position; append after them.
            self.spool
                .file_mut()
                .seek(SeekFrom::Start(self.spool_len))
                .map_err(|e| Error::io("cannot seek spool file", e))?;
        }
        if self.compressor.is_some() {
            self.spool
                .file_mut()
                .write_all(&(stored_len as u32).to_le_bytes())
                .map_err(werr)?;
            self.spool_len += 4;
        }
        let sha256 = write(self.spool.file_mut())?;
        self.pending.push(Pending {
            key,
            arch: arch.to_owned(),
            spool_offset: self.spool_len,
            stored_len,
            original_size,
            metadata: metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            sha256,
            framed: None,
        });
        self.spool_len += stored_len;
        Ok(())
    }

    /// [`add`](Self::add) for a code object that is the `len` bytes of
    /// `src` at `offset` (`src`'s file position moves). When kernels are
    /// stored as they are ([`Compression::None`]; `zstd-delta` spools them
    /// raw too) the bytes go file to file inside the kernel
    /// ([`std::io::copy`] of a [`File`] range, `copy_file_range` on Linux),
    /// never through a buffer here: what keeps offloading a plain 1.3 GB
    /// library close to `cp`. The entry's `sha256` is taken from a mapping
    /// of `src`, beside the copy (on another thread of the rayon pool when
    /// one is free): the page cache the copy reads, never a second read.
    /// Where `src` cannot be mapped it is hashed by reading it first.
    /// Otherwise the kernel is read and compressed as by `add`. The archive
    /// is the same either way.
    pub fn add_file_range(
        &mut self,
        key: &str,
        arch: &str,
        src: &mut File,
        offset: u64,
        len: u64,
    ) -> Result<()> {
        let rerr = |e| {
            Error::io(
                format!("cannot read kernel {key:?} {arch:?} at {offset:#x}"),
                e,
            )
        };
        if self.compressor.is_some() {
            // Read once into memory, where the digest and the compressor
            // both take it (hot in the cache after the read; from a mapping
            // it was measured slower).
            let n = usize::try_from(len)
                .map_err(|_| Error::new(ErrorKind::OutOfMemory, "kernel too large"))?;
            src.seek(SeekFrom::Start(offset)).map_err(rerr)?;
            // One read buffer per writer, reused (see KernelCompressor).
            let mut data = std::mem::take(&mut self.scratch);
            data.resize(n, 0);
            let added = Read::take(&*src, len)
                .read_exact(&mut data)
                .map_err(rerr)
                .and_then(|()| self.add(key, arch, &data));
            self.scratch = data;
            return added;
        }
        let normalised = self.check_new(key, arch)?;
        let map = self.digests().then(|| mapped(src, offset, len)).flatten();
        let in_map = map.as_ref().and_then(|(m, at)| m.bytes().get(at.clone()));
        // Unmapped: hashed from the file first, so the copy stays file to file.
        let read_digest = match (self.digests(), in_map) {
            (true, None) => Some(sha256_of_range(&*src, offset, len).map_err(rerr)?),
            _ => None,
        };
        src.seek(SeekFrom::Start(offset)).map_err(rerr)?;
        let from: &File = src;
        self.put(normalised, arch, (len, len), &[], |f| {
            let (digest, copied) = match in_map {
                Some(data) => copy_hashing(from, f, data),
                None => (read_digest, copy_exactly(Read::take(from, len), f, len)),
            };
            // A failure here may be the read or the write: name both ends
            // (an input that ends early is the read's).
            copied.map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => rerr(e),
                _ => Error::io(
                    format!("cannot copy kernel {key:?} {arch:?} from input offset {offset:#x} into the spool file"),
                    e,
                ),
            })?;
            Ok(digest)
        })
    }

    /// Fix the places of the next kernels before they arrive: every entry
    /// of a batch, as `(key, arch, size)`. Only for [`Compression::None`],
    /// where a stored kernel is its code object, so its place is known
    /// from its size. The batch's kernels get consecutive places in their
    /// final order (sorted, or as listed in [`EntryOrder::Insertion`]);
    /// each add of one of them, in any order (from worker threads, through
    /// a lock), writes it straight into its place, so a batch that arrives
    /// out of order costs no reordering copy at [`finish`](Self::finish).
    /// The archive is byte-identical to one built by the same adds without
    /// reserving. Adding a reserved entry twice or with another size is an
    /// [`ErrorKind::InvalidArgument`] error, and so is finishing before
    /// every reserved entry was added. Entries not reserved are added as
    /// usual, after the places reserved so far.
    pub fn reserve<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (&'a str, &'a str, u64)>,
    ) -> Result<()> {
        if self.options.compression != Compression::None {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "only an archive without compression can reserve places",
            ));
        }
        let first = self.pending.len();
        for (key, arch, size) in entries {
            if self.reserved_slot(&key.replace('\\', "/"), arch).is_some() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("kernel {key:?} for {arch:?} already exists"),
                ));
            }
            let key = self.check_new(key, arch)?;
            self.pending.push(Pending {
                key,
                arch: arch.to_owned(),
                spool_offset: 0,
                stored_len: size,
                original_size: size,
                metadata: Vec::new(),
                sha256: None,
                framed: None,
            });
        }
        let batch = &mut self.pending[first..];
        if self.options.order == EntryOrder::Sorted {
            batch.sort_by(|a, b| (&a.key, &a.arch).cmp(&(&b.key, &b.arch)));
        }
        let r = self.reserved.get_or_insert_with(|| Reserved {
            slot: HashMap::new(),
            filled: Vec::new(),
        });
        let mut at = self.spool_len;
        for (i, p) in batch.iter_mut().enumerate() {
            p.spool_offset = at;
            at = at
                .checked_add(p.stored_len)
                .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "reserved sizes overflow"))?;
            r.slot.insert((p.key.clone(), p.arch.clone()), first + i);
        }
        r.filled.resize(self.pending.len(), true);
        r.filled[first..].fill(false);
        self.spool_len = at;
        Ok(())
    }

    /// The index in `pending` of a reserved (key, arch).
    fn reserved_slot(&self, key: &str, arch: &str) -> Option<usize> {
        let r = self.reserved.as_ref()?;
        // The map is keyed by owned pairs; a lookup allocates, which only
        // writers that reserved pay.
        r.slot.get(&(key.to_owned(), arch.to_owned())).copied()
    }

    /// Number of entries added so far.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing was added yet.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Lay out and write the archive, then rename it into place.
    pub fn finish(mut self) -> Result<Written> {
        let dest = self.dest.clone();
        self.finish_inner().map_err(|e| e.with_path(&dest))
    }

    fn finish_inner(&mut self) -> Result<Written> {
        if let Compression::ZstdDelta { level } = self.options.compression {
            if self.options.order == EntryOrder::Sorted {
                self.pending
                    .sort_by(|a, b| (&a.key, &a.arch).cmp(&(&b.key, &b.arch)));
            }
            return self.finish_delta(level);
        }
        self.check_reserved()?;
        let in_order = self.order_entries();
        let zstd = self.compressor.is_some();
        // Blob area: NoOp = raw blobs; zstd = count + (size word + frame)*.
        let blob_len = self.spool_len - BLOB_START;
        if zstd && blob_len >= MAX_ZSTD_BLOB {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("zstd blob of {blob_len} bytes exceeds AMD's 4 GiB limit"),
            ));
        }
        let toc_offset = BLOB_START + blob_len;
        let toc = self.encode_toc(blob_len)?;
        let header = header(VERSION, toc_offset);
        let file_size = toc_offset + toc.len() as u64;
        if in_order {
            self.persist_spool(&toc, &header)?;
        } else {
            self.copy_in_order(&toc, &header)?;
        }
        Ok(Written {
            path: self.dest.clone(),
            entries: self.pending.len(),
            file_size,
        })
    }

    /// With reserved places: every one was filled; the spool is positioned
    /// after the last kernel, where the TOC goes.
    fn check_reserved(&mut self) -> Result<()> {
        let Some(r) = &self.reserved else {
            return Ok(());
        };
        if let Some(i) = r.filled.iter().position(|f| !f) {
            let p = &self.pending[i];
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "reserved kernel {:?} for {:?} was never added",
                    p.key, p.arch
                ),
            ));
        }
        self.spool
            .file_mut()
            .seek(SeekFrom::Start(self.spool_len))
            .map_err(|e| Error::io("cannot seek spool file", e))?;
        Ok(())
    }

    /// Put the entries in their final order; whether that is the order the
    /// spool holds them in (so the spool can become the archive).
    fn order_entries(&mut self) -> bool {
        let in_order = self.options.order == EntryOrder::Insertion
            || self
                .pending
                .windows(2)
                .all(|w| (&w[0].key, &w[0].arch) < (&w[1].key, &w[1].arch));
        if !in_order {
            self.pending
                .sort_by(|a, b| (&a.key, &a.arch).cmp(&(&b.key, &b.arch)));
        }
        in_order
    }

    /// The spool holds the blobs in final order: append the TOC, write the
    /// header (and frame count) over its placeholder, rename it into place.
    fn persist_spool(&mut self, toc: &[u8], header: &[u8]) -> Result<()> {
        let werr = |e| Error::io("cannot write archive", e);
        let count = self.frame_count_word();
        let f = self.spool.file_mut();
        f.write_all(toc).map_err(werr)?;
        f.seek(SeekFrom::Start(0)).map_err(werr)?;
        f.write_all(header).map_err(werr)?;
        if let Some(count) = count {
            f.write_all(&count).map_err(werr)?;
        }
        f.flush().map_err(werr)?;
        set_readable(self.spool.file())?;
        let spool = std::mem::replace(
            &mut self.spool,
            kpack_fsafe::Staged::new(&self.dest, "spool").map_err(staged_error)?,
        );
        spool.commit(None).map_err(staged_error)?;
        Ok(())
    }

    /// zstd: the blob's leading frame count.
    fn frame_count_word(&self) -> Option<[u8; 4]> {
        let n = self.pending.len() as u32;
        self.compressor.is_some().then(|| n.to_le_bytes())
    }

    /// The spool holds the blobs in insertion order: copy them into a new
    /// file in final order, then the TOC, and rename that into place.
    fn copy_in_order(&mut self, toc: &[u8], header: &[u8]) -> Result<()> {
        let mut out = self.archive_temp()?;
        let werr = |e| Error::io("cannot write archive", e);
        let zstd = self.compressor.is_some();
        let count = self.frame_count_word();
        let mut w = BufWriter::with_capacity(1 << 20, out.file_mut());
        w.write_all(header).map_err(werr)?;
        if let Some(count) = count {
            w.write_all(&count).map_err(werr)?;
        }
        let mut buf = Vec::new();
        for p in &self.pending {
            read_spooled_into(self.spool.file_mut(), p, &mut buf)?;
            if zstd {
                w.write_all(&(buf.len() as u32).to_le_bytes())
                    .map_err(werr)?;
            }
            w.write_all(&buf).map_err(werr)?;
        }
        w.write_all(toc).map_err(werr)?;
        w.flush().map_err(werr)?;
        drop(w);
        out.commit(None).map_err(staged_error)?;
        Ok(())
    }

    fn encode_toc(&self, blob_len: u64) -> Result<Vec<u8>> {
        let arches = self.toc_arches();
        let groups = self.ordinals_by_key();
        let zstd = self.compressor.is_some();
        let index = zstd && self.options.order == EntryOrder::Sorted;
        let mut toc = self.toc_out(1, &arches, &groups, None);
        if zstd {
            toc.compression_scheme = Scheme::ZstdPerKernel.as_str();
            toc.zstd_offset = Some(BLOB_START);
            toc.zstd_size = Some(blob_len);
            // Where each frame's bytes start (after its size word), so a
            // reader opens without walking every size word of the blob.
            toc.zstd_frame_offsets = index.then(|| {
                let mut at = BLOB_START + 4;
                (self.pending.iter())
                    .map(|p| {
                        at += 4 + p.stored_len;
                        at - p.stored_len
                    })
                    .collect()
            });
        } else {
            let mut offset = BLOB_START;
            toc.blobs = Some(
                (self.pending.iter())
                    .map(|p| {
                        offset += p.stored_len;
                        toc::BlobOut {
                            offset: offset - p.stored_len,
                            size: p.stored_len,
                        }
                    })
                    .collect(),
            );
        }
        toc.to_bytes()
    }

    /// The TOC fields every scheme has; scheme `none` until the caller
    /// says otherwise.
    fn toc_out<'a>(
        &'a self,
        version: u64,
        arches: &'a [&'a str],
        groups: &'a [(&'a str, Vec<usize>)],
        placed: Option<&'a [Placed]>,
    ) -> toc::TocOut<'a> {
        toc::TocOut {
            format_version: version,
            group_name: &self.options.group_name,
            gfx_arch_family: &self.options.gfx_arch_family,
            gfx_arches: arches,
            toc: toc::Groups {
                pending: &self.pending,
                groups,
                placed,
            },
            compression_scheme: Scheme::None.as_str(),
            zstd_offset: None,
            zstd_size: None,
            zstd_frame_offsets: None,
            blobs: None,
        }
    }
}

/// Where one zstd-delta frame landed.
struct Placed {
    offset: u64,
    size: u64,
    base: Option<u64>,
}

impl ArchiveWriter {
    /// Write a KPAK v2 `zstd-delta` archive: per key, read that key's raw
    /// kernels back from the spool, choose bases ([`delta::plan`]), compress
    /// (in parallel; the bytes do not depend on the thread count) and lay
    /// the frames out in ordinal order.
    /// The TOC's `gfx_arches`: as given, else the sorted set of arches added.
    fn toc_arches(&self) -> Vec<&str> {
        match &self.options.gfx_arches {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => {
                let mut v: Vec<&str> = self.pending.iter().map(|p| p.arch.as_str()).collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// The temp file the archive is written to, beside its destination and
    /// readable like a file `cp` would make, until it is renamed into place.
    fn archive_temp(&self) -> Result<kpack_fsafe::Staged> {
        let out = kpack_fsafe::Staged::new(&self.dest, "archive").map_err(staged_error)?;
        set_readable(out.file())?;
        Ok(out)
    }

    /// Ordinals grouped by key, keys in order of first appearance (in
    /// sorted mode: already sorted).
    fn ordinals_by_key(&self) -> Vec<(&str, Vec<usize>)> {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<&str, usize> = HashMap::new();
        for (ordinal, p) in self.pending.iter().enumerate() {
            let i = *slot.entry(p.key.as_str()).or_insert_with(|| {
                groups.push((p.key.as_str(), Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(ordinal);
        }
        groups
    }

    fn finish_delta(&mut self, level: i32) -> Result<Written> {
        let groups: Vec<Vec<usize>> = self
            .ordinals_by_key()
            .into_iter()
            .map(|(_, ordinals)| ordinals)
            .collect();
        let n = self.pending.len();
        let mut frames: Vec<Vec<u8>> = vec![Vec::new(); n];
        let mut base: Vec<Option<usize>> = vec![None; n];
        for ordinals in &groups {
            let e = self.key_frames(ordinals, level)?;
            for (i, (frame, b)) in e.frames.into_iter().zip(e.base).enumerate() {
                frames[ordinals[i]] = frame;
                base[ordinals[i]] = b.map(|b| ordinals[b]);
            }
        }
        let sizes: Vec<u64> = self.pending.iter().map(|p| p.original_size).collect();
        let archive = delta::across::Archive {
            frames: &mut frames,
            base: &mut base,
            sizes: &sizes,
        };
        delta::across::rebase(level, archive).map_err(|e| {
            e.named("cannot store kernels as deltas across keys", |o| {
                self.pending.get(o).map_or_else(
                    || format!("entry {o}"),
                    |p| format!("{} of {:?}", p.arch, p.key),
                )
            })
        })?;
        let mut out = self.archive_temp()?;
        let werr = |e| Error::io("cannot write archive", e);
        let mut pos = BLOB_START;
        {
            let mut w = BufWriter::with_capacity(1 << 20, out.file_mut());
            w.write_all(&[0u8; BLOB_START as usize]).map_err(werr)?;
            let mut placed = Vec::with_capacity(n);
            for (frame, base) in frames.iter().zip(&base) {
                w.write_all(frame).map_err(werr)?;
                placed.push(Placed {
                    offset: pos,
                    size: frame.len() as u64,
                    base: base.map(|b| b as u64),
                });
                pos += frame.len() as u64;
            }
            let toc = self.encode_toc_v2(&placed)?;
            w.write_all(&toc).map_err(werr)?;
            w.flush().map_err(werr)?;
        }
        let f = out.file_mut();
        f.seek(SeekFrom::Start(0)).map_err(werr)?;
        f.write_all(&header(crate::VERSION_DELTA, pos))
            .map_err(werr)?;
        f.flush().map_err(werr)?;
        let file_size = f
            .metadata()
            .map_err(|e| Error::io("cannot stat archive", e))?
            .len();
        out.commit(None).map_err(staged_error)?;
        Ok(Written {
            path: self.dest.clone(),
            entries: self.pending.len(),
            file_size,
        })
    }

    /// The frames of one key's entries (`ordinals`, in order) and, for
    /// each, the index in `ordinals` of its base, if it is a delta. A key
    /// is either all framed (encoded by a worker) or all raw (encoded
    /// here): `add_delta_key` and `raw_key_added` keep it so.
    fn key_frames(&mut self, ordinals: &[usize], level: i32) -> Result<delta::Encoded> {
        let key = self.pending[ordinals[0]].key.clone();
        let mut spooled = Vec::with_capacity(ordinals.len());
        for &o in ordinals {
            spooled.push(read_spooled(self.spool.file_mut(), &self.pending[o])?);
        }
        if self.pending[ordinals[0]].framed.is_none() {
            let members: Vec<&[u8]> = spooled.iter().map(Vec::as_slice).collect();
            return delta::encode_key(
                level,
                &members,
                delta::Spread::Rayon,
                self.options.delta_plan,
            )
            .map_err(|e| {
                e.named(&format!("cannot compress kernel {key:?}"), |i| {
                    ordinals
                        .get(i)
                        .map_or_else(|| format!("entry {i}"), |&o| self.pending[o].arch.clone())
                })
            });
        }
        let mut base = Vec::with_capacity(ordinals.len());
        for &o in ordinals {
            let Some(arch) = self.pending[o].framed.as_ref().and_then(Option::as_ref) else {
                base.push(None);
                continue;
            };
            let at = ordinals
                .iter()
                .position(|&b| &self.pending[b].arch == arch)
                .ok_or_else(|| {
                    Error::new(ErrorKind::Io, format!("{key:?}: base {arch:?} missing"))
                })?;
            base.push(Some(at));
        }
        Ok(delta::Encoded {
            frames: spooled,
            base,
        })
    }

    fn encode_toc_v2(&self, placed: &[Placed]) -> Result<Vec<u8>> {
        let arches = self.toc_arches();
        let groups = self.ordinals_by_key();
        let mut toc = self.toc_out(
            u64::from(crate::VERSION_DELTA),
            &arches,
            &groups,
            Some(placed),
        );
        toc.compression_scheme = Scheme::ZstdDelta.as_str();
        toc.to_bytes()
    }
}

/// The bytes `p` spooled (raw kernel or frame), read back from `spool`.
/// Leaves the file position after them: writers seek back to the end.
fn read_spooled(spool: &mut File, p: &Pending) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    read_spooled_into(spool, p, &mut buf)?;
    Ok(buf)
}

/// [`read_spooled`] into `buf` (resized to fit), reusing its allocation.
fn read_spooled_into(spool: &mut File, p: &Pending, buf: &mut Vec<u8>) -> Result<()> {
    let len = usize::try_from(p.stored_len)
        .map_err(|_| Error::new(ErrorKind::OutOfMemory, "kernel too large"))?;
    buf.resize(len, 0);
    spool
        .seek(SeekFrom::Start(p.spool_offset))
        .map_err(|e| Error::io("cannot seek spool file", e))?;
    spool
        .read_exact(buf)
        .map_err(|e| Error::io("cannot read spool file", e))
}

/// The 64-byte header area: magic, `version`, `toc_offset`, zero padding.
fn header(version: u32, toc_offset: u64) -> [u8; BLOB_START as usize] {
    let mut header = [0u8; BLOB_START as usize];
    header[0..4].copy_from_slice(&MAGIC);
    header[4..8].copy_from_slice(&version.to_le_bytes());
    header[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    header
}

/// Temp files are created 0600; an installed archive must be world-readable.
fn set_readable(file: &File) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(|e| Error::io("cannot set archive permissions", e))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// sha256 of `data`, as archives record it for each entry (`sha256`).
/// Hashed [`HASH_CHUNK`] bytes at a time, each chunk [`warm`]ed first.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for chunk in data.chunks(HASH_CHUNK) {
        h.update(warm(chunk));
    }
    h.finalize().into()
}

/// `chunk`, after one byte of each of its cache lines was read. SHA-NI
/// sha256 is bound by the latency of its rounds, and the loads it makes
/// do not run far enough ahead to hide memory's: on this project's
/// development machine it hashes 1.9 GB/s from the cache but 1.2 GB/s
/// from memory (a kernel just inflated into a large buffer, one that
/// nothing has touched yet). These loads do not depend on each other, so
/// they bring a chunk in at memory's bandwidth, and the hash then reads
/// it from the cache: 1.9 s → 1.4 s of CPU per 2 GiB (the JAX plugin's
/// kernels are 2.4 GB).
fn warm(chunk: &[u8]) -> &[u8] {
    const LINE: usize = 64;
    let x = chunk.iter().step_by(LINE).fold(0u8, |x, b| x ^ b);
    std::hint::black_box(x);
    chunk
}

/// `src` mapped, with the place of its `len` bytes at `offset`, when it can
/// be mapped and holds them (else `None`: the caller reads it instead).
/// Like any reader of the input, this assumes nobody rewrites the file
/// while it is offloaded (see [`Map::new`]).
fn mapped(src: &File, offset: u64, len: u64) -> Option<(Map, std::ops::Range<usize>)> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    let map = Map::new(src).ok()?;
    (end <= map.bytes().len()).then_some((map, start..end))
}

/// Copy `len` bytes from `from` to `to` (`copy_file_range` on Linux); fewer
/// before the end of the input is an `UnexpectedEof` error.
fn copy_exactly(mut from: impl Read, to: &mut File, len: u64) -> std::io::Result<()> {
    let n = std::io::copy(&mut from, to)?;
    if n != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("only {n} of {len} bytes before the end of the file"),
        ));
    }
    Ok(())
}

/// Bytes copied (and hashed) at a time by [`copy_hashing`]: the chunk
/// being copied (read and written) and the one being hashed stay within a
/// core's L2 cache, so the hash reads bytes the copy just brought in.
/// Measured on librocsparse (2 MiB L2): 256 KiB and 512 KiB cost the least
/// CPU, 1 MiB as much as hashing the whole kernel after its copy.
const HASH_CHUNK: usize = 256 << 10;

/// Copy `data.len()` bytes from `from`'s position to `to`, file to file,
/// and hash `data` (the same bytes, mapped) beside it: each chunk is
/// hashed while the next is copied (on another thread of the pool when
/// one is free, else right after), so the hash reads bytes the copy has
/// just brought into the cache, never the file a second time.
fn copy_hashing(
    from: &File,
    to: &mut File,
    data: &[u8],
) -> (Option<[u8; 32]>, std::io::Result<()>) {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut copied: &[u8] = &[];
    for next in data.chunks(HASH_CHUNK) {
        let n = next.len() as u64;
        let (_, res) = rayon::join(
            || h.update(warm(copied)),
            || copy_exactly(Read::take(from, n), to, n),
        );
        if let Err(e) = res {
            return (None, Err(e));
        }
        copied = next;
    }
    h.update(warm(copied));
    (Some(h.finalize().into()), Ok(()))
}

/// sha256 of the `len` bytes of `file` at `offset`, read in 1 MiB pieces.
fn sha256_of_range(mut file: &File, offset: u64, len: u64) -> std::io::Result<[u8; 32]> {
    use sha2::Digest;
    file.seek(SeekFrom::Start(offset))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < len {
        let want = buf
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("only {done} of {len} bytes before the end of the file"),
            ));
        }
        h.update(&buf[..n]);
        done += n as u64;
    }
    Ok(h.finalize().into())
}

/// An error of the staged archive file (creating, committing) as this
/// crate's, its cause kept.
fn staged_error(e: kpack_fsafe::IoError) -> Error {
    Error::io(format!("{}: {}", e.path.display(), e.what), e.source)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Archive;

    pub(crate) fn opts(compression: Compression) -> WriterOptions {
        WriterOptions {
            group_name: "g".into(),
            gfx_arch_family: "f".into(),
            compression,
            ..Default::default()
        }
    }

    #[test]
    fn rejects_duplicate_key_and_arch() {
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            ArchiveWriter::create(dir.path().join("a.kpack"), opts(Compression::None)).unwrap();
        w.add("k#0", "gfx900", b"x").unwrap();
        let e = w.add("k#0", "gfx900", b"y").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("already exists"), "{e}");
        // Backslashes normalise before the duplicate check.
        w.add("a\\b#0", "gfx900", b"x").unwrap();
        assert!(w.add("a/b#0", "gfx900", b"x").is_err());
    }

    #[test]
    fn dropping_without_finish_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ArchiveWriter::create(dir.path().join("a.kpack"), opts(Compression::default()))
            .unwrap();
        w.add("k#0", "gfx900", &[7u8; 1000]).unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn finish_leaves_only_the_archive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.kpack");
        let mut w = ArchiveWriter::create(&path, opts(Compression::default())).unwrap();
        w.add("k#0", "gfx900", &[7u8; 1000]).unwrap();
        let written = w.finish().unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.kpack")]);
        assert_eq!(written.file_size, std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn sorted_output_does_not_depend_on_add_order() {
        let dir = tempfile::tempdir().unwrap();
        let items = [
            ("b#0", "gfx906", &b"bb"[..]),
            ("a#1", "gfx900", b"a1"),
            ("a#0", "gfx906", b"a0"),
        ];
        let mut outputs = Vec::new();
        for rev in [false, true] {
            let path = dir.path().join(format!("{rev}.kpack"));
            let mut w = ArchiveWriter::create(&path, opts(Compression::default())).unwrap();
            let mut list = items.to_vec();
            if rev {
                list.reverse();
            }
            for (k, a, d) in list {
                w.add(k, a, d).unwrap();
            }
            w.finish().unwrap();
            outputs.push(std::fs::read(&path).unwrap());
        }
        assert_eq!(outputs[0], outputs[1]);
        let a = Archive::from_bytes(outputs.remove(0)).unwrap();
        let ords: Vec<_> = a
            .entries()
            .map(|e| (e.key().to_owned(), e.ordinal()))
            .collect();
        assert_eq!(
            ords,
            vec![("a#0".into(), 0), ("a#1".into(), 1), ("b#0".into(), 2)]
        );
        assert_eq!(a.arches(), ["gfx900", "gfx906"]);
    }

    /// The archive `add`s of `items` in the given order write, without
    /// reserving.
    fn plain_archive(dir: &Path, items: &[(&str, &str, &[u8])]) -> Vec<u8> {
        let path = dir.join("plain.kpack");
        let mut w = ArchiveWriter::create(&path, opts(Compression::None)).unwrap();
        for (k, a, d) in items {
            w.add(k, a, d).unwrap();
        }
        w.finish().unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn reserved_places_give_the_same_archive_in_any_add_order() {
        let dir = tempfile::tempdir().unwrap();
        let items: [(&str, &str, &[u8]); 4] = [
            ("b#0", "gfx906", b"bbbb"),
            ("a#1", "gfx900", b"a1"),
            ("a#0", "gfx906", b"a0a0a0"),
            ("a#0", "gfx900", b"z"),
        ];
        let expected = plain_archive(dir.path(), &items);
        for (n, order) in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]]
            .iter()
            .enumerate()
        {
            let path = dir.path().join(format!("r{n}.kpack"));
            let mut w = ArchiveWriter::create(&path, opts(Compression::None)).unwrap();
            w.reserve(items.iter().map(|(k, a, d)| (*k, *a, d.len() as u64)))
                .unwrap();
            for &i in order {
                let (k, a, d) = items[i];
                w.add(k, a, d).unwrap();
            }
            w.finish().unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                expected,
                "add order {order:?}"
            );
        }
    }

    #[test]
    fn reserved_batches_mix_with_plain_adds() {
        // Two reserved batches (as `kpack split` reserves one per binary)
        // around an ordinary add, the second batch sorting first: the
        // finish reorders, and the bytes are still those of plain adds.
        let dir = tempfile::tempdir().unwrap();
        let items: [(&str, &str, &[u8]); 5] = [
            ("m#0", "gfx900", b"mm"),
            ("m#0", "gfx906", b"m6m6m6"),
            ("x#0", "gfx900", b"xxx"),
            ("c#0", "gfx906", b"c"),
            ("c#1", "gfx900", b"c1c1"),
        ];
        let expected = plain_archive(dir.path(), &items);
        let path = dir.path().join("r.kpack");
        let mut w = ArchiveWriter::create(&path, opts(Compression::None)).unwrap();
        let size = |i: usize| (items[i].0, items[i].1, items[i].2.len() as u64);
        w.reserve([size(1), size(0)]).unwrap();
        w.add(items[1].0, items[1].1, items[1].2).unwrap();
        w.add(items[2].0, items[2].1, items[2].2).unwrap();
        w.reserve([size(4), size(3)]).unwrap();
        for i in [3, 0, 4] {
            w.add(items[i].0, items[i].1, items[i].2).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn reserved_places_refuse_a_wrong_size_a_second_add_and_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let mut w =
            ArchiveWriter::create(dir.path().join("a.kpack"), opts(Compression::None)).unwrap();
        w.reserve([("k#0", "gfx900", 3), ("k#0", "gfx906", 2)])
            .unwrap();
        let e = w.add("k#0", "gfx900", b"four").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("3 were reserved"), "{e}");
        w.add("k#0", "gfx900", b"abc").unwrap();
        let e = w.add("k#0", "gfx900", b"abc").unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        // A reserve naming a reserved entry again is a duplicate too.
        assert!(w.reserve([("k#0", "gfx906", 2)]).is_err());
        let e = w.finish().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("never added"), "{e}");
        // Nothing is left behind by the failed finish.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn only_uncompressed_archives_reserve() {
        let dir = tempfile::tempdir().unwrap();
        for c in [Compression::default(), Compression::ZstdDelta { level: 3 }] {
            let mut w = ArchiveWriter::create(dir.path().join("a.kpack"), opts(c)).unwrap();
            let e = w.reserve([("k#0", "gfx900", 1)]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{c:?}");
        }
    }

    #[test]
    fn file_ranges_store_what_add_stores() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        std::fs::write(&input, b"..hello..world!..").unwrap();
        for c in [
            Compression::None,
            Compression::default(),
            Compression::ZstdDelta { level: 3 },
        ] {
            let mut want = Vec::new();
            for (name, by_range) in [("add", false), ("range", true)] {
                let path = dir.path().join(format!("{name}.kpack"));
                let mut w = ArchiveWriter::create(&path, opts(c)).unwrap();
                let mut file = File::open(&input).unwrap();
                for (key, offset, len) in [("w#0", 9, 6), ("h#0", 2, 5)] {
                    if by_range {
                        w.add_file_range(key, "gfx900", &mut file, offset, len)
                            .unwrap();
                    } else {
                        let bytes = std::fs::read(&input).unwrap();
                        w.add(key, "gfx900", &bytes[offset as usize..][..len as usize])
                            .unwrap();
                    }
                }
                w.finish().unwrap();
                want.push(std::fs::read(&path).unwrap());
            }
            assert_eq!(want[0], want[1], "{c:?}");
        }
        // A range past the end of the input is an error, not a short entry.
        let mut w =
            ArchiveWriter::create(dir.path().join("short.kpack"), opts(Compression::None)).unwrap();
        let mut file = File::open(&input).unwrap();
        let e = w
            .add_file_range("k#0", "gfx900", &mut file, 10, 100)
            .unwrap_err();
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert!(
            cause
                .as_deref()
                .is_some_and(|c| c.contains("only 7 of 100 bytes")),
            "{e}: {cause:?}"
        );
    }

    #[test]
    fn file_range_entries_record_the_code_objects_sha256() {
        // Digests from `sha256sum`, not from the writer's own function.
        let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let world = "486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7";
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        std::fs::write(&input, b"..hello..world!..").unwrap();
        for (c, reserve) in [
            (Compression::None, false),
            (Compression::None, true),
            (Compression::default(), false),
        ] {
            let path = dir.path().join("a.kpack");
            let mut w = ArchiveWriter::create(&path, opts(c)).unwrap();
            if reserve {
                w.reserve([("w#0", "gfx900", 5), ("h#0", "gfx900", 5)])
                    .unwrap();
            }
            let mut file = File::open(&input).unwrap();
            for (key, offset) in [("w#0", 9), ("h#0", 2)] {
                w.add_file_range(key, "gfx900", &mut file, offset, 5)
                    .unwrap();
            }
            w.finish().unwrap();
            let a = crate::Archive::open(&path).unwrap();
            for (key, want) in [("h#0", hello), ("w#0", world)] {
                let got = a.entry(key, "gfx900").and_then(|e| e.sha256());
                let got = got.map(crate::digest::to_hex);
                assert_eq!(got.as_deref(), Some(want), "{c:?} reserve {reserve} {key}");
            }
        }
    }

    #[test]
    fn file_range_digests_span_many_chunks() {
        // Copied and hashed chunk by chunk: the digest is the whole range's.
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        let bytes: Vec<u8> = (0..3 * HASH_CHUNK + 1000)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&input, &bytes).unwrap();
        let (offset, len) = (13, 2 * HASH_CHUNK + 555);
        let path = dir.path().join("a.kpack");
        let mut w = ArchiveWriter::create(&path, opts(Compression::None)).unwrap();
        let mut file = File::open(&input).unwrap();
        w.add_file_range("k#0", "gfx900", &mut file, offset as u64, len as u64)
            .unwrap();
        w.finish().unwrap();
        let a = crate::Archive::open(&path).unwrap();
        let want = sha256(&bytes[offset..offset + len]);
        let e = a.entry("k#0", "gfx900").unwrap();
        assert_eq!(e.sha256(), Some(&want));
        assert_eq!(
            &*a.get("k#0", "gfx900").unwrap(),
            &bytes[offset..offset + len]
        );
    }

    #[test]
    fn chunked_sha256_matches_sha256sum() {
        // Hashed chunk by chunk: the digest is `sha256sum`'s of the whole.
        let bytes: Vec<u8> = (0..3 * HASH_CHUNK + 1000)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        assert_eq!(
            crate::digest::to_hex(&sha256(&bytes)),
            "acbee390dd04f61d59ef0aed75b78f6a8f80c702960c98db07d7b3aa6d8b0688"
        );
        assert_eq!(
            crate::digest::to_hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn rejects_arch_missing_from_given_gfx_arches() {
        let dir = tempfile::tempdir().unwrap();
        let o = WriterOptions {
            gfx_arches: Some(vec!["gfx900".into()]),
            ..opts(Compression::None)
        };
        let mut w = ArchiveWriter::create(dir.path().join("a.kpack"), o).unwrap();
        assert_eq!(
            w.add("k#0", "gfx906", b"x").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}
