//! The text form of an [`Inspected`] report, what `kpack inspect` prints
//! without `--json`: the file's kind, its marker, sections, wrappers,
//! bundles and their entries, and the totals per target.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::io::{Read, Seek};
use std::path::Path;

use kpack_bundle::Format;
use kpack_elf::ElfKind;

use super::{ArchTotal, BundleReport, ElfReport, Inspected, PeReport};

/// Largest marker section decoded for the text report (markers are a
/// few hundred bytes).
const MAX_MARKER_SHOWN: u64 = 1 << 20;

/// [`Inspected::text`]: the report and whether kernel names are listed.
pub struct Text<'a> {
    report: &'a Inspected,
    kernels: bool,
}

impl Inspected {
    /// The readable report (kernel names listed with `kernels`). The
    /// marker is read again from the file, to show its key and paths.
    pub fn text(&self, kernels: bool) -> Text<'_> {
        Text {
            report: self,
            kernels,
        }
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.report {
            Inspected::Elf(r) => elf_text(f, r, self.kernels),
            Inspected::Pe(r) => pe_text(f, r, self.kernels),
        }
    }
}

/// The marker at `offset`+`len` of `path`: its key (kernel name) and
/// search paths, or why it cannot be shown.
fn marker_text(f: &mut impl Write, path: &Path, offset: u64, len: u64) -> fmt::Result {
    if len > MAX_MARKER_SHOWN {
        return writeln!(f, "  marker: {len} bytes, too large to show");
    }
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|mut file| {
        file.seek(std::io::SeekFrom::Start(offset))?;
        file.take(len).read_to_end(&mut bytes)
    });
    let parsed = match read {
        Ok(_) => kpack_format::Marker::parse(&bytes).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match parsed {
        Ok(m) => {
            writeln!(f, "  marker: kernel name {:?}", m.kernel_name)?;
            for p in &m.search_paths {
                writeln!(f, "    search path {p}")?;
            }
            Ok(())
        }
        Err(e) => writeln!(f, "  marker: unreadable ({e})"),
    }
}

/// The line said of a file with no device code in it.
fn no_device_code(f: &mut impl Write, transformed: bool, wrappers: usize) -> fmt::Result {
    if transformed {
        writeln!(
            f,
            "  device code offloaded by kpack (all {wrappers} wrappers HIPK)"
        )
    } else {
        writeln!(f, "  no device code")
    }
}

fn pe_text(f: &mut impl Write, r: &PeReport, with_names: bool) -> fmt::Result {
    let kind = match r.kind {
        kpack_pe::PeKind::Dll => "PE32+ DLL",
        kpack_pe::PeKind::Exe => "PE32+ executable",
    };
    writeln!(
        f,
        "{}: {kind}, image base {:#x}",
        r.path.display(),
        r.image_base
    )?;
    if r.signed {
        writeln!(
            f,
            "  certificate table present (signed: a rewrite invalidates the signature)"
        )?;
    }
    if !r.device_code {
        no_device_code(f, r.transformed, r.wrappers.len())?;
    }
    if let Some(m) = r.marker.as_ref().filter(|m| m.in_file) {
        let len = m.size.min(m.raw_size.map_or(m.size, u64::from));
        marker_text(f, &r.path, m.offset, len)?;
    }
    for (name, s) in [
        (kpack_pe::FATBIN_SECTION, &r.fatbin),
        (kpack_pe::SEGMENT_SECTION, &r.segment),
        (kpack_pe::MARKER_SECTION, &r.marker),
    ] {
        if let Some(s) = s {
            writeln!(
                f,
                "  {name:<10} rva {:#x}  raw {:#x}+{:#x}  virtual size {} bytes{}",
                s.rva.unwrap_or_default(),
                s.offset,
                s.raw_size.unwrap_or_default(),
                s.size,
                if s.in_file {
                    ""
                } else {
                    " (not all in the file)"
                }
            )?;
        }
    }
    for w in &r.wrappers {
        let target = match w.bundle {
            Some(b) => format!("bundle {b}"),
            None => "no bundle".into(),
        };
        let via = w.via.describe();
        writeln!(
            f,
            "  wrapper {} at {:#x}: {:?} v{} -> {:#x} ({via}) {target}, reserved {}",
            w.index, w.addr, w.magic, w.version, w.pointer, w.reserved
        )?;
    }
    bundles_text(f, &r.bundles, &r.totals, with_names)
}

fn elf_text(f: &mut impl Write, r: &ElfReport, with_names: bool) -> fmt::Result {
    writeln!(f, "{}: {}", r.path.display(), kind_name(r.kind))?;
    if !r.device_code {
        no_device_code(f, r.transformed, r.wrappers.len())?;
    }
    if let Some(m) = r.marker.as_ref().filter(|m| m.in_file) {
        marker_text(f, &r.path, m.offset, m.size)?;
    }
    if let Some(fb) = &r.fatbin {
        writeln!(
            f,
            "  .hip_fatbin  offset {:#x}  addr {:#x}  size {} bytes{}",
            fb.offset,
            fb.addr,
            fb.size,
            if fb.in_file { "" } else { " (no file bytes)" }
        )?;
    }
    for w in &r.wrappers {
        let target = match w.bundle {
            Some(b) => format!("bundle {b}"),
            None => "no bundle".into(),
        };
        writeln!(
            f,
            "  wrapper {} at {:#x}: {:?} v{} -> {:#x} ({}) {target}, reserved {}",
            w.index,
            w.addr,
            w.magic,
            w.version,
            w.pointer,
            w.via.describe(),
            w.reserved
        )?;
    }
    bundles_text(f, &r.bundles, &r.totals, with_names)
}

/// `code object v5, 3 kernels`: a code object's version and kernel count.
pub fn code_object_summary(version: Option<u8>, kernels: usize) -> String {
    format!(
        "code object v{}, {kernels} kernel{}",
        version.map_or("?".into(), |v| v.to_string()),
        if kernels == 1 { "" } else { "s" }
    )
}

fn bundles_text(
    f: &mut impl Write,
    bundles: &[BundleReport],
    totals: &BTreeMap<String, ArchTotal>,
    with_names: bool,
) -> fmt::Result {
    for b in bundles {
        let fmt = match &b.format {
            Format::Plain => "uncompressed".to_string(),
            Format::Compressed(h) => format!(
                "CCOB v{} {:?}, {} bytes inflated",
                h.version, h.method, h.uncompressed_size
            ),
            Format::Elf => "bare code object".to_string(),
        };
        writeln!(
            f,
            "  bundle {} at +{:#x}, {} bytes, {fmt}",
            b.index, b.offset, b.len
        )?;
        for e in &b.entries {
            if e.entry.id.is_host() {
                writeln!(f, "    {:<44} (host)", e.entry.id.raw())?;
                continue;
            }
            let co = e
                .code_object
                .as_ref()
                .map(|c| code_object_summary(c.code_object_version, e.kernel_count))
                .or_else(|| {
                    e.spirv
                        .as_ref()
                        .map(|s| format!("SPIR-V {} module, {} words", s.version, s.words))
                })
                .unwrap_or_else(|| "not a code object".into());
            writeln!(
                f,
                "    {:<44} {:>10} bytes  {co}",
                e.entry.id.raw(),
                e.entry.size
            )?;
            if with_names {
                for k in e.code_object.iter().flat_map(|c| &c.kernels) {
                    writeln!(f, "      {k}")?;
                }
            }
        }
    }
    if !totals.is_empty() {
        writeln!(f, "  totals per target:")?;
        for (arch, t) in totals {
            writeln!(
                f,
                "    {arch:<28} {:>4} code objects {:>12} bytes",
                t.code_objects, t.bytes
            )?;
        }
    }
    Ok(())
}

fn kind_name(k: ElfKind) -> &'static str {
    match k {
        ElfKind::Exec => "ELF executable",
        ElfKind::Dyn => "ELF shared object (library or PIE executable)",
        ElfKind::Rel => "ELF relocatable object",
        ElfKind::BundleFile => "offload bundle / code object file",
    }
}
