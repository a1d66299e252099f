//! The human form of a [`Listing`] ([`Listing::text`]), what `kpack
//! inspect` prints for a static archive, a new-driver object or a bare
//! OffloadBinary file.

use std::fmt::Write as _;

use crate::archive::{ArchiveFormat, MemberKind};
use crate::listing::{Listing, MemberListing};

impl ArchiveFormat {
    /// The dialect's name, as in the JSON listing (`gnu`, `bsd64`,
    /// `aix-big`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ArchiveFormat::Unknown => "unknown",
            ArchiveFormat::Gnu => "gnu",
            ArchiveFormat::Gnu64 => "gnu64",
            ArchiveFormat::Bsd => "bsd",
            ArchiveFormat::Bsd64 => "bsd64",
            ArchiveFormat::Coff => "coff",
            ArchiveFormat::AixBig => "aix-big",
        }
    }
}

impl Listing {
    /// The listing as text: a header line for the file, each member's
    /// images and bundle entries, and the totals per target.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let path = self.path.display();
        match self.format {
            "ar" => {
                let _ = writeln!(
                    out,
                    "{path}: static archive ({}{}), {} member{}, {} symbol{}",
                    self.archive_format.map_or("", ArchiveFormat::name),
                    if self.thin == Some(true) {
                        ", thin"
                    } else {
                        ""
                    },
                    self.members.len(),
                    plural(self.members.len()),
                    self.symbols.unwrap_or(0),
                    if self.symbols == Some(1) { "" } else { "s" },
                );
            }
            "elf" => {
                let _ = writeln!(
                    out,
                    "{path}: ELF with .llvm.offloading (new offload driver)"
                );
            }
            _ => {
                let _ = writeln!(out, "{path}: OffloadBinary file");
            }
        }
        let archive = self.format == "ar";
        for m in &self.members {
            m.text(&mut out, archive);
        }
        if !self.totals.is_empty() {
            out.push_str("  totals per target:\n");
            for (arch, t) in &self.totals {
                let _ = writeln!(
                    out,
                    "    {arch:<28} {:>4} image{} {:>12} bytes",
                    t.images,
                    if t.images == 1 { " " } else { "s" },
                    t.bytes
                );
            }
        }
        out
    }
}

impl MemberListing {
    /// The member's lines (its own header line only in an `archive`).
    fn text(&self, out: &mut String, archive: bool) {
        let indent = if archive { "    " } else { "  " };
        if archive {
            let kind = match self.kind {
                MemberKind::Elf => "ELF",
                MemberKind::Bitcode => "LLVM bitcode (not read)",
                MemberKind::OffloadBinary => "OffloadBinary",
                MemberKind::Archive => "nested archive (not read)",
                MemberKind::Other => "not an object",
            };
            let thin = self
                .thin_path
                .as_ref()
                .map(|p| format!(", thin: {}", p.display()))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  member {} at {:#x} ({} bytes{thin}): {kind}",
                self.name,
                self.header_offset.unwrap_or(0),
                self.size
            );
        }
        if self.kind == MemberKind::Elf && self.entries.is_empty() && self.bundles.is_empty() {
            let _ = writeln!(out, "{indent}no device code");
        }
        for e in &self.entries {
            let _ = writeln!(
                out,
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
        for b in &self.bundles {
            let _ = writeln!(
                out,
                "{indent}.hip_fatbin bundle {} {:<44} {:>10} bytes",
                b.bundle, b.id, b.size
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::listing::{EntryListing, Total};

    #[test]
    fn archive_format_names_match_the_json_listing() {
        for f in [
            ArchiveFormat::Gnu,
            ArchiveFormat::AixBig,
            ArchiveFormat::Bsd64,
        ] {
            let json = serde_json::to_value(f).unwrap();
            assert_eq!(json.as_str(), Some(f.name()));
        }
    }

    #[test]
    fn object_listing_reads_one_line_per_image_and_totals() {
        let entry = EntryListing {
            index: 0,
            section: ".llvm.offloading".into(),
            binary: 0,
            version: 1,
            binary_offset: 0,
            kind: "elf".into(),
            producer: "hip".into(),
            triple: Some("amdgcn-amd-amdhsa".into()),
            arch: Some("gfx90a".into()),
            flags: 0,
            size: 100,
            compression: None,
        };
        let listing = Listing {
            path: "a.o".into(),
            format: "elf",
            archive_format: None,
            thin: None,
            symbols: None,
            members: vec![MemberListing {
                name: "a.o".into(),
                header_offset: None,
                size: 200,
                kind: MemberKind::Elf,
                thin_path: None,
                entries: vec![entry],
                bundles: vec![],
            }],
            totals: BTreeMap::from([(
                "gfx90a".into(),
                Total {
                    images: 1,
                    bytes: 100,
                },
            )]),
        };
        let text = listing.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "a.o: ELF with .llvm.offloading (new offload driver)"
        );
        assert!(lines[1].starts_with("  [0] elf      hip   amdgcn-amd-amdhsa    gfx90a"));
        assert!(lines[1].ends_with("100 bytes  (.llvm.offloading binary 0 v1)"));
        assert_eq!(lines[2], "  totals per target:");
        assert!(lines[3].contains("1 image "), "{}", lines[3]);
        assert_eq!(lines.len(), 4);
    }
}
