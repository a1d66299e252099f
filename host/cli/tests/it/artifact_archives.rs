//! TheRock artifact archives in and out of `kpack split`: an archive
//! (`.tar.zst`, `.tar.xz`, `.tar.gz`) splits to the same files as the
//! directory it was packed from, hard links stay links, and
//! `--output-format tar.zst` writes reproducible archives (identical at
//! `-j1` and `-j2`) whose contents and equivalence manifests match the
//! directory outputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_tests::{stderr, stdout, tree_digest};

use crate::split::{SHARDS, make_shard};
use crate::util::{KPACK, component_cache, scratch};

const ROCBLAS: &str = "math-libs/BLAS/rocBLAS/stage";

fn fresh(name: &str) -> PathBuf {
    let d = scratch().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(KPACK)
        .args(args)
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", component_cache())
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let r = run(args);
    assert!(
        r.status.success(),
        "{args:?}: {}\n{}",
        stderr(&r),
        stdout(&r)
    );
    format!("{}{}", stdout(&r), stderr(&r))
}

/// The gfx90a shard's `blas_lib` artifact, with one hard link added.
fn artifact(root: &Path) -> PathBuf {
    make_shard(root, &SHARDS[1]);
    let a = root.join("blas_lib_gfx90a");
    let inc = a.join(ROCBLAS).join("include");
    std::fs::hard_link(inc.join("rocblas.h"), inc.join("rocblas-copy.h")).unwrap();
    a
}

/// Pack `dir` as TheRock does: the manifest first, then every entry in
/// path order; `rocblas-copy.h` as a hard link to `rocblas.h`.
fn pack(dir: &Path, dest: &Path) {
    let out = std::fs::File::create(dest).unwrap();
    let sink: Box<dyn Write> = match dest.extension().and_then(|e| e.to_str()) {
        Some("zst") => Box::new(
            zstd::stream::write::Encoder::new(out, 3)
                .unwrap()
                .auto_finish(),
        ),
        Some("xz") => Box::new(liblzma::write::XzEncoder::new(out, 6)),
        Some("gz") => Box::new(flate2::write::GzEncoder::new(
            out,
            flate2::Compression::default(),
        )),
        e => panic!("{e:?}"),
    };
    let mut tar = tar::Builder::new(sink);
    tar.follow_symlinks(false);
    tar.append_path_with_name(dir.join("artifact_manifest.txt"), "artifact_manifest.txt")
        .unwrap();
    // A hard link comes after the file it names, as tar requires.
    let mut links = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name().min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(dir).unwrap();
        if rel == Path::new("artifact_manifest.txt") {
            continue;
        }
        if rel.ends_with("rocblas-copy.h") {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            h.set_mode(0o644);
            let target = rel.with_file_name("rocblas.h");
            links.push((h, rel.to_path_buf(), target));
            continue;
        }
        tar.append_path_with_name(e.path(), rel).unwrap();
    }
    for (mut h, rel, target) in links {
        tar.append_link(&mut h, rel, target).unwrap();
    }
    tar.into_inner().unwrap().flush().unwrap();
}

fn split(input: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "split",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--split-databases",
        "rocblas,hipblaslt",
        "--exclude-arch",
        "gfx1030",
    ];
    args.extend(extra);
    ok(&args)
}

#[test]
fn an_artifact_archive_splits_to_the_files_of_its_directory() {
    let tmp = fresh("artifact-archives-in");
    let dir = artifact(&tmp.join("src"));
    let from_dir = tmp.join("from-dir");
    split(&dir, &from_dir, &[]);
    let want = tree_digest(&from_dir);
    assert!(
        want.keys().any(|k| k.starts_with("blas_lib_gfx90a/")),
        "{want:?}"
    );
    for ext in ["zst", "xz", "gz"] {
        let archive = tmp.join(format!("blas_lib_gfx90a.tar.{ext}"));
        pack(&dir, &archive);
        let out = tmp.join(format!("from-{ext}"));
        split(&archive, &out, &["-j", "2"]);
        assert_eq!(tree_digest(&out), want, "{ext}");
        // The hard link is kept as one.
        use std::os::unix::fs::MetadataExt;
        let copy = out
            .join("blas_lib_generic")
            .join(ROCBLAS)
            .join("include/rocblas-copy.h");
        assert_eq!(std::fs::metadata(&copy).unwrap().nlink(), 2, "{ext}");
        // Nothing of the spool is left behind.
        let names: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("blas_lib_")),
            "{names:?}"
        );
    }
}

#[test]
fn an_artifact_archive_without_its_manifest_first_is_refused() {
    let tmp = fresh("artifact-archives-no-manifest");
    let dir = artifact(&tmp.join("src"));
    std::fs::rename(
        dir.join("artifact_manifest.txt"),
        tmp.join("artifact_manifest.txt"),
    )
    .unwrap();
    std::fs::write(dir.join("artifact_manifest.txt"), "").unwrap();
    let archive = tmp.join("blas_lib_gfx90a.tar.gz");
    let out = std::fs::File::create(&archive).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        out,
        flate2::Compression::default(),
    ));
    tar.append_dir_all("math-libs", dir.join("math-libs"))
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let r = run(&[
        "split",
        archive.to_str().unwrap(),
        "-o",
        tmp.join("out").to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("must have artifact_manifest.txt as its first member"),
        "{}",
        stderr(&r)
    );
    assert!(!tmp.join("out/blas_lib_generic").exists());
}

/// Unpack a `.tar.zst` output with the tar crate, as TheRock's reader would.
fn unpack(archive: &Path, into: &Path) -> Vec<(String, tar::EntryType, u32, u64, u64, u64)> {
    let f = std::fs::File::open(archive).unwrap();
    let mut a = tar::Archive::new(zstd::stream::read::Decoder::new(f).unwrap());
    let mut headers = Vec::new();
    std::fs::create_dir_all(into).unwrap();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header();
        headers.push((
            e.path().unwrap().to_string_lossy().into_owned(),
            h.entry_type(),
            h.mode().unwrap(),
            h.mtime().unwrap(),
            h.uid().unwrap(),
            h.gid().unwrap(),
        ));
        e.set_preserve_permissions(true);
        e.unpack_in(into).unwrap();
    }
    headers
}

#[test]
fn archive_outputs_are_reproducible_and_hold_the_directory_outputs() {
    let tmp = fresh("artifact-archives-out");
    let dir = artifact(&tmp.join("src"));
    let archive = tmp.join("blas_lib_gfx90a.tar.zst");
    pack(&dir, &archive);
    let from_dir = tmp.join("dirs");
    split(&archive, &from_dir, &[]);
    let (j1, j2) = (tmp.join("j1"), tmp.join("j2"));
    let said = split(&archive, &j1, &["--output-format", "tar.zst", "-j", "1"]);
    assert!(said.contains("blas_lib_generic.tar.zst"), "{said}");
    split(&archive, &j2, &["--output-format", "tar.zst", "-j", "2"]);
    // Shards sharing an output location: identical archives are left
    // alone, different ones are never replaced without --replace, and the
    // error names the first differing file inside the artifact.
    let said = split(&archive, &j1, &["--output-format", "tar.zst"]);
    assert!(said.contains("identical to the existing output"), "{said}");
    let other = j1.join("blas_lib_generic.artifact_equivalence.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    let first = m["files"][1]["path"].as_str().unwrap().to_string();
    m["files"][1]["sha256"] = "0".repeat(64).into();
    std::fs::write(&other, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let args = |extra: &'static str| {
        let mut v = vec![
            "split".to_string(),
            archive.to_str().unwrap().into(),
            "-o".into(),
            j1.to_str().unwrap().into(),
            "--split-databases".into(),
            "rocblas,hipblaslt".into(),
            "--exclude-arch".into(),
            "gfx1030".into(),
            "--output-format".into(),
            "tar.zst".into(),
        ];
        if !extra.is_empty() {
            v.push(extra.into());
        }
        v
    };
    let refused: Vec<String> = args("");
    let r = run(&refused.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains(&format!("first difference: {first}: contents differ")),
        "{}",
        stderr(&r)
    );
    let replace = args("--replace");
    ok(&replace.iter().map(String::as_str).collect::<Vec<_>>());
    // From the directory the hard link is two files: other archive bytes,
    // the same equivalence manifests.
    let j3 = tmp.join("j3");
    split(&dir, &j3, &["--output-format", "tar.zst"]);
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&j1),
        [
            "blas_lib_generic.artifact_equivalence.json",
            "blas_lib_generic.tar.zst",
            "blas_lib_gfx90a.artifact_equivalence.json",
            "blas_lib_gfx90a.tar.zst",
        ]
    );
    for n in names(&j1) {
        assert!(
            std::fs::read(j1.join(&n)).unwrap() == std::fs::read(j2.join(&n)).unwrap(),
            "{n} differs between -j1 and -j2"
        );
        if n.ends_with(".json") {
            assert!(
                std::fs::read(j1.join(&n)).unwrap() == std::fs::read(j3.join(&n)).unwrap(),
                "{n} differs between the archive's split and the directory's"
            );
        }
    }
    for o in ["blas_lib_generic", "blas_lib_gfx90a"] {
        let into = tmp.join("unpacked").join(o);
        let headers = unpack(&j1.join(format!("{o}.tar.zst")), &into);
        assert_eq!(headers[0].0, "artifact_manifest.txt");
        // Then every member in path order, component by component (plain
        // files, kept in the split's store, merged with the rest).
        let paths: Vec<Vec<&str>> = headers[1..]
            .iter()
            .map(|h| h.0.trim_end_matches('/').split('/').collect())
            .collect();
        assert!(paths.windows(2).all(|w| w[0] < w[1]), "{paths:?}");
        if o == "blas_lib_generic" {
            // The hard link stays one: the first name in path order is the
            // file, the other links to it.
            let kind = |name: &str| {
                headers
                    .iter()
                    .find(|h| h.0.ends_with(name))
                    .map(|h| h.1)
                    .unwrap()
            };
            assert_eq!(kind("include/rocblas-copy.h"), tar::EntryType::Regular);
            assert_eq!(kind("include/rocblas.h"), tar::EntryType::Link);
        }
        assert!(
            headers.iter().all(|h| h.3 == 0 && h.4 == 0 && h.5 == 0),
            "{headers:?}"
        );
        assert!(
            headers.iter().all(|h| [0o644, 0o755, 0o777].contains(&h.2)),
            "{headers:?}"
        );
        let (got, want) = (tree_digest(&into), tree_digest(&from_dir.join(o)));
        let strip = |m: std::collections::BTreeMap<String, String>| -> Vec<(String, String)> {
            // Modes are normalised in archives: compare contents only.
            m.into_iter()
                .map(|(k, v)| (k, v.rsplit(':').next().unwrap().to_string()))
                .collect()
        };
        assert_eq!(strip(got), strip(want), "{o}");
        let manifest: serde_json::Value = serde_json::from_slice(
            &std::fs::read(j1.join(format!("{o}.artifact_equivalence.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["schema"], "therock.artifact_equivalence.v1");
        let expect = kpack_split::directory_manifest(&from_dir.join(o)).unwrap();
        assert_eq!(manifest, serde_json::to_value(&expect).unwrap(), "{o}");
    }
}

fn recombine(shards: &Path, config: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec![
        "recombine",
        shards.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    ok(&args);
}

fn verify(dir: &Path) -> serde_json::Value {
    let r = run(&["verify", dir.to_str().unwrap(), "--json"]);
    assert!(
        r.status.success(),
        "verify {}: {}{}",
        dir.display(),
        stdout(&r),
        stderr(&r)
    );
    serde_json::from_str(&stdout(&r)).unwrap()
}

#[test]
fn split_recombine_verify_on_archives_gives_the_files_of_directories() {
    let tmp = fresh("artifact-archives-pipeline");
    let config = tmp.join("config.json");
    std::fs::write(
        &config,
        br#"{"primary_shard": "gfx1030_build",
             "architecture_groups": {"all": {"architectures": ["gfx1030", "gfx90a"]}},
             "validation": {"error_on_missing_architecture": true}}"#,
    )
    .unwrap();
    for s in &SHARDS[..2] {
        let src = tmp.join("in").join(s.name);
        make_shard(&src, s);
        // The same artifacts as TheRock ships them between jobs.
        let packed = tmp.join("in-archives").join(s.name);
        std::fs::create_dir_all(&packed).unwrap();
        for a in ["blas_lib", "support_dev"] {
            let name = format!("{a}_{}", s.family);
            pack(&src.join(&name), &packed.join(format!("{name}.tar.zst")));
        }
        let args = [
            "--batch",
            "--split-databases",
            "rocblas,hipblaslt",
            "--exclude-arch",
        ];
        let exclude = if s.exclude.is_empty() {
            "gfx906"
        } else {
            s.exclude
        };
        let dirs = tmp.join("shards-dirs").join(s.name);
        let mut a = vec!["split", src.to_str().unwrap(), "-o", dirs.to_str().unwrap()];
        a.extend(args);
        a.push(exclude);
        ok(&a);
        let archives = tmp.join("shards-archives").join(s.name);
        let mut a = vec![
            "split",
            packed.to_str().unwrap(),
            "-o",
            archives.to_str().unwrap(),
        ];
        a.extend(args);
        a.extend([exclude, "--output-format", "tar.zst"]);
        ok(&a);
        // verify reads archive outputs as they are.
        let v = verify(&archives);
        assert!(v["report"]["resolved"].as_u64().unwrap() >= 3, "{v}");
        let shown = v["report"]["artifacts"].to_string();
        assert!(shown.contains("blas_lib_generic.tar.zst"), "{shown}");
    }
    let (from_dirs, from_archives) = (tmp.join("out-dirs"), tmp.join("out-archives"));
    recombine(&tmp.join("shards-dirs"), &config, &from_dirs, &[]);
    recombine(&tmp.join("shards-archives"), &config, &from_archives, &[]);
    verify(&from_archives);
    let want = tree_digest(&from_dirs);
    assert!(
        want.keys().any(|k| k.starts_with("blas_lib_all/")),
        "{want:?}"
    );
    assert_eq!(tree_digest(&from_archives), want);
    // Recombined into artifact archives: each holds its directory's files,
    // `verify` reads them, and a second run writes the same bytes.
    let packed = tmp.join("out-packed");
    let archives = tmp.join("shards-archives");
    recombine(&archives, &config, &packed, &["--output-format", "tar.zst"]);
    verify(&packed);
    let names: Vec<String> = std::fs::read_dir(&packed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar.zst"))
        .collect();
    assert!(
        names.contains(&"blas_lib_all.tar.zst".to_string()),
        "{names:?}"
    );
    for n in &names {
        let stem = n.trim_end_matches(".tar.zst");
        let into = tmp.join("out-unpacked").join(stem);
        unpack(&packed.join(n), &into);
        assert_eq!(
            tree_digest(&into),
            tree_digest(&from_dirs.join(stem)),
            "{n}"
        );
        assert!(
            packed
                .join(format!("{stem}.artifact_equivalence.json"))
                .is_file()
        );
    }
    let again = tmp.join("out-packed-j1");
    recombine(&archives, &config, &again, &["--output-format", "tar.zst"]);
    for n in &names {
        assert_eq!(
            std::fs::read(packed.join(n)).unwrap(),
            std::fs::read(again.join(n)).unwrap(),
            "{n}"
        );
    }
}

#[test]
fn archive_per_artifact_writes_amds_names_and_markers_resolve() {
    let tmp = fresh("artifact-archives-per-artifact");
    let dir = artifact(&tmp.join("src"));
    let out = tmp.join("out");
    split(&dir, &out, &["--archive-per", "artifact"]);
    let kpack_dir = out.join("blas_lib_gfx90a").join(ROCBLAS).join("lib/.kpack");
    let names: Vec<String> = std::fs::read_dir(&kpack_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.is_empty());
    // One archive per target for every binary of the prefix, AMD's name.
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("blas_lib_gfx90a") && n.ends_with(".kpack")),
        "{names:?}"
    );
    let bin = out
        .join("blas_lib_generic")
        .join(ROCBLAS)
        .join("bin/rocblas-bench");
    let fat = kpack_elf::read_fat_binary(&bin, Default::default()).unwrap();
    let sec = fat.marker.unwrap();
    let bytes = std::fs::read(&bin).unwrap();
    let m =
        kpack_format::Marker::parse(&bytes[sec.offset as usize..(sec.offset + sec.size) as usize])
            .unwrap();
    assert_eq!(m.search_paths, ["../lib/.kpack/blas_lib_@GFXARCH@.kpack"]);
    let v = verify(&out);
    assert!(v["report"]["resolved"].as_u64().unwrap() >= 3, "{v}");
    // Archive groups have no AMD name: refused.
    let r = run(&[
        "split",
        dir.to_str().unwrap(),
        "-o",
        tmp.join("refused").to_str().unwrap(),
        "--archive-per",
        "artifact",
        "--archive-group",
        "family",
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}

/// Identical shards splitting into one output location at the same time:
/// whichever commits second finds the first's outputs identical and exits
/// 0 saying so, in every race, whatever the output format.
#[test]
fn parallel_identical_shards_all_succeed() {
    let tmp = fresh("artifact-archives-race");
    let dir = artifact(&tmp.join("src"));
    let archive = tmp.join("blas_lib_gfx90a.tar.zst");
    pack(&dir, &archive);
    for round in 0..20 {
        let format = if round % 2 == 0 { "dir" } else { "tar.zst" };
        let out = tmp.join(format!("out-{round}"));
        let spawn = || {
            std::process::Command::new(KPACK)
                .args([
                    "split",
                    archive.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                ])
                .args(["--output-format", format, "-j", "1"])
                .env_remove("SOURCE_DATE_EPOCH")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let runs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        // The one that came second says so, however close the race was.
        let said = runs
            .iter()
            .filter(|r| stdout(r).contains("identical to the existing output"))
            .count();
        assert!(
            said >= 1,
            "round {round} ({format}): neither said identical"
        );
        for r in runs {
            assert_eq!(
                r.status.code(),
                Some(0),
                "round {round} ({format}): {}",
                stderr(&r)
            );
        }
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(".kpack-tmp"))
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("blas_lib_generic")),
            "{names:?}"
        );
        assert!(
            !std::fs::read_dir(&out).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".kpack-tmp")),
            "round {round}: a staging directory was left"
        );
    }
}

/// `kpack verify` takes one artifact archive as it takes a directory.
#[test]
fn verify_takes_one_artifact_archive() {
    let tmp = fresh("artifact-archives-verify-one");
    let dir = artifact(&tmp.join("src"));
    let archive = tmp.join("blas_lib_gfx90a.tar.zst");
    pack(&dir, &archive);
    let out = tmp.join("out");
    split(&archive, &out, &["--output-format", "tar.zst"]);
    let one = out.join("blas_lib_generic.tar.zst");
    let r = run(&["verify", one.to_str().unwrap()]);
    // Checked (a generic artifact alone lacks its arch artifacts: exit 1),
    // not refused as a file (exit 2).
    assert_eq!(r.status.code(), Some(1), "{}{}", stdout(&r), stderr(&r));
    let said = format!("{}{}", stdout(&r), stderr(&r));
    assert!(said.contains("no arch artifact"), "{said}");
    let not_archive = out.join("blas_lib_generic.artifact_equivalence.json");
    let r = run(&["verify", not_archive.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}
