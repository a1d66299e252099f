//! `kpack offload` and `kpack verify-elf` on every real fixture: the output
//! verifies, survives strip / objcopy / patchelf / eu-strip, still runs under a stub
//! HIP runtime registering the same kernels, and its archives hold exactly
//! the code objects clang-offload-bundler extracts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_tests::{
    CLANG19_FAT_FIXTURES, CLANG22_FAT_FIXTURES, FAT_FIXTURES, OracleEntry, clang19_oracle,
    clang22_oracle, fixture, oracle, sha256_hex, stderr, stub_command,
};

use crate::util::{kpack, stub_hip};

/// What a run under the stub registered: (exit code, log lines).
fn run_under_stub(binary: &Path) -> (Option<i32>, Vec<String>) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let out = stub_command(stub_hip(false), binary)
        .env("KPACK_STUB_LOG", log.path())
        .output()
        .unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    (
        out.status.code(),
        text.lines().map(str::to_string).collect(),
    )
}

fn tool(name: &str, args: &[&std::ffi::OsStr]) {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name} is required for these tests: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.to_lowercase().contains("warning"),
        "{name} {args:?} warned: {err}"
    );
}

fn verify_ok(path: &Path) {
    require_readelf();
    let out = kpack(["verify-elf".as_ref(), path.as_os_str()]);
    assert!(
        out.status.success(),
        "verify-elf {}: {}{}",
        path.display(),
        kpack_tests::stdout(&out),
        stderr(&out)
    );
}

/// `verify-elf` drops its `readelf -lSW` cross-check when readelf is not
/// installed; the suite must not pass with half the check, so a missing
/// readelf fails (scripts/test.sh installs binutils).
fn require_readelf() {
    let ok = std::process::Command::new("readelf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "readelf is required by the test suite (verify-elf's cross-check); run scripts/test.sh or install binutils"
    );
}

/// One fixture set: where its files are, its oracle, how much an output
/// may grow.
struct FixtureSet {
    dir: &'static str,
    oracle: &'static [OracleEntry],
    /// Largest growth in bytes: the two added section headers and names
    /// (256) for the corpus; one 4 KiB page (the smallest `p_align`) for
    /// the clang-19 set, whose lld-linked aarch64 binaries keep their old
    /// `.shstrtab` where it is.
    max_growth: u64,
}

const CORPUS: FixtureSet = FixtureSet {
    dir: "corpus",
    oracle: &[],
    max_growth: 256,
};

const X86_64: u16 = 62;

/// Packaging steps distributions run on a binary, as (tool, args before
/// the file). BFD's strip/objcopy only read x86 here, so aarch64 outputs
/// go through LLVM's.
pub(crate) fn packaging_steps(machine: u16) -> Vec<(&'static str, Vec<&'static str>)> {
    let (strip, objcopy) = if machine == X86_64 {
        ("strip", "objcopy")
    } else {
        ("llvm-strip-19", "llvm-objcopy-19")
    };
    vec![
        (strip, vec!["--strip-all"]),
        (objcopy, vec!["--strip-debug"]),
        (
            "patchelf",
            vec![
                "--set-rpath",
                "/opt/rocm/lib/with/a/rather/long/path/so/dynstr/must/grow:/usr/lib",
            ],
        ),
    ]
}

/// The elfutils `eu-strip` runs Fedora's find-debuginfo and most
/// non-Debian packaging use, each on a fresh copy of an offloaded binary:
/// (label, arguments before the file). `debug` is where `-f` puts the
/// removed sections. elfutils reads every machine, so aarch64 too.
fn eu_strip_modes(debug: &Path) -> Vec<(&'static str, Vec<std::ffi::OsString>)> {
    vec![
        ("eu-strip", vec![]),
        ("eu-strip --strip-debug", vec!["--strip-debug".into()]),
        ("eu-strip -g", vec!["-g".into()]),
        ("eu-strip --remove-comment", vec!["--remove-comment".into()]),
        (
            "eu-strip -f",
            vec!["-f".into(), debug.as_os_str().to_owned()],
        ),
    ]
}

/// Run eu-strip `args` on a copy of `out_bin` named `<name>.<n>.eu-strip`
/// in `dir`; returns the copy and whether eu-strip changed it (it leaves a
/// file alone when it has nothing to remove).
fn eu_strip_copy(
    out_bin: &Path,
    dir: &Path,
    name: &str,
    n: usize,
    args: &[std::ffi::OsString],
) -> (PathBuf, bool) {
    let copy = dir.join(format!("{name}.{n}.eu-strip"));
    std::fs::copy(out_bin, &copy).unwrap();
    let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_os_str()).collect();
    a.push(copy.as_os_str());
    tool("eu-strip", &a);
    let changed = std::fs::read(&copy).unwrap() != std::fs::read(out_bin).unwrap();
    (copy, changed)
}

/// The whole loop on one fixture: inspect → extract (byte-identical to
/// the oracle) → offload (archives hold the oracle's objects; the layout
/// is `layout` when given) → verify-elf → packaging steps → verify-elf;
/// x86-64 ones also run under the stub HIP runtime before and after each
/// step, registering the same kernels.
fn offload_loop(set: &FixtureSet, name: &str, layout: Option<&str>) {
    let oracle: BTreeMap<(String, usize, String), String> = set
        .oracle
        .iter()
        .map(|e| {
            (
                (e.file.clone(), e.bundle, e.target.clone()),
                e.sha256.clone(),
            )
        })
        .collect();
    let input = fixture(&format!("{}/{name}", set.dir));
    let machine = kpack_tests::e_machine(&input);
    let before = sha256_hex(&std::fs::read(&input).unwrap());
    let dir = tempfile::tempdir().unwrap();

    let out = kpack(["inspect".as_ref(), input.as_os_str()]);
    assert!(out.status.success(), "inspect {name}: {}", stderr(&out));
    let extracted = dir.path().join("extracted");
    let out = kpack([
        "extract".as_ref(),
        "--all".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        extracted.as_os_str(),
    ]);
    assert!(out.status.success(), "extract {name}: {}", stderr(&out));
    let mut files = 0;
    for ((_, bundle, target), sha) in oracle.iter().filter(|((f, _, _), _)| f == name) {
        let file = format!("bundle{bundle}-{}.hsaco", target.replace(':', "_"));
        let bytes = std::fs::read(extracted.join(&file))
            .unwrap_or_else(|e| panic!("{name}: extract wrote no {file}: {e}"));
        assert_eq!(
            &sha256_hex(&bytes),
            sha,
            "{name}: {file} differs from the oracle"
        );
        files += 1;
    }
    assert!(files > 0, "{name}: not in the oracle");
    assert_eq!(
        std::fs::read_dir(&extracted).unwrap().count(),
        files,
        "{name}"
    );

    let out_bin = dir.path().join(name);
    let archives = dir.path().join(".kpack");
    let out = kpack([
        "offload".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out_bin.as_os_str(),
        "--archives".as_ref(),
        archives.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if let Some(layout) = layout {
        assert_eq!(
            report["result"]["transform"]["layout"], layout,
            "{name}: layout in {report}"
        );
    }
    assert_eq!(
        sha256_hex(&std::fs::read(&input).unwrap()),
        before,
        "{name}: input modified"
    );
    let (in_len, out_len) = (
        std::fs::metadata(&input).unwrap().len(),
        std::fs::metadata(&out_bin).unwrap().len(),
    );
    assert!(
        out_len <= in_len + set.max_growth,
        "{name}: grew from {in_len} to {out_len}"
    );
    verify_ok(&out_bin);

    // Archives hold exactly what clang-offload-bundler extracts.
    let stem = name.split('.').next().unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(&archives).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            file.starts_with(&format!("{stem}_")) && !file.contains(':'),
            "{name}: archive {file}"
        );
        let archive = kpack_format::Archive::open(&path).unwrap();
        for e in archive.entries() {
            let (key, co) = e.key().rsplit_once('#').unwrap();
            assert_eq!(key, name, "{name}: key {}", e.key());
            let want = oracle.get(&(name.to_string(), co.parse().unwrap(), e.arch().to_string()));
            let got = sha256_hex(&archive.read(e).unwrap());
            assert_eq!(
                Some(&got),
                want,
                "{name}: {} {} differs from clang-offload-bundler",
                e.key(),
                e.arch()
            );
            seen += 1;
        }
    }
    let expected = oracle.keys().filter(|(f, _, _)| f == name).count();
    assert_eq!(
        seen, expected,
        "{name}: archives hold {seen} code objects, bundles had {expected}"
    );

    // Same behaviour under the stub HIP runtime, every wrapper HIPK.
    let runs = machine == X86_64;
    let names = |log: &[String]| {
        log.iter()
            .filter(|l| !l.starts_with("fatbin"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (code_in, log_in) = if runs {
        run_under_stub(&input)
    } else {
        (Some(0), Vec::new())
    };
    if runs {
        let (code_out, log_out) = run_under_stub(&out_bin);
        assert_eq!(code_in, Some(0), "{name}: original failed: {log_in:?}");
        assert_eq!(
            code_out, code_in,
            "{name}: transformed exits differently: {log_out:?}"
        );
        assert_eq!(
            names(&log_out),
            names(&log_in),
            "{name}: registered kernels differ"
        );
        let fatbins: Vec<_> = log_out.iter().filter(|l| l.starts_with("fatbin")).collect();
        assert!(!fatbins.is_empty(), "{name}: nothing registered");
        for l in &fatbins {
            assert!(l.starts_with("fatbin HIPK 1 "), "{name}: {l}");
            assert!(
                l.contains(&format!(" {name} .kpack/{stem}_@GFXARCH@.kpack")),
                "{name}: marker {l}"
            );
        }
        // The original's wrappers point at bundles, plain or compressed.
        assert!(
            log_in
                .iter()
                .filter(|l| l.starts_with("fatbin"))
                .all(|l| l.starts_with("fatbin HIPF") && !l.contains("not at a bundle")),
            "{name}: {log_in:?}"
        );
    }

    if DISTRO_SUBSET.contains(&name) {
        distro_steps(
            name,
            &input,
            &out_bin,
            dir.path(),
            &|copy: &Path, step: &str| {
                verify_ok(copy);
                if runs {
                    let (code, log) = run_under_stub(copy);
                    assert_eq!(code, code_in, "{name} after {step}: {log:?}");
                    assert_eq!(names(&log), names(&log_in), "{name} after {step}");
                }
            },
        );
    }

    for (step, args) in packaging_steps(machine) {
        let copy = dir.path().join(format!("{name}.{step}"));
        std::fs::copy(&out_bin, &copy).unwrap();
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(copy.as_os_str());
        tool(step, &a);
        verify_ok(&copy);
        if runs {
            let (code, log) = run_under_stub(&copy);
            assert_eq!(code, code_in, "{name} after {step}: {log:?}");
            assert_eq!(names(&log), names(&log_in), "{name} after {step}");
        }
    }

    // eu-strip lays out every section it keeps but the allocated ones;
    // the program header table's allocated SHT_NULL cover keeps it.
    let debug = dir.path().join(format!("{name}.eu-strip.debug"));
    for (n, (step, args)) in eu_strip_modes(&debug).into_iter().enumerate() {
        let (copy, _) = eu_strip_copy(&out_bin, dir.path(), name, n, &args);
        verify_ok(&copy);
        if runs {
            let (code, log) = run_under_stub(&copy);
            assert_eq!(code, code_in, "{name} after {step}: {log:?}");
            assert_eq!(names(&log), names(&log_in), "{name} after {step}");
        }
    }
}

/// What dh_strip and find-debuginfo do: the debug sections into `debug`,
/// then stripped from `copy`, which gets a `.gnu_debuglink` to it.
fn split_debug(copy: &Path, debug: &Path) {
    tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            copy.as_os_str(),
            debug.as_os_str(),
        ],
    );
    let link = format!("--add-gnu-debuglink={}", debug.display());
    tool(
        "objcopy",
        &["--strip-debug".as_ref(), link.as_ref(), copy.as_os_str()],
    );
}

/// Fixtures that also go through the tools Debian's and Fedora's packaging
/// runs after the build: both layouts, a library and an executable, and
/// one with DWARF (`lib2tu_2arch_debug.so`).
const DISTRO_SUBSET: &[&str] = &[
    "lib2tu_2arch_debug.so",
    "exe_axpy_2arch",
    "libaxpy_small.so",
    "exe_axpy_ccob",
];

/// `objcopy --only-keep-debug` + `--strip-debug --add-gnu-debuglink`
/// (dh_strip, find-debuginfo), `dwz`, `debugedit`, each on a fresh copy of
/// `out_bin`; `check` runs on the result. `dwz` must do on the output what
/// it does on the input (Debian's dwz 0.15 rejects clang-15's DWARF 5 and
/// leaves the file alone; without DWARF it has nothing to do).
fn distro_steps(name: &str, input: &Path, out_bin: &Path, dir: &Path, check: &dyn Fn(&Path, &str)) {
    let copy_of = |step: &str| {
        let step_dir = dir.join(format!("distro-{step}"));
        std::fs::create_dir_all(&step_dir).unwrap();
        let copy = step_dir.join(name);
        std::fs::copy(out_bin, &copy).unwrap();
        copy
    };

    let copy = copy_of("debuglink");
    let debug = copy.with_extension("debug");
    split_debug(&copy, &debug);
    check(&copy, "objcopy --only-keep-debug + --add-gnu-debuglink");
    // The debug file keeps every section at its address (what gdb reads).
    // BFD drops SHT_NULL sections (the program header table's cover), and
    // so does gdb: they are not compared.
    let addrs = |p: &Path| {
        use object::read::elf::{ElfFile64, SectionHeader};
        use object::{LittleEndian as LE, Object, ObjectSection};
        let bytes = std::fs::read(p).unwrap();
        let file = ElfFile64::<LE>::parse(&*bytes).unwrap();
        file.sections()
            .filter(|s| {
                s.address() != 0 && s.elf_section_header().sh_type(LE) != object::elf::SHT_NULL
            })
            .map(|s| (s.name().unwrap().to_owned(), s.address()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        addrs(&debug),
        addrs(out_bin),
        "{name}: debug file addresses"
    );

    let dwz = |p: &Path| {
        Command::new("dwz")
            .arg(p)
            .output()
            .unwrap_or_else(|e| panic!("dwz is required for these tests: {e}"))
            .status
            .success()
    };
    let original = dir.join(format!("distro-dwz-input-{name}"));
    std::fs::copy(input, &original).unwrap();
    let copy = copy_of("dwz");
    assert_eq!(dwz(&copy), dwz(&original), "{name}: dwz on output vs input");
    check(&copy, "dwz");

    let copy = copy_of("debugedit");
    tool(
        "debugedit",
        &[
            "-b".as_ref(),
            dir.as_os_str(),
            "-d".as_ref(),
            "/usr/src/debug".as_ref(),
            copy.as_os_str(),
        ],
    );
    check(&copy, "debugedit");
}

#[test]
fn every_fixture_offloads_verifies_survives_packaging_and_still_runs() {
    let set = FixtureSet {
        oracle: oracle(),
        ..CORPUS
    };
    for name in FAT_FIXTURES {
        offload_loop(&set, name, Some("in-place"));
    }
}

#[test]
fn every_clang19_fixture_offloads_verifies_survives_packaging_and_still_runs() {
    let set = FixtureSet {
        dir: "clang19",
        oracle: clang19_oracle(),
        max_growth: 4096,
    };
    for (name, layout) in CLANG19_FAT_FIXTURES {
        offload_loop(&set, name, Some(layout));
    }
}

#[test]
fn every_clang22_fixture_offloads_verifies_survives_packaging_and_still_runs() {
    let set = FixtureSet {
        dir: "clang22",
        oracle: clang22_oracle(),
        max_growth: 4096,
    };
    for (name, layout) in CLANG22_FAT_FIXTURES {
        offload_loop(&set, name, Some(layout));
    }
}

/// One program header, as compared across the transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    p_type: u32,
    flags: u32,
    vaddr: u64,
    memsz: u64,
    align: u64,
}

/// Every program header of an ELF file (32- or 64-bit, either endianness).
fn segments(bytes: &[u8]) -> Vec<Segment> {
    use object::read::elf::{ElfFile, FileHeader, ProgramHeader};
    fn of<H: FileHeader>(bytes: &[u8]) -> Vec<Segment> {
        let f = ElfFile::<H>::parse(bytes).unwrap();
        let e = f.endian();
        f.elf_program_headers()
            .iter()
            .map(|p| Segment {
                p_type: p.p_type(e),
                flags: p.p_flags(e),
                vaddr: p.p_vaddr(e).into(),
                memsz: p.p_memsz(e).into(),
                align: p.p_align(e).into(),
            })
            .collect()
    }
    match object::FileKind::parse(bytes).unwrap() {
        object::FileKind::Elf64 => of::<object::elf::FileHeader64<object::Endianness>>(bytes),
        object::FileKind::Elf32 => of::<object::elf::FileHeader32<object::Endianness>>(bytes),
        k => panic!("not ELF: {k:?}"),
    }
}

/// The README's promise, on every fat fixture (corpus and clang-19): apart
/// from `.hip_fatbin`'s pages, no virtual address changes. Every section
/// keeps its address and size, every symbol (static and dynamic) its
/// address, the entry point stays, and every program header except the
/// moved `PT_PHDR` and the `PT_LOAD` holding `.hip_fatbin` is unchanged;
/// that one becomes `PT_LOAD`s that start at its start, end at its end,
/// stay inside it and grant no permission it did not.
#[test]
fn no_virtual_address_moves_except_the_removed_pages() {
    use object::elf::{PT_LOAD, PT_PHDR};
    use object::{Object, ObjectSection, ObjectSymbol};
    let names = FAT_FIXTURES.iter().map(|n| format!("corpus/{n}")).chain(
        CLANG19_FAT_FIXTURES
            .iter()
            .map(|(n, _)| format!("clang19/{n}"))
            .chain(
                CLANG22_FAT_FIXTURES
                    .iter()
                    .map(|(n, _)| format!("clang22/{n}")),
            ),
    );
    let mut checked = 0;
    for rel in names {
        let input = fixture(&rel);
        let name = rel.split_once('/').unwrap().1;
        let dir = tempfile::tempdir().unwrap();
        let out_bin = dir.path().join(name);
        let out = kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out_bin.as_os_str(),
            "--archives".as_ref(),
            dir.path().as_os_str(),
        ]);
        assert!(out.status.success(), "{rel}: {}", stderr(&out));
        let (a_bytes, b_bytes) = (
            std::fs::read(&input).unwrap(),
            std::fs::read(&out_bin).unwrap(),
        );
        let (a, b) = (
            object::File::parse(&*a_bytes).unwrap(),
            object::File::parse(&*b_bytes).unwrap(),
        );

        // Sections: every allocated one but .hip_fatbin, by name and index
        // order (names such as `.text` may repeat in principle).
        let fatbin = a.section_by_name(".hip_fatbin").unwrap();
        let (fb_start, fb_end) = (fatbin.address(), fatbin.address() + fatbin.size());
        let alloc = |f: &object::File| {
            f.sections()
                .filter(|s| s.address() != 0 && s.name() != Ok(".hip_fatbin"))
                .filter(|s| {
                    !matches!(
                        s.name(),
                        Ok(".kpack.pad" | ".kpack.phdr" | ".rocm_kpack_ref")
                    )
                })
                .map(|s| (s.name().unwrap().to_string(), s.address(), s.size()))
                .collect::<Vec<_>>()
        };
        assert_eq!(alloc(&a), alloc(&b), "{rel}: section addresses changed");
        assert!(!alloc(&a).is_empty(), "{rel}: no allocated sections read");

        assert_eq!(a.entry(), b.entry(), "{rel}: entry point moved");

        let syms = |it: &mut dyn Iterator<Item = object::Symbol<'_, '_>>| {
            it.map(|s| (s.name().unwrap_or("").to_string(), s.address(), s.size()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            syms(&mut a.symbols()),
            syms(&mut b.symbols()),
            "{rel}: symbols changed"
        );
        assert_eq!(
            syms(&mut a.dynamic_symbols()),
            syms(&mut b.dynamic_symbols()),
            "{rel}: dynamic symbols changed"
        );

        // Segments.
        let (sa, sb) = (segments(&a_bytes), segments(&b_bytes));
        let holds_fatbin =
            |s: &Segment| s.p_type == PT_LOAD && s.vaddr <= fb_start && fb_end <= s.vaddr + s.memsz;
        let split: Vec<&Segment> = sa.iter().filter(|s| holds_fatbin(s)).collect();
        assert_eq!(split.len(), 1, "{rel}: .hip_fatbin in {split:?}");
        let split = *split[0];
        let kept = |v: &[Segment]| {
            v.iter()
                .filter(|s| s.p_type != PT_PHDR)
                .filter(|s| {
                    !(s.p_type == PT_LOAD
                        && split.vaddr <= s.vaddr
                        && s.vaddr + s.memsz <= split.vaddr + split.memsz)
                })
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(&sa), kept(&sb), "{rel}: program headers changed");
        let pieces: Vec<&Segment> = sb
            .iter()
            .filter(|s| {
                s.p_type == PT_LOAD
                    && split.vaddr <= s.vaddr
                    && s.vaddr + s.memsz <= split.vaddr + split.memsz
            })
            .collect();
        assert!(pieces.len() >= 2, "{rel}: {split:?} became {pieces:?}");
        assert_eq!(pieces[0].vaddr, split.vaddr, "{rel}: {pieces:?}");
        let last = pieces[pieces.len() - 1];
        assert_eq!(
            last.vaddr + last.memsz,
            split.vaddr + split.memsz,
            "{rel}: {pieces:?}"
        );
        // The pieces before and after keep the flags; the kpack segment
        // (table and marker) may drop some (no X for data).
        assert_eq!(pieces[0].flags, split.flags, "{rel}: {pieces:?}");
        assert_eq!(last.flags, split.flags, "{rel}: {pieces:?}");
        for p in &pieces {
            assert_eq!(p.flags & !split.flags, 0, "{rel}: {p:?} from {split:?}");
        }
        let phdr_b: Vec<&Segment> = sb.iter().filter(|s| s.p_type == PT_PHDR).collect();
        let phdr_a = sa.iter().filter(|s| s.p_type == PT_PHDR).count();
        assert_eq!(phdr_b.len(), phdr_a, "{rel}: PT_PHDR count");
        for p in phdr_b {
            // The table moved to the start of its own PT_LOAD, inside the
            // old segment's range.
            assert!(
                pieces.iter().any(|l| l.vaddr == p.vaddr),
                "{rel}: PT_PHDR {p:?} not at the start of a PT_LOAD in {pieces:?}"
            );
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        FAT_FIXTURES.len() + CLANG19_FAT_FIXTURES.len() + CLANG22_FAT_FIXTURES.len()
    );
}

#[test]
fn offload_is_deterministic() {
    let input = fixture("corpus/exe_2tu_wide");
    let run = || {
        let dir = tempfile::tempdir().unwrap();
        let out_bin = dir.path().join("bin/app");
        let out = kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out_bin.as_os_str(),
            "--archives".as_ref(),
            dir.path().join("lib/.kpack").as_os_str(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut files: Vec<(String, String)> = walk(dir.path())
            .into_iter()
            .map(|p| {
                (
                    p.strip_prefix(dir.path()).unwrap().display().to_string(),
                    sha256_hex(&std::fs::read(&p).unwrap()),
                )
            })
            .collect();
        files.sort();
        (files, std::fs::read(&out_bin).unwrap())
    };
    let (a, bin) = run();
    assert_eq!(a, run().0);
    assert!(
        a.iter()
            .any(|(p, _)| p == "lib/.kpack/exe_2tu_wide_gfx90a.kpack"),
        "{a:?}"
    );
    // The search path is relative to the output binary's directory.
    let marker = b"../lib/.kpack/exe_2tu_wide_@GFXARCH@.kpack";
    assert!(bin.windows(marker.len()).any(|w| w == marker));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p))
        } else {
            out.push(p)
        }
    }
    out
}

#[test]
fn host_only_and_already_offloaded_inputs_are_copied_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let host = fixture("corpus/libhostonly.so");
    let out_host = dir.path().join("libhostonly.so");
    let out = kpack([
        "offload".as_ref(),
        host.as_os_str(),
        "-o".as_ref(),
        out_host.as_os_str(),
        "--archives".as_ref(),
        dir.path().join("a").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no device code"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&host).unwrap(),
        std::fs::read(&out_host).unwrap()
    );
    assert!(
        !dir.path().join("a").exists(),
        "archives dir created for a host-only input"
    );

    let first = dir.path().join("lib2tu.so");
    let out = kpack([
        "offload".as_ref(),
        fixture("corpus/lib2tu_2arch.so").as_os_str(),
        "-o".as_ref(),
        first.as_os_str(),
        "--archives".as_ref(),
        dir.path().join("b").as_os_str(),
    ]);
    assert!(out.status.success());
    let again = dir.path().join("again.so");
    let out = kpack([
        "offload".as_ref(),
        first.as_os_str(),
        "-o".as_ref(),
        again.as_os_str(),
        "--archives".as_ref(),
        dir.path().join("c").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already offloaded"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

#[test]
fn bad_inputs_fail_with_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let orig = std::fs::read(fixture("corpus/lib2tu_2arch.so")).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated.so", orig[..0x4000].to_vec()),
        ("elf32.so", {
            let mut b = orig.clone();
            b[4] = 1;
            b
        }),
        ("aarch64.so", {
            let mut b = orig.clone();
            b[18..20].copy_from_slice(&183u16.to_le_bytes());
            b
        }),
        ("corrupt-bundle.so", {
            let mut b = orig.clone();
            b[0x3000 + 32 + 8..0x3000 + 32 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
            b
        }),
    ];
    for (name, bytes) in cases {
        let input = dir.path().join(name);
        std::fs::write(&input, bytes).unwrap();
        let out_bin = dir.path().join(format!("out-{name}"));
        let archives = dir.path().join(format!("arch-{name}"));
        let out = kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out_bin.as_os_str(),
            "--archives".as_ref(),
            archives.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(name),
            "{name}: error must name the file: {}",
            stderr(&out)
        );
        assert!(!out_bin.exists(), "{name}: output written");
        assert!(
            !archives.exists() || std::fs::read_dir(&archives).unwrap().next().is_none(),
            "{name}: archive written"
        );
    }
}

#[test]
fn verify_elf_reports_an_untransformed_fat_binary_and_a_broken_marker() {
    let out = kpack([
        "verify-elf".as_ref(),
        fixture("corpus/libaxpy_2arch.so").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        kpack_tests::stdout(&out).contains("not offloaded"),
        "{}",
        kpack_tests::stdout(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let out_bin = dir.path().join("lib.so");
    let out = kpack([
        "offload".as_ref(),
        fixture("corpus/libaxpy_2arch.so").as_os_str(),
        "-o".as_ref(),
        out_bin.as_os_str(),
        "--archives".as_ref(),
        dir.path().as_os_str(),
    ]);
    assert!(out.status.success());
    let mut bytes = std::fs::read(&out_bin).unwrap();
    let pos = bytes.windows(11).position(|w| w == b"kernel_name").unwrap();
    bytes[pos - 1] = 0xc1; // a reserved msgpack byte where the key's header was
    std::fs::write(&out_bin, &bytes).unwrap();
    let out = kpack(["verify-elf".as_ref(), out_bin.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", kpack_tests::stdout(&out));
    assert!(
        kpack_tests::stdout(&out).contains(".rocm_kpack_ref does not parse"),
        "{}",
        kpack_tests::stdout(&out)
    );
}

/// `.hip_fatbin` in a `PT_LOAD` of its own starting part-way into a page
/// (`clang19/build-segment.sh`): `.kpack.pad` covers the head of that
/// segment, so GNU strip and objcopy keep the kpack segment where it is
/// and every packaging tool's output still verifies and runs.
#[test]
fn a_fat_binary_in_a_segment_of_its_own_survives_every_strip() {
    use object::read::elf::{ElfFile64, ProgramHeader as _};
    use object::{LittleEndian as LE, Object, ObjectSection};
    let dir = tempfile::tempdir().unwrap();
    for name in ["libaxpy_segment_490.so", "libaxpy_segment_d00.so"] {
        let input = fixture(&format!("clang19/{name}"));
        // The layout under test: .hip_fatbin first in its PT_LOAD, off a
        // page boundary.
        let bytes = std::fs::read(&input).unwrap();
        let obj = ElfFile64::<LE, _>::parse(&bytes[..]).unwrap();
        let fatbin = obj.section_by_name(".hip_fatbin").unwrap().address();
        assert!(
            obj.elf_program_headers()
                .iter()
                .any(|p| p.p_type(LE) == object::elf::PT_LOAD
                    && p.p_vaddr(LE) == fatbin
                    && fatbin % 0x1000 != 0),
            "{name}: not the layout under test"
        );
        let out_dir = dir.path().join(name);
        let out_bin = crate::util::offload_into(&input, &out_dir, &[]);
        verify_ok(&out_bin);
        let (code_in, log_in) = run_under_stub(&input);
        assert_eq!(code_in, Some(0), "{name}: {log_in:?}");
        let names = |log: &[String]| -> Vec<String> {
            log.iter()
                .filter(|l| !l.starts_with("fatbin"))
                .cloned()
                .collect()
        };
        let steps: [(&str, &[&str]); 5] = [
            ("strip", &["--strip-all"]),
            ("objcopy", &["--strip-debug"]),
            ("llvm-strip-19", &["--strip-all"]),
            ("eu-strip", &[]),
            (
                "patchelf",
                &["--set-rpath", "/opt/rocm/lib/a/long/path/so/dynstr/grows"],
            ),
        ];
        for (n, (step, args)) in steps.iter().enumerate() {
            let copy = out_dir.join(format!("step{n}.so"));
            std::fs::copy(&out_bin, &copy).unwrap();
            let mut a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
            a.push(copy.as_os_str());
            tool(step, &a);
            verify_ok(&copy);
            if *step == "patchelf" {
                // A new RUNPATH no longer finds the stub's directory.
                continue;
            }
            let (code, log) = run_under_stub(&copy);
            assert_eq!(code, Some(0), "{name} after {step}: {log:?}");
            assert_eq!(names(&log), names(&log_in), "{name} after {step}");
        }
    }
}

/// A fat binary checked as offloaded gets one line for all its HIPF
/// wrappers, naming `--pruned`; a `PT_PHDR` whose size is not the table's
/// (AMD's offloader leaves it so) is a warning, exit 0.
#[test]
fn verify_elf_says_hipf_once_and_takes_a_stale_pt_phdr_size_as_a_warning() {
    let out = kpack([
        "verify-elf".as_ref(),
        fixture("corpus/lib2tu_2arch.so").as_os_str(),
    ]);
    let text = kpack_tests::stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.matches("HIPF").count(), 1, "{text}");
    assert!(
        text.contains("wrapper(s) are HIPF: device code not offloaded (if this is `kpack prune` output, check it with `verify-elf --pruned`)"),
        "{text}"
    );

    use object::LittleEndian as LE;
    use object::read::elf::{ElfFile64, FileHeader as _, ProgramHeader as _};
    let dir = tempfile::tempdir().unwrap();
    // An executable: it has a PT_PHDR.
    let out_bin = crate::util::offload_into(&fixture("corpus/exe_axpy_2arch"), dir.path(), &[]);
    let mut bytes = std::fs::read(&out_bin).unwrap();
    let at = {
        let obj = ElfFile64::<LE, _>::parse(&bytes[..]).unwrap();
        let phoff = obj.elf_header().e_phoff(LE) as usize;
        let i = obj
            .elf_program_headers()
            .iter()
            .position(|p| p.p_type(LE) == object::elf::PT_PHDR)
            .unwrap();
        phoff + i * 56 + 32
    };
    bytes[at..at + 8].copy_from_slice(&0x380u64.to_le_bytes());
    std::fs::write(&out_bin, &bytes).unwrap();
    let out = kpack([
        "verify-elf".as_ref(),
        out_bin.as_os_str(),
        "--no-readelf".as_ref(),
    ]);
    let text = kpack_tests::stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(": ok\n"), "{text}");
    assert!(
        text.contains(": warning: PT_PHDR size 0x380 is not e_phnum * e_phentsize"),
        "{text}"
    );
}

/// elfutils' libelf (eu-strip 0.188) fills every gap between sections with
/// zeros when it writes a file, and eu-strip gives every non-allocated
/// section it keeps a new offset after the last allocated one. The
/// relocated program header table survives because an allocated `SHT_NULL`
/// section covers it (BFD drops those; libelf keeps them in place). Both
/// layouts, every eu-strip mode: eu-strip removed something (so it did
/// write the file), the cover is still over the table, and the result
/// verifies. With the cover turned back into the non-allocated PROGBITS
/// one kpack wrote before, eu-strip zeroes the table and `verify-elf`
/// catches it.
#[test]
fn program_headers_survive_every_eu_strip_mode_and_verify_elf_catches_a_zeroed_table() {
    use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
    use object::{LittleEndian as LE, Object, ObjectSection};

    // In place with DWARF (every mode removes something), shared page
    // without (only the modes that remove .symtab or .comment do).
    for (set, name, has_debug) in [
        ("corpus", "lib2tu_2arch_debug.so", true),
        ("clang19", "libaxpy_small.so", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let input = fixture(&format!("{set}/{name}"));
        let out_bin = dir.path().join(name);
        let archives = dir.path().join(".kpack");
        let out = kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out_bin.as_os_str(),
            "--archives".as_ref(),
            archives.as_os_str(),
        ]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        // The cover over the table: (file offset of its header, offset, size).
        let cover = |path: &Path| {
            let bytes = std::fs::read(path).unwrap();
            let elf = ElfFile64::<LE>::parse(&*bytes).unwrap();
            let header = elf.elf_header();
            let table = (header.e_phoff(LE), u64::from(header.e_phnum(LE)) * 56);
            let section = elf.section_by_name(".kpack.phdr").unwrap();
            let sh = section.elf_section_header();
            assert_eq!(sh.sh_type(LE), object::elf::SHT_NULL, "{name}");
            assert_eq!(sh.sh_flags(LE), u64::from(object::elf::SHF_ALLOC), "{name}");
            let at = header.e_shoff(LE) + section.index().0 as u64 * 64;
            (at, (sh.sh_offset(LE), sh.sh_size(LE)), table)
        };
        let (_, placed, table) = cover(&out_bin);
        assert_eq!(placed, table, "{name}: cover is not over the table");

        let debug = dir.path().join(format!("{name}.debug"));
        for (n, (step, args)) in eu_strip_modes(&debug).into_iter().enumerate() {
            let (copy, changed) = eu_strip_copy(&out_bin, dir.path(), name, n, &args);
            // eu-strip rewrites the file only when it removes a section:
            // make sure the modes that must remove one did.
            if has_debug || matches!(step, "eu-strip" | "eu-strip --remove-comment") {
                assert!(changed, "{name}: {step} left the file alone");
            }
            let (_, placed, table) = cover(&copy);
            assert_eq!(placed, table, "{name} after {step}: cover moved");
            verify_ok(&copy);
        }

        // The old cover: not allocated, PROGBITS.
        let (header_at, _, _) = cover(&out_bin);
        let mut bytes = std::fs::read(&out_bin).unwrap();
        let at = header_at as usize;
        bytes[at + 4..at + 8].copy_from_slice(&object::elf::SHT_PROGBITS.to_le_bytes());
        bytes[at + 8..at + 16].copy_from_slice(&0u64.to_le_bytes());
        let old = dir.path().join(format!("{name}.old-cover"));
        std::fs::write(&old, &bytes).unwrap();
        verify_ok(&old);
        tool("eu-strip", &[old.as_os_str()]);
        let out = kpack(["verify-elf".as_ref(), old.as_os_str()]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name}: {}",
            kpack_tests::stdout(&out)
        );
        assert!(
            kpack_tests::stdout(&out).contains("program header table at 0x"),
            "{name}: {}",
            kpack_tests::stdout(&out)
        );
    }
}

/// `clang19/lib2tu_dwarf4.so` (`build-dwarf.sh`: two TUs, `-g -gdwarf-4`)
/// gives the debug-info tools real work, which clang's default DWARF 5
/// does not (Debian's dwz 0.15 rejects it): `dwz` and `debugedit` must each
/// change the offloaded file, `objcopy --only-keep-debug` +
/// `--strip-debug --add-gnu-debuglink` and every `eu-strip` mode must move
/// its DWARF out, and every
/// result verifies, registers the input's kernels and loads, through
/// librocm_kpack and the archives beside it, the code objects `kpack
/// extract` takes from the input.
#[test]
fn dwarf4_library_survives_dwz_debugedit_debuglink_and_eu_strip_and_still_loads() {
    use crate::runtime_e2e::{Load, run_loading};

    let name = "lib2tu_dwarf4.so";
    let input = fixture(&format!("clang19/{name}"));
    let dir = tempfile::tempdir().unwrap();
    let out_bin = dir.path().join(name);
    let out = kpack([
        "offload".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out_bin.as_os_str(),
        "--archives".as_ref(),
        dir.path().join(".kpack").as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    verify_ok(&out_bin);

    // What each target must load: the input's code objects (two TUs, one
    // bundle each), by sha256.
    let extracted = dir.path().join("extracted");
    let out = kpack([
        "extract".as_ref(),
        input.as_os_str(),
        "--all".as_ref(),
        "-o".as_ref(),
        extracted.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = |arch: &str| {
        (0..2)
            .map(|co| {
                let bytes =
                    std::fs::read(extracted.join(format!("bundle{co}-{arch}.hsaco"))).unwrap();
                (co, sha256_hex(&bytes))
            })
            .collect::<Vec<_>>()
    };
    let (code_in, log_in) = run_under_stub(&input);
    // Everything but the wrapper lines (HIPF before, HIPK after).
    let kernels = |log: &[String]| {
        log.iter()
            .filter(|l| !l.starts_with("fatbin"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(!kernels(&log_in).is_empty(), "{log_in:?}");
    let check = |bin: &Path, step: &str| {
        verify_ok(bin);
        let (code, log) = run_under_stub(bin);
        assert_eq!(code, code_in, "after {step}: {log:?}");
        assert_eq!(kernels(&log), kernels(&log_in), "after {step}");
        for arch in ["gfx942", "gfx1100"] {
            let run = run_loading(bin, arch, &[]);
            let loaded: Vec<(u32, String)> = run
                .loads
                .iter()
                .map(|l| match l {
                    Load::Ok { co, sha, .. } => (*co, sha.clone()),
                    Load::Err { .. } => panic!("after {step}, {arch}: {l:?}\n{}", run.log),
                })
                .collect();
            assert_eq!(loaded, expected(arch), "after {step}, {arch}: {}", run.log);
        }
    };
    check(&out_bin, "offload");

    // Each tool on its own copy beside the archives (the marker's search
    // path is relative to the binary's directory).
    let copy_of = |step: &str| {
        let copy = dir.path().join(format!("{step}-{name}"));
        std::fs::copy(&out_bin, &copy).unwrap();
        copy
    };
    let changed = |copy: &Path, step: &str| {
        assert_ne!(
            std::fs::read(copy).unwrap(),
            std::fs::read(&out_bin).unwrap(),
            "{step} left the file alone: nothing was tested"
        );
    };

    let copy = copy_of("dwz");
    tool("dwz", &[copy.as_os_str()]);
    changed(&copy, "dwz");
    check(&copy, "dwz");

    // build-dwarf.sh builds in this directory: it is every CU's comp_dir.
    let copy = copy_of("debugedit");
    tool(
        "debugedit",
        &[
            "-b".as_ref(),
            "/tmp/kpack-clang19-dwarf".as_ref(),
            "-d".as_ref(),
            "/usr/src/debug/kpack".as_ref(),
            copy.as_os_str(),
        ],
    );
    changed(&copy, "debugedit");
    check(&copy, "debugedit");

    let copy = copy_of("debuglink");
    let debug = dir.path().join(format!("{name}.debug"));
    split_debug(&copy, &debug);
    changed(&copy, "objcopy --strip-debug --add-gnu-debuglink");
    let sections = |p: &Path| {
        use object::{Object, ObjectSection};
        let bytes = std::fs::read(p).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        file.sections()
            .filter_map(|s| s.name().ok().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    assert!(!sections(&copy).iter().any(|s| s == ".debug_info"));
    assert!(sections(&copy).iter().any(|s| s == ".gnu_debuglink"));
    assert!(sections(&debug).iter().any(|s| s == ".debug_info"));
    check(&copy, "objcopy --only-keep-debug + --add-gnu-debuglink");

    // Every eu-strip mode removes the DWARF (and more): each rewrites the
    // file, which must still verify, run and load.
    let eu_debug = dir.path().join(format!("{name}.eu-strip.debug"));
    for (n, (step, args)) in eu_strip_modes(&eu_debug).into_iter().enumerate() {
        let (copy, changed) = eu_strip_copy(&out_bin, dir.path(), name, n, &args);
        assert!(changed, "{step} left the file alone: nothing was tested");
        assert!(
            !sections(&copy).iter().any(|s| s == ".debug_info"),
            "{step}"
        );
        check(&copy, step);
    }
}

/// `--compression none`, `--name`, `--key` and `--search-path`, each with
/// its effect checked where it lands: the archives' file names and TOC
/// scheme (read back with kpack-format), the TOC keys, and the marker as
/// the stub HIP runtime reads it from each wrapper (what CLR would see).
/// Against a default run on the same input, so a flag that is accepted
/// but ignored fails.
#[test]
fn offload_name_key_search_path_and_compression_none_take_effect() {
    let input = fixture("corpus/exe_axpy_2arch");
    let run = |extra: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let out_bin = dir.path().join("bin/app");
        let archives = dir.path().join("lib/.kpack");
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out_bin.as_os_str(),
            "--archives".as_ref(),
            archives.as_os_str(),
        ];
        args.extend(extra.iter().map(|s| std::ffi::OsStr::new(*s)));
        let out = kpack(args);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        let mut found: Vec<(String, kpack_format::Scheme, Vec<String>)> =
            std::fs::read_dir(&archives)
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    let a = kpack_format::Archive::open(&p).unwrap();
                    let mut keys: Vec<String> = a.entries().map(|e| e.key().to_string()).collect();
                    keys.sort();
                    (
                        p.file_name().unwrap().to_string_lossy().into_owned(),
                        a.scheme(),
                        keys,
                    )
                })
                .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let (code, log) = run_under_stub(&out_bin);
        assert_eq!(code, Some(0), "{extra:?}: {log:?}");
        let markers: Vec<String> = log
            .into_iter()
            .filter(|l| l.starts_with("fatbin"))
            .collect();
        assert!(!markers.is_empty(), "{extra:?}: nothing registered");
        (found, markers, dir)
    };

    let (default, default_markers, _d) = run(&[]);
    let names: Vec<&str> = default.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "exe_axpy_2arch_gfx1030.kpack",
            "exe_axpy_2arch_gfx90a.kpack"
        ]
    );
    for (n, scheme, keys) in &default {
        assert_eq!(*scheme, kpack_format::Scheme::ZstdPerKernel, "{n}");
        assert!(keys.iter().all(|k| k.starts_with("app#")), "{n}: {keys:?}");
    }
    for m in &default_markers {
        assert!(
            m.ends_with(" app ../lib/.kpack/exe_axpy_2arch_@GFXARCH@.kpack"),
            "{m}"
        );
    }

    let (custom, markers, _d) = run(&[
        "--compression",
        "none",
        "--name",
        "axpy",
        "--key",
        "libaxpy-key",
        "--search-path",
        "/opt/first/axpy_@GFXARCH@.kpack",
        "--search-path",
        "second/axpy_@GFXARCH@.kpack",
    ]);
    let names: Vec<&str> = custom.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["axpy_gfx1030.kpack", "axpy_gfx90a.kpack"]);
    for ((n, scheme, keys), (_, _, default_keys)) in custom.iter().zip(&default) {
        assert_eq!(*scheme, kpack_format::Scheme::None, "{n}");
        let renamed: Vec<String> = default_keys
            .iter()
            .map(|k| k.replacen("app#", "libaxpy-key#", 1))
            .collect();
        assert_eq!(keys, &renamed, "{n}");
    }
    assert_eq!(markers.len(), default_markers.len());
    for m in &markers {
        assert!(
            m.ends_with(" libaxpy-key /opt/first/axpy_@GFXARCH@.kpack second/axpy_@GFXARCH@.kpack"),
            "{m}"
        );
    }
}

/// `--compression none` on compressed bundles: the writer reserves every
/// kernel's final place from the bundle headers' sizes and workers write
/// each one there as its bundle inflates, in whatever order bundles
/// finish. The archives are the same at `-j 1` and `-j 2`, every entry is
/// clang-offload-bundler's code object (the oracle), and each archive is
/// byte for byte the one the writer lays out from plain sorted adds of
/// those entries (the layout without reserving).
#[test]
fn compression_none_on_compressed_bundles_writes_reserved_places_identically_at_any_jobs() {
    let name = "lib2tu_ccob.so";
    let input = fixture(&format!("clang19/{name}"));
    let tmp = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for jobs in ["1", "2"] {
        let dir = tmp.path().join(format!("j{jobs}"));
        crate::util::offload_into(&input, &dir, &["--compression", "none", "-j", jobs]);
        let mut files: Vec<(String, Vec<u8>)> = walk(&dir)
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p.strip_prefix(&dir).unwrap().display().to_string(), bytes)
            })
            .collect();
        files.sort();
        runs.push(files);
    }
    let names = |r: &[(String, Vec<u8>)]| r.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&runs[0]), names(&runs[1]));
    for (a, b) in runs[0].iter().zip(&runs[1]) {
        assert!(a.1 == b.1, "-j 1 and -j 2 differ: {}", a.0);
    }

    let want: Vec<&OracleEntry> = clang19_oracle().iter().filter(|e| e.file == name).collect();
    assert_eq!(want.len(), 4, "two bundles, two targets each");
    let mut seen = 0;
    for (path, bytes) in runs[0].iter().filter(|f| f.0.ends_with(".kpack")) {
        let a = kpack_format::Archive::from_bytes(bytes.clone()).unwrap();
        assert_eq!(a.scheme(), kpack_format::Scheme::None, "{path}");
        let rebuilt = tmp.path().join("rebuilt.kpack");
        let mut w = kpack_format::ArchiveWriter::create(
            &rebuilt,
            kpack_format::WriterOptions {
                group_name: a.group_name().into(),
                gfx_arch_family: a.gfx_arch_family().into(),
                compression: kpack_format::Compression::None,
                ..Default::default()
            },
        )
        .unwrap();
        for e in a.entries() {
            let data = a.read(e).unwrap();
            let bundle: usize = e.key().rsplit('#').next().unwrap().parse().unwrap();
            let o = want
                .iter()
                .find(|o| o.bundle == bundle && o.target == e.arch())
                .unwrap_or_else(|| panic!("{path}: {} {} not in the oracle", e.key(), e.arch()));
            assert_eq!(
                sha256_hex(&data),
                o.sha256,
                "{path}: {} {}",
                e.key(),
                e.arch()
            );
            w.add(e.key(), e.arch(), &data).unwrap();
            seen += 1;
        }
        w.finish().unwrap();
        assert!(
            std::fs::read(&rebuilt).unwrap() == *bytes,
            "{path}: layout differs from plain adds"
        );
    }
    assert_eq!(seen, want.len());
}
