//! Reading LLVM `OffloadBinary` data: the contents of a `.llvm.offloading`
//! section, one or more binaries back to back, each starting at a multiple
//! of [`ALIGNMENT`] from the start of the section.
//!
//! Layout (little-endian; `LLVM:llvm/include/llvm/Object/OffloadBinary.h`):
//!
//! | version | header | 4th header field | string entry |
//! |---|---|---|---|
//! | 1 (clang 19, 20) | 32 bytes | size of the one entry (40) | `{key, value}` offsets, NUL-terminated |
//! | 2 | 32 bytes | entry count | `{key, value, value_size}` |
//! | 3 | 40 bytes: `+ u64 inflated_size` | entry count | as v2 |
//!
//! A v3 binary with `inflated_size != 0` is compressed: everything after
//! `entries_offset` is one zstd frame (sniffed by magic) or else zlib.
//! All offsets inside a binary are from the binary's first byte (of the
//! inflated binary, when compressed).

use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};

/// The first four bytes of every OffloadBinary (`0x10FF10AD` big-endian).
pub const MAGIC: [u8; 4] = [0x10, 0xFF, 0x10, 0xAD];
/// Binaries in one section start at multiples of this, counted from the
/// start of the section.
pub const ALIGNMENT: u64 = 8;
/// The newest version this crate reads and writes.
pub const LATEST_VERSION: u32 = 3;
/// ELF section type of `.llvm.offloading`.
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;
/// The usual name of the section.
pub const SECTION_NAME: &str = ".llvm.offloading";

/// Size of one entry record.
pub(crate) const ENTRY_SIZE: u64 = 40;
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Header size of a version.
pub(crate) fn header_size(version: u32) -> u64 {
    if version >= 3 { 40 } else { 32 }
}

/// Size of one string-map record of a version.
pub(crate) fn string_entry_size(version: u32) -> u64 {
    if version == 1 { 16 } else { 24 }
}

/// What an image holds (`ImageKind`). Unknown values are kept as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageKind(pub u16);

impl ImageKind {
    /// No image.
    pub const NONE: ImageKind = ImageKind(0);
    /// A native object (for AMDGPU: an ELF code object).
    pub const OBJECT: ImageKind = ImageKind(1);
    /// LLVM bitcode (what `-fgpu-rdc --offload-new-driver -c` stores).
    pub const BITCODE: ImageKind = ImageKind(2);
    /// A CUDA cubin.
    pub const CUBIN: ImageKind = ImageKind(3);
    /// A CUDA fatbinary.
    pub const FATBINARY: ImageKind = ImageKind(4);
    /// PTX text.
    pub const PTX: ImageKind = ImageKind(5);
    /// SPIR-V.
    pub const SPIRV: ImageKind = ImageKind(6);

    /// A name for reports: `bitcode`, `object`, ..., or `unknown-<n>`.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            ImageKind::NONE => "none",
            ImageKind::OBJECT => "object",
            ImageKind::BITCODE => "bitcode",
            ImageKind::CUBIN => "cubin",
            ImageKind::FATBINARY => "fatbinary",
            ImageKind::PTX => "ptx",
            ImageKind::SPIRV => "spirv",
            ImageKind(n) => return Cow::Owned(format!("unknown-{n}")),
        })
    }

    /// The file extension LLVM uses for the kind (`getImageKindName`:
    /// `bc`, `o`, `cubin`, `fatbin`, `s`, `spv`), `bin` otherwise.
    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::OBJECT => "o",
            ImageKind::BITCODE => "bc",
            ImageKind::CUBIN => "cubin",
            ImageKind::FATBINARY => "fatbin",
            ImageKind::PTX => "s",
            ImageKind::SPIRV => "spv",
            _ => "bin",
        }
    }

    /// What `llvm-objdump --offloading` prints as `kind`.
    pub fn objdump_name(self) -> &'static str {
        match self {
            ImageKind::OBJECT => "elf",
            ImageKind::BITCODE => "llvm ir",
            ImageKind::CUBIN => "cubin",
            ImageKind::FATBINARY => "fatbinary",
            ImageKind::PTX => "ptx",
            _ => "<none>",
        }
    }
}

impl serde::Serialize for ImageKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// Which programming model produced an image (`OffloadKind`). The raw
/// value is kept for writing back: LLVM up to 20 numbered the kinds
/// (1 OpenMP, 2 CUDA, 3 HIP), LLVM 21+ made them bits (1, 2, 4 HIP, 8 SYCL).
/// The two agree on 1 and 2, and 3 and 4 are each valid in only one of
/// them, so [`name`](OffloadKind::name) decodes either without the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffloadKind(pub u16);

impl OffloadKind {
    /// HIP as clang 19 and 20 write it.
    pub const HIP_V1: OffloadKind = OffloadKind(3);
    /// HIP as LLVM 21 and later write it.
    pub const HIP: OffloadKind = OffloadKind(4);

    /// `openmp`, `cuda`, `hip`, `sycl`, `none`, or `unknown-<n>`.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self.0 {
            0 => "none",
            1 => "openmp",
            2 => "cuda",
            3 | 4 => "hip",
            8 => "sycl",
            n => return Cow::Owned(format!("unknown-{n}")),
        })
    }
}

impl serde::Serialize for OffloadKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// How a compressed (v3) binary's body is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionFormat {
    /// A zstd frame.
    Zstd,
    /// RFC 1950 zlib.
    Zlib,
}

/// How to read.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Refuse compressed binaries that together declare more inflated
    /// bytes than this: one reader's binaries, or one ELF file's sections
    /// (the declared sizes are untrusted; nothing is allocated for them up
    /// front either way).
    pub max_inflated_size: u64,
    /// Check the MD5 of compressed clang offload bundles in `.hip_fatbin`.
    pub verify_hash: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_inflated_size: 4 << 30,
            verify_hash: true,
        }
    }
}

/// A key and its value in an entry's string map, as ranges into the body.
type StringPair = (Range<usize>, Range<usize>);

/// The bytes a binary's entries point into: the caller's data, or the one
/// inflated buffer every entry of a compressed binary shares (entries may
/// overlap; copying each would multiply a small input).
#[derive(Debug, Clone)]
enum Body<'data> {
    Borrowed(&'data [u8]),
    Inflated(Arc<Vec<u8>>),
}

impl Body<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Borrowed(b) => b,
            Body::Inflated(v) => v,
        }
    }
}

/// One image of a binary, with its metadata.
#[derive(Debug, Clone)]
pub struct Entry<'data> {
    image_kind: ImageKind,
    offload_kind: OffloadKind,
    flags: u32,
    body: Body<'data>,
    strings: Vec<StringPair>,
    image: Range<usize>,
    /// Offset of the body in the data given to [`Reader`] (not compressed).
    base: Option<u64>,
}

impl<'data> Entry<'data> {
    /// What the image holds.
    pub fn image_kind(&self) -> ImageKind {
        self.image_kind
    }

    /// Who produced it.
    pub fn offload_kind(&self) -> OffloadKind {
        self.offload_kind
    }

    /// The flags word (`OIF_Metadata = 1`: metadata only, no image).
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// The string map in file order, duplicates included.
    pub fn strings(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let body = self.body.bytes();
        self.strings
            .iter()
            .map(move |(k, v)| (&body[k.clone()], &body[v.clone()]))
    }

    /// The value of `key` as UTF-8; the last one wins, as in LLVM's map.
    pub fn string(&self, key: &str) -> Option<&str> {
        let body = self.body.bytes();
        self.strings
            .iter()
            .rev()
            .find(|(k, _)| &body[k.clone()] == key.as_bytes())
            .and_then(|(_, v)| std::str::from_utf8(&body[v.clone()]).ok())
    }

    /// The `triple` string, e.g. `amdgcn-amd-amdhsa`.
    pub fn triple(&self) -> Option<&str> {
        self.string("triple")
    }

    /// The `arch` string: for AMDGPU a target id such as `gfx90a:xnack+`.
    pub fn arch(&self) -> Option<&str> {
        self.string("arch")
    }

    /// The image bytes.
    pub fn image(&self) -> &[u8] {
        &self.body.bytes()[self.image.clone()]
    }

    /// Where the image is in the data given to [`Reader`], or `None` when
    /// the binary is compressed.
    pub fn image_range(&self) -> Option<Range<u64>> {
        self.base
            .map(|b| b + self.image.start as u64..b + self.image.end as u64)
    }
}

/// One OffloadBinary: a header and its entries.
#[derive(Debug, Clone)]
pub struct Binary<'data> {
    offset: u64,
    version: u32,
    size: u64,
    compression: Option<CompressionFormat>,
    inflated_size: u64,
    entries: Vec<Entry<'data>>,
}

impl<'data> Binary<'data> {
    /// Offset of the binary in the data given to [`Reader`].
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Format version (1, 2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Bytes the binary takes in the section, padding to the next binary
    /// not included.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The compression of a compressed v3 binary.
    pub fn compression(&self) -> Option<CompressionFormat> {
        self.compression
    }

    /// Declared size after inflation (0 unless compressed).
    pub fn inflated_size(&self) -> u64 {
        self.inflated_size
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &[Entry<'data>] {
        &self.entries
    }
}

/// A reader over the contents of one `.llvm.offloading` section (or any
/// buffer of back-to-back OffloadBinaries).
#[derive(Debug, Clone, Copy)]
pub struct Reader<'data> {
    data: &'data [u8],
    options: ReadOptions,
}

impl<'data> Reader<'data> {
    /// A reader with [`ReadOptions::default`].
    pub fn new(data: &'data [u8]) -> Reader<'data> {
        Reader::with_options(data, ReadOptions::default())
    }

    /// A reader with `options`.
    pub fn with_options(data: &'data [u8], options: ReadOptions) -> Reader<'data> {
        Reader { data, options }
    }

    /// The binaries, in order; iteration stops after the first error.
    pub fn binaries(&self) -> Binaries<'data> {
        Binaries {
            data: self.data,
            options: self.options,
            pos: 0,
            failed: false,
        }
    }

    /// Every binary, or the first error.
    pub fn read_all(&self) -> Result<Vec<Binary<'data>>, Error> {
        self.binaries().collect()
    }
}

/// Iterator over the binaries of a [`Reader`].
#[derive(Debug, Clone)]
pub struct Binaries<'data> {
    data: &'data [u8],
    options: ReadOptions,
    pos: u64,
    failed: bool,
}

impl<'data> Iterator for Binaries<'data> {
    type Item = Result<Binary<'data>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() as u64 {
            return None;
        }
        match parse_binary(self.data, self.pos, &self.options) {
            Ok(b) => {
                // LLVM steps by the declared size rounded up to the
                // alignment; a last binary may lack its padding.
                self.pos = align_up(self.pos + b.size);
                // The inflation limit is for all binaries together.
                self.options.max_inflated_size = self
                    .options
                    .max_inflated_size
                    .saturating_sub(b.inflated_size);
                Some(Ok(b))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(ALIGNMENT).saturating_mul(ALIGNMENT)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut v = [0u8; 2];
    v.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(v)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(v)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

/// The fields of a binary's header.
struct Header {
    version: u32,
    size: u64,
    entries_offset: u64,
    fourth: u64,
    inflated_size: u64,
}

/// Read and check the header at the start of `rest` (`at` makes errors).
fn read_header(rest: &[u8], at: &dyn Fn(ErrorKind, String) -> Error) -> Result<Header, Error> {
    let avail = rest.len() as u64;
    if rest.len() < 8 || rest[..4] != MAGIC {
        if rest.len() >= 4 && rest[..4] != MAGIC {
            return Err(at(
                ErrorKind::BadMagic,
                format!(
                    "magic is {:02x?}, expected {MAGIC:02x?} (0x10FF10AD)",
                    &rest[..4]
                ),
            ));
        }
        return Err(at(
            ErrorKind::Truncated,
            format!("{avail:#x} bytes left, a header needs at least 0x20"),
        ));
    }
    let version = u32_at(rest, 4);
    if version == 0 || version > LATEST_VERSION {
        return Err(at(
            ErrorKind::UnsupportedVersion,
            format!("version {version}; versions 1 to {LATEST_VERSION} are known"),
        ));
    }
    let hsize = header_size(version);
    if avail < hsize {
        return Err(at(
            ErrorKind::Truncated,
            format!("{avail:#x} bytes left, a version {version} header needs {hsize:#x}"),
        ));
    }
    let size = u64_at(rest, 8);
    if size < hsize || size > avail {
        return Err(at(
            if size > avail {
                ErrorKind::Truncated
            } else {
                ErrorKind::BadRange
            },
            format!(
                "size {size:#x} is not between the header size {hsize:#x} and the {avail:#x} bytes left"
            ),
        ));
    }
    Ok(Header {
        version,
        size,
        entries_offset: u64_at(rest, 16),
        fourth: u64_at(rest, 24),
        inflated_size: if version >= 3 { u64_at(rest, 32) } else { 0 },
    })
}

/// Parse the binary at `base` in `data`.
fn parse_binary<'data>(
    data: &'data [u8],
    base: u64,
    options: &ReadOptions,
) -> Result<Binary<'data>, Error> {
    let at = |kind, msg: String| Error::new(kind, format!("offload binary at {base:#x}: {msg}"));
    // `base < data.len()` holds: the iterator checks it.
    let rest = &data[base as usize..];
    let h = read_header(rest, &at)?;
    let on_disk = &rest[..h.size as usize];
    let mut binary = Binary {
        offset: base,
        version: h.version,
        size: h.size,
        compression: None,
        inflated_size: h.inflated_size,
        entries: Vec::new(),
    };
    if h.inflated_size != 0 {
        let (format, inflated) = inflate(on_disk, h.entries_offset, h.inflated_size, options, &at)?;
        let raw = parse_entries(&inflated, h.version, h.entries_offset, h.fourth)
            .map_err(|(k, m)| at(k, format!("(inflated) {m}")))?;
        let body = Body::Inflated(Arc::new(inflated));
        binary.compression = Some(format);
        binary.entries = raw
            .into_iter()
            .map(|r| r.entry(body.clone(), None))
            .collect();
        return Ok(binary);
    }
    let raw =
        parse_entries(on_disk, h.version, h.entries_offset, h.fourth).map_err(|(k, m)| at(k, m))?;
    binary.entries = raw
        .into_iter()
        .map(|r| r.entry(Body::Borrowed(on_disk), Some(base)))
        .collect();
    Ok(binary)
}

/// Inflate a compressed v3 binary: the first `entries_offset` bytes as
/// they are, then the inflated body; checked to be `inflated_size` long.
/// `at` makes the error, naming the binary.
fn inflate(
    on_disk: &[u8],
    entries_offset: u64,
    inflated_size: u64,
    options: &ReadOptions,
    at: &dyn Fn(ErrorKind, String) -> Error,
) -> Result<(CompressionFormat, Vec<u8>), Error> {
    let bad = |m: String| at(ErrorKind::Decompress, m);
    let size = on_disk.len() as u64;
    if entries_offset < header_size(3) || entries_offset > size {
        return Err(bad(format!(
            "compressed body offset {entries_offset:#x} is not between the header end 0x28 and the size {size:#x}"
        )));
    }
    if inflated_size < entries_offset {
        return Err(bad(format!(
            "inflated size {inflated_size:#x} is smaller than the body offset {entries_offset:#x}"
        )));
    }
    if inflated_size > options.max_inflated_size {
        return Err(bad(format!(
            "inflated size {inflated_size:#x} is over the limit: {:#x} bytes of inflation are left for the section",
            options.max_inflated_size
        )));
    }
    let body = &on_disk[entries_offset as usize..];
    let want = inflated_size - entries_offset;
    let mut out = on_disk[..entries_offset as usize].to_vec();
    // One byte more than declared, to notice a body that inflates longer.
    let limit = want.saturating_add(1);
    let format = if body.starts_with(&ZSTD_MAGIC) {
        CompressionFormat::Zstd
    } else {
        CompressionFormat::Zlib
    };
    let result = match format {
        CompressionFormat::Zstd => zstd::stream::read::Decoder::with_buffer(body)
            .and_then(|d| d.take(limit).read_to_end(&mut out)),
        CompressionFormat::Zlib => flate2::read::ZlibDecoder::new(body)
            .take(limit)
            .read_to_end(&mut out),
    };
    result.map_err(|e| {
        bad(format!(
            "{format:?} body at {entries_offset:#x} does not inflate"
        ))
        .caused_by(e)
    })?;
    let got = out.len() as u64 - entries_offset;
    if got != want {
        return Err(bad(format!(
            "{format:?} body at {entries_offset:#x} inflates to {got:#x} bytes{}, the header declares {want:#x}",
            if got > want { " or more" } else { "" }
        )));
    }
    Ok((format, out))
}

/// An entry as ranges into its binary.
struct RawEntry {
    image_kind: u16,
    offload_kind: u16,
    flags: u32,
    strings: Vec<StringPair>,
    image: Range<usize>,
}

impl RawEntry {
    fn entry<'d>(self, body: Body<'d>, base: Option<u64>) -> Entry<'d> {
        Entry {
            image_kind: ImageKind(self.image_kind),
            offload_kind: OffloadKind(self.offload_kind),
            flags: self.flags,
            body,
            strings: self.strings,
            image: self.image,
            base,
        }
    }
}

type ParseError = (ErrorKind, String);

/// `start..start+len` if it lies within `0..size`.
fn range_in(start: u64, len: u64, size: u64) -> Option<Range<usize>> {
    let end = start.checked_add(len)?;
    (end <= size).then_some(start as usize..end as usize)
}

/// NUL-terminated strings at many offsets of one buffer, found in one
/// pass: the offsets are visited in ascending order and each scan resumes
/// where the one before stopped, so every byte is read at most once
/// however many strings start in (or share) one long run.
struct CStrings {
    /// Distinct offsets, ascending.
    starts: Vec<u64>,
    /// The NUL ending the string at the same position of `starts`.
    ends: Vec<Option<usize>>,
    /// Bytes examined, at most the buffer's length.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the tests check that no byte is read twice")
    )]
    scanned: usize,
}

impl CStrings {
    fn find(bin: &[u8], mut starts: Vec<u64>) -> CStrings {
        starts.sort_unstable();
        starts.dedup();
        let mut ends = Vec::with_capacity(starts.len());
        // The last NUL found, and how far the buffer has been scanned:
        // `last_nul + 1 .. done` holds no NUL.
        let (mut last_nul, mut done) = (None::<usize>, 0usize);
        let mut scanned = 0;
        for &off in &starts {
            let end = match usize::try_from(off).ok().filter(|&o| o < bin.len()) {
                None => None,
                Some(o) if last_nul.is_some_and(|n| n >= o) => last_nul,
                Some(o) => {
                    let from = o.max(done);
                    let found = bin[from..].iter().position(|&b| b == 0);
                    scanned += found.map_or(bin.len() - from, |i| i + 1);
                    done = found.map_or(bin.len(), |i| from + i + 1);
                    last_nul = found.map(|i| from + i).or(last_nul);
                    found.map(|i| from + i)
                }
            };
            ends.push(end);
        }
        CStrings {
            starts,
            ends,
            scanned,
        }
    }

    /// The string at `off`, without its NUL, if one ends in the buffer.
    fn get(&self, off: u64) -> Option<Range<usize>> {
        let i = self.starts.binary_search(&off).ok()?;
        Some(off as usize..self.ends[i]?)
    }
}

/// How many entries a binary's header declares.
fn entry_count(version: u32, fourth: u64) -> Result<u64, ParseError> {
    if version != 1 {
        return Ok(fourth);
    }
    // v1 has one entry; the field is its size.
    if fourth != ENTRY_SIZE {
        return Err((
            ErrorKind::BadRange,
            format!("version 1 entry size is {fourth:#x}, expected {ENTRY_SIZE:#x}"),
        ));
    }
    Ok(1)
}

/// One entry record's fields, its string map located but not yet read.
struct Record {
    image_kind: u16,
    offload_kind: u16,
    flags: u32,
    map: Range<usize>,
    image: Range<usize>,
}

/// The entries of an (uncompressed or inflated) binary `bin`.
fn parse_entries(
    bin: &[u8],
    version: u32,
    entries_offset: u64,
    fourth: u64,
) -> Result<Vec<RawEntry>, ParseError> {
    let size = bin.len() as u64;
    let count = entry_count(version, fourth)?;
    let table = count
        .checked_mul(ENTRY_SIZE)
        .and_then(|len| range_in(entries_offset, len, size))
        .ok_or_else(|| {
            (
                ErrorKind::BadRange,
                format!(
                    "{count} entries at {entries_offset:#x} do not fit in the binary's {size:#x} bytes"
                ),
            )
        })?;
    // `count * 40` fits in `bin`, so this allocation is bounded by the input.
    let mut records = Vec::with_capacity(count as usize);
    let mut images = 0u64;
    for (i, rec) in bin[table].chunks_exact(ENTRY_SIZE as usize).enumerate() {
        let here = entries_offset + i as u64 * ENTRY_SIZE;
        let r = parse_record(rec, version, size)
            .map_err(|(k, m)| (k, format!("entry {i} (at {here:#x}): {m}")))?;
        // Images are copies of their own: together they fit in the binary.
        // Overlapping ones would let every reader of the entries (extract,
        // prune) multiply a small input without bound.
        images += r.image.len() as u64;
        if images > size {
            return Err((
                ErrorKind::BadRange,
                format!(
                    "entry {i} (at {here:#x}): the images of entries 0 to {i} total {images:#x} bytes, more than the binary's {size:#x} (they overlap)"
                ),
            ));
        }
        records.push(r);
    }
    let strings = CStrings::find(bin, string_offsets(bin, version, &records));
    records
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let here = entries_offset + i as u64 * ENTRY_SIZE;
            read_strings(bin, version, &r.map, &strings)
                .map(|strings| RawEntry {
                    image_kind: r.image_kind,
                    offload_kind: r.offload_kind,
                    flags: r.flags,
                    strings,
                    image: r.image,
                })
                .map_err(|(k, m)| (k, format!("entry {i} (at {here:#x}): {m}")))
        })
        .collect()
}

/// The fields of the 40-byte entry record `rec` of a binary of `size` bytes.
fn parse_record(rec: &[u8], version: u32, size: u64) -> Result<Record, ParseError> {
    let sentry = string_entry_size(version);
    let string_offset = u64_at(rec, 8);
    let num_strings = u64_at(rec, 16);
    let image_offset = u64_at(rec, 24);
    let image_size = u64_at(rec, 32);
    let map = num_strings
        .checked_mul(sentry)
        .and_then(|len| range_in(string_offset, len, size))
        .ok_or_else(|| {
            (
                ErrorKind::BadRange,
                format!(
                    "{num_strings} strings at {string_offset:#x} do not fit in {size:#x} bytes"
                ),
            )
        })?;
    let image = range_in(image_offset, image_size, size).ok_or_else(|| {
        (
            ErrorKind::BadRange,
            format!(
                "image {image_offset:#x}+{image_size:#x} runs past the binary's {size:#x} bytes"
            ),
        )
    })?;
    Ok(Record {
        image_kind: u16_at(rec, 0),
        offload_kind: u16_at(rec, 2),
        flags: u32_at(rec, 4),
        map,
        image,
    })
}

/// Every offset at which a NUL-terminated string starts: each key, and
/// in version 1 each value.
fn string_offsets(bin: &[u8], version: u32, records: &[Record]) -> Vec<u64> {
    let sentry = string_entry_size(version) as usize;
    let mut out = Vec::new();
    for r in records {
        for s in bin[r.map.clone()].chunks_exact(sentry) {
            out.push(u64_at(s, 0));
            if version == 1 {
                out.push(u64_at(s, 8));
            }
        }
    }
    out
}

/// The string map at `map` in `bin`, C strings taken from `cstrings`.
fn read_strings(
    bin: &[u8],
    version: u32,
    map: &Range<usize>,
    cstrings: &CStrings,
) -> Result<Vec<StringPair>, ParseError> {
    let size = bin.len() as u64;
    let sentry = string_entry_size(version);
    let mut strings = Vec::with_capacity(map.len() / sentry as usize);
    for (j, s) in bin[map.clone()].chunks_exact(sentry as usize).enumerate() {
        let at = map.start as u64 + j as u64 * sentry;
        let key_off = u64_at(s, 0);
        let val_off = u64_at(s, 8);
        let key = cstrings.get(key_off).ok_or_else(|| {
            (
                ErrorKind::BadRange,
                format!("string {j} (at {at:#x}): key at {key_off:#x} is not a NUL-terminated string in the binary"),
            )
        })?;
        let value = if version == 1 {
            cstrings.get(val_off)
        } else {
            range_in(val_off, u64_at(s, 16), size)
        }
        .ok_or_else(|| {
            (
                ErrorKind::BadRange,
                format!("string {j} (at {at:#x}): value at {val_off:#x} runs past the binary's {size:#x} bytes"),
            )
        })?;
        strings.push((key, value));
    }
    Ok(strings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_kind_names_both_numberings_of_hip() {
        assert_eq!(OffloadKind::HIP_V1.name(), "hip");
        assert_eq!(OffloadKind::HIP.name(), "hip");
        assert_eq!(OffloadKind(16).name(), "unknown-16");
    }

    #[test]
    fn rejects_wrong_magic_with_its_offset() {
        let e = Reader::new(&[0u8; 40]).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadMagic);
        assert!(e.to_string().starts_with("offload binary at 0x0:"), "{e}");
    }

    #[test]
    fn rejects_unknown_version() {
        let mut d = [0u8; 40];
        d[..4].copy_from_slice(&MAGIC);
        d[4] = 4;
        let e = Reader::new(&d).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnsupportedVersion);
    }

    #[test]
    fn rejects_short_header() {
        let mut d = [0u8; 20];
        d[..4].copy_from_slice(&MAGIC);
        d[4] = 1;
        let e = Reader::new(&d).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Truncated);
    }

    #[test]
    fn empty_input_has_no_binaries() {
        assert!(Reader::new(&[]).read_all().unwrap().is_empty());
    }

    /// An inflated v3 binary whose entries have no strings and the given
    /// image ranges (offsets from the binary's start) over a zeroed body
    /// of `body` bytes after the entry table.
    fn inflated_v3(images: &[(u64, u64)], body: usize) -> Vec<u8> {
        let table = 40 + images.len() * 40;
        let mut b = vec![0u8; table + body];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&3u32.to_le_bytes());
        let size = b.len() as u64;
        b[8..16].copy_from_slice(&size.to_le_bytes());
        b[16..24].copy_from_slice(&40u64.to_le_bytes());
        b[24..32].copy_from_slice(&(images.len() as u64).to_le_bytes());
        for (i, &(off, len)) in images.iter().enumerate() {
            let rec = &mut b[40 + i * 40..80 + i * 40];
            rec[..2].copy_from_slice(&1u16.to_le_bytes());
            rec[2..4].copy_from_slice(&4u16.to_le_bytes());
            rec[8..16].copy_from_slice(&(table as u64).to_le_bytes());
            rec[24..32].copy_from_slice(&off.to_le_bytes());
            rec[32..40].copy_from_slice(&len.to_le_bytes());
        }
        b
    }

    /// `inflated` compressed the v3 way: the header as it is, the rest one
    /// zstd frame; padded to the alignment.
    fn compress_v3(inflated: &[u8]) -> Vec<u8> {
        let mut out = inflated[..40].to_vec();
        out.extend(zstd::bulk::compress(&inflated[40..], 19).unwrap());
        let size = out.len() as u64;
        out[8..16].copy_from_slice(&size.to_le_bytes());
        out[32..40].copy_from_slice(&(inflated.len() as u64).to_le_bytes());
        out.resize(align_up(size) as usize, 0);
        out
    }

    #[test]
    fn refuses_entries_whose_images_overlap() {
        // 40 entries over one 1 MiB body: a few KiB that every reader of
        // the entries would turn into 40 MiB.
        let mib = 1 << 20;
        let body_at = 40 + 40 * 40;
        let data = compress_v3(&inflated_v3(&[(body_at, mib); 40], mib as usize));
        assert!(data.len() < 8 << 10, "{}", data.len());
        let e = Reader::new(&data).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadRange);
        assert!(e.to_string().contains("overlap"), "{e}");
        // Uncompressed the same.
        let plain = inflated_v3(&[(40 + 2 * 40, mib); 2], mib as usize);
        let e = Reader::new(&plain).read_all().unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
    }

    #[test]
    fn entries_of_a_compressed_binary_share_its_inflated_body() {
        let body_at = 40 + 2 * 40;
        let data = compress_v3(&inflated_v3(&[(body_at, 16), (body_at + 16, 16)], 32));
        let bins = Reader::new(&data).read_all().unwrap();
        let [a, b] = bins[0].entries() else {
            panic!("two entries")
        };
        assert_eq!(a.image().as_ptr().wrapping_add(16), b.image().as_ptr());
        assert_eq!((a.image_range(), b.image().len()), (None, 16));
    }

    #[test]
    fn a_body_that_does_not_inflate_keeps_the_decoder_error_as_its_source() {
        let mut bin = compress_v3(&inflated_v3(&[], 0x1000));
        // The zstd magic stays, the frame header after it is garbage.
        bin[44..52].fill(0xff);
        let e = Reader::new(&bin).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decompress);
        assert_eq!(
            e.to_string(),
            "offload binary at 0x0: Zstd body at 0x28 does not inflate"
        );
        let cause = std::error::Error::source(&e).expect("the decoder's error is the source");
        assert!(cause.downcast_ref::<std::io::Error>().is_some(), "{cause}");
    }

    #[test]
    fn the_inflation_limit_is_for_all_binaries_together() {
        let one = compress_v3(&inflated_v3(&[], 0x1000));
        let two = [one.clone(), one.clone()].concat();
        let options = ReadOptions {
            max_inflated_size: 0x1800,
            ..ReadOptions::default()
        };
        assert_eq!(
            Reader::with_options(&one, options)
                .read_all()
                .unwrap()
                .len(),
            1
        );
        let e = Reader::with_options(&two, options).read_all().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decompress);
        assert!(
            e.to_string().contains("0x7d8 bytes of inflation are left"),
            "{e}"
        );
    }

    #[test]
    fn c_strings_read_every_byte_at_most_once() {
        let mut bin = vec![b'x'; 1 << 16];
        bin[1000] = 0;
        *bin.last_mut().unwrap() = 0;
        let offsets: Vec<u64> = (0..bin.len() as u64).rev().chain([0, 1 << 20]).collect();
        let found = CStrings::find(&bin, offsets);
        assert!(found.scanned <= bin.len(), "{}", found.scanned);
        assert_eq!(found.get(0), Some(0..1000));
        assert_eq!(found.get(999), Some(999..1000));
        assert_eq!(found.get(1000), Some(1000..1000));
        assert_eq!(found.get(1001), Some(1001..bin.len() - 1));
        assert_eq!(found.get(1 << 20), None);
        assert_eq!(found.get(5), Some(5..1000));
        let none = CStrings::find(b"abc", vec![0, 1, 2, 3]);
        assert_eq!((none.get(0), none.get(2), none.get(3)), (None, None, None));
    }

    #[test]
    fn version_1_strings_sharing_one_long_run_are_read_in_one_pass() {
        // One v1 entry with 60,000 keys and values, each starting somewhere
        // in one 2 MiB run without a NUL until its end: scanning each from
        // its offset would read ~120 GB.
        let n = 60_000u64;
        let (map_at, run_at, run) = (72u64, 72 + 16 * n, 2u64 << 20);
        let size = run_at + run;
        let mut b = vec![b'x'; size as usize];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[8..16].copy_from_slice(&size.to_le_bytes());
        b[16..24].copy_from_slice(&32u64.to_le_bytes());
        b[24..32].copy_from_slice(&40u64.to_le_bytes());
        b[32..72].fill(0);
        b[40..48].copy_from_slice(&map_at.to_le_bytes());
        b[48..56].copy_from_slice(&n.to_le_bytes());
        for i in 0..n {
            let at = (map_at + 16 * i) as usize;
            b[at..at + 8].copy_from_slice(&(run_at + i * 16).to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&(run_at + i * 16 + 8).to_le_bytes());
        }
        *b.last_mut().unwrap() = 0;
        let bins = Reader::new(&b).read_all().unwrap();
        let e = &bins[0].entries()[0];
        assert_eq!(e.strings().count(), n as usize);
        assert_eq!(e.strings().next().unwrap().0.len() as u64, run - 1);
    }
}
