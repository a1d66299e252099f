//! One bundle rewritten to hold fewer entries, for `kpack prune`.

use crate::budget::MemoryBudget;
use crate::bundle::{bundle_layout, write_bundle};
use crate::ccob::{Method, deflate};
use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, read_vec};
use crate::target::EntryId;
use crate::walk::{Format, Item};

/// Largest entry alignment inferred from a bundle: clang aligns HIP code
/// objects to 4096.
const MAX_ALIGN: u64 = 4096;

/// Zstd levels tried in turn for a recompressed bundle: a fast one, then
/// the strongest, for the rare bundle whose original used a stronger level
/// than the first try and would otherwise not fit its old place.
const ZSTD_LEVELS: [i32; 2] = [9, 19];
/// The zlib level (zlib's strongest; it is fast enough).
const ZLIB_LEVEL: i32 = 9;

/// A kept entry that is portable SPIR-V (named so, or starting with its
/// magic) must be a whole module: a broken one is an error naming it, not
/// a module kept for a loader to fail on.
fn check_spirv(entry: &crate::bundle::Entry, src: &dyn ReadAt, at: u64) -> Result<(), Error> {
    match crate::codeobject::inspect_spirv(&entry.id, src, at, entry.size) {
        Some(Err(e)) => Err(Error::new(
            ErrorKind::BadHeader,
            format!("entry {} is no valid SPIR-V module: {e}", entry.id.raw()),
        )),
        _ => Ok(()),
    }
}

/// The bytes of `item` (a bundle walked from `src`) rewritten to hold its
/// host entries and the device entries `keep` accepts, in their order,
/// each code object byte-identical.
///
/// A plain bundle gets a new header and offsets, with the alignment the
/// original's code objects had; a compressed one is recompressed with the
/// same CCOB version and method and a fresh MD5. The result is never
/// longer than the original (`item.len`), so it fits where the original
/// was: an error says so otherwise. A bare code object (no bundle) is
/// returned unchanged when kept and is an error when not, because nothing
/// can stand in for it.
pub fn prune_item(
    item: &Item,
    src: &dyn ReadAt,
    keep: &dyn Fn(&EntryId) -> bool,
    budget: &MemoryBudget,
) -> Result<Vec<u8>, Error> {
    let kept: Vec<usize> = (0..item.entries.len())
        .filter(|&i| item.entries[i].id.is_host() || keep(&item.entries[i].id))
        .collect();
    if let Format::Elf = item.format {
        if kept.is_empty() {
            return Err(Error::new(
                ErrorKind::BadRange,
                format!(
                    "bare code object at {:#x} cannot be pruned: it is not in a bundle",
                    item.offset
                ),
            ));
        }
        return read_vec(src, item.abs_offset(), item.len);
    }
    // One pass over the item, so a compressed bundle is inflated once and
    // its MD5 checked.
    let mut bytes_of: Vec<Option<Vec<u8>>> = vec![None; item.entries.len()];
    item.stream_entries(src, budget, |i, entry, bytes| {
        if kept.contains(&i) {
            check_spirv(entry, &bytes, 0)?;
            bytes_of[i] = Some(bytes.to_vec());
        }
        Ok::<(), Error>(())
    })?;
    let mut objects = Vec::with_capacity(kept.len());
    for &i in &kept {
        let bytes = bytes_of[i].take().unwrap_or_default();
        objects.push((item.entries[i].id.raw(), bytes));
    }
    let entries: Vec<(&str, &[u8])> = objects.iter().map(|(id, b)| (*id, &b[..])).collect();
    let plain = write_bundle(&entries, entry_align(item));
    let bytes = match item.format {
        Format::Compressed(header) => {
            let levels: &[i32] = match header.method {
                Method::Zstd => &ZSTD_LEVELS,
                Method::Zlib => &[ZLIB_LEVEL],
            };
            let mut best = None;
            for &level in levels {
                let bytes = deflate(&plain, header.version, header.method, level)?;
                let fits = bytes.len() as u64 <= item.len;
                best = Some(bytes);
                if fits {
                    break;
                }
            }
            best.unwrap_or_default()
        }
        _ => plain,
    };
    if bytes.len() as u64 > item.len {
        return Err(Error::new(
            ErrorKind::BadRange,
            format!(
                "pruned bundle at {:#x} takes {} bytes, more than the original's {}",
                item.offset,
                bytes.len(),
                item.len
            ),
        ));
    }
    Ok(bytes)
}

/// A pruned plain bundle, described rather than built: its new header and
/// where each kept code object comes from, so a writer copies the objects
/// straight from the source instead of holding the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainPrune {
    /// The new bundle header (magic, entry count, entry table).
    pub header: Vec<u8>,
    /// Each kept code object: offset in the new bundle, absolute offset
    /// in the source, size.
    pub objects: Vec<(u64, u64, u64)>,
    /// Length of the new bundle.
    pub len: u64,
}

/// What [`prune_item_streamed`] gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrunedItem {
    /// The bytes, built: a compressed bundle (recompressed) or a kept bare
    /// code object.
    Built(Vec<u8>),
    /// A plain bundle, described: nothing of it is held.
    Plain(PlainPrune),
}

impl PrunedItem {
    /// Length of the pruned item in bytes.
    pub fn len(&self) -> u64 {
        match self {
            PrunedItem::Built(bytes) => bytes.len() as u64,
            PrunedItem::Plain(plain) => plain.len,
        }
    }

    /// Whether the pruned item has no bytes (never, for a bundle).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`prune_item`] without holding a plain bundle: the same bytes, but a
/// plain bundle comes back as its new header and the source ranges of the
/// kept code objects (nothing is read but the header the walk already
/// parsed). Compressed bundles and bare code objects are built as
/// [`prune_item`] builds them, one at a time.
pub fn prune_item_streamed(
    item: &Item,
    src: &dyn ReadAt,
    keep: &dyn Fn(&EntryId) -> bool,
    budget: &MemoryBudget,
) -> Result<PrunedItem, Error> {
    if !matches!(item.format, Format::Plain) {
        return prune_item(item, src, keep, budget).map(PrunedItem::Built);
    }
    let kept: Vec<&crate::bundle::Entry> = item
        .entries
        .iter()
        .filter(|e| e.id.is_host() || keep(&e.id))
        .collect();
    let sized: Vec<(&str, u64)> = kept.iter().map(|e| (e.id.raw(), e.size)).collect();
    let layout = bundle_layout(&sized, entry_align(item));
    let mut objects = Vec::with_capacity(kept.len());
    for (e, &offset) in kept.iter().zip(&layout.offsets) {
        // The walk checked the entries against the bundle; checked again,
        // since the writer copies these ranges blindly.
        let abs = item
            .abs_offset()
            .checked_add(e.offset)
            .filter(|&abs| {
                e.offset.saturating_add(e.size) <= item.len
                    && abs.checked_add(e.size).is_some_and(|end| end <= src.size())
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::BadRange,
                    format!(
                        "entry {} of the bundle at {:#x} runs past the bundle",
                        e.id.raw(),
                        item.offset
                    ),
                )
            })?;
        check_spirv(e, src, abs)?;
        if e.size > 0 {
            objects.push((offset, abs, e.size));
        }
    }
    if layout.len > item.len {
        return Err(Error::new(
            ErrorKind::BadRange,
            format!(
                "pruned bundle at {:#x} takes {} bytes, more than the original's {}",
                item.offset, layout.len, item.len
            ),
        ));
    }
    Ok(PrunedItem::Plain(PlainPrune {
        header: layout.header,
        objects,
        len: layout.len,
    }))
}

/// The alignment of the original's code objects: the largest power of two
/// up to 4096 that divides every non-empty entry's offset.
fn entry_align(item: &Item) -> u64 {
    item.entries
        .iter()
        .filter(|e| e.size > 0)
        .map(|e| {
            if e.offset == 0 {
                MAX_ALIGN
            } else {
                (1u64 << e.offset.trailing_zeros().min(12)).min(MAX_ALIGN)
            }
        })
        .min()
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::walk::{WalkOptions, walk};

    const HOST: &str = "host-x86_64-unknown-linux";
    const A: &str = "hipv4-amdgcn-amd-amdhsa--gfx90a";
    const B: &str = "hipv4-amdgcn-amd-amdhsa--gfx1100";

    #[allow(
        clippy::ptr_arg,
        reason = "Vec<u8> is what implements ReadAt in memory"
    )]
    fn only_first(bytes: &Vec<u8>) -> Item {
        walk(bytes, 0, bytes.len() as u64, WalkOptions::default())
            .next()
            .unwrap()
            .unwrap()
    }

    fn keep_gfx90a(id: &EntryId) -> bool {
        id.raw().ends_with("gfx90a")
    }

    #[test]
    fn prunes_a_plain_bundle_keeping_host_and_chosen_entries() {
        let code_a = vec![7u8; 5000];
        let code_b = vec![9u8; 3000];
        let original = write_bundle(&[(HOST, b""), (A, &code_a), (B, &code_b)], 4096);
        let item = only_first(&original);
        let pruned = prune_item(&item, &original, &keep_gfx90a, &MemoryBudget::default()).unwrap();
        assert!(pruned.len() < original.len());
        let back = only_first(&pruned);
        let ids: Vec<_> = back.entries.iter().map(|e| e.id.raw().to_owned()).collect();
        assert_eq!(ids, [HOST, A]);
        assert_eq!(back.read_entry(&pruned, 1).unwrap(), code_a);
        assert_eq!(back.entries[1].offset % 4096, 0);
    }

    #[test]
    fn streamed_plain_prune_describes_the_built_bytes() {
        let code_a = vec![7u8; 5000];
        let code_b = vec![9u8; 3000];
        for (entries, keep_a) in [
            (
                vec![(HOST, &b""[..]), (A, &code_a[..]), (B, &code_b[..])],
                true,
            ),
            (
                vec![(HOST, &b""[..]), (B, &code_b[..]), (A, &code_a[..])],
                true,
            ),
            (vec![(HOST, &b""[..]), (B, &code_b[..])], false),
        ] {
            let original = write_bundle(&entries, 4096);
            let item = only_first(&original);
            let built =
                prune_item(&item, &original, &keep_gfx90a, &MemoryBudget::default()).unwrap();
            let PrunedItem::Plain(plain) =
                prune_item_streamed(&item, &original, &keep_gfx90a, &MemoryBudget::default())
                    .unwrap()
            else {
                panic!("a plain bundle is described, not built")
            };
            // Rebuild it the way a streaming writer does.
            let mut bytes = plain.header.clone();
            for &(offset, abs, size) in &plain.objects {
                bytes.resize(offset as usize, 0);
                bytes.extend_from_slice(&original[abs as usize..(abs + size) as usize]);
            }
            bytes.resize(plain.len as usize, 0);
            assert_eq!(bytes, built, "keep gfx90a: {keep_a}");
        }
    }

    #[test]
    fn prunes_a_compressed_bundle_with_its_version_and_method() {
        let code_a: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
        let code_b: Vec<u8> = (0..6000u32).map(|i| (i % 241) as u8).collect();
        let plain = write_bundle(&[(HOST, b""), (A, &code_a), (B, &code_b)], 4096);
        for (version, method) in [(2, Method::Zstd), (3, Method::Zlib), (1, Method::Zstd)] {
            let original = deflate(&plain, version, method, 3).unwrap();
            let item = only_first(&original);
            let pruned =
                prune_item(&item, &original, &keep_gfx90a, &MemoryBudget::default()).unwrap();
            // Walking checks the fresh MD5.
            let back = only_first(&pruned);
            let Format::Compressed(header) = back.format else {
                panic!("not compressed")
            };
            assert_eq!((header.version, header.method), (version, method));
            assert_eq!(back.entries.len(), 2);
            assert_eq!(back.read_entry(&pruned, 1).unwrap(), code_a);
        }
    }
}
