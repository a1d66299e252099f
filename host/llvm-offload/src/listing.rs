//! What `kpack inspect` and `kpack extract` report of the files the new
//! offload driver leaves: a static archive's members, an ELF object's
//! `.llvm.offloading` images and `.hip_fatbin` bundle entries, or a bare
//! OffloadBinary file, as a [`serde::Serialize`] [`Listing`] built by
//! [`list`] (and the images themselves by [`list_with_images`]).
//!
//! Images are named `<member>-<index>-<arch>.<ext>`: `<member>` is the
//! archive member's file name (the input's for an object), `<index>` the
//! image's position in the member as `llvm-objdump --offloading` numbers
//! it, `<arch>` with `:` as `_`, `<ext>` LLVM's for the image kind (`bc`,
//! `o`, ...). Old-driver bundle entries in archive members are
//! `<member>-bundle<N>-<target>.hsaco`. A member name repeated in an
//! archive gets `.<k>` (k = 1, 2, ...) on its later copies.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::archive::{Archive, ArchiveFormat, MemberKind};
use crate::binary::{Binary, CompressionFormat, Entry, ReadOptions, Reader};
use crate::elf::DeviceCode;
use crate::error::{Error, ErrorKind};

/// The containers a [`Listing`] is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// A static archive.
    Archive,
    /// An ELF file with `.llvm.offloading`.
    Elf,
    /// A bare OffloadBinary file (e.g. a dumped section).
    OffloadBinary,
}

/// The report of one input.
#[derive(Debug, Serialize)]
pub struct Listing {
    /// The file.
    pub path: PathBuf,
    /// `ar`, `elf` or `offload-binary`.
    pub format: &'static str,
    /// An archive's flavour (GNU, BSD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_format: Option<ArchiveFormat>,
    /// Whether an archive is thin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thin: Option<bool>,
    /// An archive's symbol count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbols: Option<usize>,
    /// For `elf` and `offload-binary`, one member named after the file.
    pub members: Vec<MemberListing>,
    /// Per arch: images and bytes.
    pub totals: BTreeMap<String, Total>,
}

/// One archive member (or the file itself).
#[derive(Debug, Serialize)]
pub struct MemberListing {
    /// Its name in the archive.
    pub name: String,
    /// Where its header starts in the archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_offset: Option<u64>,
    /// Its size in bytes.
    pub size: u64,
    /// What it is.
    pub kind: MemberKind,
    /// A thin member's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thin_path: Option<PathBuf>,
    /// Its OffloadBinary images.
    pub entries: Vec<EntryListing>,
    /// Its `.hip_fatbin` bundle entries.
    pub bundles: Vec<BundleEntryListing>,
}

/// One OffloadBinary image.
#[derive(Debug, Serialize)]
pub struct EntryListing {
    /// Its position in the member, as `llvm-objdump --offloading` numbers it.
    pub index: usize,
    /// The section it is in (`-` for a bare OffloadBinary file).
    pub section: String,
    /// The binary's position in the section.
    pub binary: usize,
    /// The binary's version.
    pub version: u32,
    /// Offset of the binary in its section.
    pub binary_offset: u64,
    /// The image kind's name (`bitcode`, `elf`, ...).
    pub kind: String,
    /// The producer (`hip`, `openmp`, ...).
    pub producer: String,
    /// Its `triple` string.
    pub triple: Option<String>,
    /// Its `arch` string.
    pub arch: Option<String>,
    /// Its flags.
    pub flags: u32,
    /// The image's size in bytes.
    pub size: u64,
    /// How the binary is compressed (v3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<CompressionFormat>,
}

/// One device entry of a member's `.hip_fatbin` bundles.
#[derive(Debug, Serialize)]
pub struct BundleEntryListing {
    /// The bundle's position.
    pub bundle: usize,
    /// The entry id.
    pub id: String,
    /// Its target id, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its size in bytes.
    pub size: u64,
}

/// Images and bytes of one arch.
#[derive(Debug, Serialize, Default)]
pub struct Total {
    /// Images.
    pub images: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// One image to write out.
#[derive(Debug)]
pub struct ListedImage {
    /// Its file name (see the module documentation).
    pub file_name: String,
    /// Its arch, if it names one.
    pub arch: Option<String>,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// List `path`, read as `container`.
pub fn list(path: &Path, container: Container, opts: ReadOptions) -> Result<Listing, Error> {
    walk(path, container, opts, false).map(|(r, _)| r)
}

/// List `path`, read as `container`, and collect every image.
pub fn list_with_images(
    path: &Path,
    container: Container,
    opts: ReadOptions,
) -> Result<(Listing, Vec<ListedImage>), Error> {
    walk(path, container, opts, true)
}

/// Walk `path`: one listing, and with `collect` the images themselves.
fn walk(
    path: &Path,
    container: Container,
    opts: ReadOptions,
    collect: bool,
) -> Result<(Listing, Vec<ListedImage>), Error> {
    let data = std::fs::read(path).map_err(|e| {
        Error::with_source(ErrorKind::Io, format!("cannot read {}", path.display()), e)
    })?;
    let in_file = |e: Error| e.context(path.display().to_string());
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".into());
    let mut listing = Listing {
        path: path.to_path_buf(),
        format: match container {
            Container::Archive => "ar",
            Container::Elf => "elf",
            Container::OffloadBinary => "offload-binary",
        },
        archive_format: None,
        thin: None,
        symbols: None,
        members: Vec::new(),
        totals: BTreeMap::new(),
    };
    let mut images = Vec::new();
    let sink = collect.then_some(&mut images);
    match container {
        Container::Archive => walk_archive(path, &data, &opts, &mut listing, sink)?,
        Container::Elf => {
            let code = DeviceCode::parse(&data, &opts).map_err(in_file)?;
            let mut m = MemberListing::whole_file(&file_name, &data, MemberKind::Elf);
            member_code(&code, &file_name, &mut m, sink).map_err(in_file)?;
            listing.members.push(m);
        }
        Container::OffloadBinary => {
            let binaries = Reader::with_options(&data, opts)
                .read_all()
                .map_err(in_file)?;
            let mut m = MemberListing::whole_file(&file_name, &data, MemberKind::OffloadBinary);
            let mut sink = sink;
            let mut index = 0;
            for (b, bin) in binaries.iter().enumerate() {
                for e in bin.entries() {
                    let at = EntryAt {
                        section: "-",
                        binary: b,
                        bin,
                    };
                    push_entry(&mut m, &mut sink, &file_name, &at, e, &mut index);
                }
            }
            listing.members.push(m);
        }
    }
    listing.add_totals();
    Ok((listing, images))
}

impl MemberListing {
    /// The one member of an input that is not an archive: the file itself.
    fn whole_file(name: &str, data: &[u8], kind: MemberKind) -> MemberListing {
        MemberListing {
            name: name.to_string(),
            header_offset: None,
            size: data.len() as u64,
            kind,
            thin_path: None,
            entries: Vec::new(),
            bundles: Vec::new(),
        }
    }
}

/// The members of the static archive `data` (read from `path`) into
/// `listing`, and with `sink` their images.
fn walk_archive(
    path: &Path,
    data: &[u8],
    opts: &ReadOptions,
    listing: &mut Listing,
    mut sink: Option<&mut Vec<ListedImage>>,
) -> Result<(), Error> {
    let in_file = |e: Error| e.context(path.display().to_string());
    let ar = Archive::parse(data).map_err(in_file)?;
    listing.archive_format = Some(ar.format());
    listing.thin = Some(ar.is_thin());
    listing.symbols = Some(ar.symbols().map_err(in_file)?.len());
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for m in ar.members() {
        let name = m.name().into_owned();
        let base = Path::new(&name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.clone());
        let k = seen.entry(base.clone()).or_default();
        let stem = if *k == 0 { base } else { format!("{base}.{k}") };
        *k += 1;
        let in_member = |e: Error| {
            e.context(format!(
                "{}: member `{name}` at {:#x}",
                path.display(),
                m.header_offset()
            ))
        };
        let bytes: Cow<'_, [u8]> = m.contents(dir).map_err(in_member)?;
        let mut ml = MemberListing {
            name: name.clone(),
            header_offset: Some(m.header_offset()),
            size: m.size(),
            kind: MemberKind::of(&bytes),
            thin_path: m.is_thin().then(|| m.thin_path(dir)),
            entries: Vec::new(),
            bundles: Vec::new(),
        };
        if ml.kind == MemberKind::Elf {
            let code = DeviceCode::parse(&bytes, opts).map_err(in_member)?;
            member_code(&code, &stem, &mut ml, sink.as_deref_mut()).map_err(in_member)?;
        }
        listing.members.push(ml);
    }
    Ok(())
}

impl Listing {
    /// Images and bytes per arch (bundle entries: per target, else id).
    fn add_totals(&mut self) {
        for m in &self.members {
            for e in &m.entries {
                let t = self
                    .totals
                    .entry(e.arch.clone().unwrap_or_else(|| "(no arch)".into()))
                    .or_default();
                t.images += 1;
                t.bytes += e.size;
            }
            for b in &m.bundles {
                let t = self
                    .totals
                    .entry(b.target.clone().unwrap_or_else(|| b.id.clone()))
                    .or_default();
                t.images += 1;
                t.bytes += b.size;
            }
        }
    }
}

/// Where an image is: its section, and its binary and that binary's
/// position in the section.
struct EntryAt<'s, 'b, 'd> {
    section: &'s str,
    binary: usize,
    bin: &'b Binary<'d>,
}

fn push_entry(
    m: &mut MemberListing,
    sink: &mut Option<&mut Vec<ListedImage>>,
    stem: &str,
    at: &EntryAt<'_, '_, '_>,
    e: &Entry<'_>,
    index: &mut usize,
) {
    let arch = e.arch().map(String::from);
    if let Some(out) = sink.as_deref_mut() {
        let arch_part = arch.as_deref().unwrap_or("noarch").replace(':', "_");
        out.push(ListedImage {
            file_name: format!("{stem}-{index}-{arch_part}.{}", e.image_kind().extension()),
            arch: arch.clone(),
            bytes: e.image().to_vec(),
        });
    }
    m.entries.push(EntryListing {
        index: *index,
        section: at.section.to_string(),
        binary: at.binary,
        version: at.bin.version(),
        binary_offset: at.bin.offset(),
        kind: e.image_kind().name().into_owned(),
        producer: e.offload_kind().name().into_owned(),
        triple: e.triple().map(String::from),
        arch,
        flags: e.flags(),
        size: e.image().len() as u64,
        compression: at.bin.compression(),
    });
    *index += 1;
}

/// Entries and bundle entries of one ELF member.
fn member_code(
    code: &DeviceCode<'_>,
    stem: &str,
    m: &mut MemberListing,
    mut sink: Option<&mut Vec<ListedImage>>,
) -> Result<(), Error> {
    let mut index = 0;
    for s in &code.offloading {
        for (b, bin) in s.binaries.iter().enumerate() {
            for e in bin.entries() {
                let at = EntryAt {
                    section: &s.name,
                    binary: b,
                    bin,
                };
                push_entry(m, &mut sink, stem, &at, e, &mut index);
            }
        }
    }
    if let Some(fb) = &code.fatbin {
        for (b, item) in fb.bundles.iter().enumerate() {
            for (i, entry) in item.entries.iter().enumerate() {
                if entry.id.is_host() {
                    continue;
                }
                let target = entry.id.target().map(|t| t.to_string());
                if let Some(out) = sink.as_deref_mut() {
                    let t = target
                        .clone()
                        .unwrap_or_else(|| entry.id.raw().to_string())
                        .replace(':', "_");
                    out.push(ListedImage {
                        file_name: format!("{stem}-bundle{b}-{t}.hsaco"),
                        arch: target.clone(),
                        bytes: fb.read_entry(b, i)?,
                    });
                }
                m.bundles.push(BundleEntryListing {
                    bundle: b,
                    id: entry.id.raw().to_string(),
                    target,
                    size: entry.size,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::{ImageKind, OffloadKind};
    use crate::write::{Image, WriteOptions, Writer};

    #[test]
    fn lists_a_bare_offload_binary_file_and_names_its_images() {
        let image = |arch: &str| Image {
            image_kind: ImageKind::BITCODE,
            offload_kind: OffloadKind::HIP_V1,
            flags: 0,
            strings: vec![
                (b"triple".to_vec(), b"amdgcn-amd-amdhsa".to_vec()),
                (b"arch".to_vec(), arch.as_bytes().to_vec()),
            ],
            image: b"BC\xc0\xde".to_vec(),
        };
        let mut section = Writer::new();
        for arch in ["gfx1100", "gfx90a:xnack+"] {
            section
                .push(&[image(arch)], &WriteOptions::default())
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dumped.bin");
        std::fs::write(&path, section.finish()).unwrap();

        let (listing, images) =
            list_with_images(&path, Container::OffloadBinary, ReadOptions::default()).unwrap();
        assert_eq!(listing.format, "offload-binary");
        assert_eq!(listing.members.len(), 1);
        let m = &listing.members[0];
        assert_eq!((m.name.as_str(), m.entries.len()), ("dumped.bin", 2));
        assert_eq!((m.entries[0].binary, m.entries[1].binary), (0, 1));
        assert_eq!(m.entries[1].arch.as_deref(), Some("gfx90a:xnack+"));
        assert_eq!(listing.totals["gfx1100"].images, 1);
        let names: Vec<&str> = images.iter().map(|i| i.file_name.as_str()).collect();
        assert_eq!(
            names,
            ["dumped.bin-0-gfx1100.bc", "dumped.bin-1-gfx90a_xnack+.bc"]
        );
    }

    #[test]
    fn an_unreadable_file_names_it_and_keeps_the_cause() {
        let e = list(
            Path::new("/nonexistent/x.a"),
            Container::Archive,
            ReadOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), "cannot read /nonexistent/x.a");
        assert!(std::error::Error::source(&e).is_some());
    }
}
