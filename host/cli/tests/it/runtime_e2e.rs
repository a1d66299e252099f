//! The end-to-end proof for the runtime: every fixture offloaded by
//! `kpack offload` and run (executables directly, libraries through
//! `dlopen_host`) under the stub HIP runtime built with `-DKPACK_LOAD`,
//! which loads each HIPK wrapper's code object through `librocm_kpack.so`
//! exactly as CLR does (`kpack_discover_binary_path` +
//! `kpack_load_code_object`). The loaded bytes must be the code objects
//! clang-offload-bundler extracts from the original fat binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kpack_tests::{FAT_FIXTURES, fixture, stderr, stub_command};

use crate::util::{kpack, stub_hip};

const KPACK_ERROR_NOT_IMPLEMENTED: i32 = 8;
pub(crate) const KPACK_ERROR_ARCHIVE_NOT_FOUND: i32 = 13;
pub(crate) const KPACK_ERROR_ARCH_NOT_FOUND: i32 = 14;

/// One `load` line of the stub's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Load {
    Ok {
        co: u32,
        sha: String,
        size: usize,
    },
    Err {
        co: u32,
        code: i32,
        diagnostic: String,
    },
}

impl Load {
    fn co(&self) -> u32 {
        match self {
            Load::Ok { co, .. } | Load::Err { co, .. } => *co,
        }
    }
}

/// A run under the loading stub: exit code, number of HIPK registrations, loads.
pub(crate) struct Run {
    pub(crate) code: Option<i32>,
    pub(crate) fatbins: usize,
    pub(crate) loads: Vec<Load>,
    pub(crate) log: String,
}

pub(crate) fn run_loading(binary: &Path, archs: &str, env: &[(&str, &std::ffi::OsStr)]) -> Run {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = stub_command(stub_hip(true), binary);
    for var in [
        "ROCM_KPACK_PATH",
        "ROCM_KPACK_PATH_PREFIX",
        "ROCM_KPACK_DISABLE",
        "ROCM_KPACK_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("KPACK_STUB_LOG", log.path())
        .env("KPACK_STUB_ARCHS", archs);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    let mut run = Run {
        code: out.status.code(),
        fatbins: 0,
        loads: Vec::new(),
        log: format!("{text}{}", stderr(&out)),
    };
    for line in text.lines() {
        if line.starts_with("fatbin HIPK") {
            run.fatbins += 1;
        }
        let Some(rest) = line.strip_prefix("load ") else {
            continue;
        };
        let f: Vec<&str> = rest.splitn(5, ' ').collect();
        assert_eq!(f[1], archs, "{line}");
        let co = f[0].parse().unwrap();
        run.loads.push(match f[2] {
            "ok" => {
                let (sha, size) = f[3..]
                    .join(" ")
                    .split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.parse().unwrap()))
                    .unwrap();
                Load::Ok { co, sha, size }
            }
            "error" => Load::Err {
                co,
                code: f[3].parse().unwrap(),
                diagnostic: f.get(4).unwrap_or(&"").replace('|', "\n"),
            },
            other => panic!("bad load line {line:?} ({other})"),
        });
    }
    run
}

/// (file, co_index, target) -> (sha256, size), from clang-offload-bundler.
type Oracle = BTreeMap<(String, u32, String), (String, usize)>;

fn oracle() -> &'static Oracle {
    static O: OnceLock<Oracle> = OnceLock::new();
    O.get_or_init(|| {
        // File names differ between the two sets, so one map holds both.
        kpack_tests::oracle()
            .iter()
            .chain(kpack_tests::clang19_oracle())
            .map(|e| {
                (
                    (e.file.clone(), e.bundle as u32, e.target.clone()),
                    (e.sha256.clone(), e.size as usize),
                )
            })
            .collect()
    })
}

fn want(file: &str, co: u32, target: &str) -> &'static (String, usize) {
    oracle()
        .get(&(file.into(), co, target.into()))
        .unwrap_or_else(|| panic!("oracle has no {file} #{co} {target}"))
}

/// `kpack offload` a fixture into `dir/NAME` with archives in `dir/.kpack`.
fn offload(name: &str, dir: &Path) -> PathBuf {
    let set = if kpack_tests::CLANG19_FAT_FIXTURES
        .iter()
        .any(|(f, _)| f == &name)
    {
        "clang19"
    } else {
        "corpus"
    };
    crate::util::offload_into(&fixture(&format!("{set}/{name}")), dir, &[])
}

/// Load every wrapper of `name` (offloaded in `dir`) for `archs`; each load
/// must succeed and equal the oracle's object for `target`.
pub(crate) fn assert_loads(name: &str, bin: &Path, archs: &str, target: &str) -> Vec<u32> {
    let run = run_loading(bin, archs, &[]);
    assert_eq!(run.code, Some(0), "{name} {archs}: exit\n{}", run.log);
    assert!(run.fatbins > 0, "{name}: nothing registered\n{}", run.log);
    assert_eq!(
        run.loads.len(),
        run.fatbins,
        "{name} {archs}: one load per HIPK wrapper\n{}",
        run.log
    );
    for l in &run.loads {
        let Load::Ok { co, sha, size } = l else {
            panic!("{name} {archs}: {l:?}\n{}", run.log)
        };
        let (wsha, wsize) = want(name, *co, target);
        assert_eq!(
            (sha, size),
            (wsha, wsize),
            "{name} #{co} for device {archs}: not the {target} object clang-offload-bundler extracts"
        );
    }
    let mut cos: Vec<u32> = run.loads.iter().map(Load::co).collect();
    cos.sort();
    cos
}

fn assert_error(run: &Run, code: i32, what: &str) -> String {
    assert_eq!(run.code, Some(0), "{what}: exit\n{}", run.log);
    assert!(!run.loads.is_empty(), "{what}: no loads\n{}", run.log);
    let mut diag = String::new();
    for l in &run.loads {
        match l {
            Load::Err {
                code: c,
                diagnostic,
                ..
            } if *c == code => diag = diagnostic.clone(),
            other => panic!("{what}: expected error {code}, got {other:?}\n{}", run.log),
        }
    }
    diag
}

/// `reserved1` (the co_index) of each wrapper in `.hipFatBinSegment`.
fn wrapper_co_indices(bin: &Path) -> Vec<u64> {
    use object::{Object, ObjectSection};
    let bytes = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let seg = file
        .section_by_name(".hipFatBinSegment")
        .unwrap()
        .data()
        .unwrap()
        .to_vec();
    assert_eq!(seg.len() % 24, 0);
    seg.chunks(24)
        .map(|w| {
            assert_eq!(&w[..4], b"HIPK", "{}: wrapper not HIPK", bin.display());
            u64::from_le_bytes(w[16..24].try_into().unwrap())
        })
        .collect()
}

#[test]
fn every_shipped_target_loads_the_object_clang_offload_bundler_extracts() {
    for name in FAT_FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let bin = offload(name, dir.path());
        let targets: Vec<&String> = oracle()
            .keys()
            .filter(|(f, co, _)| f == name && *co == 0)
            .map(|(_, _, t)| t)
            .collect();
        assert!(!targets.is_empty(), "{name}: not in the oracle");
        // Every wrapper's co_index is the index of the bundle it points at.
        let expect_wrappers: &[u64] = match *name {
            "exe_2tu_wide" | "lib2tu_2arch.so" | "lib2tu_2arch_debug.so" | "exe_2tu_2arch_lld" => {
                &[0, 1]
            }
            "exe_rdc_2arch" | "librdc_2arch.so" => &[0, 0],
            _ => &[0],
        };
        assert_eq!(
            wrapper_co_indices(&bin),
            expect_wrappers,
            "{name}: wrappers' co_index"
        );
        for target in targets {
            let cos = assert_loads(name, &bin, target, target);
            let expect: Vec<u32> = match *name {
                "exe_2tu_wide"
                | "lib2tu_2arch.so"
                | "lib2tu_2arch_debug.so"
                | "exe_2tu_2arch_lld" => vec![0, 1],
                // -fgpu-rdc: two wrappers share the one bundle (co_index 0
                // both); the device-link registration code registers one.
                _ => vec![0],
            };
            assert_eq!(cos, expect, "{name} {target}: co_index of the wrappers");
        }
    }
}

#[test]
fn every_clang19_x86_64_fixture_loads_the_oracle_object_for_each_target() {
    // aarch64 fixtures do not run here (no emulator); generic targets are
    // loaded under their own id like any other.
    for (name, _) in kpack_tests::CLANG19_FAT_FIXTURES {
        if kpack_tests::e_machine(&fixture(&format!("clang19/{name}"))) != 62 {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let bin = offload(name, dir.path());
        let targets: Vec<&String> = oracle()
            .keys()
            .filter(|(f, co, _)| f == name && *co == 0)
            .map(|(_, _, t)| t)
            .collect();
        assert!(!targets.is_empty(), "{name}: not in the oracle");
        let two_tu = name.starts_with("lib2tu");
        let rdc = name.contains("rdc");
        let expect_wrappers: &[u64] = match (two_tu, rdc) {
            (true, _) => &[0, 1],
            (_, true) => &[0, 0],
            _ => &[0],
        };
        assert_eq!(
            wrapper_co_indices(&bin),
            expect_wrappers,
            "{name}: wrappers' co_index"
        );
        for target in targets {
            let cos = assert_loads(name, &bin, target, target);
            let expect: Vec<u32> = if two_tu { vec![0, 1] } else { vec![0] };
            assert_eq!(cos, expect, "{name} {target}: co_index of the loads");
        }
    }
}

#[test]
fn feature_flags_fall_back_most_specific_first() {
    for name in ["libaxpy_feat.so", "exe_axpy_feat"] {
        let dir = tempfile::tempdir().unwrap();
        let bin = offload(name, dir.path());
        for (device, target) in [
            ("gfx90a:xnack+", "gfx90a:xnack+"),
            ("gfx90a:xnack-", "gfx90a:xnack-"),
            // A real MI200 reports sramecc too; the archive omits it (= any).
            ("gfx90a:sramecc+:xnack-", "gfx90a:xnack-"),
            ("amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+", "gfx90a:xnack+"),
            ("gfx908:sramecc+:xnack-", "gfx908:sramecc+:xnack-"),
            // First listed arch without a match gives way to the next.
            ("gfx942,gfx908:sramecc+:xnack-", "gfx908:sramecc+:xnack-"),
            ("-,gfx1030", "gfx1030"),
        ] {
            assert_loads(name, &bin, device, target);
        }
        // Feature variants the binary does not have: the gfx90a / gfx908
        // archive is found but serves no compatible target.
        for device in ["gfx90a", "gfx908:sramecc-:xnack-", "gfx908"] {
            let run = run_loading(&bin, device, &[]);
            let diag = assert_error(
                &run,
                KPACK_ERROR_ARCH_NOT_FOUND,
                &format!("{name} on {device}"),
            );
            let processor = device.split(':').next().unwrap();
            assert!(
                diag.contains(&format!("_{processor}.kpack")),
                "{name} {device}: diagnostic must name the archive:\n{diag}"
            );
            assert!(
                diag.contains(&format!("{device:?}")),
                "{name} {device}: diagnostic must name the device arch:\n{diag}"
            );
        }
    }
    // Plain gfx90a device, plain gfx90a binary.
    let dir = tempfile::tempdir().unwrap();
    let bin = offload("libaxpy_2arch.so", dir.path());
    assert_loads("libaxpy_2arch.so", &bin, "gfx90a", "gfx90a");
    assert_loads("libaxpy_2arch.so", &bin, "gfx90a:sramecc+:xnack-", "gfx90a");
}

#[test]
fn unshipped_target_and_missing_archive_fail_with_amds_codes_and_say_what_was_tried() {
    let dir = tempfile::tempdir().unwrap();
    let bin = offload("libaxpy_2arch.so", dir.path());
    let kpack_dir = std::fs::canonicalize(dir.path().join(".kpack")).unwrap();

    // No archive exists for the device's processor: like AMD, 13; the
    // diagnostic lists every expanded candidate path.
    let run = run_loading(&bin, "gfx942:sramecc+:xnack-", &[]);
    let diag = assert_error(&run, KPACK_ERROR_ARCHIVE_NOT_FOUND, "gfx942");
    for t in [
        "gfx942:sramecc+:xnack-",
        "gfx942:sramecc+",
        "gfx942:xnack-",
        "gfx942",
    ] {
        let p = kpack_dir.join(format!("libaxpy_2arch_{t}.kpack"));
        assert!(
            diag.contains(&format!("{}", p.display())),
            "missing {} in:\n{diag}",
            p.display()
        );
    }
    assert!(diag.contains("does not exist"), "{diag}");
    // ... and which targets are shipped, so "not shipped" reads differently from "not installed".
    let pattern = kpack_dir.join("libaxpy_2arch_@GFXARCH@.kpack");
    assert!(
        diag.contains(&format!(
            "archives present for {}: gfx1030, gfx90a",
            pattern.display()
        )),
        "{diag}"
    );

    // An archive is found (ROCM_KPACK_PATH) but serves another target: 14,
    // naming the archive, its arches and the device arch searched for.
    let gfx1030 = kpack_dir.join("libaxpy_2arch_gfx1030.kpack");
    let run = run_loading(&bin, "gfx942", &[("ROCM_KPACK_PATH", gfx1030.as_os_str())]);
    let diag = assert_error(
        &run,
        KPACK_ERROR_ARCH_NOT_FOUND,
        "gfx942 with ROCM_KPACK_PATH",
    );
    assert!(
        diag.contains(&gfx1030.display().to_string())
            && diag.contains("gfx1030")
            && diag.contains("\"gfx942\""),
        "{diag}"
    );

    // The archive for a shipped target deleted: 13.
    std::fs::remove_file(kpack_dir.join("libaxpy_2arch_gfx90a.kpack")).unwrap();
    let run = run_loading(&bin, "gfx90a", &[]);
    let diag = assert_error(
        &run,
        KPACK_ERROR_ARCHIVE_NOT_FOUND,
        "deleted gfx90a archive",
    );
    assert!(
        diag.contains("libaxpy_2arch_gfx90a.kpack") && diag.contains("does not exist"),
        "{diag}"
    );
    // ... while the other target still loads.
    assert_loads("libaxpy_2arch.so", &bin, "gfx1030", "gfx1030");

    // ROCM_KPACK_DISABLE: 8.
    let run = run_loading(&bin, "gfx1030", &[("ROCM_KPACK_DISABLE", "1".as_ref())]);
    assert_error(&run, KPACK_ERROR_NOT_IMPLEMENTED, "ROCM_KPACK_DISABLE");
}

#[test]
fn amd_spelled_per_target_archives_resolve() {
    // AMD's split names one archive per full target id
    // (`<prefix>_gfx90a:xnack+.kpack`); the loader's most-specific-first
    // expansion must find those as well as our per-processor files.
    for name in ["libaxpy_feat.so", "exe_axpy_feat"] {
        let dir = tempfile::tempdir().unwrap();
        let bin = offload(name, dir.path());
        let kdir = dir.path().join(".kpack");
        let stem = name.split('.').next().unwrap();
        let mut written = Vec::new();
        for entry in std::fs::read_dir(&kdir).unwrap() {
            let path = entry.unwrap().path();
            let archive = kpack_format::Archive::open(&path).unwrap();
            let mut by_target: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
            for e in archive.entries() {
                by_target
                    .entry(e.arch().to_owned())
                    .or_default()
                    .push((e.key().to_owned(), archive.read(e).unwrap().into_owned()));
            }
            drop(archive);
            std::fs::remove_file(&path).unwrap();
            for (target, entries) in by_target {
                let out = kdir.join(format!("{stem}_{target}.kpack"));
                let mut w = kpack_format::ArchiveWriter::create(
                    &out,
                    kpack_format::WriterOptions::default(),
                )
                .unwrap();
                for (key, data) in entries {
                    w.add(&key, &target, &data).unwrap();
                }
                w.finish().unwrap();
                written.push(target);
            }
        }
        written.sort();
        assert_eq!(
            written,
            [
                "gfx1030",
                "gfx908:sramecc+:xnack-",
                "gfx90a:xnack+",
                "gfx90a:xnack-"
            ],
            "{name}"
        );
        for (device, target) in [
            ("gfx90a:xnack+", "gfx90a:xnack+"),
            ("gfx90a:sramecc+:xnack-", "gfx90a:xnack-"),
            ("gfx908:sramecc+:xnack-", "gfx908:sramecc+:xnack-"),
            ("gfx1030", "gfx1030"),
        ] {
            assert_loads(name, &bin, device, target);
        }
        let run = run_loading(&bin, "gfx90a", &[]);
        assert_error(
            &run,
            KPACK_ERROR_ARCHIVE_NOT_FOUND,
            "plain gfx90a with per-target archives",
        );
    }
}

#[test]
fn relocated_and_symlinked_binaries_still_find_their_archives() {
    // The marker's search path is relative to the binary's real location
    // (/proc/self/maps), so moving the directory or calling the binary
    // through a symlink elsewhere changes nothing.
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("opt/app/lib");
    std::fs::create_dir_all(&inner).unwrap();
    let bin = offload("lib2tu_2arch.so", &inner);
    let moved = dir.path().join("moved");
    std::fs::rename(dir.path().join("opt"), &moved).unwrap();
    let bin_moved = moved.join(bin.strip_prefix(dir.path().join("opt")).unwrap());
    assert_eq!(
        assert_loads("lib2tu_2arch.so", &bin_moved, "gfx90a", "gfx90a"),
        [0, 1]
    );
    let link_dir = dir.path().join("elsewhere");
    std::fs::create_dir_all(&link_dir).unwrap();
    let link = link_dir.join("lib2tu_2arch.so");
    std::os::unix::fs::symlink(&bin_moved, &link).unwrap();
    assert_eq!(
        assert_loads("lib2tu_2arch.so", &link, "gfx1030", "gfx1030"),
        [0, 1]
    );

    // Packaging steps after offload keep loading too.
    let stripped = moved.join("app/lib/stripped.so");
    std::fs::copy(&bin_moved, &stripped).unwrap();
    let out = Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .output()
        .expect("strip is required");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        assert_loads("lib2tu_2arch.so", &stripped, "gfx90a", "gfx90a"),
        [0, 1]
    );
}

/// Rewrite `path` as an archive of `entries` (key, target, bytes).
fn write_archive(path: &Path, entries: &[(String, &str, Vec<u8>)]) {
    let mut w =
        kpack_format::ArchiveWriter::create(path, kpack_format::WriterOptions::default()).unwrap();
    for (key, target, data) in entries {
        w.add(key, target, data).unwrap();
    }
    w.finish().unwrap();
}

/// The code object `kpack extract` writes for bundle `co`, target `target`.
fn extracted(name: &str, co: u32, target: &str, dir: &Path) -> Vec<u8> {
    // A fresh directory per call: the same object may be asked for twice,
    // and extract refuses to overwrite without --force.
    let scratch = tempfile::tempdir_in(dir).unwrap();
    let out = scratch.path().join(format!("x-{co}-{target}"));
    let input = fixture(&format!("corpus/{name}"));
    let res = kpack([
        "extract".as_ref(),
        input.as_os_str(),
        "--target".as_ref(),
        target.as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(res.status.success(), "extract: {}", stderr(&res));
    std::fs::read(out.join(format!("bundle{co}-{target}.hsaco"))).unwrap()
}

#[test]
fn feature_overlay_archives_fall_through_to_the_base() {
    // AMD's torch layout (rocm-systems #9953): `<p>_gfx90a.kpack` holds every
    // kernel for bare gfx90a, `<p>_gfx90a:xnack+.kpack` a few on top. The
    // overlay's object is gfx940's (any distinct object will do: the stub
    // only hashes what it is given).
    let name = "exe_2tu_wide";
    let dir = tempfile::tempdir().unwrap();
    let bin = offload(name, dir.path());
    let kdir = dir.path().join(".kpack");
    let base_path = kdir.join(format!("{name}_gfx90a.kpack"));
    let base = kpack_format::Archive::open(&base_path).unwrap();
    let key = |co: u32| {
        base.entries()
            .map(|e| e.key().to_owned())
            .find(|k| k.ends_with(&format!("#{co}")))
            .unwrap()
    };
    let (k0, k1) = (key(0), key(1));
    drop(base);
    let g90a = |co| extracted(name, co, "gfx90a", dir.path());
    let over1 = extracted(name, 1, "gfx940", dir.path());
    let overlay = kdir.join(format!("{name}_gfx90a:xnack+.kpack"));
    let sha = |co, t| want(name, co, t).0.clone();
    let loaded = |run: &Run| -> BTreeMap<u32, String> {
        assert_eq!(run.code, Some(0), "{}", run.log);
        run.loads
            .iter()
            .map(|l| match l {
                Load::Ok { co, sha, .. } => (*co, sha.clone()),
                other => panic!("{other:?}\n{}", run.log),
            })
            .collect()
    };

    // Base holds both kernels, the overlay only #1: #0 comes from the base
    // (only there), #1 from the overlay (in both: most specific wins).
    write_archive(&overlay, &[(k1.clone(), "gfx90a:xnack+", over1.clone())]);
    let run = run_loading(&bin, "gfx90a:xnack+", &[]);
    assert_eq!(
        loaded(&run),
        BTreeMap::from([(0, sha(0, "gfx90a")), (1, sha(1, "gfx940"))])
    );
    // ROCM_KPACK_DEBUG says where a fall-through found the kernel.
    let run = run_loading(&bin, "gfx90a:xnack+", &[("ROCM_KPACK_DEBUG", "1".as_ref())]);
    assert!(
        run.log.contains(&format!(
            "found in {}",
            std::fs::canonicalize(&kdir)
                .unwrap()
                .join(format!("{name}_gfx90a.kpack"))
                .display()
        )) && run
            .log
            .contains("after 1 archive/target pair(s) lacking it"),
        "{}",
        run.log
    );
    // A device without xnack+ never sees the overlay.
    let run = run_loading(&bin, "gfx90a:xnack-", &[]);
    assert_eq!(
        loaded(&run),
        BTreeMap::from([(0, sha(0, "gfx90a")), (1, sha(1, "gfx90a"))])
    );

    // #1 only in the overlay.
    write_archive(&base_path, &[(k0.clone(), "gfx90a", g90a(0))]);
    let run = run_loading(&bin, "gfx90a:xnack+", &[]);
    assert_eq!(
        loaded(&run),
        BTreeMap::from([(0, sha(0, "gfx90a")), (1, sha(1, "gfx940"))])
    );

    // In neither: KERNEL_NOT_FOUND (5), naming both archives tried.
    write_archive(&overlay, &[(k0, "gfx90a:xnack+", g90a(0))]);
    let run = run_loading(&bin, "gfx90a:xnack+", &[]);
    let diag = run
        .loads
        .iter()
        .find_map(|l| match l {
            Load::Err {
                co: 1,
                code: 5,
                diagnostic,
            } => Some(diagnostic.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("#1 must fail with 5\n{}", run.log));
    assert!(
        diag.contains(&format!(
            "{name}_gfx90a:xnack+.kpack target \"gfx90a:xnack+\": no such key"
        )),
        "{diag}"
    );
    assert!(
        diag.contains(&format!(
            "{name}_gfx90a.kpack target \"gfx90a\": no such key"
        )),
        "{diag}"
    );
}

#[test]
fn a_miss_under_rocm_kpack_debug_prints_one_line_saying_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crate::util::offload_into(
        &fixture("clang19/libaxpy_plain.so"),
        dir.path(),
        &["--gpu-targets", "gfx942"],
    );
    let quiet = run_loading(&bin, "gfx1100", &[]);
    assert!(
        !quiet.log.contains("install the device code"),
        "{}",
        quiet.log
    );
    let run = run_loading(&bin, "gfx1100", &[("ROCM_KPACK_DEBUG", "1".as_ref())]);
    let lines: Vec<&str> = run
        .log
        .lines()
        .filter(|l| l.starts_with("kpack: ") && l.contains("no code object #0"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.log);
    let line = lines[0];
    assert!(
        line.contains(&bin.display().to_string())
            && line.contains("[gfx1100")
            && line.contains("install the device code for gfx1100")
            && line.contains("kpack fetch --gpu auto"),
        "{line}"
    );
}
