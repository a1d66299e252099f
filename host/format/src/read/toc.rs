//! Parsing the header and the msgpack TOC of a KPAK file into a [`Toc`]:
//! every field, blob range and ordinal is checked here, once, so the
//! reader above never meets an inconsistent archive.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Base, Entry, Scheme};
use crate::error::{Error, ErrorKind, Result};
use crate::msgpack::{self, Data, Fields, Value, as_array, as_map, as_str, as_uint};
use crate::{BLOB_START, FRAME_INDEX_KEY, HEADER_SIZE, MAGIC, VERSION, VERSION_DELTA};

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
    /// Bytes of msgpack the TOC takes.
    pub(super) toc_len: u64,
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
        if format_version != u64::from(version) {
            return Err(Error::at(
                ErrorKind::UnsupportedVersion,
                fv.offset,
                format!("TOC format_version {format_version} in a version {version} header"),
            ));
        }
        let group_name = as_str(root.require("group_name")?, "group_name")?.to_owned();
        let gfx_arch_family =
            as_str(root.require("gfx_arch_family")?, "gfx_arch_family")?.to_owned();
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
                "zstd-delta" => Scheme::ZstdDelta,
                other => {
                    return Err(Error::at(
                        ErrorKind::NotImplemented,
                        v.offset,
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
        let mut indexed = false;
        let blobs = match scheme {
            Scheme::None => Some(noop_blobs(&root, toc_offset)?),
            Scheme::ZstdPerKernel => match root.get(FRAME_INDEX_KEY) {
                Some(index) => {
                    indexed = true;
                    Some(indexed_frames(&root, index, bytes, toc_offset)?)
                }
                None => Some(zstd_frames(&root, bytes, toc_offset)?),
            },
            Scheme::ZstdDelta => None,
        };

        let toc_v = root.require("toc")?;
        let toc = Fields::new(as_map(toc_v, "toc")?, toc_v.offset, "toc")?;
        let mut binaries = Vec::with_capacity(toc.len());
        // Few distinct arches per archive: each is allocated once.
        let mut arch_names: Vec<Arc<str>> = Vec::new();
        for (key, arches_v) in toc.iter() {
            let key: Arc<str> = key.into();
            let arch_map =
                Fields::new(as_map(arches_v, "toc value")?, arches_v.offset, "toc value")?;
            let mut entries = Vec::with_capacity(arch_map.len());
            for (arch, ev) in arch_map.iter() {
                let arch = match arch_names.iter().find(|a| ***a == *arch) {
                    Some(a) => Arc::clone(a),
                    None => {
                        let a: Arc<str> = arch.into();
                        arch_names.push(Arc::clone(&a));
                        a
                    }
                };
                entries.push(parse_entry(
                    &key,
                    &arch,
                    ev,
                    blobs.as_ref(),
                    scheme,
                    toc_offset,
                )?);
            }
            entries.sort_by(|a, b| a.arch.cmp(&b.arch));
            binaries.push(Binary { key, entries });
        }
        binaries.sort_by(|a, b| a.key.cmp(&b.key));
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
            toc_len: used as u64,
            binaries,
            blob_count,
            version,
            indexed,
        })
    }
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
    let (start, end) = zstd_blob_range(root, toc_offset)?;
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
    v: &Value<'_>,
    blobs: Option<&Blobs>,
    scheme: Scheme,
    toc_offset: u64,
) -> Result<Entry> {
    let f = Fields::new(as_map(v, "toc entry")?, v.offset, "toc entry")?;
    let what = || format!("toc[{key:?}][{arch:?}]");
    if let Some(t) = f.get("type") {
        as_str(t, "entry type")?;
    }
    let ord_v = f.require("ordinal")?;
    let ordinal = as_uint(ord_v, "ordinal")?;
    let original_size = as_uint(f.require("original_size")?, "original_size")?;
    let mut base = None;
    let Some((stored_offset, stored_size)) = (match blobs {
        Some(blobs) => usize::try_from(ordinal)
            .ok()
            .and_then(|i| blobs.get(i))
            .copied(),
        None => {
            // zstd-delta: the entry places its own frame.
            let off_v = f.require("offset")?;
            let offset = as_uint(off_v, "frame offset")?;
            let size = as_uint(f.require("size")?, "frame size")?;
            if offset < BLOB_START || offset.checked_add(size).is_none_or(|e| e > toc_offset) {
                return Err(Error::format(
                    off_v.offset,
                    format!(
                        "{}: frame [{offset:#x}, +{size}) is outside the blob area [0x40, {toc_offset:#x})",
                        what()
                    ),
                ));
            }
            if let Some(b) = f.get("base") {
                base = Some(Base {
                    ordinal: as_uint(b, "base")?,
                    toc_at: b.offset,
                    offset: 0,
                    size: 0,
                    original_size: 0,
                });
            }
            Some((offset, size))
        }
    }) else {
        return Err(Error::format(
            ord_v.offset,
            format!(
                "{}: ordinal {ordinal} but the archive has {} blobs",
                what(),
                blobs.map_or(0, Vec::len)
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
        for (k, mv) in mf.iter() {
            metadata.push(((*k).to_owned(), as_str(mv, "metadata value")?.to_owned()));
        }
    }
    Ok(Entry {
        key: Arc::clone(key),
        arch: Arc::clone(arch),
        ordinal,
        original_size,
        stored_offset,
        stored_size,
        metadata,
        base,
    })
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
    root: &Fields<'_, '_, '_>,
    index: &Value<'_>,
    bytes: &[u8],
    toc_offset: u64,
) -> Result<Blobs> {
    let (start, end) = zstd_blob_range(root, toc_offset)?;
    let count = u64::from(u32_at(bytes, start as usize).unwrap_or(0));
    let offsets = as_array(index, FRAME_INDEX_KEY)?;
    if offsets.len() as u64 != count {
        return Err(Error::format(
            index.offset,
            format!(
                "{FRAME_INDEX_KEY} has {} offsets but the zstd blob announces {count} frames",
                offsets.len()
            ),
        ));
    }
    let mut frames: Blobs = Vec::with_capacity(offsets.len());
    let mut expect = start + 8;
    for (i, v) in offsets.iter().enumerate() {
        let at = as_uint(v, "frame offset")?;
        if at != expect || at > end {
            return Err(Error::format(
                v.offset,
                format!(
                    "{FRAME_INDEX_KEY}[{i}] is {at:#x}, but frame {i} starts at {expect:#x} \
                     (blob [{start:#x}, {end:#x}))"
                ),
            ));
        }
        let next = match offsets.get(i + 1) {
            Some(n) => as_uint(n, "frame offset")?,
            None => end.saturating_add(4),
        };
        if next < at.saturating_add(4) || next > end.saturating_add(4) {
            return Err(Error::format(
                v.offset,
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
fn zstd_blob_range(root: &Fields<'_, '_, '_>, toc_offset: u64) -> Result<(u64, u64)> {
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
    Ok((start, start + size))
}
