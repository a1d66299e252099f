//! Walk a `.hip_fatbin` section (or a whole bundle file): plain bundles,
//! compressed bundles and raw AMDGPU ELF images back to back, with zero
//! padding between them.

use std::io::Write;

use crate::bundle::{BUNDLE_MAGIC, Entry, parse_bundle};
use crate::ccob::{CCOB_MAGIC, CcobHeader, inflate};
use crate::codeobject;
use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, copy_range, read_vec};

/// How to walk.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions {
    /// Check each compressed bundle's MD5 (on by default; LLVM only checks
    /// in verbose mode).
    pub verify_hash: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions { verify_hash: true }
    }
}

/// The container format of one item found in a section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum Format {
    /// An uncompressed `__CLANG_OFFLOAD_BUNDLE__`.
    Plain,
    /// A compressed bundle.
    Compressed(CcobHeader),
    /// A bare AMDGPU ELF image (no bundle around it).
    Elf,
}

/// One bundle (or bare code object) in a section, with its entries.
#[derive(Debug)]
pub struct Item {
    /// Offset from the start of the walked region.
    pub offset: u64,
    /// Length in the region (compressed length for CCOB).
    pub len: u64,
    /// The container format.
    pub format: Format,
    /// Entries in file order; host entries included, nothing deduplicated.
    pub entries: Vec<Entry>,
    /// Absolute offset of the item in the source.
    abs: u64,
    /// Inflated bytes for compressed bundles; entry offsets index into it.
    inflated: Option<Vec<u8>>,
}

impl Item {
    /// Where entry offsets are measured from: the inflated buffer or the
    /// source, and the base offset within it.
    pub fn entry_source<'a>(&'a self, src: &'a dyn ReadAt) -> (&'a dyn ReadAt, u64) {
        match &self.inflated {
            Some(data) => (data, 0),
            None => (src, self.abs),
        }
    }

    /// The bytes of entry `i`.
    pub fn read_entry(&self, src: &dyn ReadAt, i: usize) -> Result<Vec<u8>, Error> {
        let e = self.entry(i)?;
        let (s, base) = self.entry_source(src);
        read_vec(s, base + e.offset, e.size)
    }

    /// Copy the bytes of entry `i` to `out` without holding them whole.
    pub fn copy_entry(&self, src: &dyn ReadAt, i: usize, out: &mut dyn Write) -> Result<(), Error> {
        let e = self.entry(i)?;
        let (s, base) = self.entry_source(src);
        copy_range(s, base + e.offset, e.size, out)
    }

    /// Inspect the code object of entry `i` (ELF header, flags, metadata).
    pub fn code_object(
        &self,
        src: &dyn ReadAt,
        i: usize,
    ) -> Result<codeobject::CodeObjectInfo, Error> {
        let e = self.entry(i)?;
        let (s, base) = self.entry_source(src);
        codeobject::inspect(s, base + e.offset, e.size)
    }

    fn entry(&self, i: usize) -> Result<&Entry, Error> {
        self.entries.get(i).ok_or_else(|| {
            Error::new(
                ErrorKind::BadRange,
                format!("no entry {i} in bundle at {:#x}", self.abs),
            )
        })
    }
}

/// Walk the region `[start, start+len)` of `src`, one item at a time.
pub fn walk(src: &dyn ReadAt, start: u64, len: u64, opts: WalkOptions) -> Walker<'_> {
    Walker {
        src,
        start,
        end: start.saturating_add(len),
        pos: start,
        opts,
        failed: false,
    }
}

/// Iterator over the items of a region; see [`walk`].
pub struct Walker<'a> {
    src: &'a dyn ReadAt,
    start: u64,
    end: u64,
    pos: u64,
    opts: WalkOptions,
    failed: bool,
}

impl Iterator for Walker<'_> {
    type Item = Result<Item, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.step();
        if matches!(r, Some(Err(_))) {
            self.failed = true;
        }
        r
    }
}

impl Walker<'_> {
    fn step(&mut self) -> Option<Result<Item, Error>> {
        match skip_zeros(self.src, self.pos, self.end) {
            Ok(Some(p)) => self.pos = p,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        }
        let r = self.item_at(self.pos);
        if let Ok(item) = &r {
            self.pos += item.len;
        }
        Some(r)
    }

    fn item_at(&self, pos: u64) -> Result<Item, Error> {
        let head = read_vec(self.src, pos, 24.min(self.end - pos))?;
        let offset = pos - self.start;
        if head.len() == 24 && head[..] == BUNDLE_MAGIC[..] {
            let h = parse_bundle(self.src, pos, self.end)?;
            return Ok(Item {
                offset,
                len: h.len,
                format: Format::Plain,
                entries: h.entries,
                abs: pos,
                inflated: None,
            });
        }
        if head.starts_with(CCOB_MAGIC) {
            let inf = inflate(self.src, pos, self.end, self.opts.verify_hash)?;
            let entries = inner_entries(&inf.data).map_err(|e| {
                Error::at(e.kind(), pos, format!("inside the compressed bundle: {e}"))
            })?;
            return Ok(Item {
                offset,
                len: inf.len,
                format: Format::Compressed(inf.header),
                entries,
                abs: pos,
                inflated: Some(inf.data),
            });
        }
        if head.starts_with(b"\x7fELF") {
            let (len, entry) = codeobject::bare_elf_entry(self.src, pos, self.end)?;
            return Ok(Item {
                offset,
                len,
                format: Format::Elf,
                entries: vec![entry],
                abs: pos,
                inflated: None,
            });
        }
        Err(Error::at(
            ErrorKind::BadHeader,
            pos,
            format!(
                "expected an offload bundle, CCOB or AMDGPU ELF; found bytes {}",
                hex_prefix(&head)
            ),
        ))
    }
}

/// Entries of the plain bundle(s) a CCOB inflated to, offsets from the
/// start of the inflated data.
#[allow(
    clippy::ptr_arg,
    reason = "ReadAt is implemented for Vec<u8>; the unsized [u8] cannot be a trait object"
)]
fn inner_entries(data: &Vec<u8>) -> Result<Vec<Entry>, Error> {
    let mut entries = Vec::new();
    let mut pos = 0u64;
    let end = data.len() as u64;
    while let Some(p) = skip_zeros(data, pos, end)? {
        let h = parse_bundle(data, p, end)?;
        entries.extend(h.entries.into_iter().map(|mut e| {
            e.offset += p;
            e
        }));
        pos = p + h.len;
    }
    if entries.is_empty() {
        return Err(Error::new(
            ErrorKind::BadRange,
            "compressed bundle holds no bundle",
        ));
    }
    Ok(entries)
}

/// First non-zero byte at or after `pos`, or `None` at the end.
fn skip_zeros(src: &dyn ReadAt, mut pos: u64, end: u64) -> Result<Option<u64>, Error> {
    let mut buf = [0u8; 4096];
    while pos < end {
        let n = (end - pos).min(buf.len() as u64) as usize;
        src.read_exact_at(pos, &mut buf[..n])
            .map_err(|e| Error::io(pos, e))?;
        if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
            return Ok(Some(pos + i as u64));
        }
        pos += n as u64;
    }
    Ok(None)
}

fn hex_prefix(b: &[u8]) -> String {
    b.iter()
        .take(8)
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::write_bundle;
    use crate::ccob::{Method, deflate};

    fn bundle(tag: u8) -> Vec<u8> {
        write_bundle(
            &[
                ("host-x86_64-unknown-linux", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx1030", &[tag; 3000]),
            ],
            4096,
        )
    }

    #[test]
    fn walks_mixed_bundles_with_padding() {
        let mut region = bundle(1);
        region.resize(region.len().next_multiple_of(4096), 0);
        region.extend(deflate(&bundle(2), 3, Method::Zstd, 3).unwrap());
        region.resize(region.len().next_multiple_of(4096), 0);
        region.extend(deflate(&bundle(3), 2, Method::Zlib, 6).unwrap());
        region.resize(region.len() + 100, 0);
        let items: Vec<Item> = walk(&region, 0, region.len() as u64, WalkOptions::default())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(items.len(), 3);
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item.entries.len(), 2);
            let data = item.read_entry(&region, 1).unwrap();
            assert_eq!(data, vec![i as u8 + 1; 3000]);
        }
        assert!(matches!(
            items[1].format,
            Format::Compressed(CcobHeader { version: 3, .. })
        ));
        assert_eq!(items[1].offset, 8192);
    }

    #[test]
    fn reports_garbage_with_its_offset() {
        let mut region = bundle(1);
        region.resize(8192, 0);
        region.extend_from_slice(b"garbage!");
        let results: Vec<_> =
            walk(&region, 0, region.len() as u64, WalkOptions::default()).collect();
        assert_eq!(results.len(), 2);
        let e = results[1].as_ref().unwrap_err();
        assert_eq!(e.offset(), Some(8192));
    }

    #[test]
    fn ccob_magic_inside_payload_does_not_split_the_bundle() {
        let mut payload = vec![0u8; 4000];
        payload[100..104].copy_from_slice(b"CCOB");
        payload[2000..2024].copy_from_slice(BUNDLE_MAGIC);
        let b = write_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1030", &payload)], 4096);
        let c = deflate(&b, 3, Method::Zstd, 3).unwrap();
        let items: Vec<Item> = walk(&c, 0, c.len() as u64, WalkOptions::default())
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].read_entry(&c, 0).unwrap(), payload);
    }
}
