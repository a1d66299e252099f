//! Uncompressed clang offload bundles (`__CLANG_OFFLOAD_BUNDLE__`).

use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, read_vec};
use crate::target::EntryId;

/// The 24-byte magic that starts an uncompressed bundle.
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Longest entry id we accept; real ones are under 100 bytes.
const MAX_ID_LEN: u64 = 4096;

/// How many times its own length a bundle's entries may add up to.
pub const MAX_SHARING: u64 = 64;

/// One entry of a bundle: an id and the byte range of its code object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry {
    /// The parsed entry id.
    pub id: EntryId,
    /// Offset of the code object from the start of the bundle.
    pub offset: u64,
    /// Size of the code object in bytes.
    pub size: u64,
}

/// The entries of a bundle and where it ends.
#[derive(Debug, Clone)]
pub struct BundleHeader {
    /// Entries in file order; never deduplicated.
    pub entries: Vec<Entry>,
    /// Length of the bundle: the end of its header or of its last code
    /// object, whichever is further (the format has no size field).
    pub len: u64,
}

/// Parse the bundle that starts at `start` in `src`; it may extend at most to
/// `limit` (the end of its section).
pub fn parse_bundle(src: &dyn ReadAt, start: u64, limit: u64) -> Result<BundleHeader, Error> {
    let avail = limit.saturating_sub(start);
    let head = read_vec(src, start, 32.min(avail))?;
    if head.len() < 32 || &head[..24] != BUNDLE_MAGIC {
        return Err(Error::at(
            ErrorKind::BadHeader,
            start,
            "not a clang offload bundle (magic or header missing)",
        ));
    }
    let count = u64::from_le_bytes(head[24..32].try_into().unwrap_or_default());
    if count == 0 {
        return Err(Error::at(
            ErrorKind::BadRange,
            start + 24,
            "bundle declares zero entries",
        ));
    }
    // Each descriptor takes at least 24 bytes.
    if count > (avail - 32) / 24 {
        return Err(Error::at(
            ErrorKind::BadRange,
            start + 24,
            format!("bundle declares {count} entries, more than its {avail} bytes can hold"),
        ));
    }
    let mut pos = start + 32;
    let mut entries = Vec::with_capacity(count as usize);
    let mut end = 32u64;
    for i in 0..count {
        let (entry, desc_len) = parse_entry(src, i, pos, limit, avail)?;
        end = end.max(entry.offset + entry.size);
        pos += desc_len;
        entries.push(entry);
    }
    end = end.max(pos - start);
    // Entries may share bytes (one code object under several ids), but
    // each is handed out (extracted, archived) on its own: many entries
    // over one range would multiply a small bundle without bound.
    let total = entries.iter().fold(0u64, |t, e| t.saturating_add(e.size));
    if total > end.saturating_mul(MAX_SHARING) {
        return Err(Error::at(
            ErrorKind::BadRange,
            start + 24,
            format!(
                "the {count} entries total {total:#x} bytes, more than {MAX_SHARING} times the bundle's {end:#x}: too many entries share the same bytes"
            ),
        ));
    }
    Ok(BundleHeader { entries, len: end })
}

/// Entry descriptor `i` at `pos` (the bundle has `avail` bytes before
/// `limit`): the entry and the descriptor's length.
fn parse_entry(
    src: &dyn ReadAt,
    i: u64,
    pos: u64,
    limit: u64,
    avail: u64,
) -> Result<(Entry, u64), Error> {
    let desc = read_vec(src, pos, 24.min(limit.saturating_sub(pos)))?;
    if desc.len() < 24 {
        return Err(Error::at(
            ErrorKind::Truncated,
            pos,
            format!("entry {i} descriptor is cut off"),
        ));
    }
    let field =
        |k: usize| u64::from_le_bytes(desc[k * 8..k * 8 + 8].try_into().unwrap_or_default());
    let (offset, size, id_len) = (field(0), field(1), field(2));
    if id_len == 0 || id_len > MAX_ID_LEN || pos + 24 + id_len > limit {
        return Err(Error::at(
            ErrorKind::BadRange,
            pos + 16,
            format!("entry {i} id length {id_len} is impossible"),
        ));
    }
    let id_bytes = read_vec(src, pos + 24, id_len)?;
    let id_text = std::str::from_utf8(&id_bytes).map_err(|_| {
        Error::at(
            ErrorKind::BadEntryId,
            pos + 24,
            format!("entry {i} id is not text"),
        )
    })?;
    let id = EntryId::parse(id_text).map_err(|e| e.offset_by(pos + 24))?;
    if offset.checked_add(size).is_none_or(|e| e > avail) {
        return Err(Error::at(
            ErrorKind::BadRange,
            pos,
            format!(
                "entry {i} ({id_text}) range {offset:#x}+{size:#x} runs past the end of its section ({avail:#x} bytes from the bundle start)"
            ),
        ));
    }
    if size > 0 && offset < 32 {
        return Err(Error::at(
            ErrorKind::BadRange,
            pos,
            format!("entry {i} ({id_text}) overlaps the bundle header"),
        ));
    }
    Ok((Entry { id, offset, size }, 24 + id_len))
}

/// Write an uncompressed bundle holding `entries` (id, code object), each
/// code object aligned to `align` bytes as clang does (HIP uses 4096).
pub fn write_bundle(entries: &[(&str, &[u8])], align: u64) -> Vec<u8> {
    let sized: Vec<(&str, u64)> = entries
        .iter()
        .map(|(id, data)| (*id, data.len() as u64))
        .collect();
    let layout = bundle_layout(&sized, align);
    let mut out = layout.header;
    for ((_, data), off) in entries.iter().zip(layout.offsets) {
        out.resize(off as usize, 0);
        out.extend_from_slice(data);
    }
    out
}

/// Where [`write_bundle`] puts everything, without the code objects: the
/// header bytes, each code object's offset and the bundle's length. A
/// writer that streams the code objects from elsewhere emits the header,
/// then zeros up to each offset and the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleLayout {
    /// Magic, entry count and entry table.
    pub header: Vec<u8>,
    /// Offset of each code object from the start of the bundle.
    pub offsets: Vec<u64>,
    /// Length of the bundle: the end of the last code object (of the
    /// header when there is none).
    pub len: u64,
}

/// The layout of an uncompressed bundle holding code objects of the
/// given (id, size), aligned as in [`write_bundle`].
pub fn bundle_layout(entries: &[(&str, u64)], align: u64) -> BundleLayout {
    let align = align.max(1);
    let mut header = Vec::new();
    header.extend_from_slice(BUNDLE_MAGIC);
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let header_len: u64 = 32
        + entries
            .iter()
            .map(|(id, _)| 24 + id.len() as u64)
            .sum::<u64>();
    let mut offset = header_len.next_multiple_of(align);
    let mut offsets = Vec::with_capacity(entries.len());
    let mut len = header_len;
    for (id, size) in entries {
        header.extend_from_slice(&offset.to_le_bytes());
        header.extend_from_slice(&size.to_le_bytes());
        header.extend_from_slice(&(id.len() as u64).to_le_bytes());
        header.extend_from_slice(id.as_bytes());
        offsets.push(offset);
        len = offset + size;
        offset = (offset + size).next_multiple_of(align);
    }
    BundleLayout {
        header,
        offsets,
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain bundle whose `n` entries all name the same 16 bytes.
    fn shared_entries(n: usize) -> Vec<u8> {
        let id = b"hipv4-amdgcn-amd-amdhsa--gfx90a";
        let data_at = (32 + n * (24 + id.len())) as u64;
        let mut b = BUNDLE_MAGIC.to_vec();
        b.extend((n as u64).to_le_bytes());
        for _ in 0..n {
            b.extend(data_at.to_le_bytes());
            b.extend(16u64.to_le_bytes());
            b.extend((id.len() as u64).to_le_bytes());
            b.extend(id);
        }
        b.extend([0x7fu8; 16]);
        b
    }

    #[test]
    fn refuses_entries_that_share_bytes_too_often() {
        let few = shared_entries(8);
        assert_eq!(
            parse_bundle(&few, 0, few.len() as u64)
                .unwrap()
                .entries
                .len(),
            8
        );
        // 2,000 entries over one 1 MiB code object would hand out 2 GiB
        // from a bundle of 1.1 MiB.
        let id = b"hipv4-amdgcn-amd-amdhsa--gfx90a";
        let mut many = shared_entries(2000);
        let n = 2000u64;
        let data_at = 32 + n * (24 + id.len() as u64);
        many.resize(data_at as usize + (1 << 20), 0x7f);
        for i in 0..n {
            let at = (32 + i * (24 + id.len() as u64)) as usize;
            many[at + 8..at + 16].copy_from_slice(&(1u64 << 20).to_le_bytes());
        }
        let e = parse_bundle(&many, 0, many.len() as u64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadRange);
        assert!(e.to_string().contains("share the same bytes"), "{e}");
    }

    #[test]
    fn round_trips_a_written_bundle() {
        let bytes = write_bundle(
            &[
                ("host-x86_64-unknown-linux", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"abc"),
            ],
            4096,
        );
        let h = parse_bundle(&bytes, 0, bytes.len() as u64).unwrap();
        assert_eq!(h.entries.len(), 2);
        assert_eq!(h.entries[1].offset, 4096);
        assert_eq!(h.entries[1].size, 3);
        assert_eq!(h.len, 4099);
    }

    #[test]
    fn rejects_zero_and_absurd_entry_counts() {
        let mut bytes = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"abc")], 1);
        bytes[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            parse_bundle(&bytes, 0, bytes.len() as u64)
                .unwrap_err()
                .kind(),
            ErrorKind::BadRange
        );
        bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            parse_bundle(&bytes, 0, bytes.len() as u64)
                .unwrap_err()
                .kind(),
            ErrorKind::BadRange
        );
    }

    #[test]
    fn rejects_entry_past_the_end() {
        let mut bytes = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"abc")], 1);
        // size field of entry 0 is at 32 + 8
        bytes[40..48].copy_from_slice(&1000u64.to_le_bytes());
        let e = parse_bundle(&bytes, 0, bytes.len() as u64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadRange);
        assert_eq!(e.offset(), Some(32));
    }

    #[test]
    fn rejects_truncated_header() {
        let bytes = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"abc")], 1);
        for cut in [10, 31, 40, 60] {
            assert!(
                parse_bundle(&bytes[..cut].to_vec(), 0, cut as u64).is_err(),
                "cut at {cut}"
            );
        }
    }
}
