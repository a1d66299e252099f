//! Parsing the header and the msgpack TOC of a KPAK file into a [`Toc`]:
//! every field, blob range and ordinal is checked here, once, so the
//! reader above never meets an inconsistent archive.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Base, Entry, Scheme};
use crate::decode::{self, At, MapOf, Reader, Seq};
use crate::error::{Error, ErrorKind, Result};

mod raw;

use crate::{BLOB_START, FRAME_INDEX_KEY, HEADER_SIZE, MAGIC, VERSION, VERSION_DELTA};
use raw::{RawBinaries, RawEntry, RawToc};

/// AMD's loader refuses zstd blobs larger than this (§2.6 step 10).
const MAX_ZSTD_BLOB: u64 = 1 << 32;
/// AMD's loader refuses more frames than this.
const MAX_FRAMES: u64 = 1 << 20;

/// One binary key and its entries.
#[derive(Debug)]
pub(super) struct Binary {
    pub(super) key: Arc<str>,
    /// Sorted by arch, byte-wise.
    pub(super) entries: Vec<Entry>,
}

/// Everything the header and the TOC say, checked against the file: the
/// parsed state an [`Archive`](super::Archive) serves from.
#[derive(Debug)]
pub(super) struct Toc {
    pub(super) scheme: Scheme,
    pub(super) format_version: u64,
    pub(super) group_name: String,
    pub(super) gfx_arch_family: String,
    pub(super) gfx_arches: Vec<String>,
    pub(super) toc_offset: u64,
    /// Sorted by key, byte-wise (AMD's `std::map` order).
    pub(super) binaries: Vec<Binary>,
    pub(super) blob_count: u64,
    /// The header version (1, or 2 for `zstd-delta`).
    pub(super) version: u32,
    /// v1 `zstd-per-kernel` frames came from the `zstd_frame_offsets`
    /// index, not a walk: each frame's size word is checked when read.
    pub(super) indexed: bool,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl Toc {
    /// Parse and check the header and TOC of the archive `bytes`.
    pub(super) fn parse(bytes: &[u8]) -> Result<Toc> {
        // Offsets for errors cost a tracked reader: only a failed parse is
        // run again with one, for its error.
        Toc::parse_with(bytes, Reader::Fast).or_else(|_| Toc::parse_with(bytes, Reader::Tracked))
    }

    /// Bytes of msgpack the TOC of the archive `bytes` takes.
    pub(super) fn toc_len(&self, bytes: &[u8]) -> u64 {
        let toc = bytes.get(self.toc_offset as usize..).unwrap_or_default();
        decode::length(toc, self.toc_offset).map_or(0, |n| n as u64)
    }

    fn parse_with(bytes: &[u8], reader: Reader) -> Result<Toc> {
        let (version, toc_offset) = parse_header(bytes)?;
        let raw = decode_toc(bytes, toc_offset, reader)?;
        let format_version = check_format_version(&raw, toc_offset, version)?;
        let scheme = scheme_of(&raw, version)?;
        let required = |key: &str| missing(toc_offset, "TOC", key);
        let group_name = raw
            .group_name
            .clone()
            .ok_or_else(|| required("group_name"))?;
        let gfx_arch_family =
            (raw.gfx_arch_family.clone()).ok_or_else(|| required("gfx_arch_family"))?;
        let gfx_arches = match &raw.gfx_arches {
            Some(list) => list.0.clone(),
            None => return Err(required("gfx_arches")),
        };
        let indexed = scheme == Scheme::ZstdPerKernel && raw.zstd_frame_offsets.is_some();
        let blobs = match scheme {
            Scheme::None => Some(noop_blobs(&raw, toc_offset)?),
            Scheme::ZstdPerKernel => Some(match &raw.zstd_frame_offsets {
                Some(index) => indexed_frames(&raw, index, bytes, toc_offset)?,
                None => zstd_frames(&raw, bytes, toc_offset)?,
            }),
            Scheme::ZstdDelta => None,
        };
        let toc = raw.toc.ok_or_else(|| required("toc"))?;
        let places = Places {
            blobs: blobs.as_ref(),
            scheme,
            toc_offset,
        };
        let mut binaries = build_binaries(toc.v, &places)?;
        let blob_count = match blobs {
            Some(b) => b.len() as u64,
            None => resolve_bases(&mut binaries)?,
        };
        Ok(Toc {
            scheme,
            format_version,
            group_name,
            gfx_arch_family,
            gfx_arches,
            toc_offset,
            binaries,
            blob_count,
            version,
            indexed,
        })
    }
}

/// The header's version and `toc_offset`, checked against the file.
fn parse_header(bytes: &[u8]) -> Result<(u32, u64)> {
    let len = bytes.len() as u64;
    if !bytes.starts_with(&MAGIC) {
        return Err(Error::format(
            0,
            format!(
                "not a .kpack archive (it starts with {:02x?}, not \"KPAK\")",
                bytes.get(..4).unwrap_or(bytes)
            ),
        ));
    }
    if bytes.len() < HEADER_SIZE {
        return Err(Error::format(
            0,
            format!("file is {len} bytes, shorter than the 16-byte header"),
        ));
    }
    let version = u32_at(bytes, 4).unwrap_or(0);
    if version != VERSION && version != VERSION_DELTA {
        return Err(Error::at(
            ErrorKind::UnsupportedVersion,
            4,
            format!("header version {version}, only 1 and 2 are supported"),
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
    Ok((version, toc_offset))
}

/// The TOC's msgpack, typed.
fn decode_toc(bytes: &[u8], toc_offset: u64, reader: Reader) -> Result<RawToc> {
    // toc_offset < len (checked), so it fits in usize and the TOC has a byte.
    let toc_bytes = &bytes[toc_offset as usize..];
    let root = toc_bytes.first().copied().unwrap_or(0xc1);
    if !decode::is_map(root) {
        return Err(Error::at(
            ErrorKind::MsgpackParseFailed,
            toc_offset,
            format!("TOC root is a {}, not a map", decode::type_name(root)),
        ));
    }
    let MapOf(raw) =
        decode::decode::<MapOf<RawToc>>(toc_bytes, toc_offset, reader).map_err(|f| {
            if f.syntax {
                Error::at(
                    ErrorKind::MsgpackParseFailed,
                    f.offset,
                    format!("TOC is not valid msgpack: {}", f.message),
                )
            } else {
                Error::format(f.offset, format!("malformed TOC: {}", f.message))
            }
        })?;
    Ok(raw)
}

/// `format_version`, which must equal the header's version.
fn check_format_version(raw: &RawToc, toc_offset: u64, version: u32) -> Result<u64> {
    let fv = raw
        .format_version
        .ok_or_else(|| missing(toc_offset, "TOC", "format_version"))?;
    if fv.v != u64::from(version) {
        return Err(Error::at(
            ErrorKind::UnsupportedVersion,
            fv.at,
            format!("TOC format_version {} in a version {version} header", fv.v),
        ));
    }
    Ok(fv.v)
}

/// `compression_scheme`, which must agree with the header's version.
fn scheme_of(raw: &RawToc, version: u32) -> Result<Scheme> {
    let scheme = match &raw.compression_scheme {
        // Both AMD readers default a missing scheme to "none".
        None => Scheme::None,
        Some(v) => match v.v.as_str() {
            "none" => Scheme::None,
            "zstd-per-kernel" => Scheme::ZstdPerKernel,
            "zstd-delta" => Scheme::ZstdDelta,
            other => {
                return Err(Error::at(
                    ErrorKind::NotImplemented,
                    v.at,
                    format!("unknown compression_scheme {other:?}"),
                ));
            }
        },
    };
    // Version 2 holds zstd-delta and nothing else: a v1 reader must never
    // see the scheme (AMD's treats unknown schemes as "none").
    if (version == VERSION_DELTA) != (scheme == Scheme::ZstdDelta) {
        return Err(Error::format(
            4,
            format!(
                "compression_scheme {:?} in a version {version} header",
                scheme.as_str()
            ),
        ));
    }
    Ok(scheme)
}

/// `what` (a map at `at`) lacks `key`.
fn missing(at: u64, what: &str, key: &str) -> Error {
    Error::format(at, format!("{what} has no {key:?} key"))
}

/// What an entry needs to place its stored bytes.
struct Places<'b> {
    blobs: Option<&'b Blobs>,
    scheme: Scheme,
    toc_offset: u64,
}

/// The `toc` map as sorted, checked [`Binary`]s: keys unique and sorted
/// byte-wise, each key's arches unique and sorted.
fn build_binaries(raw: RawBinaries, places: &Places<'_>) -> Result<Vec<Binary>> {
    let mut raw = raw.0;
    raw.sort_by(|a, b| a.key.v.cmp(&b.key.v));
    if let Some(w) = raw.windows(2).find(|w| w[0].key.v == w[1].key.v) {
        return Err(duplicate(&w[1].key, "toc"));
    }
    let mut binaries = Vec::with_capacity(raw.len());
    for mut b in raw {
        b.entries.sort_by(|x, y| x.0.v.cmp(&y.0.v));
        if let Some(w) = b.entries.windows(2).find(|w| w[0].0.v == w[1].0.v) {
            return Err(duplicate(&w[1].0, "toc value"));
        }
        let entries = (b.entries.into_iter())
            .map(|(arch, ev)| parse_entry(&b.key.v, &arch.v, ev, places))
            .collect::<Result<Vec<_>>>()?;
        binaries.push(Binary {
            key: b.key.v,
            entries,
        });
    }
    Ok(binaries)
}

/// A key met a second time (at `name`'s offset) in the map `what`.
fn duplicate(name: &At<Arc<str>>, what: &str) -> Error {
    Error::format(name.at, format!("duplicate key {:?} in {what}", name.v))
}

/// (absolute offset, size) of each ordinal's stored bytes.
type Blobs = Vec<(u64, u64)>;

fn noop_blobs(raw: &RawToc, toc_offset: u64) -> Result<Blobs> {
    let Some(items) = &raw.blobs else {
        return Err(missing(toc_offset, "TOC", "blobs"));
    };
    let mut blobs = Vec::with_capacity(items.0.len());
    for (i, item) in items.0.iter().enumerate() {
        let f = &item.v.0;
        let off_v = f
            .offset
            .ok_or_else(|| missing(item.at, "blobs element", "offset"))?;
        let offset = off_v.v;
        let size = f
            .size
            .ok_or_else(|| missing(item.at, "blobs element", "size"))?;
        let end = offset.checked_add(size);
        if offset < BLOB_START || end.is_none_or(|e| e > toc_offset) {
            return Err(Error::format(
                off_v.at,
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

fn zstd_frames(raw: &RawToc, bytes: &[u8], toc_offset: u64) -> Result<Blobs> {
    let (start, end) = zstd_blob_range(raw, toc_offset)?;
    let size = end - start;
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
    key: &Arc<str>,
    arch: &Arc<str>,
    raw: At<MapOf<RawEntry>>,
    places: &Places<'_>,
) -> Result<Entry> {
    let (at, f) = (raw.at, raw.v.0);
    let what = || format!("toc[{key:?}][{arch:?}]");
    let ord_v = f
        .ordinal
        .ok_or_else(|| missing(at, "toc entry", "ordinal"))?;
    let ordinal = ord_v.v;
    let original_size =
        (f.original_size).ok_or_else(|| missing(at, "toc entry", "original_size"))?;
    let (stored_offset, stored_size, base) = match places.blobs {
        Some(blobs) => {
            let blob = usize::try_from(ordinal).ok().and_then(|i| blobs.get(i));
            let Some(&(offset, size)) = blob else {
                return Err(Error::format(
                    ord_v.at,
                    format!(
                        "{}: ordinal {ordinal} but the archive has {} blobs",
                        what(),
                        blobs.len()
                    ),
                ));
            };
            (offset, size, None)
        }
        None => delta_frame(&f, at, places.toc_offset, &what)?,
    };
    if places.scheme == Scheme::None && stored_size != original_size {
        return Err(Error::format(
            ord_v.at,
            format!(
                "{}: blob {ordinal} is {stored_size} bytes but original_size is {original_size}",
                what()
            ),
        ));
    }
    let sha256 = match &f.sha256 {
        None => None,
        Some(d) => Some(crate::digest::from_hex(&d.v).ok_or_else(|| {
            Error::format(
                d.at,
                format!("{}: sha256 {:?} is not 64 hex digits", what(), d.v),
            )
        })?),
    };
    Ok(Entry {
        key: Arc::clone(key),
        arch: Arc::clone(arch),
        ordinal,
        original_size,
        stored_offset,
        stored_size,
        metadata: f.metadata.map(|m| m.0).unwrap_or_default(),
        sha256,
        base,
    })
}

/// zstd-delta: the frame an entry places itself (checked against the blob
/// area) and its base, to be resolved once every entry is known.
fn delta_frame(
    f: &RawEntry,
    at: u64,
    toc_offset: u64,
    what: &dyn Fn() -> String,
) -> Result<(u64, u64, Option<Base>)> {
    let off_v = f.offset.ok_or_else(|| missing(at, "toc entry", "offset"))?;
    let offset = off_v.v;
    let size = f.size.ok_or_else(|| missing(at, "toc entry", "size"))?;
    if offset < BLOB_START || offset.checked_add(size).is_none_or(|e| e > toc_offset) {
        return Err(Error::format(
            off_v.at,
            format!(
                "{}: frame [{offset:#x}, +{size}) is outside the blob area [0x40, {toc_offset:#x})",
                what()
            ),
        ));
    }
    let base = f.base.map(|b| Base {
        ordinal: b.v,
        toc_at: b.at,
        offset: 0,
        size: 0,
        original_size: 0,
    });
    Ok((offset, size, base))
}

/// zstd-delta: check that ordinals are unique and frames disjoint, and
/// point each delta at its base's frame. A base must exist, must not be the
/// entry itself and must not be a delta (so no chain and no cycle: a load
/// decodes at most two frames). Returns the number of frames.
fn resolve_bases(binaries: &mut [Binary]) -> Result<u64> {
    // ordinal -> (offset, size, original_size, its own base)
    let mut by_ordinal: HashMap<u64, (u64, u64, u64, Option<u64>)> = HashMap::new();
    let mut frames = Vec::new();
    for e in binaries.iter().flat_map(|b| b.entries.iter()) {
        let me = (
            e.stored_offset,
            e.stored_size,
            e.original_size,
            e.base.as_ref().map(|b| b.ordinal),
        );
        if by_ordinal.insert(e.ordinal, me).is_some() {
            return Err(Error::format(
                e.stored_offset,
                format!(
                    "toc[{:?}][{:?}]: ordinal {} is used twice",
                    e.key, e.arch, e.ordinal
                ),
            ));
        }
        frames.push((e.stored_offset, e.stored_size, e.ordinal));
    }
    frames.sort_unstable();
    for w in frames.windows(2) {
        let ((o1, s1, i1), (o2, _, i2)) = (w[0], w[1]);
        if s1 > 0 && o1 + s1 > o2 {
            return Err(Error::format(
                o2,
                format!("frame of ordinal {i2} at {o2:#x} overlaps ordinal {i1} at {o1:#x}+{s1}"),
            ));
        }
    }
    for e in binaries.iter_mut().flat_map(|b| b.entries.iter_mut()) {
        let (ordinal, key, arch) = (e.ordinal, e.key.clone(), e.arch.clone());
        let Some(base) = e.base.as_mut() else {
            continue;
        };
        let what = format!("toc[{key:?}][{arch:?}]");
        let at = base.toc_at;
        if base.ordinal == ordinal {
            return Err(Error::format(
                at,
                format!("{what}: entry {ordinal} names itself as its base"),
            ));
        }
        let Some(&(offset, size, original_size, its_base)) = by_ordinal.get(&base.ordinal) else {
            return Err(Error::format(
                at,
                format!(
                    "{what}: base {} is not an entry of this archive",
                    base.ordinal
                ),
            ));
        };
        if let Some(next) = its_base {
            let why = if next == ordinal {
                format!("a cycle: {ordinal} -> {} -> {ordinal}", base.ordinal)
            } else {
                format!(
                    "bases must not be deltas ({} has base {next})",
                    base.ordinal
                )
            };
            return Err(Error::format(
                at,
                format!("{what}: base {} is itself a delta, {why}", base.ordinal),
            ));
        }
        base.offset = offset;
        base.size = size;
        base.original_size = original_size;
    }
    Ok(frames.len() as u64)
}

/// v1 `zstd-per-kernel` with the `zstd_frame_offsets` index: frame ranges
/// from the TOC alone (sizes are the gaps between offsets, less each size
/// word), so opening touches the header, one count word and the TOC. The
/// index must tile the blob exactly as a walk would; each frame's size word
/// is compared when that frame is read (and by `verify`).
fn indexed_frames(
    raw: &RawToc,
    index: &At<Seq<At<u64>>>,
    bytes: &[u8],
    toc_offset: u64,
) -> Result<Blobs> {
    let (start, end) = zstd_blob_range(raw, toc_offset)?;
    let count = u64::from(u32_at(bytes, start as usize).unwrap_or(0));
    let offsets = &index.v.0;
    if offsets.len() as u64 != count {
        return Err(Error::format(
            index.at,
            format!(
                "{FRAME_INDEX_KEY} has {} offsets but the zstd blob announces {count} frames",
                offsets.len()
            ),
        ));
    }
    let mut frames: Blobs = Vec::with_capacity(offsets.len());
    let mut expect = start + 8;
    for (i, v) in offsets.iter().enumerate() {
        let at = v.v;
        if at != expect || at > end {
            return Err(Error::format(
                v.at,
                format!(
                    "{FRAME_INDEX_KEY}[{i}] is {at:#x}, but frame {i} starts at {expect:#x} \
                     (blob [{start:#x}, {end:#x}))"
                ),
            ));
        }
        let next = match offsets.get(i + 1) {
            Some(n) => n.v,
            None => end.saturating_add(4),
        };
        if next < at.saturating_add(4) || next > end.saturating_add(4) {
            return Err(Error::format(
                v.at,
                format!(
                    "{FRAME_INDEX_KEY}[{}] is {next:#x}, not after frame {i} at {at:#x} \
                     and inside the blob end {end:#x}",
                    i + 1
                ),
            ));
        }
        frames.push((at, next - 4 - at));
        expect = next;
    }
    if count == 0 && end != start + 4 {
        return Err(Error::format(
            start,
            format!("zstd blob announces no frames but is {} bytes", end - start),
        ));
    }
    Ok(frames)
}

/// `[zstd_offset, zstd_offset + zstd_size)`, checked against the file.
fn zstd_blob_range(raw: &RawToc, toc_offset: u64) -> Result<(u64, u64)> {
    let off_v = raw
        .zstd_offset
        .ok_or_else(|| missing(toc_offset, "TOC", "zstd_offset"))?;
    let size_v = raw
        .zstd_size
        .ok_or_else(|| missing(toc_offset, "TOC", "zstd_size"))?;
    let (start, size) = (off_v.v, size_v.v);
    if size > MAX_ZSTD_BLOB {
        return Err(Error::format(
            size_v.at,
            format!("zstd_size {size} exceeds 4 GiB"),
        ));
    }
    let end = start.checked_add(size);
    if start < BLOB_START || end.is_none_or(|e| e > toc_offset) {
        return Err(Error::format(
            off_v.at,
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
    Ok((start, start + size))
}
