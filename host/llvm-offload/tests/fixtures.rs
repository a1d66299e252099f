//! The clang-19 fixtures against oracles we did not write:
//! `OFFLOAD_ORACLE.tsv` (images as clang-offload-packager-19 extracts
//! them), `OFFLOADING.txt` (llvm-objdump-19 --offloading), `ORACLE.tsv`
//! (old-driver bundle entries, cross-checked with clang-offload-bundler-19)
//! and `ARCHIVES.txt` (llvm-ar-19 t, llvm-nm-19 --print-armap).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_llvm_offload::{
    Archive, ArchiveFormat, DeviceCode, ImageKind, MemberKind, OffloadKind, ReadOptions, Reader,
    WriteOptions, Writer,
};
use sha2::{Digest, Sha256};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/clang19")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// One image as the oracles describe it.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Row {
    arch: String,
    kind: String,
    size: u64,
    sha256: String,
}

/// `OFFLOAD_ORACLE.tsv`: file -> images in order.
fn offload_oracle() -> BTreeMap<String, Vec<Row>> {
    let text = String::from_utf8(read("OFFLOAD_ORACLE.tsv")).unwrap();
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let rows = out.entry(f[0].to_string()).or_default();
        assert_eq!(f[1].parse::<usize>().unwrap(), rows.len(), "{line}");
        rows.push(Row {
            arch: f[2].into(),
            kind: f[3].into(),
            size: f[4].parse().unwrap(),
            sha256: f[5].into(),
        });
    }
    out
}

/// Our view of an ELF file's `.llvm.offloading` images, in oracle terms
/// (`llvmir` is the TSV's spelling of objdump's "llvm ir").
fn rows_of(code: &DeviceCode<'_>) -> Vec<Row> {
    let mut rows = Vec::new();
    for s in &code.offloading {
        for b in &s.binaries {
            for e in b.entries() {
                assert_eq!(e.triple(), Some("amdgcn-amd-amdhsa"));
                rows.push(Row {
                    arch: e.arch().unwrap().into(),
                    kind: e.image_kind().objdump_name().replace(' ', ""),
                    size: e.image().len() as u64,
                    sha256: sha256(e.image()),
                });
            }
        }
    }
    rows
}

/// `llvm-objdump --offloading`'s text for an ELF file's images.
fn objdump_text(name: &str, code: &DeviceCode<'_>) -> String {
    let mut out = format!("== llvm-objdump-19 --offloading {name}\n");
    let entries = code
        .offloading
        .iter()
        .flat_map(|s| s.binaries.iter())
        .flat_map(|b| b.entries().iter());
    for (i, e) in entries.enumerate() {
        out += &format!(
            "OFFLOADING IMAGE [{i}]:\nkind            {}\narch            {}\ntriple          {}\nproducer        {}\n",
            e.image_kind().objdump_name(),
            e.arch().unwrap(),
            e.triple().unwrap(),
            e.offload_kind().name()
        );
    }
    out
}

/// `OFFLOADING.txt`, split into its `== ...` blocks by name.
fn objdump_oracle() -> BTreeMap<String, String> {
    let text = String::from_utf8(read("OFFLOADING.txt")).unwrap();
    let mut out = BTreeMap::new();
    for block in text.split("== ").filter(|b| !b.is_empty()) {
        let name = block
            .lines()
            .next()
            .unwrap()
            .trim_start_matches("llvm-objdump-19 --offloading ")
            .to_string();
        out.insert(name, format!("== {block}"));
    }
    out
}

const NEW_DRIVER_OBJECTS: [&str; 2] = ["nd_kern_axpy.o", "nd_kern_reduce.o"];

#[test]
fn new_driver_objects_match_the_packager_and_objdump() {
    let oracle = offload_oracle();
    let objdump = objdump_oracle();
    for name in NEW_DRIVER_OBJECTS {
        let data = read(name);
        let code = DeviceCode::parse(&data, &ReadOptions::default()).unwrap();
        assert_eq!(code.elf_type, object::elf::ET_REL);
        assert!(
            code.fatbin.is_none(),
            "{name}: the new driver writes no .hip_fatbin"
        );
        assert_eq!(code.offloading.len(), 1);
        assert_eq!(code.offloading[0].name, ".llvm.offloading");
        assert_eq!(rows_of(&code), oracle[name], "{name}");
        assert_eq!(objdump_text(name, &code), objdump[name], "{name}");
        for b in &code.offloading[0].binaries {
            assert_eq!(b.version(), 1, "clang 19 writes version 1");
            for e in b.entries() {
                assert_eq!(e.image_kind(), ImageKind::BITCODE);
                assert_eq!(e.offload_kind(), OffloadKind::HIP_V1);
                assert!(e.image().starts_with(b"BC\xc0\xde"));
            }
        }
    }
}

#[test]
fn image_ranges_point_into_the_section() {
    let data = read("nd_kern_axpy.o");
    let code = DeviceCode::parse(&data, &ReadOptions::default()).unwrap();
    let s = &code.offloading[0];
    let section = &data[s.offset as usize..(s.offset + s.size) as usize];
    for b in &s.binaries {
        for e in b.entries() {
            let r = e.image_range().unwrap();
            assert_eq!(&section[r.start as usize..r.end as usize], e.image());
        }
    }
}

/// The section bytes of an object's only `.llvm.offloading`.
fn offloading_section(data: &[u8]) -> &[u8] {
    let code = DeviceCode::parse(data, &ReadOptions::default()).unwrap();
    let s = &code.offloading[0];
    &data[s.offset as usize..(s.offset + s.size) as usize]
}

#[test]
fn rewriting_clang_sections_gives_the_same_bytes() {
    for name in NEW_DRIVER_OBJECTS {
        let data = read(name);
        let section = offloading_section(&data);
        let mut w = Writer::new();
        let binaries = Reader::new(section).read_all().unwrap();
        assert_eq!(
            binaries.len(),
            2,
            "{name}: clang 19 writes one binary per image"
        );
        for b in &binaries {
            let images: Vec<_> = b.entries().iter().map(|e| e.to_image()).collect();
            let opts = WriteOptions {
                version: b.version(),
                compression: None,
            };
            w.push(&images, &opts).unwrap();
        }
        let again = w.finish();
        assert_eq!(again.len(), section.len(), "{name}");
        assert!(again == section, "{name}: rewritten section differs");
    }
}

#[test]
fn newer_versions_round_trip_the_fixture_images() {
    let data = read("nd_kern_reduce.o");
    let binaries = Reader::new(offloading_section(&data)).read_all().unwrap();
    let images: Vec<_> = binaries
        .iter()
        .flat_map(|b| b.entries().iter().map(|e| e.to_image()))
        .collect();
    for (version, compression) in [
        (2, None),
        (3, None),
        (3, Some(kpack_llvm_offload::Compression::Zstd(19))),
        (3, Some(kpack_llvm_offload::Compression::Zlib(9))),
    ] {
        let opts = WriteOptions {
            version,
            compression,
        };
        let mut w = Writer::new();
        w.push(&images, &opts).unwrap();
        let bytes = w.finish();
        let back = Reader::new(&bytes).read_all().unwrap();
        assert_eq!(back.len(), 1);
        let again: Vec<_> = back[0].entries().iter().map(|e| e.to_image()).collect();
        assert_eq!(again, images, "v{version} {compression:?}");
        // Reading then writing with the same options is a fixed point.
        let mut w2 = Writer::new();
        w2.push(&again, &opts).unwrap();
        assert!(
            w2.finish() == bytes,
            "v{version} {compression:?} not a fixed point"
        );
    }
}

/// `ORACLE.tsv` rows of `file`: (bundle, entry id, size, sha256).
fn bundle_oracle(file: &str) -> Vec<(usize, String, u64, String)> {
    let text = String::from_utf8(read("ORACLE.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f[0] == file)
        .map(|f| {
            (
                f[1].parse().unwrap(),
                f[2].into(),
                f[3].parse().unwrap(),
                f[4].into(),
            )
        })
        .collect()
}

fn bundle_rows(code: &DeviceCode<'_>) -> Vec<(usize, String, u64, String)> {
    let fb = code.fatbin.as_ref().expect(".hip_fatbin");
    let mut rows = Vec::new();
    for (b, item) in fb.bundles.iter().enumerate() {
        for (i, entry) in item.entries.iter().enumerate() {
            if entry.id.is_host() {
                continue;
            }
            let bytes = fb.read_entry(b, i).unwrap();
            rows.push((b, entry.id.raw().to_string(), entry.size, sha256(&bytes)));
        }
    }
    rows
}

#[test]
fn old_driver_objects_match_the_bundler_oracle() {
    for name in ["kern_axpy_old.o", "kern_axpy_old_ccob.o"] {
        let data = read(name);
        let code = DeviceCode::parse(&data, &ReadOptions::default()).unwrap();
        assert!(code.offloading.is_empty(), "{name}");
        let want = bundle_oracle(name);
        assert_eq!(want.len(), 2, "{name}: oracle rows");
        assert_eq!(bundle_rows(&code), want, "{name}");
    }
}

/// `ARCHIVES.txt` block of `archive`: (member lines, armap lines).
fn archive_oracle(archive: &str) -> (Vec<String>, Vec<String>) {
    let text = String::from_utf8(read("ARCHIVES.txt")).unwrap();
    let block = text
        .split("== ")
        .find(|b| b.lines().next() == Some(archive))
        .unwrap_or_else(|| panic!("{archive} not in ARCHIVES.txt"));
    let pick = |p: &str| {
        block
            .lines()
            .filter_map(|l| l.strip_prefix(p))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    (pick("member "), pick("armap "))
}

/// A member's name, what its bytes are, and its `.llvm.offloading` images.
type MemberRows = (String, MemberKind, Vec<Row>);

/// Every member of `archive` with its device-code rows, checked against
/// ARCHIVES.txt; returns the format, whether thin, and the members.
fn read_archive(archive: &str) -> (ArchiveFormat, bool, Vec<MemberRows>) {
    let path = dir().join(archive);
    let data = std::fs::read(&path).unwrap();
    let ar = Archive::parse(&data).unwrap();
    let (members, armap) = archive_oracle(archive);
    let rel_dir = Path::new(archive).parent().unwrap();
    let names: Vec<String> = ar
        .members()
        .iter()
        .map(|m| {
            if rel_dir.as_os_str().is_empty() {
                m.name().into_owned()
            } else {
                format!("{}/{}", rel_dir.display(), m.name())
            }
        })
        .collect();
    assert_eq!(names, members, "{archive}: members");
    let symbols: Vec<String> = ar
        .symbols()
        .unwrap()
        .iter()
        .map(|s| format!("{} in {}", s.name, ar.members()[s.member.unwrap()].name()))
        .collect();
    assert_eq!(symbols, armap, "{archive}: symbol table");

    let archive_dir = path.parent().unwrap();
    let mut out = Vec::new();
    for m in ar.members() {
        let bytes: Cow<'_, [u8]> = m.contents(archive_dir).unwrap();
        assert_eq!(bytes.len() as u64, m.size());
        let kind = MemberKind::of(&bytes);
        let rows = match kind {
            MemberKind::Elf => {
                rows_of(&DeviceCode::parse(&bytes, &ReadOptions::default()).unwrap())
            }
            _ => Vec::new(),
        };
        out.push((m.name().into_owned(), kind, rows));
    }
    (ar.format(), ar.is_thin(), out)
}

#[test]
fn gnu_archive_members_match_the_packager() {
    let oracle = offload_oracle();
    let (format, thin, members) = read_archive("libnd_kernels.a");
    assert_eq!((format, thin), (ArchiveFormat::Gnu, false));
    assert_eq!(members.len(), 2);
    for (name, kind, rows) in members {
        assert_eq!(kind, MemberKind::Elf);
        assert_eq!(rows, oracle[&format!("libnd_kernels.a({name})")], "{name}");
    }
}

#[test]
fn thin_bsd_and_symbol_less_archives_read_the_same_images() {
    let oracle = offload_oracle();
    for (archive, format, thin) in [
        ("libnd_thin.a", ArchiveFormat::Gnu, true),
        ("libnd_bsd.a", ArchiveFormat::Bsd, false),
        // No symbol table, but the `//` long-name table says GNU.
        ("libnd_nosym.a", ArchiveFormat::Gnu, false),
    ] {
        let (f, t, members) = read_archive(archive);
        assert_eq!((f, t), (format, thin), "{archive}");
        let names: Vec<_> = members.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(names, NEW_DRIVER_OBJECTS, "{archive}");
        for (name, _, rows) in members {
            assert_eq!(rows, oracle[&name], "{archive}({name})");
        }
    }
}

#[test]
fn thin_archive_members_resolve_relative_to_the_archive() {
    let oracle = offload_oracle();
    let (_, thin, members) = read_archive("thin/libnd_up.a");
    assert!(thin);
    assert_eq!(members[0].0, "../nd_kern_axpy.o");
    assert_eq!(members[0].2, oracle["nd_kern_axpy.o"]);
    assert_eq!(members[1].0, "../kern_axpy_old.o");
    assert!(members[1].2.is_empty(), "old driver: no .llvm.offloading");
}

#[test]
fn thin_archive_with_a_missing_member_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(dir().join("libnd_thin.a"), tmp.path().join("libnd_thin.a")).unwrap();
    let data = std::fs::read(tmp.path().join("libnd_thin.a")).unwrap();
    let ar = Archive::parse(&data).unwrap();
    let e = ar.members()[0].contents(tmp.path()).unwrap_err();
    assert_eq!(e.kind(), kpack_llvm_offload::ErrorKind::Io);
    assert!(e.to_string().contains("nd_kern_axpy.o"), "{e}");
    // A stale member: the file changed size since the archive was made.
    std::fs::write(tmp.path().join("nd_kern_axpy.o"), b"\x7fELF short").unwrap();
    let e = ar.members()[0].contents(tmp.path()).unwrap_err();
    assert_eq!(e.kind(), kpack_llvm_offload::ErrorKind::Malformed);
    assert!(e.to_string().contains("archive header says"), "{e}");
}

#[test]
fn mixed_archive_has_old_and_new_driver_members() {
    let oracle = offload_oracle();
    let path = dir().join("libmixed.a");
    let data = std::fs::read(&path).unwrap();
    let ar = Archive::parse(&data).unwrap();
    let kinds: Vec<_> = ar
        .members()
        .iter()
        .map(|m| MemberKind::of(m.data()))
        .collect();
    assert_eq!(
        kinds,
        [
            MemberKind::Elf,
            MemberKind::Elf,
            MemberKind::Elf,
            MemberKind::Other
        ]
    );
    for m in &ar.members()[..2] {
        let code = DeviceCode::parse(m.data(), &ReadOptions::default()).unwrap();
        assert_eq!(bundle_rows(&code), bundle_oracle(&m.name()), "{}", m.name());
    }
    let code = DeviceCode::parse(ar.members()[2].data(), &ReadOptions::default()).unwrap();
    assert_eq!(rows_of(&code), oracle["nd_kern_reduce.o"]);
    // Members are where the archive says: the bytes equal the loose files.
    for m in ar.members().iter().take(3) {
        assert!(m.data() == read(&m.name()).as_slice(), "{}", m.name());
        assert_eq!(m.data_offset() % 2, 0, "ar members are 2-aligned");
    }
}

#[test]
fn offloading_sections_are_found_from_the_headers_alone() {
    for (name, want) in [
        ("nd_kern_axpy.o", true),
        ("nd_kern_reduce.o", true),
        ("kern_axpy_old.o", false),
        ("libaxpy_small.so", false),
        ("libnd_kernels.a", false),
    ] {
        assert_eq!(
            kpack_llvm_offload::has_offloading_section(&read(name)[..]),
            want,
            "{name}"
        );
        let cache = object::ReadCache::new(std::fs::File::open(dir().join(name)).unwrap());
        assert_eq!(
            kpack_llvm_offload::has_offloading_section(&cache),
            want,
            "{name} (ReadCache)"
        );
    }
}
