//! Portable SPIR-V (`amdgcnspirv`) as a target of its own: recognised and
//! validated by `inspect`, archived by `offload`, its own arch artifact in
//! `split`, its own device wheel, kept by `--gpu-targets` and `--keep`,
//! resolved by `verify --gpu amdgcnspirv`, and named by `verify --gpu` when
//! it is all a GPU could load (fixtures: `clang22/libaxpy_spirv*.so`).

use std::path::Path;

use kpack_tests::{fixture, stderr, stdout};

use crate::util::{kpack, kpack_prune, verify_passes};

#[test]
fn inspect_reads_spirv_entries_as_modules_without_warnings() {
    for name in [
        "libaxpy_spirv.so",
        "libaxpy_spirv_ccob.so",
        "libaxpy_spirv_only.so",
    ] {
        let input = fixture(&format!("clang22/{name}"));
        let out = kpack(["inspect".as_ref(), "--strict".as_ref(), input.as_os_str()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{name}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("SPIR-V 1.6 module, "),
            "{name}: {}",
            stdout(&out)
        );
        let out = kpack(["inspect".as_ref(), "--json".as_ref(), input.as_os_str()]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let entries = v["files"][0]["bundles"][0]["entries"].as_array().cloned();
        let entries = entries.unwrap_or_else(|| panic!("{name}: {v}"));
        let spirv: Vec<_> = entries.iter().filter(|e| !e["spirv"].is_null()).collect();
        assert_eq!(spirv.len(), 1, "{name}: {entries:?}");
        assert_eq!(spirv[0]["spirv"]["version"], "1.6", "{name}");
        assert_eq!(
            spirv[0]["spirv"]["words"].as_u64().unwrap() * 4,
            spirv[0]["size"].as_u64().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn a_corrupt_spirv_module_is_a_warning_naming_spirv() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("clang22/libaxpy_spirv_only.so")).unwrap();
    let magic = 0x0723_0203u32.to_le_bytes();
    let at = bytes.windows(4).position(|w| w == magic).unwrap();
    // Version 2.0: no SPIR-V there is.
    bytes[at + 4..at + 8].copy_from_slice(&0x0002_0000u32.to_le_bytes());
    let bad = dir.path().join("libbad.so");
    std::fs::write(&bad, &bytes).unwrap();
    let out = kpack(["inspect".as_ref(), "--strict".as_ref(), bad.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a valid SPIR-V module") && stderr(&out).contains("not 1.x"),
        "{}",
        stderr(&out)
    );
}

/// A broken SPIR-V module is refused by `offload` (in the default zstd
/// scheme and stored as it is), naming the file, bundle and entry, with
/// nothing written (the other targets are not archived either), and by
/// `prune --keep amdgcnspirv`; a prune that drops it goes through, and
/// `extract` writes it with a warning and exit 1.
#[test]
fn offload_refuses_a_broken_spirv_module() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("clang22/libaxpy_spirv.so")).unwrap();
    let magic = 0x0723_0203u32.to_le_bytes();
    let at = bytes.windows(4).position(|w| w == magic).unwrap();
    bytes[at + 4..at + 8].copy_from_slice(&0x0002_0000u32.to_le_bytes());
    let bad = dir.path().join("libbad.so");
    std::fs::write(&bad, &bytes).unwrap();
    for scheme in ["zstd", "none"] {
        let root = dir.path().join(scheme);
        let out = install(&bad, &root, &["--compression", scheme]);
        assert_eq!(out.status.code(), Some(2), "{scheme}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("libbad.so: bundle 0: entry ")
                && err.contains("amdgcnspirv")
                && err.contains("no valid SPIR-V module"),
            "{scheme}: {err}"
        );
        assert!(
            !root.join("lib").exists(),
            "{scheme}: something was written"
        );
    }
    // The intact library offloads.
    let out = install(
        &fixture("clang22/libaxpy_spirv.so"),
        &dir.path().join("ok"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // prune refuses to keep it; dropping it is fine.
    let pruned = dir.path().join("pruned.so");
    let out = kpack_prune(&bad, &pruned, "amdgcnspirv", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no valid SPIR-V module"),
        "{}",
        stderr(&out)
    );
    assert!(!pruned.exists());
    let out = kpack_prune(&bad, &pruned, "gfx942", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // extract hands it out as it is, with a warning and exit 1.
    let extracted = dir.path().join("extracted");
    let out = kpack([
        "extract".as_ref(),
        "--all".as_ref(),
        bad.as_os_str(),
        "-o".as_ref(),
        extracted.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no valid SPIR-V module")
            && stderr(&out).contains("written as it is"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&extracted).unwrap().count(), 2);
}

/// `root/lib/libaxpy.so` offloaded from `input` with `extra` flags.
fn install(input: &Path, root: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "offload".into(),
        input.into(),
        "-o".into(),
        root.join("lib/libaxpy.so").into(),
        "--archives".into(),
        root.join("lib/.kpack").into(),
        "--name".into(),
        "axpy".into(),
    ];
    args.extend(extra.iter().map(Into::into));
    kpack(args)
}

#[test]
fn offload_verify_and_target_lists_treat_spirv_as_a_target() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let out = install(&fixture("clang22/libaxpy_spirv.so"), root, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(root.join("lib/.kpack/axpy_amdgcnspirv.kpack").is_file());
    assert!(root.join("lib/.kpack/axpy_gfx942.kpack").is_file());
    verify_passes(root);

    let gpu = |g: &str| {
        kpack([
            "verify".as_ref(),
            "--gpu".as_ref(),
            g.as_ref(),
            root.as_os_str(),
        ])
    };
    let out = gpu("amdgcnspirv");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("libaxpy.so#0: lib/.kpack/axpy_amdgcnspirv.kpack as amdgcnspirv"),
        "{}",
        stdout(&out)
    );
    // gfx942 loads its own code; gfx1201 has none, and only SPIR-V would do.
    let out = gpu("gfx942");
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(!stdout(&out).contains("SPIR-V"), "{}", stdout(&out));
    let out = gpu("gfx1201");
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "=> only portable SPIR-V would serve: lib/.kpack/axpy_amdgcnspirv.kpack as amdgcnspirv"
        ),
        "{}",
        stdout(&out)
    );

    // --gpu-targets keeps it alone.
    let only = tempfile::tempdir().unwrap();
    let out = install(
        &fixture("clang22/libaxpy_spirv.so"),
        only.path(),
        &["--gpu-targets", "amdgcnspirv"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let archives: Vec<_> = std::fs::read_dir(only.path().join("lib/.kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(archives, ["axpy_amdgcnspirv.kpack"]);

    // prune --keep amdgcnspirv drops gfx942.
    let pruned = dir.path().join("libpruned.so");
    let out = kpack_prune(
        &fixture("clang22/libaxpy_spirv.so"),
        &pruned,
        "amdgcnspirv",
        &["--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kept"], serde_json::json!(["amdgcnspirv"]), "{v}");
    assert_eq!(v["dropped"], serde_json::json!(["gfx942"]), "{v}");
}

#[test]
fn split_gives_spirv_an_arch_artifact_that_verify_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    split_spirv_artifact(tmp.path(), &out_dir);
    assert!(
        out_dir
            .join("blas_lib_amdgcnspirv/stage/lib/.kpack/blas_lib.lib.libaxpy.so_amdgcnspirv.kpack")
            .is_file()
    );
    let o = verify_passes(&out_dir);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("2 archives, 2 lookups resolved"),
        "{}",
        stdout(&o)
    );
    verify_spirv_gpu_passes(&out_dir);
}

#[test]
fn recombine_groups_spirv_and_verify_resolves_it() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = tmp.path().join("shards");
    split_spirv_artifact(&tmp.path().join("in"), &shards.join("gfx94X_build"));
    let config = tmp.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"primary_shard":"gfx94X_build","architecture_groups":{
            "gfx94X":{"display_name":"MI300","architectures":["gfx942"]},
            "spirv":{"display_name":"portable SPIR-V","architectures":["amdgcnspirv"]}}}"#,
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let out = kpack([
        "recombine".as_ref(),
        shards.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(out_dir.join("blas_lib_spirv").is_dir());
    verify_passes(&out_dir);
    let text = verify_spirv_gpu_passes(&out_dir);
    assert!(
        text.contains("libaxpy.so_amdgcnspirv.kpack as amdgcnspirv"),
        "{text}"
    );
}

/// `clang22/libaxpy_spirv.so` as a TheRock artifact under `parent`, split
/// into `out`.
fn split_spirv_artifact(parent: &Path, out: &Path) {
    let art = parent.join("blas_lib_gfx94X");
    crate::util::artifact_with_library(&art, fixture("clang22/libaxpy_spirv.so"), "libaxpy.so");
    let o = kpack([
        "split".as_ref(),
        art.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `kpack verify --gpu amdgcnspirv DIR` passes; its stdout.
fn verify_spirv_gpu_passes(dir: &Path) -> String {
    let o = kpack([
        "verify".as_ref(),
        "--gpu".as_ref(),
        "amdgcnspirv".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    stdout(&o)
}
