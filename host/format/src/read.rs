//! The reader: [`Archive`] validates a whole KPAK file once at open, then
//! serves kernels without locks (NoOp: borrowed from the map; zstd: one frame
//! decoded with a per-thread context).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::mmap::Map;
use crate::msgpack::{self, Data, Value};
use crate::{BLOB_START, HEADER_SIZE, MAGIC, VERSION};

/// AMD's loader refuses zstd blobs larger than this (§2.6 step 10).
const MAX_ZSTD_BLOB: u64 = 1 << 32;
/// AMD's loader refuses more frames than this.
const MAX_FRAMES: u64 = 1 << 20;
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
}

impl Scheme {
    /// The TOC's `compression_scheme` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::None => "none",
            Scheme::ZstdPerKernel => "zstd-per-kernel",
        }
    }
}

/// One TOC entry: a code object for one binary key and one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    key: String,
    arch: String,
    ordinal: u64,
    original_size: u64,
    stored_offset: u64,
    stored_size: u64,
    metadata: Vec<(String, String)>,
}

impl Entry {
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

#[derive(Debug)]
struct Binary {
    key: String,
    /// Sorted by arch, byte-wise.
    entries: Vec<Entry>,
}

/// A validated, read-only KPAK v1 archive.
///
/// Everything is checked at open (header, TOC shape, every blob and frame
/// range, ordinals); [`Archive::get`] only decodes. `Archive` is `Send + Sync`
/// and takes no lock.
#[derive(Debug)]
pub struct Archive {
    backing: Backing,
    scheme: Scheme,
    format_version: u64,
    group_name: String,
    gfx_arch_family: String,
    gfx_arches: Vec<String>,
    toc_offset: u64,
    toc_len: u64,
    /// Sorted by key, byte-wise (AMD's `std::map` order).
    binaries: Vec<Binary>,
    index: HashMap<String, usize>,
    blob_count: u64,
}

impl Archive {
    /// Open and validate the archive at `path`, memory-mapping it.
    ///
    /// An empty file is an [`ErrorKind::Io`] error and a missing one
    /// [`ErrorKind::FileNotFound`], as in AMD's `kpack_open`.
    pub fn open(path: impl AsRef<Path>) -> Result<Archive> {
        let path = path.as_ref();
        let inner = || -> Result<Archive> {
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
        let parsed = parse_layout(backing.bytes())?;
        Ok(Archive {
            backing,
            scheme: parsed.scheme,
            format_version: parsed.format_version,
            group_name: parsed.group_name,
            gfx_arch_family: parsed.gfx_arch_family,
            gfx_arches: parsed.gfx_arches,
            toc_offset: parsed.toc_offset,
            toc_len: parsed.toc_len,
            index: parsed
                .binaries
                .iter()
                .enumerate()
                .map(|(i, b)| (b.key.clone(), i))
                .collect(),
            binaries: parsed.binaries,
            blob_count: parsed.blob_count,
        })
    }

    /// The compression scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
    /// The TOC's `format_version` (always 1 once opened).
    pub fn format_version(&self) -> u64 {
        self.format_version
    }
    /// The TOC's `group_name`.
    pub fn group_name(&self) -> &str {
        &self.group_name
    }
    /// The TOC's `gfx_arch_family`.
    pub fn gfx_arch_family(&self) -> &str {
        &self.gfx_arch_family
    }
    /// The TOC's `gfx_arches`, in file order. AMD's loader decides whether
    /// an archive serves an arch from this list alone.
    pub fn arches(&self) -> &[String] {
        &self.gfx_arches
    }
    /// Whether `arch` is listed in `gfx_arches` (exact match).
    pub fn has_arch(&self, arch: &str) -> bool {
        self.gfx_arches.iter().any(|a| a == arch)
    }
    /// Number of distinct binary keys.
    pub fn binary_count(&self) -> usize {
        self.binaries.len()
    }
    /// The `i`-th binary key in byte-wise sorted order (AMD's `kpack_get_binary`).
    pub fn binary(&self, i: usize) -> Option<&str> {
        self.binaries.get(i).map(|b| b.key.as_str())
    }
    /// Binary keys in byte-wise sorted order.
    pub fn binaries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.binaries.iter().map(|b| b.key.as_str())
    }
    /// Every entry, sorted by (key, arch).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.binaries.iter().flat_map(|b| b.entries.iter())
    }
    /// Number of entries.
    pub fn entry_count(&self) -> usize {
        self.binaries.iter().map(|b| b.entries.len()).sum()
    }
    /// The entry for `key` and `arch` (exact byte match, no normalisation).
    pub fn entry(&self, key: &str, arch: &str) -> Option<&Entry> {
        let b = &self.binaries[*self.index.get(key)?];
        b.entries.iter().find(|e| e.arch == arch)
    }
    /// Offset of the msgpack TOC.
    pub fn toc_offset(&self) -> u64 {
        self.toc_offset
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
    pub fn read(&self, entry: &Entry) -> Result<Cow<'_, [u8]>> {
        let stored = self.stored(entry)?;
        match self.scheme {
            Scheme::None => Ok(Cow::Borrowed(stored)),
            Scheme::ZstdPerKernel => decompress(stored, entry).map(Cow::Owned),
        }
    }

    fn stored(&self, entry: &Entry) -> Result<&[u8]> {
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
            "KPAK v{VERSION} file_size={} toc_offset={:#x} toc_len={}",
            self.file_size(),
            self.toc_offset,
            self.toc_len
        );
        let _ = writeln!(s, "format_version: {}", self.format_version);
        let _ = writeln!(s, "group_name: {:?}", self.group_name);
        let _ = writeln!(s, "gfx_arch_family: {:?}", self.gfx_arch_family);
        let _ = writeln!(s, "gfx_arches: {:?}", self.gfx_arches);
        let _ = writeln!(s, "compression_scheme: {:?}", self.scheme.as_str());
        let _ = writeln!(s, "blobs: {}", self.blob_count);
        for e in self.entries() {
            let _ = write!(
                s,
                "entry {:?} {:?} ordinal={} original_size={} stored={:#x}+{}",
                e.key, e.arch, e.ordinal, e.original_size, e.stored_offset, e.stored_size
            );
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

thread_local! {
    // One decompression context per thread: creating one costs more than
    // decoding a small kernel, and a shared one would need a lock.
    static DCTX: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn decompress(frame: &[u8], entry: &Entry) -> Result<Vec<u8>> {
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
    let size = usize::try_from(size)
        .map_err(|_| Error::new(ErrorKind::OutOfMemory, "kernel too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(size).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!("cannot allocate {size} bytes for kernel {:?}", entry.key),
        )
    })?;
    let got = DCTX.with(|cell| -> std::io::Result<usize> {
        let mut slot = cell.borrow_mut();
        let dctx = match &mut *slot {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        dctx.decompress_to_buffer(frame, &mut out)
    });
    let got = got.map_err(|e| fail(format!("frame {} failed to decode: {e}", entry.ordinal)))?;
    if got != size {
        return Err(fail(format!(
            "frame {} decoded to {got} bytes, TOC original_size is {size}",
            entry.ordinal
        )));
    }
    Ok(out)
}

struct Parsed {
    scheme: Scheme,
    format_version: u64,
    group_name: String,
    gfx_arch_family: String,
    gfx_arches: Vec<String>,
    toc_offset: u64,
    toc_len: u64,
    binaries: Vec<Binary>,
    blob_count: u64,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn parse_layout(bytes: &[u8]) -> Result<Parsed> {
    let len = bytes.len() as u64;
    if bytes.len() < HEADER_SIZE {
        return Err(Error::format(
            0,
            format!("file is {len} bytes, shorter than the 16-byte header"),
        ));
    }
    if bytes[0..4] != MAGIC {
        return Err(Error::format(
            0,
            format!("bad magic {:02x?}, expected \"KPAK\"", &bytes[0..4]),
        ));
    }
    let version = u32_at(bytes, 4).unwrap_or(0);
    if version != VERSION {
        return Err(Error::at(
            ErrorKind::UnsupportedVersion,
            4,
            format!("header version {version}, only 1 is supported"),
        ));
    }
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[8..16]);
    let toc_offset = u64::from_le_bytes(raw);
    if toc_offset >= len {
        return Err(Error::format(
            8,
            format!("toc_offset {toc_offset:#x} is not inside the {len}-byte file"),
        ));
    }
    if toc_offset < BLOB_START {
        return Err(Error::format(
            8,
            format!("toc_offset {toc_offset:#x} points into the 64-byte header"),
        ));
    }
    // toc_offset < len, so it fits in usize.
    let toc_bytes = &bytes[toc_offset as usize..];
    let (root, used) = msgpack::decode(toc_bytes, toc_offset).map_err(|e| {
        Error::at(
            ErrorKind::MsgpackParseFailed,
            e.offset,
            format!("TOC is not valid msgpack: {e}"),
        )
    })?;
    let root_offset = root.offset;
    let Data::Map(root_items) = root.data else {
        return Err(Error::at(
            ErrorKind::MsgpackParseFailed,
            root.offset,
            format!("TOC root is a {}, not a map", root.data.type_name()),
        ));
    };
    let root = Fields::new(&root_items, root_offset, "TOC")?;

    let fv = root.require("format_version")?;
    let format_version = as_uint(fv, "format_version")?;
    if format_version != 1 {
        return Err(Error::at(
            ErrorKind::UnsupportedVersion,
            fv.offset,
            format!("TOC format_version {format_version}, only 1 is supported"),
        ));
    }
    let group_name = as_str(root.require("group_name")?, "group_name")?.to_owned();
    let gfx_arch_family = as_str(root.require("gfx_arch_family")?, "gfx_arch_family")?.to_owned();
    let arches_v = root.require("gfx_arches")?;
    let gfx_arches = as_array(arches_v, "gfx_arches")?
        .iter()
        .map(|v| as_str(v, "gfx_arches element").map(str::to_owned))
        .collect::<Result<Vec<_>>>()?;
    let scheme = match root.get("compression_scheme") {
        // Both AMD readers default a missing scheme to "none".
        None => Scheme::None,
        Some(v) => match as_str(v, "compression_scheme")? {
            "none" => Scheme::None,
            "zstd-per-kernel" => Scheme::ZstdPerKernel,
            other => {
                return Err(Error::at(
                    ErrorKind::NotImplemented,
                    v.offset,
                    format!("unknown compression_scheme {other:?}"),
                ));
            }
        },
    };

    let blobs = match scheme {
        Scheme::None => noop_blobs(&root, toc_offset)?,
        Scheme::ZstdPerKernel => zstd_frames(&root, bytes, toc_offset)?,
    };

    let toc_v = root.require("toc")?;
    let toc = Fields::new(as_map(toc_v, "toc")?, toc_v.offset, "toc")?;
    let mut binaries = Vec::with_capacity(toc.items.len());
    for (key, arches_v) in &toc.items {
        let arch_map = Fields::new(as_map(arches_v, "toc value")?, arches_v.offset, "toc value")?;
        let mut entries = Vec::with_capacity(arch_map.items.len());
        for (arch, ev) in &arch_map.items {
            entries.push(parse_entry(key, arch, ev, &blobs, scheme)?);
        }
        entries.sort_by(|a, b| a.arch.cmp(&b.arch));
        binaries.push(Binary {
            key: (*key).to_owned(),
            entries,
        });
    }
    binaries.sort_by(|a, b| a.key.cmp(&b.key));

    Ok(Parsed {
        scheme,
        format_version,
        group_name,
        gfx_arch_family,
        gfx_arches,
        toc_offset,
        toc_len: used as u64,
        binaries,
        blob_count: blobs.len() as u64,
    })
}

/// (absolute offset, size) of each ordinal's stored bytes.
type Blobs = Vec<(u64, u64)>;

fn noop_blobs(root: &Fields<'_, '_, '_>, toc_offset: u64) -> Result<Blobs> {
    let blobs_v = root.require("blobs")?;
    let items = as_array(blobs_v, "blobs")?;
    let mut blobs = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let f = Fields::new(as_map(item, "blobs element")?, item.offset, "blobs element")?;
        let off_v = f.require("offset")?;
        let offset = as_uint(off_v, "blob offset")?;
        let size = as_uint(f.require("size")?, "blob size")?;
        let end = offset.checked_add(size);
        if offset < BLOB_START || end.is_none_or(|e| e > toc_offset) {
            return Err(Error::format(
                off_v.offset,
                format!(
                    "blobs[{i}] [{offset:#x}, +{size}) is outside the blob area [0x40, {toc_offset:#x})"
                ),
            ));
        }
        blobs.push((offset, size));
    }
    // Blobs are distinct storage; overlap means a corrupt or forged TOC.
    let mut sorted: Vec<(u64, u64, usize)> = blobs
        .iter()
        .enumerate()
        .map(|(i, &(o, s))| (o, s, i))
        .collect();
    sorted.sort_unstable();
    for w in sorted.windows(2) {
        let ((o1, s1, i1), (o2, _, i2)) = (w[0], w[1]);
        if o1 + s1 > o2 && s1 > 0 {
            return Err(Error::format(
                o2,
                format!("blobs[{i2}] at {o2:#x} overlaps blobs[{i1}] at {o1:#x}+{s1}"),
            ));
        }
    }
    Ok(blobs)
}

fn zstd_frames(root: &Fields<'_, '_, '_>, bytes: &[u8], toc_offset: u64) -> Result<Blobs> {
    let off_v = root.require("zstd_offset")?;
    let start = as_uint(off_v, "zstd_offset")?;
    let size_v = root.require("zstd_size")?;
    let size = as_uint(size_v, "zstd_size")?;
    if size > MAX_ZSTD_BLOB {
        return Err(Error::format(
            size_v.offset,
            format!("zstd_size {size} exceeds 4 GiB"),
        ));
    }
    let end = start.checked_add(size);
    if start < BLOB_START || end.is_none_or(|e| e > toc_offset) {
        return Err(Error::format(
            off_v.offset,
            format!(
                "zstd blob [{start:#x}, +{size}) is outside the blob area [0x40, {toc_offset:#x})"
            ),
        ));
    }
    if size < 4 {
        return Err(Error::format(
            start,
            format!("zstd blob of {size} bytes has no frame count"),
        ));
    }
    // In range of the file, so these fit in usize.
    let (start_u, end_u) = (start as usize, (start + size) as usize);
    let count = u64::from(u32_at(bytes, start_u).unwrap_or(0));
    if count > MAX_FRAMES {
        return Err(Error::format(
            start,
            format!("zstd blob announces {count} frames, more than {MAX_FRAMES}"),
        ));
    }
    // Each frame needs at least its 4-byte size word.
    if count.saturating_mul(4) > size - 4 {
        return Err(Error::format(
            start,
            format!("zstd blob of {size} bytes cannot hold {count} frames"),
        ));
    }
    let mut frames = Vec::with_capacity(count as usize);
    let mut pos = start_u + 4;
    for i in 0..count {
        let word = pos;
        let len = match u32_at(bytes, pos) {
            Some(n) if pos + 4 <= end_u => n as usize,
            _ => {
                return Err(Error::format(
                    word as u64,
                    format!("size word of frame {i} runs past the zstd blob end {end_u:#x}"),
                ));
            }
        };
        pos += 4;
        if len > end_u - pos {
            return Err(Error::format(
                word as u64,
                format!(
                    "frame {i} of {len} bytes at {pos:#x} runs past the zstd blob end {end_u:#x}"
                ),
            ));
        }
        frames.push((pos as u64, len as u64));
        pos += len;
    }
    if pos != end_u {
        return Err(Error::format(
            pos as u64,
            format!(
                "{} bytes after the last of {count} frames inside zstd_size",
                end_u - pos
            ),
        ));
    }
    Ok(frames)
}

fn parse_entry(
    key: &str,
    arch: &str,
    v: &Value<'_>,
    blobs: &Blobs,
    scheme: Scheme,
) -> Result<Entry> {
    let f = Fields::new(as_map(v, "toc entry")?, v.offset, "toc entry")?;
    let what = || format!("toc[{key:?}][{arch:?}]");
    if let Some(t) = f.get("type") {
        as_str(t, "entry type")?;
    }
    let ord_v = f.require("ordinal")?;
    let ordinal = as_uint(ord_v, "ordinal")?;
    let original_size = as_uint(f.require("original_size")?, "original_size")?;
    let Some(&(stored_offset, stored_size)) =
        usize::try_from(ordinal).ok().and_then(|i| blobs.get(i))
    else {
        return Err(Error::format(
            ord_v.offset,
            format!(
                "{}: ordinal {ordinal} but the archive has {} blobs",
                what(),
                blobs.len()
            ),
        ));
    };
    if scheme == Scheme::None && stored_size != original_size {
        return Err(Error::format(
            ord_v.offset,
            format!(
                "{}: blob {ordinal} is {stored_size} bytes but original_size is {original_size}",
                what()
            ),
        ));
    }
    let mut metadata = Vec::new();
    if let Some(m) = f.get("metadata") {
        let mf = Fields::new(as_map(m, "metadata")?, m.offset, "metadata")?;
        for (k, mv) in &mf.items {
            metadata.push(((*k).to_owned(), as_str(mv, "metadata value")?.to_owned()));
        }
    }
    Ok(Entry {
        key: key.to_owned(),
        arch: arch.to_owned(),
        ordinal,
        original_size,
        stored_offset,
        stored_size,
        metadata,
    })
}

/// A msgpack map with string keys, checked for duplicates.
struct Fields<'v, 'a, 'w> {
    items: Vec<(&'a str, &'v Value<'a>)>,
    offset: u64,
    what: &'w str,
}

impl<'v, 'a, 'w> Fields<'v, 'a, 'w> {
    fn new(items: &'v [(Value<'a>, Value<'a>)], offset: u64, what: &'w str) -> Result<Self> {
        let mut out: Vec<(&'a str, &'v Value<'a>)> = Vec::with_capacity(items.len());
        for (k, v) in items {
            let key = match k.data {
                Data::Str(_) => as_str(k, "map key")?,
                _ => as_str(k, &format!("key in {what}"))?,
            };
            if items.len() < 64 && out.iter().any(|(seen, _)| *seen == key) {
                return Err(Error::format(
                    k.offset,
                    format!("duplicate key {key:?} in {what}"),
                ));
            }
            out.push((key, v));
        }
        if out.len() >= 64 {
            // Large maps (the TOC's binaries): check duplicates by sorting.
            let mut keys: Vec<(&str, u64)> = items
                .iter()
                .zip(&out)
                .map(|((k, _), (s, _))| (*s, k.offset))
                .collect();
            keys.sort_unstable();
            if let Some(w) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Error::format(
                    w[1].1,
                    format!("duplicate key {:?} in {what}", w[1].0),
                ));
            }
        }
        Ok(Fields {
            items: out,
            offset,
            what,
        })
    }

    fn get(&self, key: &str) -> Option<&'v Value<'a>> {
        self.items.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn require(&self, key: &str) -> Result<&'v Value<'a>> {
        self.get(key)
            .ok_or_else(|| Error::format(self.offset, format!("{} has no {key:?} key", self.what)))
    }
}

fn wrong_type(v: &Value<'_>, what: &str, want: &str) -> Error {
    Error::format(
        v.offset,
        format!(
            "{what} is a msgpack {}, expected {want}",
            v.data.type_name()
        ),
    )
}

fn as_str<'a>(v: &Value<'a>, what: &str) -> Result<&'a str> {
    match v.data {
        Data::Str(s) => std::str::from_utf8(s)
            .map_err(|_| Error::format(v.offset, format!("{what} is not valid UTF-8"))),
        _ => Err(wrong_type(v, what, "str")),
    }
}

fn as_uint(v: &Value<'_>, what: &str) -> Result<u64> {
    match v.data {
        Data::UInt(n) => Ok(n),
        _ => Err(wrong_type(v, what, "a non-negative int")),
    }
}

fn as_array<'v, 'a>(v: &'v Value<'a>, what: &str) -> Result<&'v [Value<'a>]> {
    match &v.data {
        Data::Array(items) => Ok(items),
        _ => Err(wrong_type(v, what, "array")),
    }
}

fn as_map<'v, 'a>(v: &'v Value<'a>, what: &str) -> Result<&'v [(Value<'a>, Value<'a>)]> {
    match &v.data {
        Data::Map(items) => Ok(items),
        _ => Err(wrong_type(v, what, "map")),
    }
}
