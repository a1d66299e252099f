//! Steppings that reject generic code: a gfx1250 whose code would come only
//! from `gfx12-5-generic` (ROCr's tests show gfx1250 A0 parts refuse such
//! code objects) is warned about where targets are chosen (`offload`,
//! `split`) and where a GPU's kernels are explained (`verify --gpu
//! gfx1250`).

use std::path::{Path, PathBuf};

use kpack_bundle::{WalkOptions, walk, write_bundle};
use kpack_tests::{fixture, stderr, stdout};
use object::{Object, ObjectSection};

use crate::util::kpack;

/// clang-19 cannot build for `gfx12-5-generic`, so craft a library: clang19's
/// libaxpy_plain.so with its gfx1201 entry renamed `gfx12-5-generic`
/// (bundle id, and `EF_AMDGPU_MACH` 0x05b) and, when `with_gfx1250`, a copy
/// of it as `gfx1250` (mach 0x049) in place of the gfx942 entry; the
/// bundle rewritten by kpack-bundle's writer in place of the old one.
fn generic_library(dir: &Path, with_gfx1250: bool) -> PathBuf {
    let mut elf = std::fs::read(fixture("clang19/libaxpy_plain.so")).unwrap();
    let (off, size) = {
        let file = object::File::parse(&*elf).unwrap();
        let (off, size) = file
            .section_by_name(".hip_fatbin")
            .unwrap()
            .file_range()
            .unwrap();
        (off as usize, size as usize)
    };
    let section = elf[off..off + size].to_vec();
    let items: Vec<_> = walk(&section, 0, size as u64, WalkOptions::default())
        .collect::<Result<_, _>>()
        .unwrap();
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, e) in items[0].entries.iter().enumerate() {
        let bytes = items[0].read_entry(&section, i).unwrap();
        let id = e.id.raw().to_owned();
        if with_gfx1250 && id.ends_with("gfx942") {
            // Room for the gfx1250 copy in the old bundle's bytes.
            continue;
        }
        let Some(head) = id.strip_suffix("gfx1201") else {
            entries.push((id, bytes));
            continue;
        };
        let with_mach = |mach: u32| {
            let mut b = bytes.clone();
            let flags = u32::from_le_bytes(b[48..52].try_into().unwrap());
            b[48..52].copy_from_slice(&((flags & !0xff) | mach).to_le_bytes());
            b
        };
        entries.push((format!("{head}gfx12-5-generic"), with_mach(0x05b)));
        if with_gfx1250 {
            entries.push((format!("{head}gfx1250"), with_mach(0x049)));
        }
    }
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(i, b)| (i.as_str(), b.as_slice()))
        .collect();
    let bundle = write_bundle(&refs, 4096);
    assert!(bundle.len() <= size, "{} > {size}", bundle.len());
    elf[off..off + size].fill(0);
    elf[off..off + bundle.len()].copy_from_slice(&bundle);
    let path = dir.join(if with_gfx1250 {
        "libboth.so"
    } else {
        "libgeneric.so"
    });
    std::fs::write(&path, elf).unwrap();
    path
}

/// `kpack offload` `lib` into `dir/out`; its stderr.
fn offload_stderr(lib: &Path, dir: &Path) -> String {
    let out_dir = dir.join("out");
    let out = kpack([
        "offload".as_ref(),
        lib.as_os_str(),
        "-o".as_ref(),
        out_dir.join(lib.file_name().unwrap()).as_os_str(),
        "--archives".as_ref(),
        out_dir.join(".kpack").as_os_str(),
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stderr(&out)
}

fn stepping_warnings(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.starts_with("warning:") && l.contains("A0 steppings"))
        .collect()
}

#[test]
fn gfx1250_served_only_by_gfx12_5_generic_is_warned_about_by_offload_and_verify_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let lib = generic_library(dir.path(), false);
    let err = offload_stderr(&lib, dir.path());
    let warned = stepping_warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].contains("libgeneric.so")
            && warned[0].contains("gfx1250 would get only gfx12-5-generic code"),
        "{err}"
    );

    let out_dir = dir.path().join("out");
    let verify = |gpu: &str| {
        kpack([
            "verify".as_ref(),
            "--gpu".as_ref(),
            gpu.as_ref(),
            out_dir.as_os_str(),
        ])
    };
    // The kernel loads as gfx12-5-generic: exit 0, and the warning names
    // the binary.
    let out = verify("gfx1250");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("as gfx12-5-generic"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    let warned = stepping_warnings(&err);
    assert!(
        warned.len() == 1 && warned[0].contains("libgeneric.so"),
        "{err}"
    );
    // gfx1251 has no such stepping: no warning.
    let out = verify("gfx1251");
    assert!(
        stepping_warnings(&stderr(&out)).is_empty(),
        "{}",
        stderr(&out)
    );
}

#[test]
fn gfx1250_with_its_own_code_object_is_not_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let lib = generic_library(dir.path(), true);
    let err = offload_stderr(&lib, dir.path());
    assert!(stepping_warnings(&err).is_empty(), "{err}");
    let out = kpack([
        "verify".as_ref(),
        "--gpu".as_ref(),
        "gfx1250".as_ref(),
        dir.path().join("out").as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("as gfx1250"), "{}", stdout(&out));
    assert!(
        stepping_warnings(&stderr(&out)).is_empty(),
        "{}",
        stderr(&out)
    );
}

/// `kpack split` of an artifact holding `lib`; its stderr.
fn split_stderr(lib: &Path, dir: &Path) -> String {
    let art = dir.join("art/gen_lib");
    crate::util::artifact_with_library(&art, lib, lib.file_name().unwrap().to_str().unwrap());
    let out = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        dir.join("split").as_os_str(),
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stderr(&out)
}

#[test]
fn split_warns_when_its_archives_serve_gfx1250_only_generic_code() {
    let dir = tempfile::tempdir().unwrap();
    let err = split_stderr(&generic_library(dir.path(), false), dir.path());
    let warned = stepping_warnings(&err);
    assert!(
        warned.len() == 1 && warned[0].contains("gfx1250 would get only gfx12-5-generic"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let err = split_stderr(&generic_library(dir.path(), true), dir.path());
    assert!(stepping_warnings(&err).is_empty(), "{err}");
}
