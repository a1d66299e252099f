//! The reader: [`Archive`] validates a whole KPAK file once at open, then
//! serves kernels without locks (NoOp: borrowed from the map; zstd: one frame
//! decoded with a per-thread context).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::frame::zstd_decode;
use crate::mmap::Map;

mod toc;

use toc::Toc;

/// No zstd frame expands by more than this factor (an RLE block turns 4 bytes
/// into 128 KiB); used to refuse absurd `original_size` before allocating.
const MAX_ZSTD_RATIO: u64 = 1 << 16;

/// How kernels are stored in the blob area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `"none"`: raw code objects back to back.
    None,
    /// `"zstd-per-kernel"`: one independent zstd frame per kernel.
    ZstdPerKernel,
    /// `"zstd-delta"` (header version 2): bases are independent zstd
    /// frames, deltas zstd frames against their base's decoded bytes.
    ZstdDelta,
}

impl Scheme {
    /// The TOC's `compression_scheme` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::None => "none",
            Scheme::ZstdPerKernel => "zstd-per-kernel",
            Scheme::ZstdDelta => "zstd-delta",
        }
    }
}

/// One TOC entry: a code object for one binary key and one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    // Shared with the binary and the other entries of the same key (and
    // arch): one allocation per key instead of one per entry at open.
    key: Arc<str>,
    arch: Arc<str>,
    ordinal: u64,
    original_size: u64,
    stored_offset: u64,
    stored_size: u64,
    metadata: Vec<(String, String)>,
    sha256: Option<[u8; 32]>,
    base: Option<Base>,
}

/// Where a `zstd-delta` entry's base frame is (resolved at open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Base {
    pub(crate) ordinal: u64,
    /// Offset of the `base` value in the TOC, for messages.
    pub(crate) toc_at: u64,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    pub(crate) original_size: u64,
}

impl Entry {
    /// For a `zstd-delta` delta: the ordinal of the base entry its frame was
    /// compressed against. `None` for bases and every other scheme.
    pub fn base(&self) -> Option<u64> {
        self.base.as_ref().map(|b| b.ordinal)
    }
    /// The binary key, e.g. `lib/libfoo.so#0`.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The architecture, e.g. `gfx1100` or `gfx942:xnack+`.
    pub fn arch(&self) -> &str {
        &self.arch
    }
    /// Index of the blob (NoOp) or frame (zstd) holding the bytes.
    pub fn ordinal(&self) -> u64 {
        self.ordinal
    }
    /// Size of the code object once decoded.
    pub fn original_size(&self) -> u64 {
        self.original_size
    }
    /// Absolute file offset of the stored bytes (raw blob or zstd frame).
    pub fn stored_offset(&self) -> u64 {
        self.stored_offset
    }
    /// Size of the stored bytes (raw blob or zstd frame).
    pub fn stored_size(&self) -> u64 {
        self.stored_size
    }
    /// The optional per-entry `metadata` map, in file order (string values only).
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }
    /// The code object's sha256 as the TOC records it (`sha256`; archives
    /// kpack writes in sorted order carry it, AMD's do not).
    pub fn sha256(&self) -> Option<&[u8; 32]> {
        self.sha256.as_ref()
    }
}

#[derive(Debug)]
enum Backing {
    Map(Map),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m.bytes(),
            Backing::Owned(v) => v,
        }
    }
}

/// A validated, read-only KPAK v1 archive.
///
/// Everything is checked at open (header, TOC shape, every blob and frame
/// range, ordinals); [`Archive::get`] only decodes. `Archive` is `Send + Sync`
/// and takes no lock.
#[derive(Debug)]
pub struct Archive {
    backing: Backing,
    toc: Toc,
}

impl Archive {
    /// Open and validate the archive at `path`, memory-mapping it.
    ///
    /// An empty file is an [`ErrorKind::Io`] error and a missing one
    /// [`ErrorKind::FileNotFound`], as in AMD's `kpack_open`.
    pub fn open(path: impl AsRef<Path>) -> Result<Archive> {
        let path = path.as_ref();
        let inner = || -> Result<Archive> {
            // Opening a FIFO blocks until a writer comes, and a device or
            // directory is no archive: refuse anything but a regular file
            // before opening it.
            let meta = std::fs::metadata(path).map_err(|e| Error::io("cannot open archive", e))?;
            if !meta.is_file() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("not a regular file ({})", kpack_fsafe::file_kind(&meta)),
                ));
            }
            let file = File::open(path).map_err(|e| Error::io("cannot open archive", e))?;
            let len = file
                .metadata()
                .map_err(|e| Error::io("cannot stat archive", e))?
                .len();
            if len == 0 {
                return Err(Error::new(ErrorKind::Io, "archive file is empty"));
            }
            let map = Map::new(&file).map_err(|e| Error::io("cannot map archive", e))?;
            Archive::parse(Backing::Map(map))
        };
        inner().map_err(|e| e.with_path(path))
    }

    /// Validate an archive held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Archive> {
        Archive::parse(Backing::Owned(bytes))
    }

    fn parse(backing: Backing) -> Result<Archive> {
        let toc = Toc::parse(backing.bytes())?;
        Ok(Archive { backing, toc })
    }

    /// The compression scheme.
    pub fn scheme(&self) -> Scheme {
        self.toc.scheme
    }
    /// The header version: 1 (AMD's format) or 2 (`zstd-delta`).
    pub fn version(&self) -> u32 {
        self.toc.version
    }
    /// Whether a `zstd-per-kernel` archive carried the `zstd_frame_offsets`
    /// index (so opening it walked no frame headers).
    pub fn has_frame_index(&self) -> bool {
        self.toc.indexed
    }
    /// The entry stored under `ordinal`, if any (the base a delta names).
    pub fn entry_by_ordinal(&self, ordinal: u64) -> Option<&Entry> {
        self.entries().find(|e| e.ordinal == ordinal)
    }
    /// The TOC's `format_version` (equal to the header version once opened).
    pub fn format_version(&self) -> u64 {
        self.toc.format_version
    }
    /// The TOC's `group_name`.
    pub fn group_name(&self) -> &str {
        &self.toc.group_name
    }
    /// The TOC's `gfx_arch_family`.
    pub fn gfx_arch_family(&self) -> &str {
        &self.toc.gfx_arch_family
    }
    /// The TOC's `gfx_arches`, in file order. AMD's loader decides whether
    /// an archive serves an arch from this list alone.
    pub fn arches(&self) -> &[String] {
        &self.toc.gfx_arches
    }
    /// Whether `arch` is listed in `gfx_arches` (exact match).
    pub fn has_arch(&self, arch: &str) -> bool {
        self.toc.gfx_arches.iter().any(|a| a == arch)
    }
    /// Number of distinct binary keys.
    pub fn binary_count(&self) -> usize {
        self.toc.binaries.len()
    }
    /// The `i`-th binary key in byte-wise sorted order (AMD's `kpack_get_binary`).
    pub fn binary(&self, i: usize) -> Option<&str> {
        self.toc.binaries.get(i).map(|b| &*b.key)
    }
    /// Binary keys in byte-wise sorted order.
    pub fn binaries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.toc.binaries.iter().map(|b| &*b.key)
    }
    /// Every entry, sorted by (key, arch).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.toc.binaries.iter().flat_map(|b| b.entries.iter())
    }
    /// Number of entries.
    pub fn entry_count(&self) -> usize {
        self.toc.binaries.iter().map(|b| b.entries.len()).sum()
    }
    /// The entry for `key` and `arch` (exact byte match, no normalisation).
    pub fn entry(&self, key: &str, arch: &str) -> Option<&Entry> {
        // Binaries are sorted byte-wise and unique (checked at open), so a
        // binary search needs no index built at open.
        let i = self
            .toc
            .binaries
            .binary_search_by(|b| b.key.as_ref().cmp(key))
            .ok()?;
        self.toc.binaries[i]
            .entries
            .iter()
            .find(|e| &*e.arch == arch)
    }
    /// Offset of the msgpack TOC.
    pub fn toc_offset(&self) -> u64 {
        self.toc.toc_offset
    }
    /// Total size of the archive in bytes.
    pub fn file_size(&self) -> u64 {
        self.backing.bytes().len() as u64
    }

    /// The code object for `key` and `arch`.
    ///
    /// NoOp archives borrow straight from the mapping; zstd archives decode
    /// one frame and check that it yields exactly `original_size` bytes.
    pub fn get(&self, key: &str, arch: &str) -> Result<Cow<'_, [u8]>> {
        let entry = self.entry(key, arch).ok_or_else(|| {
            Error::new(
                ErrorKind::KernelNotFound,
                format!("no kernel for binary {key:?} and arch {arch:?}"),
            )
        })?;
        self.read(entry)
    }

    /// The decoded bytes of `entry` (which must come from this archive).
    ///
    /// A `zstd-delta` delta decodes its base first (see
    /// [`Archive::read_with_base`] to reuse a decoded base).
    pub fn read(&self, entry: &Entry) -> Result<Cow<'_, [u8]>> {
        let stored = self.stored(entry)?;
        if self.toc.scheme == Scheme::None {
            return Ok(Cow::Borrowed(stored));
        }
        let mut out = decode_buffer(stored, entry)?;
        self.decode_to(entry, None, &mut out)?;
        Ok(Cow::Owned(out))
    }

    /// Decode `entry` straight into `out`, which must be exactly
    /// [`Entry::original_size`] bytes long: the caller's own buffer (the C
    /// ABI's `malloc`ed one), so a load neither allocates nor copies twice.
    /// A `zstd-delta` delta decodes its base first (see
    /// [`Archive::read_with_base_into`] to reuse a decoded base).
    ///
    /// `out` is any [`DecodeTarget`]: a slice, a `Vec` of that capacity, or
    /// the C ABI's `malloc`ed buffer, which is written without being
    /// zero-filled first.
    pub fn read_into<B: DecodeTarget + ?Sized>(&self, entry: &Entry, out: &mut B) -> Result<()> {
        self.check_out_len(entry, out.capacity())?;
        self.decode_to(entry, None, out)
    }

    /// The size `entry` decodes to, once its frame's size claims check out
    /// (the same checks a read makes first): what a caller allocates for
    /// [`Archive::read_into`], never an absurd TOC value.
    pub fn decoded_size(&self, entry: &Entry) -> Result<usize> {
        let stored = self.stored(entry)?;
        match self.toc.scheme {
            Scheme::None => Ok(stored.len()),
            Scheme::ZstdPerKernel | Scheme::ZstdDelta => check_sizes(stored, entry),
        }
    }

    /// The decoded base of a `zstd-delta` delta (`None` for any other
    /// entry), for callers that memoise bases across loads.
    pub fn read_base(&self, entry: &Entry) -> Result<Option<Vec<u8>>> {
        let Some(base) = &entry.base else {
            return Ok(None);
        };
        let as_entry = Entry {
            key: entry.key.clone(),
            arch: format!("{} (base {})", entry.arch, base.ordinal).into(),
            ordinal: base.ordinal,
            original_size: base.original_size,
            stored_offset: base.offset,
            stored_size: base.size,
            metadata: Vec::new(),
            sha256: None,
            base: None,
        };
        let frame = self.stored(&as_entry)?;
        let mut out = decode_buffer(frame, &as_entry)?;
        decompress(frame, &as_entry, None, &mut out)?;
        Ok(Some(out))
    }

    /// Decode a `zstd-delta` delta against `base`, its base's decoded bytes
    /// (from [`Archive::read_base`]); any other entry decodes as
    /// [`Archive::read`] does and ignores `base`.
    pub fn read_with_base(&self, entry: &Entry, base: &[u8]) -> Result<Vec<u8>> {
        let stored = self.stored(entry)?;
        if self.toc.scheme == Scheme::None {
            return Ok(stored.to_vec());
        }
        let mut out = decode_buffer(stored, entry)?;
        self.decode_to(entry, Some(base), &mut out)?;
        Ok(out)
    }

    /// [`Archive::read_with_base`] into the caller's buffer, as
    /// [`Archive::read_into`] does.
    pub fn read_with_base_into<B: DecodeTarget + ?Sized>(
        &self,
        entry: &Entry,
        base: &[u8],
        out: &mut B,
    ) -> Result<()> {
        self.check_out_len(entry, out.capacity())?;
        self.decode_to(entry, Some(base), out)
    }

    fn check_out_len(&self, entry: &Entry, len: usize) -> Result<()> {
        if len as u64 != entry.original_size {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a {}-byte buffer for {:?} ({:?}), whose original_size is {}",
                    len, entry.key, entry.arch, entry.original_size
                ),
            ));
        }
        Ok(())
    }

    /// Decode `entry` into `out` (an empty `Vec` with room for it, or a
    /// slice of exactly its size). `base`: the decoded base of a delta,
    /// decoded here when not given.
    fn decode_to<B: DecodeTarget + ?Sized>(
        &self,
        entry: &Entry,
        base: Option<&[u8]>,
        out: &mut B,
    ) -> Result<()> {
        let stored = self.stored(entry)?;
        match self.toc.scheme {
            Scheme::None => {
                if out.fill_from(stored) {
                    Ok(())
                } else {
                    Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "a {}-byte buffer for the {}-byte stored entry {:?}",
                            out.capacity(),
                            stored.len(),
                            entry.key
                        ),
                    ))
                }
            }
            Scheme::ZstdPerKernel => {
                self.check_size_word(entry)?;
                decompress(stored, entry, None, out)
            }
            Scheme::ZstdDelta => match (&entry.base, base) {
                (None, _) => decompress(stored, entry, None, out),
                (Some(_), Some(base)) => decompress(stored, entry, Some(base), out),
                (Some(_), None) => {
                    let base = self.read_base(entry)?.unwrap_or_default();
                    decompress(stored, entry, Some(&base), out)
                }
            },
        }
    }

    /// An indexed v1 frame's size word must agree with the index; checked
    /// here, per frame read, instead of walking every frame at open.
    fn check_size_word(&self, entry: &Entry) -> Result<()> {
        if !self.toc.indexed {
            return Ok(());
        }
        let at = entry.stored_offset.saturating_sub(4);
        let word = usize::try_from(at)
            .ok()
            .and_then(|a| self.backing.bytes().get(a..a.checked_add(4)?))
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        if word != Some(entry.stored_size) {
            return Err(Error::format(
                at,
                format!(
                    "frame {} size word is {word:?}, the frame index says {}",
                    entry.ordinal, entry.stored_size
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn stored(&self, entry: &Entry) -> Result<&[u8]> {
        // Ranges were validated at open; this re-check keeps a foreign entry
        // from panicking.
        let bytes = self.backing.bytes();
        usize::try_from(entry.stored_offset)
            .ok()
            .zip(usize::try_from(entry.stored_size).ok())
            .and_then(|(o, n)| bytes.get(o..o.checked_add(n)?))
            .ok_or_else(|| {
                Error::format(entry.stored_offset, "entry does not belong to this archive")
            })
    }

    /// A deterministic text description of the archive, for golden tests and
    /// `kpack archive list --dump`: header, TOC fields, and every entry with
    /// its placement and an FNV-1a-64 digest of its decoded bytes.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "KPAK v{} file_size={} toc_offset={:#x} toc_len={}",
            self.toc.version,
            self.file_size(),
            self.toc.toc_offset,
            self.toc.toc_len(self.backing.bytes())
        );
        let _ = writeln!(s, "format_version: {}", self.toc.format_version);
        let _ = writeln!(s, "group_name: {:?}", self.toc.group_name);
        let _ = writeln!(s, "gfx_arch_family: {:?}", self.toc.gfx_arch_family);
        let _ = writeln!(s, "gfx_arches: {:?}", self.toc.gfx_arches);
        let _ = writeln!(s, "compression_scheme: {:?}", self.toc.scheme.as_str());
        let _ = writeln!(s, "blobs: {}", self.toc.blob_count);
        if self.toc.indexed {
            let _ = writeln!(s, "{}: yes", crate::FRAME_INDEX_KEY);
        }
        for e in self.entries() {
            let _ = write!(
                s,
                "entry {:?} {:?} ordinal={} original_size={} stored={:#x}+{}",
                e.key, e.arch, e.ordinal, e.original_size, e.stored_offset, e.stored_size
            );
            if let Some(base) = e.base() {
                let _ = write!(s, " base={base}");
            }
            match self.read(e) {
                Ok(bytes) => {
                    let _ = write!(s, " fnv1a64={:016x}", fnv1a64(&bytes));
                }
                Err(err) => {
                    let _ = write!(s, " error={err}");
                }
            }
            for (k, v) in &e.metadata {
                let _ = write!(s, " {k}={v:?}");
            }
            s.push('\n');
        }
        s
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where an entry is decoded: zstd's output-buffer contract (its
/// capacity, a pointer to write through, how much is filled) plus a plain
/// copy for stored (uncompressed) entries. A `Vec` is written from its
/// start up to its capacity, a slice whole; the C ABI implements it for a
/// `malloc`ed buffer, which need not be zero-filled first.
pub trait DecodeTarget: zstd::zstd_safe::WriteBuf {
    /// Make `src` the whole content, when it is exactly the capacity long;
    /// `false` (nothing written) otherwise.
    fn fill_from(&mut self, src: &[u8]) -> bool;
}

impl DecodeTarget for Vec<u8> {
    fn fill_from(&mut self, src: &[u8]) -> bool {
        if src.len() != self.capacity() {
            return false;
        }
        self.clear();
        self.extend_from_slice(src);
        true
    }
}

impl DecodeTarget for [u8] {
    fn fill_from(&mut self, src: &[u8]) -> bool {
        if src.len() != self.len() {
            return false;
        }
        self.copy_from_slice(src);
        true
    }
}

/// Check the frame's size claims: the TOC's `original_size` must be
/// possible for a frame of this length and agree with the frame's declared
/// content size (when present).
fn check_sizes(frame: &[u8], entry: &Entry) -> Result<usize> {
    let fail = |msg: String| Error::at(ErrorKind::DecompressionFailed, entry.stored_offset, msg);
    let size = entry.original_size;
    if size > (frame.len() as u64).saturating_mul(MAX_ZSTD_RATIO) {
        return Err(fail(format!(
            "original_size {size} is impossible for a {}-byte frame",
            frame.len()
        )));
    }
    if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(frame)
        && declared != size
    {
        return Err(fail(format!(
            "frame {} declares {declared} bytes, TOC original_size is {size}",
            entry.ordinal
        )));
    }
    usize::try_from(size).map_err(|_| Error::new(ErrorKind::OutOfMemory, "kernel too large"))
}

/// An empty buffer with room for exactly `entry.original_size` bytes, after
/// [`check_sizes`].
fn decode_buffer(frame: &[u8], entry: &Entry) -> Result<Vec<u8>> {
    let size = check_sizes(frame, entry)?;
    let mut out = Vec::new();
    out.try_reserve_exact(size).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!("cannot allocate {size} bytes for kernel {:?}", entry.key),
        )
    })?;
    Ok(out)
}

/// The slot holds exactly one whole zstd frame.
fn check_frame(frame: &[u8], entry: &Entry) -> Result<()> {
    let fail = |msg: String| Error::at(ErrorKind::DecompressionFailed, entry.stored_offset, msg);
    let whole = zstd::zstd_safe::find_frame_compressed_size(frame).map_err(|c| {
        fail(format!(
            "frame {} is not a zstd frame: {}",
            entry.ordinal,
            zstd::zstd_safe::get_error_name(c)
        ))
    })?;
    if whole != frame.len() {
        return Err(fail(format!(
            "frame {} holds {} bytes of zstd data in a {}-byte slot",
            entry.ordinal,
            whole,
            frame.len()
        )));
    }
    Ok(())
}

/// Decode `entry`'s frame into `out` (against `base`, for a delta) and
/// check it yields exactly `original_size` bytes.
fn decompress<B: zstd::zstd_safe::WriteBuf + ?Sized>(
    frame: &[u8],
    entry: &Entry,
    base: Option<&[u8]>,
    out: &mut B,
) -> Result<()> {
    let fail = |msg: String| Error::at(ErrorKind::DecompressionFailed, entry.stored_offset, msg);
    check_frame(frame, entry)?;
    check_sizes(frame, entry)?;
    let what = match (base, entry.base()) {
        (Some(_), Some(b)) => format!("delta frame {} (base {b})", entry.ordinal),
        _ => format!("frame {}", entry.ordinal),
    };
    let got =
        zstd_decode(frame, base, out).map_err(|e| fail(format!("{what} failed to decode: {e}")))?;
    let size = entry.original_size;
    if got as u64 != size {
        return Err(fail(format!(
            "{what} decoded to {got} bytes, TOC original_size is {size}"
        )));
    }
    Ok(())
}
