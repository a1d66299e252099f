//! Structural checks of a host binary after (or without) the transform:
//! what the loader, strip, objcopy and patchelf rely on, and what kpack
//! promises (markers mapped and parsable, wrappers redirected, no
//! relocation into removed bytes).

use kpack_bundle::{Magic, WrapperFields};
use kpack_format::{Finding, error_chain};
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader as _, ProgramHeader as _};
use object::{Object, ObjectSection, ReadRef};

use crate::machine::Machine;
use crate::read::{FATBIN_SECTION, MARKER_SECTION, SEGMENT_SECTION, WRAPPER_SIZE, is_fatbin_run};

/// The bytes a check was given are not a 64-bit little-endian ELF at all.
#[derive(Debug, thiserror::Error)]
#[error("not a 64-bit little-endian ELF")]
pub struct NotElf(#[source] object::read::Error);

impl NotElf {
    /// The crate error for the file at `path` these bytes came from.
    pub fn in_file(self, path: &std::path::Path) -> crate::Error {
        crate::Error::new(
            crate::ErrorKind::Unsupported,
            path,
            "not a 64-bit little-endian ELF",
        )
        .with_source(self.0)
    }
}

/// Check the ELF image `data` (the whole file). Returns one finding (check
/// `elf`, an error, its path left to the caller) per problem; empty means
/// the file passed. `Err` only when the bytes are not a 64-bit
/// little-endian ELF at all.
pub fn verify_image<'d, R: ReadRef<'d>>(data: R) -> Result<Vec<Finding>, NotElf> {
    verify(data, false)
}

/// The checks of [`verify_image`] for the output of [`crate::prune`]: the
/// same structure, but the device code stays, so every wrapper must still
/// be HIPF and point into `.hip_fatbin`'s file bytes (at a bundle the
/// HIP runtime reads as before), and there is no marker.
pub fn verify_pruned_image<'d, R: ReadRef<'d>>(data: R) -> Result<Vec<Finding>, NotElf> {
    verify(data, true)
}

fn verify<'d, R: ReadRef<'d>>(data: R, pruned: bool) -> Result<Vec<Finding>, NotElf> {
    let obj = ElfFile64::<LE, R>::parse(data).map_err(NotElf)?;
    let phdrs = obj.elf_program_headers();
    let mut c = Checks {
        obj: &obj,
        data,
        file_len: data.len().unwrap_or(0),
        phdrs,
        loads: phdrs
            .iter()
            .filter(|p| p.p_type(LE) == elf::PT_LOAD)
            .collect(),
        pruned,
        f: Vec::new(),
        w: Vec::new(),
        hipf: 0,
    };
    c.segments();
    c.program_header_table();
    c.interpreter();
    c.sections_in_segments();
    let marker_addr = c.marker();
    let relas = relocation_targets(&obj);
    let wrapper_slots = c.wrappers(marker_addr, &relas);
    if pruned {
        c.pointers_into_device_code(&relas, &wrapper_slots);
    }
    c.removed_device_code(&relas);
    if c.hipf > 0 {
        // One line for all of them (a real library has dozens), and the
        // likely reason: a pruned file keeps its device code.
        c.f.push(format!(
            "{} wrapper(s) are HIPF: device code not offloaded (if this is `kpack prune` output, check it with `verify-elf --pruned`)",
            c.hipf
        ));
    }
    let errors = c.f.into_iter().map(|m| Finding::error("elf", m));
    let warnings = c.w.into_iter().map(|m| Finding::warning("elf", m));
    Ok(errors.chain(warnings).collect())
}

type Phdr = elf::ProgramHeader64<LE>;

/// The file under check and the findings so far.
struct Checks<'d, 'o, R: ReadRef<'d>> {
    obj: &'o ElfFile64<'d, LE, R>,
    data: R,
    file_len: u64,
    phdrs: &'d [Phdr],
    /// The `PT_LOAD` entries, in table order.
    loads: Vec<&'d Phdr>,
    /// Checking the output of [`crate::prune`].
    pruned: bool,
    /// Errors.
    f: Vec<String>,
    /// Warnings: what some tools write and loaders accept.
    w: Vec<String>,
    /// HIPF wrappers in a file checked as offloaded.
    hipf: usize,
}

impl<'d, R: ReadRef<'d>> Checks<'d, '_, R> {
    /// Segments: aligned, in the file, ascending, no shared file bytes.
    fn segments(&mut self) {
        let file_len = self.file_len;
        let mut last_vaddr = 0;
        let loads = self.loads.clone();
        for (i, p) in loads.into_iter().enumerate() {
            let (off, va, fsz, msz, al) = (
                p.p_offset(LE),
                p.p_vaddr(LE),
                p.p_filesz(LE),
                p.p_memsz(LE),
                p.p_align(LE),
            );
            if al > 1 && (off % al != va % al) {
                self.f.push(format!(
                    "PT_LOAD {i}: p_offset {off:#x} and p_vaddr {va:#x} differ modulo p_align {al:#x}"
                ));
            }
            if off % 4096 != va % 4096 {
                self.f.push(format!(
                    "PT_LOAD {i}: p_offset {off:#x} and p_vaddr {va:#x} differ modulo the page size"
                ));
            }
            if off.checked_add(fsz).is_none_or(|e| e > file_len) {
                self.f.push(format!("PT_LOAD {i}: file range {off:#x}+{fsz:#x} runs past the end of the file ({file_len:#x})"));
            }
            if fsz > msz {
                self.f
                    .push(format!("PT_LOAD {i}: p_filesz {fsz:#x} > p_memsz {msz:#x}"));
            }
            if va < last_vaddr {
                self.f
                    .push(format!("PT_LOAD {i}: not in ascending p_vaddr order"));
            }
            last_vaddr = va;
            self.segment_pairs(i, p);
        }
    }

    /// `PT_LOAD` `i` against every later one.
    fn segment_pairs(&mut self, i: usize, p: &Phdr) {
        let (off, fsz, msz) = (p.p_offset(LE), p.p_filesz(LE), p.p_memsz(LE));
        for (j, q) in self.loads.iter().enumerate().skip(i + 1) {
            let (qo, qf) = (q.p_offset(LE), q.p_filesz(LE));
            if fsz > 0 && qf > 0 && u128::from(off) < end(qo, qf) && u128::from(qo) < end(off, fsz)
            {
                self.f.push(format!("PT_LOAD {i} and {j} share file bytes"));
            }
            if (fsz == 0 || qf == 0) && off == qo && msz > 0 && q.p_memsz(LE) > 0 {
                self.f.push(format!("PT_LOAD {i} and {j} start at the same file offset {off:#x} and one has no file bytes"));
            }
        }
    }

    /// The program header table: mapped by a `PT_LOAD`, described by
    /// `PT_PHDR`.
    fn program_header_table(&mut self) {
        let hdr = self.obj.elf_header();
        let phoff = hdr.e_phoff(LE);
        let phlen = u64::from(hdr.e_phnum(LE)) * u64::from(hdr.e_phentsize(LE));
        self.table_between_sections(phoff, phlen);
        let covering = self.loads.iter().find(|p| {
            p.p_offset(LE) <= phoff && end(phoff, phlen) <= end(p.p_offset(LE), p.p_filesz(LE))
        });
        let Some(l) = covering else {
            self.f.push(format!(
                "program header table at {phoff:#x} is not covered by a PT_LOAD"
            ));
            return;
        };
        let Some(ph) = self.phdrs.iter().find(|p| p.p_type(LE) == elf::PT_PHDR) else {
            return;
        };
        let expect = l.p_vaddr(LE).wrapping_add(phoff - l.p_offset(LE));
        if ph.p_offset(LE) != phoff || ph.p_vaddr(LE) != expect {
            self.f.push(format!(
                "PT_PHDR (offset {:#x}, vaddr {:#x}) does not describe the table at offset {phoff:#x} / vaddr {expect:#x}",
                ph.p_offset(LE),
                ph.p_vaddr(LE)
            ));
        }
        if ph.p_filesz(LE) != phlen {
            // AMD's offloader leaves the old size (loaders read e_phnum,
            // not PT_PHDR's size): worth a look, not a broken file.
            self.w.push(format!(
                "PT_PHDR size {:#x} is not e_phnum * e_phentsize ({phlen:#x})",
                ph.p_filesz(LE)
            ));
        }
    }

    /// `PT_INTERP` holds one NUL-terminated path.
    fn interpreter(&mut self) {
        let Some(interp) = self.phdrs.iter().find(|p| p.p_type(LE) == elf::PT_INTERP) else {
            return;
        };
        let ok = interp
            .data(LE, self.data)
            .ok()
            .is_some_and(|d| d.last() == Some(&0) && d.len() > 1 && !d[..d.len() - 1].contains(&0));
        if !ok {
            self.f
                .push("PT_INTERP does not hold a NUL-terminated path".into());
        }
    }

    /// Every allocated section inside one `PT_LOAD`, mapped from its file
    /// bytes.
    fn sections_in_segments(&mut self) {
        for s in self.obj.sections() {
            let sh = s.elf_section_header();
            let flags = sh.sh_flags.get(LE);
            let (addr, size) = (sh.sh_addr.get(LE), sh.sh_size.get(LE));
            if flags & u64::from(elf::SHF_ALLOC) == 0
                || size == 0
                || flags & u64::from(elf::SHF_TLS) != 0
            {
                continue;
            }
            let name = s.name().unwrap_or("?");
            let nobits = sh.sh_type.get(LE) == elf::SHT_NOBITS;
            let seg = self.loads.iter().find(|p| {
                p.p_vaddr(LE) <= addr && end(addr, size) <= end(p.p_vaddr(LE), p.p_memsz(LE))
            });
            match seg {
                None => self.f.push(format!(
                    "section {name} ({addr:#x}+{size:#x}) is not inside one PT_LOAD"
                )),
                Some(p) if !nobits => {
                    let in_file = end(addr, size) <= end(p.p_vaddr(LE), p.p_filesz(LE));
                    let off_ok = u128::from(sh.sh_offset.get(LE))
                        == end(p.p_offset(LE), addr - p.p_vaddr(LE));
                    if !in_file || !off_ok {
                        self.f.push(format!(
                            "section {name} is not mapped from its file bytes by its PT_LOAD"
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// A program header table after some section's bytes and inside none:
    /// elfutils' libelf (eu-strip, dwz, debugedit) fills every gap between
    /// sections when it writes a file, and so zeroes such a table. kpack's
    /// outputs cover theirs with `.kpack.phdr`, an `SHT_NULL` section that
    /// GNU strip and objcopy drop: after them, run no libelf writer.
    fn table_between_sections(&mut self, phoff: u64, phlen: u64) {
        let with_bytes = |s: &elf::SectionHeader64<LE>| {
            s.sh_type.get(LE) != elf::SHT_NOBITS && s.sh_size.get(LE) > 0
        };
        let Ok(sections) = self.obj.elf_header().sections(LE, self.data) else {
            return;
        };
        let headers = sections.iter().skip(1).filter(|s| with_bytes(s));
        let (mut before, mut covered) = (false, false);
        for s in headers {
            let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
            before |= off < phoff;
            covered |= off <= phoff && end(phoff, phlen) <= end(off, size);
        }
        if before && !covered {
            self.w.push(format!(
                "program header table at {phoff:#x} lies after section bytes and inside no section: eu-strip, dwz and debugedit (elfutils' libelf) zero it when they rewrite this file"
            ));
        }
    }

    /// The marker section: mapped and parsable. Returns its address and
    /// size when it parses; a pruned file has none.
    fn marker(&mut self) -> Option<(u64, u64)> {
        let m = self.obj.section_by_name(MARKER_SECTION)?;
        let sh = m.elf_section_header();
        if sh.sh_flags.get(LE) & u64::from(elf::SHF_ALLOC) == 0 {
            self.f
                .push(format!("{MARKER_SECTION} is not mapped (no SHF_ALLOC)"));
        }
        let mut marker_addr = None;
        match m.data() {
            Ok(bytes) => match kpack_format::Marker::parse(bytes) {
                Ok(_) => marker_addr = Some((m.address(), m.size())),
                Err(e) => self.f.push(format!(
                    "{MARKER_SECTION} does not parse: {}",
                    error_chain(&e)
                )),
            },
            Err(e) => self.f.push(format!(
                "{MARKER_SECTION} cannot be read: {}",
                error_chain(&e)
            )),
        }
        marker_addr
    }

    /// Every wrapper: HIPK at the marker once offloaded, HIPF into the
    /// device code once pruned.
    /// Returns the wrappers' pointer slots.
    fn wrappers(
        &mut self,
        marker_addr: Option<(u64, u64)>,
        relas: &[(u64, u64)],
    ) -> std::collections::HashSet<u64> {
        let mut slots = std::collections::HashSet::new();
        let Some(seg) = self.obj.section_by_name(SEGMENT_SECTION) else {
            return slots;
        };
        // Indexed once (the first relocation of a slot counts): every
        // wrapper looks its pointer slot up.
        let mut by_slot = std::collections::HashMap::with_capacity(relas.len());
        for &(slot, target) in relas {
            by_slot.entry(slot).or_insert(target);
        }
        let data = seg.data().unwrap_or(&[]);
        for (i, w) in data.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
            let w = WrapperFields::parse(w);
            let slot = seg.address().wrapping_add(i as u64 * WRAPPER_SIZE + 8);
            let ptr = by_slot.get(&slot).copied().unwrap_or(w.pointer);
            slots.insert(slot);
            self.wrapper(i, w.magic, ptr, marker_addr);
        }
        slots
    }

    /// In a pruned file only wrappers point at device code: anything else
    /// aimed into it (and moved along by prune) is a pointer prune must
    /// not touch.
    fn pointers_into_device_code(
        &mut self,
        relas: &[(u64, u64)],
        wrapper_slots: &std::collections::HashSet<u64>,
    ) {
        for &(slot, target) in relas {
            if !wrapper_slots.contains(&slot) && self.in_fatbin_runs(target) {
                self.f.push(format!(
                    "relocation at {slot:#x} points at {target:#x}, inside {FATBIN_SECTION}, but is not a wrapper's pointer"
                ));
            }
        }
    }

    /// Wrapper `i` with `magic`, pointing at `ptr` at run time.
    fn wrapper(&mut self, i: usize, magic: Magic, ptr: u64, marker_addr: Option<(u64, u64)>) {
        let pruned = self.pruned;
        match (magic, marker_addr) {
            (Magic::Hipk, Some((ma, _))) if ptr == ma => {}
            (Magic::Hipk, Some((ma, _))) => self.f.push(format!(
                "wrapper {i} is HIPK but points at {ptr:#x}, not the marker at {ma:#x}"
            )),
            (Magic::Hipk, _) if pruned => self.f.push(format!(
                "wrapper {i} is HIPK in a pruned file (it was offloaded, not pruned)"
            )),
            (Magic::Hipk, None) => self.f.push(format!(
                "wrapper {i} is HIPK but there is no {MARKER_SECTION}"
            )),
            (Magic::Hipf, Some(_)) => self
                .f
                .push(format!("wrapper {i} is still HIPF in a file with a marker")),
            (Magic::Hipf, None) if pruned => {
                if !self.in_fatbin_runs(ptr) {
                    self.f.push(format!(
                        "wrapper {i} points at {ptr:#x}, outside {FATBIN_SECTION}'s file bytes (and its runs)"
                    ));
                }
            }
            (Magic::Hipf, None) => self.hipf += 1,
            (Magic::Other(other), _) => self
                .f
                .push(format!("wrapper {i} has unknown magic {other:#x}")),
        }
    }

    /// `ptr` is inside the file bytes of `.hip_fatbin` or one of the runs
    /// prune split it into.
    fn in_fatbin_runs(&self, ptr: u64) -> bool {
        self.obj.sections().any(|fb| {
            fb.name().is_ok_and(is_fatbin_run)
                && fb.elf_section_header().sh_type.get(LE) != elf::SHT_NOBITS
                && ptr >= fb.address()
                && u128::from(ptr) < end(fb.address(), fb.size())
        })
    }

    /// Once offloaded, `.hip_fatbin` has no file bytes and no relocation
    /// points into it; a pruned file has no marker.
    fn removed_device_code(&mut self, relas: &[(u64, u64)]) {
        let marker = self.obj.section_by_name(MARKER_SECTION);
        if self.pruned && marker.is_some() {
            self.f
                .push(format!("a pruned file has a {MARKER_SECTION} section"));
        }
        let Some(fb) = self.obj.section_by_name(FATBIN_SECTION) else {
            return;
        };
        let sh_type = fb.elf_section_header().sh_type.get(LE);
        if marker.is_some() && sh_type != elf::SHT_NOBITS {
            self.f
                .push(format!("{FATBIN_SECTION} still has file bytes"));
        }
        if sh_type == elf::SHT_NOBITS {
            let (lo, hi) = (u128::from(fb.address()), end(fb.address(), fb.size()));
            for (slot, target) in relas {
                if u128::from(*target) >= lo && u128::from(*target) < hi {
                    self.f.push(format!(
                        "relocation at {slot:#x} points at {target:#x}, inside removed device code"
                    ));
                }
            }
        }
    }
}

/// The end of `start + len`, exact: header fields are untrusted, and a
/// range past `u64::MAX` must fail a check, not overflow.
fn end(start: u64, len: u64) -> u128 {
    u128::from(start) + u128::from(len)
}

/// (slot, run-time value) of RELATIVE and 64-bit relocations in dynamic
/// relocation tables.
fn relocation_targets<'d, R: ReadRef<'d>>(obj: &ElfFile64<'d, LE, R>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let dynsyms = obj.dynamic_symbol_table();
    // An unknown machine has no wrapper relocations kpack understands.
    let Some(machine) = Machine::from_e_machine(obj.elf_header().e_machine(LE)) else {
        return out;
    };
    for s in obj.sections() {
        let sh = s.elf_section_header();
        if sh.sh_type.get(LE) != elf::SHT_RELA || sh.sh_info.get(LE) != 0 {
            continue;
        }
        let Ok(data) = s.data() else { continue };
        let Ok(entries) = object::pod::slice_from_all_bytes::<elf::Rela64<LE>>(data) else {
            continue;
        };
        for r in entries {
            let info = r.r_info.get(LE);
            let (ty, sym) = ((info & 0xffff_ffff) as u32, (info >> 32) as usize);
            let value = match ty {
                t if t == machine.relative() => r.r_addend.get(LE) as u64,
                t if t == machine.abs64() => {
                    use object::{ObjectSymbol, ObjectSymbolTable};
                    let base = dynsyms
                        .as_ref()
                        .and_then(|t| t.symbol_by_index(object::SymbolIndex(sym)).ok())
                        .map_or(0, |s| s.address());
                    if base == 0 {
                        continue;
                    }
                    base.wrapping_add(r.r_addend.get(LE) as u64)
                }
                _ => continue,
            };
            out.push((r.r_offset.get(LE), value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `libaxpy_2arch.so` with a RELATIVE relocation that is not the
    /// wrapper's re-aimed into `.hip_fatbin` (as a pruned file must never
    /// have).
    fn with_stray_pointer() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/corpus/libaxpy_2arch.so"
        );
        let mut bytes = std::fs::read(path).unwrap();
        let (fatbin, wrapper_slot, rela) = {
            let obj = ElfFile64::<LE, _>::parse(&bytes[..]).unwrap();
            let fatbin = obj.section_by_name(FATBIN_SECTION).unwrap().address();
            let slot = obj.section_by_name(SEGMENT_SECTION).unwrap().address() + 8;
            let off = obj
                .section_by_name(".rela.dyn")
                .unwrap()
                .elf_section_header()
                .sh_offset
                .get(LE);
            (fatbin, slot, off as usize)
        };
        // The first RELATIVE entry (type 8 on x86-64) that is not the wrapper's.
        let at = (rela..)
            .step_by(24)
            .find(|&e| {
                let info = u64::from_le_bytes(bytes[e + 8..e + 16].try_into().unwrap());
                let off = u64::from_le_bytes(bytes[e..e + 8].try_into().unwrap());
                info & 0xffff_ffff == 8 && off != wrapper_slot
            })
            .unwrap();
        bytes[at + 16..at + 24].copy_from_slice(&(fatbin + 0x10).to_le_bytes());
        bytes
    }

    /// Warnings of `verify_image` that name the program header table.
    fn table_warnings(image: &[u8]) -> Vec<String> {
        verify_image(image)
            .unwrap()
            .into_iter()
            .filter(|f| f.message.contains("program header table"))
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn warns_when_no_section_covers_a_program_header_table_between_sections() {
        let path = std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/corpus/libaxpy_2arch.so"
        ));
        // A table right after the ELF header, before every section: libelf
        // leaves it alone.
        assert_eq!(
            table_warnings(&std::fs::read(path).unwrap()),
            Vec::<String>::new()
        );
        let fat = crate::read_fat_binary(path, Default::default()).unwrap();
        let (mut image, _) = crate::transform(path, &fat, b"\x80").unwrap();
        // Offloaded: the table is on the kpack page, covered by .kpack.phdr.
        assert_eq!(table_warnings(&image), Vec::<String>::new());
        // As GNU strip leaves it: .kpack.phdr gone (here: empty).
        let cover = {
            let obj = ElfFile64::<LE, _>::parse(&image[..]).unwrap();
            let index = obj.section_by_name(".kpack.phdr").unwrap().index().0;
            obj.elf_header().e_shoff.get(LE) as usize + index * 64
        };
        image[cover + 32..cover + 40].copy_from_slice(&0u64.to_le_bytes());
        let warnings = table_warnings(&image);
        assert!(
            warnings.len() == 1 && warnings[0].contains("eu-strip"),
            "{warnings:?}"
        );
    }

    #[test]
    fn pruned_check_refuses_a_non_wrapper_pointer_into_device_code() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/corpus/libaxpy_2arch.so"
        );
        let clean = std::fs::read(path).unwrap();
        assert_eq!(
            verify_pruned_image(&clean[..]).unwrap(),
            Vec::<Finding>::new()
        );
        let f = verify_pruned_image(&with_stray_pointer()[..]).unwrap();
        assert!(
            f.iter()
                .any(|m| m.message.contains("is not a wrapper's pointer")),
            "{f:?}"
        );
    }
}
