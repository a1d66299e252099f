//! kpack-pe against the Windows fixtures in `tests/fixtures/pe/`: reading
//! checked against oracles we did not write (`clang-offload-bundler-19`'s
//! unbundled code objects, `pe_oracle.py`'s wrapper table), offload output
//! checked by the `object` crate's reader, LLVM's tools and an independent
//! checksum, and mutated inputs that must never panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_bundle::{Format, WalkOptions};
use kpack_format::Marker;
use kpack_pe::Magic;
use kpack_pe::{FatBinary, PointerVia, TransformReport};
use object::LittleEndian as LE;
use object::read::pe::{ImageNtHeaders as _, ImageOptionalHeader as _, PeFile64};
use object::{Object, ObjectSection};
use sha2::{Digest, Sha256};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pe")
}

/// Every fixture, by name, sorted.
fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".dll") || n.ends_with(".exe"))
        .collect();
    v.sort();
    assert_eq!(v.len(), 15, "fixture set changed: {v:?}");
    v
}

/// Rows of a fixture TSV, header dropped.
fn tsv(name: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir().join(name))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn hex_u64(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn read(name: &str) -> FatBinary {
    kpack_pe::read_fat_binary(&dir().join(name), WalkOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn marker_for(name: &str) -> Vec<u8> {
    Marker {
        kernel_name: format!("bin/{name}"),
        search_paths: vec![".kpack/fixture_@GFXARCH@.kpack".into()],
    }
    .to_bytes()
}

fn offload(name: &str) -> (Vec<u8>, TransformReport) {
    let fat = read(name);
    kpack_pe::transform(&dir().join(name), &fat, &marker_for(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn reads_exactly_the_code_objects_clang_offload_bundler_extracts() {
    for name in fixtures() {
        let fat = read(&name);
        let mut mine = BTreeSet::new();
        for (b, item) in fat.bundles.iter().enumerate() {
            let format = match &item.format {
                Format::Plain => "plain".to_string(),
                Format::Compressed(h) => format!("ccob-v{}", h.version),
                Format::Elf => "elf".to_string(),
            };
            for (i, e) in item.entries.iter().enumerate() {
                if e.id.is_host() {
                    continue;
                }
                let bytes = item.read_entry(&fat.source, i).unwrap();
                mine.insert(vec![
                    name.clone(),
                    b.to_string(),
                    format.clone(),
                    e.id.to_string(),
                    bytes.len().to_string(),
                    hex::encode(Sha256::digest(&bytes)),
                ]);
            }
        }
        let oracle: BTreeSet<Vec<String>> = tsv("ORACLE.tsv")
            .into_iter()
            .filter(|r| r[0] == name)
            .collect();
        assert!(!oracle.is_empty(), "{name}: not in ORACLE.tsv");
        assert_eq!(mine, oracle, "{name}");
    }
}

#[test]
fn reads_exactly_the_wrappers_pe_oracle_lists() {
    let rows = tsv("WRAPPERS.tsv");
    for name in fixtures() {
        let fat = read(&name);
        let expected: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == name).collect();
        assert_eq!(fat.wrappers.len(), expected.len(), "{name}");
        let seg = fat.segment.as_ref().unwrap();
        for (w, r) in fat.wrappers.iter().zip(expected) {
            assert_eq!(w.index.to_string(), r[1], "{name}");
            assert_eq!(w.file_offset, hex_u64(&r[2]), "{name} wrapper {}", r[1]);
            assert_eq!(w.addr - fat.image_base, hex_u64(&r[3]), "{name}");
            assert_eq!(w.addr - seg.addr, w.index as u64 * 24, "{name}");
            assert_eq!(w.magic, Magic::Hipf, "{name}");
            assert_eq!(hex_u64(&r[4]), 0x4849_5046);
            assert_eq!(w.version.to_string(), r[5], "{name}");
            assert_eq!(w.pointer, hex_u64(&r[6]), "{name}");
            assert_eq!(w.reserved, hex_u64(&r[7]), "{name}");
            let via = if r[8] == "yes" {
                PointerVia::BaseReloc
            } else {
                PointerVia::Inline
            };
            assert_eq!(w.via, via, "{name} wrapper {}", r[1]);
            let b = r[9]
                .strip_prefix("bundle")
                .unwrap()
                .parse::<usize>()
                .unwrap();
            assert_eq!(w.bundle, Some(b), "{name} wrapper {}", r[1]);
            assert_eq!(fat.bundles[b].offset, hex_u64(&r[10]), "{name}");
        }
    }
}

#[test]
fn detects_pe_by_magic_not_by_extension() {
    let tmp = tempfile::tempdir().unwrap();
    let renamed = tmp.path().join("libfoo.so");
    std::fs::copy(dir().join("dll_1tu.dll"), &renamed).unwrap();
    assert!(kpack_pe::is_pe_file(&renamed).unwrap());
    assert_eq!(read_path(&renamed).bundles.len(), 1);
    let elf = tmp.path().join("not_a.dll");
    std::fs::write(&elf, b"\x7fELF\x02\x01\x01").unwrap();
    assert!(!kpack_pe::is_pe_file(&elf).unwrap());
    let e = kpack_pe::read_fat_binary(&elf, WalkOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), kpack_pe::ErrorKind::Malformed);
    assert!(e.to_string().contains("not_a.dll"), "{e}");
}

fn read_path(p: &Path) -> FatBinary {
    kpack_pe::read_fat_binary(p, WalkOptions::default()).unwrap()
}

/// The PE checksum, written again from Microsoft's description
/// (`CheckSumMappedFile`): sum of 16-bit words with carries folded back,
/// CheckSum field as zero, plus the file length.
fn reference_checksum(data: &[u8], field: usize) -> u32 {
    let mut buf = data.to_vec();
    buf[field..field + 4].fill(0);
    if buf.len() % 2 == 1 {
        buf.push(0);
    }
    let mut sum: u32 = 0;
    for w in buf.chunks(2) {
        sum += u32::from(w[0]) | (u32::from(w[1]) << 8);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum + data.len() as u32
}

fn checksum_field(data: &[u8]) -> usize {
    let lfanew = u32::from_le_bytes(data[0x3c..0x40].try_into().unwrap()) as usize;
    lfanew + 4 + 20 + 64
}

#[test]
fn checksum_matches_the_value_pe_oracle_computed_for_dll_cert() {
    let data = std::fs::read(dir().join("dll_cert.dll")).unwrap();
    let field = checksum_field(&data);
    let stored = u32::from_le_bytes(data[field..field + 4].try_into().unwrap());
    assert_eq!(stored, 0xb4c0, "README: CheckSum 0xb4c0");
    assert_eq!(reference_checksum(&data, field), 0xb4c0);
    assert_eq!(kpack_pe::checksum(&data, field as u64), 0xb4c0);
}

#[test]
fn every_fixture_passes_the_verifier_as_built() {
    for name in fixtures() {
        let data = std::fs::read(dir().join(&name)).unwrap();
        assert_eq!(
            kpack_pe::verify_image(&data),
            Vec::<kpack_format::Finding>::new(),
            "{name}"
        );
    }
}

/// Facts of one section as `object` reads them.
#[derive(Debug, Clone, PartialEq)]
struct Sec {
    name: String,
    rva: u32,
    vsize: u32,
    raw_ptr: u32,
    raw_size: u32,
    chars: u32,
}

fn sections(data: &[u8]) -> Vec<Sec> {
    let pe = PeFile64::<&[u8]>::parse(data).unwrap();
    pe.sections()
        .map(|s| {
            let h = s.pe_section();
            Sec {
                name: s.name().unwrap().to_string(),
                rva: h.virtual_address.get(LE),
                vsize: h.virtual_size.get(LE),
                raw_ptr: h.pointer_to_raw_data.get(LE),
                raw_size: h.size_of_raw_data.get(LE),
                chars: h.characteristics.get(LE),
            }
        })
        .collect()
}

/// (file offset, size) of every debug directory entry's data.
fn debug_data(data: &[u8]) -> Vec<Vec<u8>> {
    let pe = PeFile64::<&[u8]>::parse(data).unwrap();
    let d = pe.data_directory(6).unwrap();
    let (off, size) = d.file_range(&pe.section_table()).unwrap();
    (0..size / 28)
        .map(|k| {
            let e = (off + 28 * k) as usize;
            let n = u32::from_le_bytes(data[e + 16..e + 20].try_into().unwrap()) as usize;
            let p = u32::from_le_bytes(data[e + 24..e + 28].try_into().unwrap()) as usize;
            data[p..p + n].to_vec()
        })
        .collect()
}

/// `data` with every debug directory entry's PointerToRawData zeroed.
fn masked(data: &[u8]) -> Vec<u8> {
    let mut m = data.to_vec();
    let pe = PeFile64::<&[u8]>::parse(data).unwrap();
    let d = pe.data_directory(6).unwrap();
    let (off, size) = d.file_range(&pe.section_table()).unwrap();
    for k in 0..size / 28 {
        let e = (off + 28 * k) as usize + 24;
        m[e..e + 4].fill(0);
    }
    m
}

fn raw_end(secs: &[Sec], headers: u32) -> usize {
    secs.iter()
        .filter(|s| s.raw_size > 0)
        .map(|s| (s.raw_ptr + s.raw_size) as usize)
        .fold(headers as usize, usize::max)
}

#[test]
fn offload_output_is_a_sound_smaller_image_with_everything_else_kept() {
    for name in fixtures() {
        let input = std::fs::read(dir().join(&name)).unwrap();
        let (out, report) = offload(&name);
        assert_eq!(
            kpack_pe::verify_image(&out),
            Vec::<kpack_format::Finding>::new(),
            "{name}"
        );
        assert!(
            out.len() < input.len(),
            "{name}: {} -> {}",
            input.len(),
            out.len()
        );
        assert_eq!(report.output_size, out.len() as u64);

        let pin = PeFile64::<&[u8]>::parse(&input[..]).unwrap();
        let pout = PeFile64::<&[u8]>::parse(&out[..]).unwrap();
        let (oin, oout) = (
            pin.nt_headers().optional_header(),
            pout.nt_headers().optional_header(),
        );
        let (sin, sout) = (sections(&input), sections(&out));
        assert_eq!(sout.len(), sin.len() + 1, "{name}");
        // Every old section keeps its name, RVA and VirtualSize; .hip_fat
        // has no raw data left; the others keep their bytes.
        for (a, b) in sin.iter().zip(&sout) {
            assert_eq!(
                (&a.name, a.rva, a.vsize),
                (&b.name, b.rva, b.vsize),
                "{name}"
            );
            if a.name == ".hip_fat" {
                assert_eq!((b.raw_size, b.raw_ptr), (0, 0), "{name}");
                assert_eq!(report.bytes_removed, u64::from(a.raw_size));
            } else if a.name != ".hipFatB" {
                // Wrappers are checked below; debug entries' PointerToRawData
                // may move (compared by what they point at, below).
                assert_eq!(a.raw_size, b.raw_size, "{name} {}", a.name);
                assert_eq!(
                    masked(&input)[a.raw_ptr as usize..][..a.raw_size as usize],
                    masked(&out)[b.raw_ptr as usize..][..b.raw_size as usize],
                    "{name} {}",
                    a.name
                );
            }
        }
        // The marker section.
        let m = sout.last().unwrap();
        assert_eq!(m.name, ".kpackrf");
        assert_eq!(m.chars, 0x4000_0040);
        assert_eq!(m.rva, report.marker_rva);
        assert_eq!(m.rva % oout.section_alignment(), 0);
        let bytes = &out[m.raw_ptr as usize..][..m.vsize as usize];
        assert_eq!(bytes, &marker_for(&name)[..], "{name}");
        let parsed = Marker::parse(bytes).unwrap();
        assert_eq!(parsed.kernel_name, format!("bin/{name}"));
        assert_eq!(
            u64::from(oout.size_of_image()),
            u64::from(m.rva + m.vsize).next_multiple_of(u64::from(oout.section_alignment()))
        );
        // SizeOfInitializedData follows the raw data that came and went.
        assert_eq!(
            i64::from(oout.size_of_initialized_data()) - i64::from(oin.size_of_initialized_data()),
            i64::from(m.raw_size) - report.bytes_removed as i64,
            "{name}"
        );
        // Wrappers: HIPK, the marker's VA, the bundle index.
        let fat_in = read(&name);
        let tmp = tempfile::tempdir().unwrap();
        let outp = tmp.path().join(&name);
        std::fs::write(&outp, &out).unwrap();
        let fat_out = read_path(&outp);
        assert!(fat_out.is_transformed(), "{name}");
        assert!(fat_out.bundles.is_empty(), "{name}");
        for (a, b) in fat_in.wrappers.iter().zip(&fat_out.wrappers) {
            assert_eq!(b.magic, Magic::Hipk);
            assert_eq!(b.version, 1);
            assert_eq!(b.pointer, oout.image_base() + u64::from(m.rva));
            assert_eq!(b.pointer, report.marker_addr);
            assert_eq!(Some(b.reserved as usize), a.bundle);
            assert_eq!(a.via, b.via, "{name}: base relocation coverage kept");
        }
        // Trailing data (symbol table, certificate table, overlay) kept,
        // right after the marker.
        let tail_in = &input[raw_end(&sin, oin.size_of_headers())..];
        let tail_out = &out[raw_end(&sout, oout.size_of_headers())..];
        assert_eq!(tail_in, tail_out, "{name}");
        // Certificate table directory moved with it.
        let cin = pin.data_directory(4).map(|d| d.address_range());
        let cout = pout.data_directory(4).map(|d| d.address_range());
        assert_eq!(cin.is_some(), cout.is_some(), "{name}");
        assert_eq!(report.signature_invalidated, cin.is_some());
        if let (Some((a, n)), Some((b, m))) = (cin, cout) {
            assert_eq!(n, m);
            assert_eq!(b % 8, 0);
            assert_eq!(
                input[a as usize..][..n as usize],
                out[b as usize..][..m as usize],
                "{name}: certificate bytes"
            );
        }
        // Symbol table pointer moved with it.
        let (fin, fout) = (
            pin.nt_headers().file_header(),
            pout.nt_headers().file_header(),
        );
        let (yin, yout) = (
            fin.pointer_to_symbol_table.get(LE) as usize,
            fout.pointer_to_symbol_table.get(LE) as usize,
        );
        if yin != 0 {
            let n = 18 * fin.number_of_symbols.get(LE) as usize;
            assert_eq!(input[yin..][..n], out[yout..][..n], "{name}: symbols");
        }
        // Debug directory entries point at the same bytes.
        assert_eq!(debug_data(&input), debug_data(&out), "{name}");
        // CheckSum recomputed iff it was set.
        let field = checksum_field(&out);
        let stored = u32::from_le_bytes(out[field..field + 4].try_into().unwrap());
        if oin.check_sum() != 0 {
            assert!(report.checksum_recomputed);
            assert_eq!(stored, reference_checksum(&out, field), "{name}");
        } else {
            assert_eq!(stored, 0, "{name}");
        }
        // Deterministic.
        assert_eq!(offload(&name).0, out, "{name}: second run differs");
    }
}

#[test]
fn dll_dwarf_has_no_header_room_so_the_headers_grow_by_one_file_alignment_unit() {
    let (out, report) = offload("dll_dwarf.dll");
    assert_eq!(report.headers_grown, 0x200);
    let pe = PeFile64::<&[u8]>::parse(&out[..]).unwrap();
    assert_eq!(pe.nt_headers().optional_header().size_of_headers(), 0x600);
    assert!(sections(&out).iter().all(|s| s.rva >= 0x1000));
    // Every other fixture has room: nothing moves up.
    assert_eq!(offload("dll_1tu.dll").1.headers_grown, 0);
}

#[test]
fn signed_fixture_is_reported_as_invalidated() {
    assert!(read("dll_cert.dll").signed);
    assert!(!read("dll_1tu.dll").signed);
    assert!(offload("dll_cert.dll").1.signature_invalidated);
    assert!(!offload("dll_1tu.dll").1.signature_invalidated);
}

#[test]
fn transformed_image_is_not_transformed_again() {
    let (out, _) = offload("dll_2tu.dll");
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("dll_2tu.dll");
    std::fs::write(&p, &out).unwrap();
    let fat = read_path(&p);
    let e = kpack_pe::transform(&p, &fat, &marker_for("x"))
        .err()
        .unwrap();
    assert_eq!(e.kind(), kpack_pe::ErrorKind::AlreadyTransformed);
}

#[test]
fn verifier_catches_broken_images() {
    let (out, _) = offload("dll_debug.dll");
    let field = checksum_field(&out);
    // A wrapper pointing elsewhere.
    let fat = read("dll_debug.dll");
    let w = fat.wrappers[0].file_offset as usize;
    let mut bad = out.clone();
    bad[w + 8] ^= 0x10;
    let f = kpack_pe::verify_image(&bad);
    assert!(
        f.iter().any(|m| m.message.contains("not at the marker")),
        "{f:?}"
    );
    // A checksum that does not match.
    let mut bad = out.clone();
    bad[field..field + 4].copy_from_slice(&1u32.to_le_bytes());
    let f = kpack_pe::verify_image(&bad);
    assert!(f.iter().any(|m| m.message.contains("CheckSum")), "{f:?}");
    // Two sections' raw data overlapping.
    let secs = sections(&out);
    let lfanew = u32::from_le_bytes(out[0x3c..0x40].try_into().unwrap()) as usize;
    let table = lfanew + 24 + 240;
    let mut bad = out.clone();
    bad[table + 40 + 20..table + 40 + 24].copy_from_slice(&secs[0].raw_ptr.to_le_bytes());
    let f = kpack_pe::verify_image(&bad);
    assert!(f.iter().any(|m| m.message.contains("overlap")), "{f:?}");
    // A debug entry pointing at other bytes.
    let mut bad = out.clone();
    let pe = PeFile64::<&[u8]>::parse(&out[..]).unwrap();
    let (doff, _) = pe
        .data_directory(6)
        .unwrap()
        .file_range(&pe.section_table())
        .unwrap();
    let e = doff as usize + 24;
    let p = u32::from_le_bytes(bad[e..e + 4].try_into().unwrap()) + 0x200;
    bad[e..e + 4].copy_from_slice(&p.to_le_bytes());
    let f = kpack_pe::verify_image(&bad);
    assert!(
        f.iter().any(|m| m.message.contains("debug directory")),
        "{f:?}"
    );
    // The marker garbled.
    let m = secs.last().unwrap();
    let mut bad = out.clone();
    bad[m.raw_ptr as usize] = 0xc1;
    let f = kpack_pe::verify_image(&bad);
    assert!(f.iter().any(|m| m.message.contains("marker")), "{f:?}");
}

/// Lines of an LLVM tool's output that complain, or the failure to run.
fn llvm_complaints(tool: &str, args: &[&str], file: &Path) -> Option<Vec<String>> {
    let out = match Command::new(tool).args(args).arg(file).output() {
        Ok(o) => o,
        Err(_) => return None,
    };
    let mut bad = Vec::new();
    if !out.status.success() {
        bad.push(format!("{tool} exited with {}", out.status));
    }
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bad.extend(
        text.lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("warning") || l.contains("error") || l.contains("invalid")
            })
            .map(|l| format!("{tool}: {l}")),
    );
    Some(bad)
}

#[test]
fn llvm_tools_find_nothing_wrong_with_offload_output() {
    let tmp = tempfile::tempdir().unwrap();
    for name in fixtures() {
        let (out, _) = offload(&name);
        let p = tmp.path().join(&name);
        std::fs::write(&p, &out).unwrap();
        for (tool, args) in [
            (
                "llvm-readobj-19",
                &["--sections", "--coff-basereloc", "--coff-debug-directory"][..],
            ),
            ("llvm-objdump-19", &["-h"][..]),
        ] {
            // A required tool: its absence fails the test (scripts/test.sh
            // installs it), never skips the cross-check.
            let bad = llvm_complaints(tool, args, &p).unwrap_or_else(|| {
                panic!("{tool} does not run: install Debian's llvm-19 (scripts/test.sh does)")
            });
            assert_eq!(bad, Vec::<String>::new(), "{name}");
        }
        let listing = Command::new("llvm-objdump-19")
            .arg("-h")
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&listing.stdout).contains(".kpackrf"),
            "{name}"
        );
    }
}

/// xorshift64*: a fixed-seed PRNG, so every run mutates the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn mutated_fixtures_never_panic_through_read_transform_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x6b70_6163_6b2d_7065);
    let mut outcomes = [0usize; 3];
    for name in fixtures() {
        let data = std::fs::read(dir().join(&name)).unwrap();
        let fat = read(&name);
        // Where the interesting fields are: headers, wrappers, bundle heads.
        let seg = fat.segment.as_ref().unwrap().offset as usize;
        let fb = fat.fatbin.as_ref().unwrap().offset as usize;
        let hot = [0usize, 0x80, 0x100, 0x180, 0x200, 0x300, seg, fb];
        for round in 0..24 {
            let mut m = data.clone();
            let edits = 1 + rng.next() % 4;
            for _ in 0..edits {
                let at = if rng.next().is_multiple_of(4) {
                    rng.next() as usize % m.len()
                } else {
                    (hot[rng.next() as usize % hot.len()] + rng.next() as usize % 0x100) % m.len()
                };
                m[at] = match rng.next() % 4 {
                    0 => 0,
                    1 => 0xff,
                    2 => m[at] ^ (1 << (rng.next() % 8)),
                    _ => rng.next() as u8,
                };
            }
            if round % 8 == 7 {
                m.truncate(rng.next() as usize % m.len());
            }
            let _ = kpack_pe::verify_image(&m);
            let p = tmp.path().join(format!("{round}-{name}"));
            std::fs::write(&p, &m).unwrap();
            match kpack_pe::read_fat_binary(&p, WalkOptions::default()) {
                Err(_) => outcomes[0] += 1,
                Ok(fat) => match kpack_pe::transform(&p, &fat, &marker_for(&name)) {
                    Err(_) => outcomes[1] += 1,
                    Ok((out, _)) => {
                        let _ = kpack_pe::verify_image(&out);
                        outcomes[2] += 1;
                    }
                },
            }
        }
    }
    eprintln!("mutations: {outcomes:?} (read failed, transform failed, transformed)");
    assert_eq!(outcomes.iter().sum::<usize>(), 15 * 24);
}
