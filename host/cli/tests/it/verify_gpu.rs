//! `kpack verify --gpu GPU PATH`: which archive and target each kernel
//! would load from (the runtime's own resolution), or what is missing.
//! `clang19/libaxpy_generic.so` carries gfx1100, gfx9-generic,
//! gfx10-3-generic, gfx11-generic and gfx12-generic.

use std::path::Path;
use std::process::Output;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::kpack;

/// An install prefix: `lib/libaxpy.so` offloaded, archives in `lib/.kpack`.
fn installed(root: &Path) {
    let out = kpack([
        "offload".as_ref(),
        fixture("clang19/libaxpy_generic.so").as_os_str(),
        "-o".as_ref(),
        root.join("lib/libaxpy.so").as_os_str(),
        "--archives".as_ref(),
        root.join("lib/.kpack").as_os_str(),
        "--name".as_ref(),
        "axpy".as_ref(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn verify_gpu(gpu: &str, path: &Path, json: bool) -> Output {
    let mut args = vec![
        "verify".as_ref(),
        "--gpu".as_ref(),
        gpu.as_ref(),
        path.as_os_str(),
    ];
    if json {
        args.push("--json".as_ref());
    }
    kpack(args)
}

#[test]
fn names_the_archive_and_target_each_kernel_loads_from() {
    let dir = tempfile::tempdir().unwrap();
    installed(dir.path());
    // gfx1101 has no native code: CLR's arch list falls back to gfx11-generic.
    let out = verify_gpu("gfx1101", dir.path(), false);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("GPU gfx1101: loader arch list gfx1101, gfx11-generic (what the HIP runtime asks for: the device's target and its map's generic target)\n"),
        "{text}"
    );
    assert!(
        text.contains("  libaxpy.so#0: lib/.kpack/axpy_gfx11-generic.kpack as gfx11-generic\n"),
        "{text}"
    );
    assert!(
        text.contains("1 binaries, 1 kernels, 0 missing for gfx1101"),
        "{text}"
    );

    let out = verify_gpu("gfx1100", dir.path(), true);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let k = &v["report"]["binaries"][0]["kernels"][0];
    assert_eq!(k["status"], "loads");
    assert_eq!(k["archive"], "lib/.kpack/axpy_gfx1100.kpack");
    assert_eq!(k["target"], "gfx1100");
    assert_eq!(v["missing"], 0);
}

#[test]
fn an_archive_lacking_the_key_is_shown_as_tried_first() {
    let dir = tempfile::tempdir().unwrap();
    installed(dir.path());
    let mut w = kpack_format::ArchiveWriter::create(
        dir.path().join("lib/.kpack/axpy_gfx1101.kpack"),
        kpack_format::WriterOptions::default(),
    )
    .unwrap();
    w.add("other.so#0", "gfx1101", b"x").unwrap();
    w.finish().unwrap();
    let out = verify_gpu("gfx1101", dir.path(), false);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "  libaxpy.so#0: lib/.kpack/axpy_gfx11-generic.kpack as gfx11-generic\n    (tried first: lib/.kpack/axpy_gfx1101.kpack as gfx1101, lacks it)\n"
        ),
        "{text}"
    );
}

#[test]
fn says_exactly_what_is_missing_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    installed(dir.path());
    // gfx942 has no generic target and nothing was built for it.
    let out = verify_gpu("gfx942", dir.path(), false);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("  libaxpy.so#0: MISSING (ArchiveNotFound, kpack error 13)"),
        "{text}"
    );
    assert!(
        text.contains(": gfx10-3-generic, gfx11-generic, gfx1100, gfx12-generic, gfx9-generic"),
        "{text}"
    );
    assert!(text.contains("1 missing for gfx942"), "{text}");

    // The generic archive removed: gfx1101 has nothing left.
    std::fs::remove_file(dir.path().join("lib/.kpack/axpy_gfx11-generic.kpack")).unwrap();
    let out = verify_gpu("gfx1101", dir.path(), true);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let k = &v["report"]["binaries"][0]["kernels"][0];
    assert_eq!(k["status"], "missing");
    assert_eq!(k["code"], 13);
    assert!(
        k["diagnostic"]
            .as_str()
            .unwrap()
            .contains("axpy_gfx11-generic.kpack"),
        "{k}"
    );
}

#[test]
fn resolves_across_split_artifacts_and_rejects_a_bad_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("blas_lib_gfx110X");
    crate::util::artifact_with_library(&a, fixture("clang19/libaxpy_generic.so"), "libaxpy.so");
    let out_dir = dir.path().join("out");
    let out = kpack([
        "split".as_ref(),
        a.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = verify_gpu("gfx1151", &out_dir, false);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("as gfx11-generic\n"), "{text}");
    assert!(text.contains("0 missing for gfx1151"), "{text}");

    let out = verify_gpu("gfx90a:xnack", &out_dir, false);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--gpu \"gfx90a:xnack\""),
        "{}",
        stderr(&out)
    );
}

/// The corpus fat wheel split `--group sub-family` into `tmp/out`, its host
/// wheel alone installed into `tmp/site`: (out, site).
pub(crate) fn split_and_install_host(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let fat = crate::wheel::build_fat_wheel(tmp, &crate::wheel_groups::fat_files());
    let out = tmp.join("out");
    let o = crate::wheel::kpack_env(
        &[
            "wheel".as_ref(),
            "split".as_ref(),
            fat.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--group".as_ref(),
            "sub-family".as_ref(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let site = tmp.join("site");
    crate::auditwheel::install(&[out.join("fatpkg-1.0-py3-none-linux_x86_64.whl")], &site);
    (out, site)
}

#[test]
fn names_the_device_wheel_that_would_provide_a_missing_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, site) = split_and_install_host(tmp.path());
    let o = verify_gpu("gfx1100", &site, false);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains(
            "    => the device wheel fatpkg-device-gfx110x provides it: pip install 'fatpkg[device-gfx110x]'\n"
        ),
        "{text}"
    );
    // gfx942's wheel is of another sub-family.
    let o = verify_gpu("gfx942:xnack+", &site, true);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["report"]["binaries"][0]["kernels"][0]["provider"],
        "the device wheel fatpkg-device-gfx9-4 provides it: pip install 'fatpkg[device-gfx9-4]'"
    );
    // Installed, the wheel is no longer suggested.
    crate::auditwheel::install(
        &[out.join("fatpkg_device_gfx110x-1.0-py3-none-linux_x86_64.whl")],
        &site,
    );
    let o = verify_gpu("gfx1100", &site, false);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn names_the_arch_artifact_that_would_provide_a_missing_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("blas_lib_gfx110X");
    crate::util::artifact_with_library(&a, fixture("clang19/libaxpy_generic.so"), "libaxpy.so");
    let out_dir = dir.path().join("out");
    let out = kpack([
        "split".as_ref(),
        a.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Neither gfx1100's own code nor the gfx11-generic fallback is here.
    for name in ["blas_lib_gfx1100", "blas_lib_gfx11-generic"] {
        std::fs::remove_dir_all(out_dir.join(name)).unwrap();
    }
    let out = verify_gpu("gfx1100", &out_dir, false);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "    => the arch artifact blas_lib_gfx1100 would provide it; it is not among the artifacts given\n"
        ),
        "{}",
        stdout(&out)
    );
    // Paths tried are named under the artifact, not under the temporary
    // tree verify builds (gone when it ends).
    let out = verify_gpu("gfx1100", &out_dir, true);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = v.to_string();
    assert!(!text.contains("kpack-verify-gpu-"), "{text}");
    assert!(
        text.contains(&out_dir.join("blas_lib_generic").display().to_string()),
        "{text}"
    );
}

/// A GPU the package was not built for: the doctor says so and names what
/// was built, and proposes no extra or device wheel that does not exist.
#[test]
fn a_gpu_the_package_was_not_built_for_gets_no_made_up_extra() {
    let tmp = tempfile::tempdir().unwrap();
    let (_out, site) = split_and_install_host(tmp.path());
    // No wheel of gfx1010's chain (gfx1010, gfx10-1, gfx10) was built.
    let o = verify_gpu("gfx1010", &site, false);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains("    => fatpkg 1.0 was not built for gfx1010 (built: "),
        "{text}"
    );
    assert!(!text.contains("pip install"), "{text}");
}

/// Generic code no HIP runtime asks for: offload and split warn beside
/// the archive (a copy of the generic fixture whose gfx12-generic entry is
/// renamed gfx13-generic: CLR's map names no processor for it), and say
/// nothing of the generic targets the runtime does ask for.
#[test]
fn archives_of_generic_code_no_runtime_asks_for_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let real = fixture("clang19/libaxpy_generic.so");
    let bytes = std::fs::read(&real).unwrap();
    let (from, to) = (
        b"hipv4-amdgcn-amd-amdhsa--gfx12-generic".as_slice(),
        b"hipv4-amdgcn-amd-amdhsa--gfx13-generic".as_slice(),
    );
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    let mut crafted = bytes.clone();
    crafted[at..at + to.len()].copy_from_slice(to);
    let lib = tmp.path().join("libaxpy_g13.so");
    std::fs::write(&lib, &crafted).unwrap();

    let offload = |input: &Path, dir: &str| {
        let d = tmp.path().join(dir);
        kpack([
            "offload".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            d.join("lib.so").as_os_str(),
            "--archives".as_ref(),
            d.join(".kpack").as_os_str(),
        ])
    };
    let o = offload(&lib, "crafted");
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.lines().any(|l| l.starts_with("warning: ")
            && l.contains("gfx13-generic.kpack")
            && l.contains("no HIP runtime asks for gfx13-generic")
            && l.contains("gfx1310")),
        "{err}"
    );
    let o = offload(&real, "real");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("HIP runtime asks"), "{}", stderr(&o));

    let art = tmp.path().join("blas_lib_gfx90a");
    crate::util::artifact_with_library(&art, &lib, "libaxpy.so");
    let out = tmp.path().join("split");
    let o = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let warnings = v["artifacts"][0]["warnings"].to_string();
    assert!(
        warnings.contains("gfx13-generic archives: no HIP runtime asks for gfx13-generic"),
        "{warnings}"
    );
    assert!(!warnings.contains("gfx12-generic"), "{warnings}");
}

/// A directory of fat libraries never offloaded: each is listed with the
/// targets it carries, and one with no code for the GPU (nor its generic
/// target) counts as missing (exit 1), the `hipErrorNoBinaryForGpu` case;
/// one that carries it loads its embedded code (exit 0).
#[test]
fn fat_binaries_without_code_for_the_gpu_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("corpus/libaxpy_2arch.so"),
        dir.path().join("libaxpy.so"),
    )
    .unwrap();
    std::fs::copy(
        fixture("clang19/libaxpy_generic.so"),
        dir.path().join("libgeneric.so"),
    )
    .unwrap();
    let out = verify_gpu("gfx1100", dir.path(), false);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("libaxpy.so (fat binary, device code not offloaded): carries gfx1030, gfx90a\n  MISSING: no code object for gfx1100"),
        "{text}"
    );
    assert!(text.contains("hipErrorNoBinaryForGpu"), "{text}");
    assert!(
        text.contains("  embedded code for gfx1100 loads\n"),
        "{text}"
    );
    assert!(
        text.contains("2 binaries, 0 kernels, 1 missing for gfx1100"),
        "{text}"
    );
    // gfx1101 has no native code in either: the generic library serves it.
    let out = verify_gpu("gfx1101", dir.path(), true);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let fat = v["report"]["fat_binaries"].as_array().unwrap();
    assert_eq!(fat.len(), 2);
    assert_eq!(fat[1]["serves"], "gfx11-generic");
    assert!(fat[0]["serves"].is_null());
    let out = verify_gpu("gfx90a", dir.path(), false);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("embedded code for gfx90a loads"));
}

/// The corpus fat wheel split without `--group` into `tmp/out`; its host
/// wheel and gfx90a's device wheel installed into `tmp/site`.
fn split_ungrouped_and_install(tmp: &Path) -> std::path::PathBuf {
    let fat = crate::wheel::build_fat_wheel(tmp, &crate::wheel::fat_files());
    let out = tmp.join("out");
    let o = crate::wheel::kpack_env(
        &[
            "wheel".as_ref(),
            "split".as_ref(),
            fat.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let site = tmp.join("site");
    crate::auditwheel::install(
        &[
            out.join("fatpkg-1.0-py3-none-linux_x86_64.whl"),
            out.join("fatpkg_device_gfx90a-1.0-py3-none-linux_x86_64.whl"),
        ],
        &site,
    );
    site
}

/// Split without `--group`, a GPU no device wheel serves is "not built
/// for", as in the grouped and AMD layouts, and no wheel is proposed to
/// install; the advice comes once per binary, however many of its
/// kernels miss (lib2tu.so has two).
#[test]
fn the_default_layout_says_not_built_for_once_per_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let site = split_ungrouped_and_install(tmp.path());
    let o = verify_gpu("gfx1010", &site, false);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains("    => fatpkg 1.0 was not built for gfx1010"),
        "{text}"
    );
    assert!(!text.contains("pip install"), "{text}");
    let binaries = text.lines().filter(|l| l.ends_with(".so")).count();
    let advice = text.lines().filter(|l| l.starts_with("    => ")).count();
    assert_eq!(advice, binaries, "{text}");
    assert!(text.contains(" and 1 more kernels: MISSING ("), "{text}");
    let o = verify_gpu("gfx1010", &site, true);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for b in v["report"]["binaries"].as_array().unwrap() {
        assert!(
            b["provider"]
                .as_str()
                .unwrap()
                .contains("not built for gfx1010"),
            "{b}"
        );
    }
    // A host whose METADATA names no device wheels (split by an older
    // kpack without --group): the device wheels installed tell.
    let meta = site.join("fatpkg-1.0.dist-info/METADATA");
    let text = std::fs::read_to_string(&meta).unwrap();
    let plain: String = text
        .lines()
        .filter(|l| !l.starts_with("Provides-Extra:") && !l.contains("extra =="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&meta, plain).unwrap();
    let o = verify_gpu("gfx1010", &site, false);
    let text = stdout(&o);
    assert!(
        text.contains("    => fatpkg 1.0 was not built for gfx1010 as far as this install tells (device wheels installed: gfx90a;"),
        "{text}"
    );
    assert!(!text.contains("pip install"), "{text}");
    // gfx90a's wheel is installed: its code loads.
    let o = verify_gpu("gfx90a", &site, false);
    assert!(
        stdout(&o).contains("  fatpkg/lib/libaxpy.so#0: _fatpkg_kpack/fatpkg.fatpkg.lib.libaxpy.so_gfx90a.kpack as gfx90a\n"),
        "{}",
        stdout(&o)
    );
}
