//! The writers: lay the output out as the [`Plan`] says, then point the
//! wrappers and their relocations at the marker.

use std::path::Path;

use object::pod;

use super::plan::Plan;
use super::source::Source;
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

/// The output image before patching: input bytes up to the kpack page, the
/// page, the kept tail, `.shstrtab`, the section header table; the ELF
/// header rewritten in place.
pub(super) fn assemble(source: &Source<'_>, plan: &Plan, marker: &[u8]) -> Result<Vec<u8>, Error> {
    let mut image = source.read(0, plan.kpack_page_offset)?;
    image.extend_from_slice(&kpack_page(plan, marker));
    if !plan.kept_tail.is_empty() {
        image.extend_from_slice(&source.read(
            plan.kept_tail.start,
            plan.kept_tail.end - plan.kept_tail.start,
        )?);
    }
    let old_shstrtab = source.read(
        plan.old_shstrtab.start,
        plan.old_shstrtab.end - plan.old_shstrtab.start,
    )?;
    image.extend_from_slice(&shstrtab(plan, old_shstrtab));
    image.resize(plan.section_table_offset as usize, 0);
    for header in &plan.section_headers {
        image.extend_from_slice(pod::bytes_of(header));
    }
    image[..size_of_val(&plan.file_header)].copy_from_slice(pod::bytes_of(&plan.file_header));
    debug_assert_eq!(image.len() as u64, plan.output_size);
    Ok(image)
}

/// Turn every wrapper into HIPK pointing at the marker with its co_index,
/// and its relocation (if any) into the machine's `R_*_RELATIVE` to the
/// marker.
/// Returns the number of relocations rewritten.
pub(super) fn patch(
    input: &Path,
    image: &mut [u8],
    plan: &Plan,
    machine: Machine,
    patches: &[WrapperPatch],
) -> Result<usize, Error> {
    let r_info = u64::from(machine.relative());
    let layout = |message: String| Error::new(ErrorKind::Layout, input, message);
    // Patches land on bytes kept from the input; never on the kpack page or
    // the removed device code.
    let kept = |offset: u64, what: &str| {
        plan.kept(offset).map(|at| at as usize).ok_or_else(|| {
            layout(format!(
                "{what} at file offset {offset:#x} lies inside .hip_fatbin's first pages"
            ))
        })
    };
    let marker_addr = plan.marker_addr.to_le_bytes();
    let mut relocations = 0;
    for wrapper in patches {
        let at = kept(wrapper.file_offset, "wrapper")?;
        let write = |image: &mut [u8], at: usize, bytes: &[u8]| {
            put(image, at, bytes).map_err(|m| layout(format!("wrapper: {m}")))
        };
        write(image, at, &HIPK.to_le_bytes())?;
        write(image, at.saturating_add(8), &marker_addr)?;
        write(
            image,
            at.saturating_add(16),
            &wrapper.co_index.to_le_bytes(),
        )?;
        if let Some(rela_entry) = wrapper.rela_entry {
            let at = kept(rela_entry, "relocation")?;
            let write = |image: &mut [u8], at: usize, bytes: &[u8]| {
                put(image, at, bytes).map_err(|m| layout(format!("relocation: {m}")))
            };
            // Elf64_Rela: r_offset stays; r_info = RELATIVE, no symbol; addend = marker.
            write(image, at.saturating_add(8), &r_info.to_le_bytes())?;
            write(image, at.saturating_add(16), &marker_addr)?;
            relocations += 1;
        }
    }
    Ok(relocations)
}

/// Overwrite `bytes` at `at`; a wrapper or relocation the rewrite moved
/// outside the output (it sat in the dropped tail) is an error, not a panic.
fn put(image: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), String> {
    let len = image.len();
    let destination = at
        .checked_add(bytes.len())
        .and_then(|end| image.get_mut(at..end))
        .ok_or_else(|| {
            format!("patch at output offset {at:#x} is outside the {len:#x}-byte image")
        })?;
    destination.copy_from_slice(bytes);
    Ok(())
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
        let image = assemble(&source, &plan, marker).unwrap();
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

    #[test]
    fn refuses_a_patch_on_removed_device_code() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/corpus/libaxpy_2arch.so");
        let fat = read_fat_binary(&path, Default::default()).unwrap();
        let source = Source::new(&path, &fat.source);
        let headers = Headers::read(&source).unwrap();
        let plan = Plan::new(&path, &headers, fat.fatbin.unwrap(), 8, source.len()).unwrap();
        let mut image = assemble(&source, &plan, &[0; 8]).unwrap();
        let inside = WrapperPatch {
            file_offset: plan.cut.start,
            co_index: 0,
            rela_entry: None,
        };
        let error = patch(&path, &mut image, &plan, Machine::X86_64, &[inside]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Layout);
        assert!(error.to_string().contains("lies inside"), "{error}");
    }
}
