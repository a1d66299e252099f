//! `inspect` and `extract` for what the new offload driver leaves in
//! objects and static archives: `.llvm.offloading` (LLVM OffloadBinary)
//! sections, plus old-driver `.hip_fatbin` bundles in archive members.
//!
//! Handled here, by content: static archives (`!<arch>\n`, `!<thin>\n`),
//! ELF files with an `SHT_LLVM_OFFLOADING` section, and bare OffloadBinary
//! files (`10 FF 10 AD`). Every other input goes the fat-binary way.
//!
//! `extract` names files `<member>-<index>-<arch>.<ext>`: `<member>` is the
//! archive member's file name (the input's for an object), `<index>` the
//! image's position in the member as `llvm-objdump --offloading` numbers
//! it, `<arch>` with `:` as `_`, `<ext>` LLVM's for the image kind (`bc`,
//! `o`, ...). Old-driver bundle entries in archive members are
//! `<member>-bundle<N>-<target>.hsaco`. A member name repeated in an
//! archive gets `.<k>` (k = 1, 2, ...) on its later copies.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use kpack_amdgpu::TargetId;
use kpack_binary::FileKind;
use kpack_llvm_offload::{
    Archive, ArchiveFormat, DeviceCode, Entry, MemberKind, ReadOptions, Reader,
};
use serde::Serialize;

/// What kind of input this module handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A static archive.
    Archive,
    /// An ELF file with `.llvm.offloading`.
    Elf,
    /// A bare OffloadBinary file (e.g. a dumped section).
    OffloadBinary,
}

/// Sniff `path`: `Some` if this module handles it.
pub fn detect(path: &Path) -> anyhow::Result<Option<Input>> {
    let kind =
        FileKind::of_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    match kind {
        FileKind::StaticArchive => return Ok(Some(Input::Archive)),
        FileKind::OffloadBinary => return Ok(Some(Input::OffloadBinary)),
        FileKind::HostElf { .. } | FileKind::OtherElf { .. } | FileKind::CodeObject => {}
        _ => return Ok(None),
    }
    // Section headers only: fat binaries can be gigabytes. A malformed
    // ELF is left to the fat-binary reader and its errors.
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let cache = object::ReadCache::new(f);
    let has_offloading = kpack_llvm_offload::has_offloading_section(&cache);
    Ok(has_offloading.then_some(Input::Elf))
}

/// `--json` report of one input.
#[derive(Serialize)]
pub struct Report {
    path: PathBuf,
    /// `ar`, `elf` or `offload-binary`.
    format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    archive_format: Option<ArchiveFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thin: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    symbols: Option<usize>,
    /// For `elf` and `offload-binary`, one member named after the file.
    members: Vec<MemberReport>,
    /// Per arch: images and bytes.
    totals: BTreeMap<String, Total>,
}

#[derive(Serialize)]
struct MemberReport {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    header_offset: Option<u64>,
    size: u64,
    kind: MemberKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    thin_path: Option<PathBuf>,
    entries: Vec<EntryReport>,
    bundles: Vec<BundleEntryReport>,
}

#[derive(Serialize)]
struct EntryReport {
    index: usize,
    section: String,
    binary: usize,
    version: u32,
    /// Offset of the binary in its section.
    binary_offset: u64,
    kind: String,
    producer: String,
    triple: Option<String>,
    arch: Option<String>,
    flags: u32,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    compression: Option<kpack_llvm_offload::CompressionFormat>,
}

#[derive(Serialize)]
struct BundleEntryReport {
    bundle: usize,
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    size: u64,
}

#[derive(Serialize, Default)]
struct Total {
    images: usize,
    bytes: u64,
}

/// One image to write out.
struct Image {
    file_name: String,
    arch: Option<String>,
    bytes: Vec<u8>,
}

fn options(verify_hash: bool) -> ReadOptions {
    ReadOptions {
        verify_hash,
        ..ReadOptions::default()
    }
}

/// Walk `path`: one report, and with `collect` the images themselves.
fn walk(
    path: &Path,
    input: Input,
    verify_hash: bool,
    collect: bool,
) -> anyhow::Result<(Report, Vec<Image>)> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let opts = options(verify_hash);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".into());
    let mut report = Report {
        path: path.to_path_buf(),
        format: match input {
            Input::Archive => "ar",
            Input::Elf => "elf",
            Input::OffloadBinary => "offload-binary",
        },
        archive_format: None,
        thin: None,
        symbols: None,
        members: Vec::new(),
        totals: BTreeMap::new(),
    };
    let mut images = Vec::new();
    let sink = collect.then_some(&mut images);
    match input {
        Input::Archive => walk_archive(path, &data, &opts, &mut report, sink)?,
        Input::Elf => {
            let code =
                DeviceCode::parse(&data, &opts).with_context(|| path.display().to_string())?;
            let mut mr = MemberReport::whole_file(&file_name, &data, MemberKind::Elf);
            member_code(&code, &file_name, &mut mr, sink)
                .with_context(|| path.display().to_string())?;
            report.members.push(mr);
        }
        Input::OffloadBinary => {
            let binaries = Reader::with_options(&data, opts)
                .read_all()
                .with_context(|| path.display().to_string())?;
            let mut mr = MemberReport::whole_file(&file_name, &data, MemberKind::OffloadBinary);
            let mut sink = sink;
            let mut index = 0;
            for (b, bin) in binaries.iter().enumerate() {
                for e in bin.entries() {
                    push_entry(&mut mr, &mut sink, &file_name, "-", b, bin, e, &mut index);
                }
            }
            report.members.push(mr);
        }
    }
    report.add_totals();
    Ok((report, images))
}

impl MemberReport {
    /// The one member of an input that is not an archive: the file itself.
    fn whole_file(name: &str, data: &[u8], kind: MemberKind) -> MemberReport {
        MemberReport {
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
/// `report`, and with `sink` their images.
fn walk_archive(
    path: &Path,
    data: &[u8],
    opts: &ReadOptions,
    report: &mut Report,
    mut sink: Option<&mut Vec<Image>>,
) -> anyhow::Result<()> {
    let ar = Archive::parse(data).with_context(|| path.display().to_string())?;
    report.archive_format = Some(ar.format());
    report.thin = Some(ar.is_thin());
    report.symbols = Some(
        ar.symbols()
            .with_context(|| path.display().to_string())?
            .len(),
    );
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
        let what = || {
            format!(
                "{}: member `{name}` at {:#x}",
                path.display(),
                m.header_offset()
            )
        };
        let bytes: Cow<'_, [u8]> = m.contents(dir).with_context(what)?;
        let mut mr = MemberReport {
            name: name.clone(),
            header_offset: Some(m.header_offset()),
            size: m.size(),
            kind: MemberKind::of(&bytes),
            thin_path: m.is_thin().then(|| m.thin_path(dir)),
            entries: Vec::new(),
            bundles: Vec::new(),
        };
        if mr.kind == MemberKind::Elf {
            let code = DeviceCode::parse(&bytes, opts).with_context(what)?;
            member_code(&code, &stem, &mut mr, sink.as_deref_mut()).with_context(what)?;
        }
        report.members.push(mr);
    }
    Ok(())
}

impl Report {
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

#[allow(
    clippy::too_many_arguments,
    reason = "one call site per input kind; a struct would only rename them"
)]
fn push_entry(
    mr: &mut MemberReport,
    sink: &mut Option<&mut Vec<Image>>,
    stem: &str,
    section: &str,
    binary: usize,
    bin: &kpack_llvm_offload::Binary<'_>,
    e: &Entry<'_>,
    index: &mut usize,
) {
    let arch = e.arch().map(String::from);
    if let Some(out) = sink.as_deref_mut() {
        let arch_part = arch.as_deref().unwrap_or("noarch").replace(':', "_");
        out.push(Image {
            file_name: format!("{stem}-{index}-{arch_part}.{}", e.image_kind().extension()),
            arch: arch.clone(),
            bytes: e.image().to_vec(),
        });
    }
    mr.entries.push(EntryReport {
        index: *index,
        section: section.to_string(),
        binary,
        version: bin.version(),
        binary_offset: bin.offset(),
        kind: e.image_kind().name().into_owned(),
        producer: e.offload_kind().name().into_owned(),
        triple: e.triple().map(String::from),
        arch,
        flags: e.flags(),
        size: e.image().len() as u64,
        compression: bin.compression(),
    });
    *index += 1;
}

/// Entries and bundle entries of one ELF member.
fn member_code(
    code: &DeviceCode<'_>,
    stem: &str,
    mr: &mut MemberReport,
    mut sink: Option<&mut Vec<Image>>,
) -> anyhow::Result<()> {
    let mut index = 0;
    for s in &code.offloading {
        for (b, bin) in s.binaries.iter().enumerate() {
            for e in bin.entries() {
                push_entry(mr, &mut sink, stem, &s.name, b, bin, e, &mut index);
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
                    out.push(Image {
                        file_name: format!("{stem}-bundle{b}-{t}.hsaco"),
                        arch: target.clone(),
                        bytes: fb.read_entry(b, i)?,
                    });
                }
                mr.bundles.push(BundleEntryReport {
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

/// The report of `kpack inspect` for one input.
pub fn inspect(path: &Path, input: Input, verify_hash: bool) -> anyhow::Result<Report> {
    walk(path, input, verify_hash, false).map(|(r, _)| r)
}

impl Report {
    /// Human-readable text on stdout.
    pub fn print_text(&self) {
        match self.format {
            "ar" => println!(
                "{}: static archive ({}{}), {} member{}, {} symbol{}",
                self.path.display(),
                serde_json::to_value(self.archive_format)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                if self.thin == Some(true) {
                    ", thin"
                } else {
                    ""
                },
                self.members.len(),
                if self.members.len() == 1 { "" } else { "s" },
                self.symbols.unwrap_or(0),
                if self.symbols == Some(1) { "" } else { "s" },
            ),
            "elf" => println!(
                "{}: ELF with .llvm.offloading (new offload driver)",
                self.path.display()
            ),
            _ => println!("{}: OffloadBinary file", self.path.display()),
        }
        let archive = self.format == "ar";
        for m in &self.members {
            m.print_text(archive);
        }
        if !self.totals.is_empty() {
            println!("  totals per target:");
            for (arch, t) in &self.totals {
                println!(
                    "    {arch:<28} {:>4} image{} {:>12} bytes",
                    t.images,
                    if t.images == 1 { " " } else { "s" },
                    t.bytes
                );
            }
        }
    }
}

impl MemberReport {
    /// The member's lines (its own header line only in an `archive`).
    fn print_text(&self, archive: bool) {
        let m = self;
        let indent = if archive { "    " } else { "  " };
        if archive {
            let kind = match m.kind {
                MemberKind::Elf => "ELF",
                MemberKind::Bitcode => "LLVM bitcode (not read)",
                MemberKind::OffloadBinary => "OffloadBinary",
                MemberKind::Archive => "nested archive (not read)",
                MemberKind::Other => "not an object",
            };
            let thin = m
                .thin_path
                .as_ref()
                .map(|p| format!(", thin: {}", p.display()))
                .unwrap_or_default();
            println!(
                "  member {} at {:#x} ({} bytes{thin}): {kind}",
                m.name,
                m.header_offset.unwrap_or(0),
                m.size
            );
        }
        if m.kind == MemberKind::Elf && m.entries.is_empty() && m.bundles.is_empty() {
            println!("{indent}no device code");
        }
        for e in &m.entries {
            println!(
                "{indent}[{}] {:<8} {:<5} {:<20} {:<16} {:>10} bytes  ({} binary {} v{}{})",
                e.index,
                e.kind,
                e.producer,
                e.triple.as_deref().unwrap_or("-"),
                e.arch.as_deref().unwrap_or("-"),
                e.size,
                e.section,
                e.binary,
                e.version,
                e.compression
                    .map(|c| format!(", {c:?}"))
                    .unwrap_or_default()
            );
        }
        for b in &m.bundles {
            println!(
                "{indent}.hip_fatbin bundle {} {:<44} {:>10} bytes",
                b.bundle, b.id, b.size
            );
        }
    }
}

/// `kpack extract` for one input: write every image (or those of
/// `targets`) into `output`, staged then moved into place.
pub fn extract(
    path: &Path,
    input: Input,
    all: bool,
    targets: &[TargetId],
    output: &Path,
    verify_hash: bool,
    force: bool,
) -> crate::exit::CliResult {
    let (_, images) = walk(path, input, verify_hash, true)?;
    if images.is_empty() {
        return Err(anyhow::anyhow!("{}: no device code", path.display()).into());
    }
    let present: BTreeSet<String> = images.iter().filter_map(|i| i.arch.clone()).collect();
    let matches = |arch: &Option<String>| {
        all || arch.as_deref().is_some_and(|a| {
            targets
                .iter()
                .any(|t| TargetId::parse(a).is_ok_and(|p| &p == t) || a == t.to_string())
        })
    };
    for t in targets {
        if !images.iter().any(|i| {
            i.arch
                .as_deref()
                .is_some_and(|a| TargetId::parse(a).is_ok_and(|p| &p == t) || a == t.to_string())
        }) {
            return Err(anyhow::anyhow!(
                "{}: no image for target {t}; present: {}",
                path.display(),
                present.iter().cloned().collect::<Vec<_>>().join(", ")
            )
            .into());
        }
    }
    let chosen: Vec<&Image> = images.iter().filter(|i| matches(&i.arch)).collect();
    for img in &chosen {
        crate::safety::not_existing(&output.join(&img.file_name), force)?;
    }
    let (created, stage) = crate::archive::extract_stage(output)?;
    for img in &chosen {
        let p = stage.path().join(&img.file_name);
        std::fs::write(&p, &img.bytes).with_context(|| format!("cannot write {}", p.display()))?;
    }
    for img in &chosen {
        let dest = output.join(&img.file_name);
        std::fs::rename(stage.path().join(&img.file_name), &dest)
            .with_context(|| format!("cannot move into {}", dest.display()))?;
        println!("{}\t{}", dest.display(), img.bytes.len());
    }
    drop(stage);
    created.keep();
    Ok(())
}
