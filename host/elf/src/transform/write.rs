//! The writers: lay the output out as the [`Plan`] says, then point the
//! wrappers and their relocations at the marker.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use object::pod;

use super::plan::Plan;
use super::source::{Source, check_range};
use super::{PHDR_SIZE, WrapperPatch};
use crate::error::{Error, ErrorKind};
use crate::machine::Machine;
use crate::read::HIPK;

/// The kpack page: the new program header table, then the marker, then
/// zeros.
pub(super) fn kpack_page(plan: &Plan, marker: &[u8]) -> Vec<u8> {
    // The rest of the page is zeros: in the shared-page layout these are
    // the device-code bytes that stay in the file.
    let mut page = vec![0u8; plan.kpack_page_len as usize];
    for (index, header) in plan.program_headers.iter().enumerate() {
        let at = index * PHDR_SIZE as usize;
        page[at..at + PHDR_SIZE as usize].copy_from_slice(pod::bytes_of(header));
    }
    // The plan checked that the table and the marker fit in the page.
    let marker_at = plan.marker_offset_in_page as usize;
    page[marker_at..marker_at + marker.len()].copy_from_slice(marker);
    page
}

/// The new `.shstrtab`: the old one's bytes, then the added names.
pub(super) fn shstrtab(plan: &Plan, old: Vec<u8>) -> Vec<u8> {
    let mut table = old;
    for name in &plan.added_names {
        table.extend_from_slice(name.as_bytes());
        table.push(0);
    }
    table
}

/// Zeros written per call: padding and cleared ranges go out through this
/// window, so memory does not grow with the file.
const CHUNK: u64 = 1 << 20;

/// Why a positioned patch of the output ([`Out::put_at`]) failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum PatchError {
    /// The patch does not lie inside the image.
    #[error("patch at output offset {at:#x} is outside the {len:#x}-byte image")]
    Outside { at: u64, len: u64 },
    /// Writing it failed.
    #[error("cannot write at output offset {at:#x}")]
    Write {
        at: u64,
        #[source]
        source: std::io::Error,
    },
}

impl PatchError {
    /// The crate error for `input`, the patch named by `what` (`ELF header`,
    /// `wrapper`, `relocation`) and this cause.
    pub(super) fn into_error(self, input: &std::path::Path, what: &str) -> Error {
        match self {
            PatchError::Outside { .. } => {
                Error::new(ErrorKind::Layout, input, format!("{what}: {self}"))
            }
            PatchError::Write { at, source } => Error::new(
                ErrorKind::Layout,
                input,
                format!("{what}: cannot write at output offset {at:#x}"),
            )
            .with_source(source),
        }
    }
}

/// The output being written, with the input's path for error messages and
/// the position the next sequential write lands on.
pub(super) struct Out<'a, W> {
    input: &'a Path,
    w: W,
    pos: u64,
}

impl<'a, W: Write + Seek> Out<'a, W> {
    /// Write into `w`, which must be empty and positioned at its start.
    pub(super) fn new(input: &'a Path, w: W) -> Out<'a, W> {
        Out { input, w, pos: 0 }
    }

    fn io(&self, at: u64, e: std::io::Error) -> Error {
        Error::io(
            self.input,
            &format!("write the rewritten image at output offset {at:#x}"),
            e,
        )
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let at = self.pos;
        self.w.write_all(bytes).map_err(|e| self.io(at, e))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// `len` bytes of the input from `offset`, file to file when the
    /// output is a file (see [`Source::copy_to`]).
    pub(super) fn copy(&mut self, source: &Source<'_>, offset: u64, len: u64) -> Result<(), Error> {
        check_range(self.input, offset, len, source.len())?;
        source.copy_to(offset, len, &mut self.w)?;
        self.pos += len;
        Ok(())
    }

    /// `count` zeros at the sequential position.
    pub(super) fn zeros(&mut self, count: u64) -> Result<(), Error> {
        self.zeros_to(self.pos.saturating_add(count))
    }

    /// Output offset the next sequential write lands on.
    pub(super) fn pos(&self) -> u64 {
        self.pos
    }

    /// Zeros up to output offset `to`.
    fn zeros_to(&mut self, to: u64) -> Result<(), Error> {
        let buf = vec![0u8; CHUNK.min(to.saturating_sub(self.pos)) as usize];
        while self.pos < to {
            let n = (to - self.pos).min(CHUNK) as usize;
            self.write(&buf[..n])?;
        }
        Ok(())
    }

    /// Overwrite `bytes` at output offset `at` of an image `len` bytes long;
    /// the sequential position is left where it was.
    pub(super) fn put_at(&mut self, len: u64, at: u64, bytes: &[u8]) -> Result<(), PatchError> {
        if at
            .checked_add(bytes.len() as u64)
            .is_none_or(|end| end > len)
        {
            return Err(PatchError::Outside { at, len });
        }
        let pos = self.pos;
        self.w
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.w.write_all(bytes))
            .and_then(|()| self.w.seek(SeekFrom::Start(pos)).map(|_| ()))
            .map_err(|source| PatchError::Write { at, source })
    }

    /// Flush and hand back the writer.
    pub(super) fn finish(mut self) -> Result<W, Error> {
        let at = self.pos;
        self.w.flush().map_err(|e| self.io(at, e))?;
        Ok(self.w)
    }
}

/// The output image before patching: input bytes up to the kpack page, the
/// page, the kept tail, `.shstrtab`, the section header table; the ELF
/// header rewritten in place. Written sequentially into `out`, copying the
/// input through a bounded buffer.
pub(super) fn assemble<W: Write + Seek>(
    source: &Source<'_>,
    plan: &Plan,
    marker: &[u8],
    out: &mut Out<'_, W>,
) -> Result<(), Error> {
    out.copy(source, 0, plan.kpack_page_offset)?;
    out.write(&kpack_page(plan, marker))?;
    if !plan.kept_tail.is_empty() {
        out.copy(
            source,
            plan.kept_tail.start,
            plan.kept_tail.end - plan.kept_tail.start,
        )?;
    }
    let old_shstrtab = source.read(
        plan.old_shstrtab.start,
        plan.old_shstrtab.end - plan.old_shstrtab.start,
    )?;
    out.write(&shstrtab(plan, old_shstrtab))?;
    if out.pos > plan.section_table_offset {
        // The plan places the table after .shstrtab; never truncate.
        return Err(Error::new(
            ErrorKind::Layout,
            out.input,
            format!(
                "section header table at {:#x} would overlap .shstrtab (ends at {:#x})",
                plan.section_table_offset, out.pos
            ),
        ));
    }
    out.zeros_to(plan.section_table_offset)?;
    for header in &plan.section_headers {
        out.write(pod::bytes_of(header))?;
    }
    debug_assert_eq!(out.pos, plan.output_size);
    let header = pod::bytes_of(&plan.file_header);
    out.put_at(plan.output_size, 0, header)
        .map_err(|e| e.into_error(out.input, "ELF header"))?;
    Ok(())
}

/// Turn every wrapper into HIPK pointing at the marker with its co_index,
/// and its relocation (if any) into the machine's `R_*_RELATIVE` to the
/// marker: positioned writes into the `len`-byte image `out` holds.
/// Returns the number of relocations rewritten.
pub(super) fn patch<W: Write + Seek>(
    out: &mut Out<'_, W>,
    len: u64,
    plan: &Plan,
    machine: Machine,
    patches: &[WrapperPatch],
) -> Result<usize, Error> {
    let input = out.input;
    let r_info = u64::from(machine.relative());
    let layout = |message: String| Error::new(ErrorKind::Layout, input, message);
    // Patches land on bytes kept from the input; never on the kpack page or
    // the removed device code.
    let kept = |offset: u64, what: &str| {
        plan.kept(offset).ok_or_else(|| {
            layout(format!(
                "{what} at file offset {offset:#x} lies inside .hip_fatbin's first pages"
            ))
        })
    };
    let marker_addr = plan.marker_addr.to_le_bytes();
    let mut relocations = 0;
    for wrapper in patches {
        let at = kept(wrapper.file_offset, "wrapper")?;
        let mut write = |at: u64, bytes: &[u8]| {
            out.put_at(len, at, bytes)
                .map_err(|e| e.into_error(input, "wrapper"))
        };
        write(at, &HIPK.to_le_bytes())?;
        write(at.saturating_add(8), &marker_addr)?;
        write(at.saturating_add(16), &wrapper.co_index.to_le_bytes())?;
        if let Some(rela_entry) = wrapper.rela_entry {
            let at = kept(rela_entry, "relocation")?;
            let mut write = |at: u64, bytes: &[u8]| {
                out.put_at(len, at, bytes)
                    .map_err(|e| e.into_error(input, "relocation"))
            };
            // Elf64_Rela: r_offset stays; r_info = RELATIVE, no symbol; addend = marker.
            write(at.saturating_add(8), &r_info.to_le_bytes())?;
            write(at.saturating_add(16), &marker_addr)?;
            relocations += 1;
        }
    }
    Ok(relocations)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use kpack_bundle::ReadAt;

    use super::super::PAGE;
    use super::super::source::Headers;
    use super::*;
    use crate::read::read_fat_binary;

    #[test]
    fn assembles_kept_bytes_around_the_kpack_page() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/corpus/libaxpy_2arch.so");
        let fat = read_fat_binary(&path, Default::default()).unwrap();
        let source = Source::new(&path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let marker = b"\x82\xa1a\x01\xa1b\x02";
        let plan = Plan::new(
            &path,
            &headers,
            fat.fatbin.unwrap(),
            marker.len() as u64,
            source.len(),
        )
        .unwrap();
        let mut out = Out::new(&path, std::io::Cursor::new(Vec::new()));
        assemble(&source, &plan, marker, &mut out).unwrap();
        let image = out.finish().unwrap().into_inner();
        let input = source.read(0, source.len()).unwrap();
        assert_eq!(image.len() as u64, plan.output_size);
        assert_eq!(&image[..64], pod::bytes_of(&plan.file_header));
        let page_at = plan.kpack_page_offset as usize;
        assert_eq!(&image[64..page_at], &input[64..page_at]);
        let page = &image[page_at..page_at + PAGE as usize];
        assert_eq!(
            &page[..PHDR_SIZE as usize],
            pod::bytes_of(&plan.program_headers[0])
        );
        let marker_at = plan.marker_offset_in_page as usize;
        assert_eq!(&page[marker_at..marker_at + marker.len()], marker);
        assert!(page[marker_at + marker.len()..].iter().all(|&b| b == 0));
        let tail = (plan.kept_tail.start as usize)..(plan.kept_tail.end as usize);
        let tail_at = page_at + PAGE as usize;
        assert_eq!(&image[tail_at..tail_at + tail.len()], &input[tail]);
        assert_eq!(fat.source.size(), input.len() as u64);
    }

    /// The transform as it was before it wrote into a file: the whole
    /// image built in memory, then patched in place. Kept here only as the
    /// reference the streaming writer must match byte for byte.
    fn in_memory_reference(path: &Path, fat: &crate::FatBinary, marker: &[u8]) -> Vec<u8> {
        let (fatbin, patches) = super::super::offloadable(path, fat).unwrap();
        let source = Source::new(path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let plan = Plan::new(path, &headers, fatbin, marker.len() as u64, source.len()).unwrap();
        let mut image = source.read(0, plan.kpack_page_offset).unwrap();
        image.extend_from_slice(&kpack_page(&plan, marker));
        let tail = &plan.kept_tail;
        image.extend_from_slice(&source.read(tail.start, tail.end - tail.start).unwrap());
        let old = &plan.old_shstrtab;
        let old = source.read(old.start, old.end - old.start).unwrap();
        image.extend_from_slice(&shstrtab(&plan, old));
        image.resize(plan.section_table_offset as usize, 0);
        for header in &plan.section_headers {
            image.extend_from_slice(pod::bytes_of(header));
        }
        image[..64].copy_from_slice(pod::bytes_of(&plan.file_header));
        let machine = fat.machine.unwrap();
        let put = |image: &mut Vec<u8>, at: u64, bytes: &[u8]| {
            image[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        };
        for wrapper in &patches {
            let at = plan.kept(wrapper.file_offset).unwrap();
            put(&mut image, at, &HIPK.to_le_bytes());
            put(&mut image, at + 8, &plan.marker_addr.to_le_bytes());
            put(&mut image, at + 16, &wrapper.co_index.to_le_bytes());
            if let Some(rela) = wrapper.rela_entry {
                let at = plan.kept(rela).unwrap();
                put(
                    &mut image,
                    at + 8,
                    &u64::from(machine.relative()).to_le_bytes(),
                );
                put(&mut image, at + 16, &plan.marker_addr.to_le_bytes());
            }
        }
        image
    }

    #[test]
    fn file_output_equals_the_in_memory_image_on_every_fixture() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let marker = b"\x82\xa1a\x01\xa1b\x02";
        let mut checked = Vec::new();
        for dir in ["corpus", "clang19"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .collect();
            paths.sort();
            for path in paths {
                let Ok(fat) = read_fat_binary(&path, Default::default()) else {
                    continue;
                };
                if super::super::offloadable(&path, &fat).is_err() || fat.machine.is_none() {
                    continue;
                }
                let expected = in_memory_reference(&path, &fat, marker);
                let (written, result) =
                    crate::transform::written_through_file("elf-write-test", &path, |file| {
                        crate::transform_to(&path, &fat, marker, file)
                    });
                let (_, report) = result.unwrap();
                assert_eq!(
                    report.output_size,
                    written.len() as u64,
                    "{}",
                    path.display()
                );
                assert!(written == expected, "{} differs", path.display());
                checked.push(path);
            }
        }
        // Both fixture sets, and their clang-19 CCOB and aarch64 binaries.
        assert!(
            checked.len() >= 30,
            "only {} fixtures checked",
            checked.len()
        );
        assert!(
            checked
                .iter()
                .any(|p| p.ends_with("libaxpy_aarch64_ccob.so"))
        );
    }

    #[test]
    fn refuses_a_patch_on_removed_device_code() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/corpus/libaxpy_2arch.so");
        let fat = read_fat_binary(&path, Default::default()).unwrap();
        let source = Source::new(&path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let plan = Plan::new(&path, &headers, fat.fatbin.unwrap(), 8, source.len()).unwrap();
        let mut out = Out::new(&path, std::io::Cursor::new(Vec::new()));
        assemble(&source, &plan, &[0; 8], &mut out).unwrap();
        let inside = WrapperPatch {
            file_offset: plan.cut.start,
            co_index: 0,
            rela_entry: None,
        };
        let error = patch(
            &mut out,
            plan.output_size,
            &plan,
            Machine::X86_64,
            &[inside],
        )
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Layout);
        assert!(error.to_string().contains("lies inside"), "{error}");
    }
}
