//! Writing OffloadBinaries the way LLVM's `OffloadBinary::write` lays them
//! out, so that rewriting what was read gives the same bytes:
//!
//! header, entries, string-map records, one string table (ELF style: a
//! leading NUL, strings sorted by their reversed bytes, a string that ends
//! another one shares its tail), zeros to [`ALIGNMENT`], the images back to
//! back, zeros to [`ALIGNMENT`]. Version 1 holds one image per binary
//! (clang 19 concatenates one binary per image); versions 2 and 3 hold any
//! number. Version 3 may compress everything after the header.

use std::collections::BTreeMap;
use std::io::Write as _;

use crate::binary::{
    ALIGNMENT, ENTRY_SIZE, Entry, ImageKind, LATEST_VERSION, MAGIC, OffloadKind, align_up,
    header_size, string_entry_size,
};
use crate::error::{Error, ErrorKind};

/// One image to write, with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// What the image holds.
    pub image_kind: ImageKind,
    /// Who produced it (written as given).
    pub offload_kind: OffloadKind,
    /// The flags word.
    pub flags: u32,
    /// The string map in order (`triple`, `arch`, ...).
    pub strings: Vec<(Vec<u8>, Vec<u8>)>,
    /// The image bytes.
    pub image: Vec<u8>,
}

impl Entry<'_> {
    /// An owned copy for [`Writer`].
    pub fn to_image(&self) -> Image {
        Image {
            image_kind: self.image_kind(),
            offload_kind: self.offload_kind(),
            flags: self.flags(),
            strings: self
                .strings()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
            image: self.image().to_vec(),
        }
    }
}

/// How to compress a version 3 binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// zstd at this level.
    Zstd(i32),
    /// zlib at this level (0 to 9).
    Zlib(u32),
}

/// How to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// Format version, 1 to 3.
    pub version: u32,
    /// Compression (version 3 only).
    pub compression: Option<Compression>,
}

impl Default for WriteOptions {
    /// Version 1, uncompressed: what clang 19 and 20 write.
    fn default() -> Self {
        WriteOptions {
            version: 1,
            compression: None,
        }
    }
}

/// Builds the contents of a `.llvm.offloading` section: binaries appended
/// one after another, each padded to [`ALIGNMENT`].
#[derive(Debug, Default)]
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// An empty section.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Append one binary holding `images` (exactly one for version 1).
    pub fn push(&mut self, images: &[Image], options: &WriteOptions) -> Result<(), Error> {
        let bin = write_binary(images, options)?;
        self.out.extend_from_slice(&bin);
        Ok(())
    }

    /// The section bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// One binary holding `images`, padded to [`ALIGNMENT`].
pub fn write_binary(images: &[Image], options: &WriteOptions) -> Result<Vec<u8>, Error> {
    check_writable(images, options)?;
    let version = options.version;
    let strtab = StringTable::new(
        images
            .iter()
            .flat_map(|img| img.strings.iter())
            .flat_map(|(k, v)| [&k[..], &v[..]]),
    );
    let hsize = header_size(version);
    let nstrings: u64 = images.iter().map(|i| i.strings.len() as u64).sum();
    let entries_size = ENTRY_SIZE * images.len() as u64;
    let strmap_offset = hsize + entries_size;
    let strtab_offset = strmap_offset + string_entry_size(version) * nstrings;
    let data_offset = align_up(strtab_offset + strtab.bytes.len() as u64);
    let images_size: u64 = images.iter().map(|i| i.image.len() as u64).sum();
    let size = align_up(data_offset + images_size);

    let mut out = Vec::with_capacity(size as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&hsize.to_le_bytes());
    let fourth = if version == 1 {
        ENTRY_SIZE
    } else {
        images.len() as u64
    };
    out.extend_from_slice(&fourth.to_le_bytes());
    if version >= 3 {
        out.extend_from_slice(&0u64.to_le_bytes());
    }
    write_entries(&mut out, images, version, strmap_offset, data_offset);
    for (k, v) in images.iter().flat_map(|img| img.strings.iter()) {
        out.extend_from_slice(&(strtab_offset + strtab.offset(k)).to_le_bytes());
        out.extend_from_slice(&(strtab_offset + strtab.offset(v)).to_le_bytes());
        if version >= 2 {
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&strtab.bytes);
    out.resize(data_offset as usize, 0);
    for img in images {
        out.extend_from_slice(&img.image);
    }
    out.resize(size as usize, 0);

    match options.compression {
        None => Ok(out),
        Some(c) => compress(out, hsize, c),
    }
}

/// Refuse what `options.version` cannot hold: an unknown version, no
/// image, several in version 1, compression before version 3, a NUL in a
/// key (or in a version 1 value).
fn check_writable(images: &[Image], options: &WriteOptions) -> Result<(), Error> {
    let version = options.version;
    let bad = |m: String| Error::new(ErrorKind::Unrepresentable, m);
    if version == 0 || version > LATEST_VERSION {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!("cannot write OffloadBinary version {version}"),
        ));
    }
    if images.is_empty() {
        return Err(bad("an OffloadBinary needs at least one image".into()));
    }
    if version == 1 && images.len() != 1 {
        return Err(bad(format!(
            "version 1 holds one image, {} given (write one binary per image)",
            images.len()
        )));
    }
    if options.compression.is_some() && version < 3 {
        return Err(bad(format!(
            "version {version} cannot be compressed; compression needs version 3"
        )));
    }
    for (i, img) in images.iter().enumerate() {
        for (k, v) in &img.strings {
            if k.contains(&0) || (version == 1 && v.contains(&0)) {
                return Err(bad(format!(
                    "image {i}: string `{}` contains a NUL, which version {version} cannot store",
                    String::from_utf8_lossy(k)
                )));
            }
        }
    }
    Ok(())
}

/// The entry records: each image's string map at its place after
/// `strmap_offset`, its bytes after `data_offset`.
fn write_entries(
    out: &mut Vec<u8>,
    images: &[Image],
    version: u32,
    strmap_offset: u64,
    data_offset: u64,
) {
    let mut string_offset = strmap_offset;
    let mut image_offset = data_offset;
    for img in images {
        out.extend_from_slice(&img.image_kind.0.to_le_bytes());
        out.extend_from_slice(&img.offload_kind.0.to_le_bytes());
        out.extend_from_slice(&img.flags.to_le_bytes());
        out.extend_from_slice(&string_offset.to_le_bytes());
        out.extend_from_slice(&(img.strings.len() as u64).to_le_bytes());
        out.extend_from_slice(&image_offset.to_le_bytes());
        out.extend_from_slice(&(img.image.len() as u64).to_le_bytes());
        string_offset += string_entry_size(version) * img.strings.len() as u64;
        image_offset += img.image.len() as u64;
    }
}

/// LLVM's compressed form: the header with `size` = header + compressed
/// body and `inflated_size` = the uncompressed size, the body, zeros to
/// [`ALIGNMENT`].
fn compress(uncompressed: Vec<u8>, hsize: u64, c: Compression) -> Result<Vec<u8>, Error> {
    let body = &uncompressed[hsize as usize..];
    let io = |e: std::io::Error| Error::with_source(ErrorKind::Io, "compressing failed", e);
    let packed = match c {
        Compression::Zstd(level) => zstd::bulk::compress(body, level).map_err(io)?,
        Compression::Zlib(level) => {
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level.min(9)));
            enc.write_all(body).map_err(io)?;
            enc.finish().map_err(io)?
        }
    };
    let size = hsize + packed.len() as u64;
    let mut out = Vec::with_capacity(align_up(size) as usize);
    out.extend_from_slice(&uncompressed[..8]);
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&uncompressed[16..32]);
    out.extend_from_slice(&(uncompressed.len() as u64).to_le_bytes());
    out.extend_from_slice(&packed);
    out.resize(align_up(size) as usize, 0);
    debug_assert_eq!(out.len() as u64 % ALIGNMENT, 0);
    Ok(out)
}

/// LLVM's `StringTableBuilder` in ELF mode, finalized with tail merging.
struct StringTable {
    offsets: BTreeMap<Vec<u8>, u64>,
    bytes: Vec<u8>,
}

impl StringTable {
    fn new<'a>(strings: impl Iterator<Item = &'a [u8]>) -> StringTable {
        let mut unique: Vec<&[u8]> = strings.collect();
        unique.sort_unstable();
        unique.dedup();
        // Descending by reversed bytes, a string that runs out first being
        // the smaller: a suffix sorts right after the strings it ends.
        unique.sort_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
        let mut offsets = BTreeMap::new();
        let mut bytes = vec![0u8];
        let mut previous: &[u8] = &[];
        for s in unique {
            if s.is_empty() {
                // ELF string tables give "" offset 0, the leading NUL.
                offsets.insert(Vec::new(), 0);
                continue;
            }
            if previous.ends_with(s) {
                let at = bytes.len() - s.len() - 1;
                offsets.insert(s.to_vec(), at as u64);
                continue;
            }
            offsets.insert(s.to_vec(), bytes.len() as u64);
            bytes.extend_from_slice(s);
            bytes.push(0);
            previous = s;
        }
        StringTable { offsets, bytes }
    }

    fn offset(&self, s: &[u8]) -> u64 {
        // Every string written was added in `new`.
        self.offsets.get(s).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reader;

    fn image(arch: &str, bytes: &[u8]) -> Image {
        Image {
            image_kind: ImageKind::BITCODE,
            offload_kind: OffloadKind::HIP_V1,
            flags: 0,
            strings: vec![
                (b"arch".to_vec(), arch.as_bytes().to_vec()),
                (b"triple".to_vec(), b"amdgcn-amd-amdhsa".to_vec()),
            ],
            image: bytes.to_vec(),
        }
    }

    #[test]
    fn string_table_shares_tails_like_llvm() {
        let t = StringTable::new(
            [&b"arch"[..], b"triple", b"gfx1100", b"ple", b"", b"arch"].into_iter(),
        );
        assert_eq!(t.bytes, b"\0arch\0triple\0gfx1100\0");
        assert_eq!(t.offset(b"arch"), 1);
        assert_eq!(t.offset(b"ple"), 9);
        assert_eq!(t.offset(b""), 0);
    }

    #[test]
    fn writes_and_reads_every_version() {
        for version in 1..=3 {
            let images = if version == 1 {
                vec![image("gfx1100", b"BC\xc0\xde123")]
            } else {
                vec![image("gfx1100", b"BC\xc0\xde123"), image("gfx942", b"x")]
            };
            let bytes = write_binary(
                &images,
                &WriteOptions {
                    version,
                    compression: None,
                },
            )
            .unwrap();
            assert_eq!(bytes.len() % 8, 0);
            let bins = Reader::new(&bytes).read_all().unwrap();
            assert_eq!(bins.len(), 1);
            assert_eq!(bins[0].version(), version);
            let back: Vec<Image> = bins[0].entries().iter().map(|e| e.to_image()).collect();
            assert_eq!(back, images, "version {version}");
        }
    }

    #[test]
    fn compressed_binaries_read_back() {
        let images = vec![image("gfx1100", &[7u8; 3000]), image("gfx942", &[9u8; 100])];
        for c in [Compression::Zstd(3), Compression::Zlib(6)] {
            let opts = WriteOptions {
                version: 3,
                compression: Some(c),
            };
            let bytes = write_binary(&images, &opts).unwrap();
            assert!(bytes.len() < 1000, "{c:?} did not compress");
            let bins = Reader::new(&bytes).read_all().unwrap();
            assert!(bins[0].compression().is_some());
            let back: Vec<Image> = bins[0].entries().iter().map(|e| e.to_image()).collect();
            assert_eq!(back, images);
        }
    }

    #[test]
    fn refuses_what_a_version_cannot_hold() {
        let two = [image("a", b""), image("b", b"")];
        let v1 = WriteOptions::default();
        assert_eq!(
            write_binary(&two, &v1).unwrap_err().kind(),
            ErrorKind::Unrepresentable
        );
        let mut nul = image("a", b"");
        nul.strings[0].1 = b"a\0b".to_vec();
        assert_eq!(
            write_binary(&[nul.clone()], &v1).unwrap_err().kind(),
            ErrorKind::Unrepresentable
        );
        let v2 = WriteOptions {
            version: 2,
            compression: None,
        };
        assert!(write_binary(&[nul], &v2).is_ok());
        let z = WriteOptions {
            version: 2,
            compression: Some(Compression::Zstd(1)),
        };
        assert_eq!(
            write_binary(&two, &z).unwrap_err().kind(),
            ErrorKind::Unrepresentable
        );
    }
}
