//! `kpack prune` on link inputs: clang-19 relocatable objects
//! (new driver `.llvm.offloading`, old driver `.hip_fatbin`) and static
//! archives pruned to one arch still link, and what the linker puts in the
//! result's bundle is exactly that arch. Oracles: `llvm-objdump-19
//! --offloading`, `clang-offload-bundler-19 --list` / `--unbundle`, GNU ld
//! reading the archive index, and clang-19's own device link.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_bundle::WalkOptions;
use kpack_tests::{fixture, stderr, stdout};

use crate::util::kpack_prune;

/// `kpack prune INPUT -o OUTPUT --keep KEEP`, which must succeed.
fn prune(input: &Path, output: &Path, keep: &str) {
    let out = kpack_prune(input, output, keep, &[]);
    assert!(
        out.status.success(),
        "{}: {}",
        input.display(),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains(&format!("kept {keep}")),
        "{}",
        stdout(&out)
    );
}

/// Run a tool, which must succeed; its stdout.
fn tool(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/test.sh installs it)"));
    assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
    stdout(&out)
}

/// The GPU targets in the linked binary's `.hip_fatbin` bundles.
fn linked_targets(binary: &Path) -> Vec<String> {
    kpack_elf::read_fat_binary(binary, WalkOptions::default())
        .unwrap()
        .targets()
}

/// Link `inputs` (with `extra` flags) into a shared library with the new
/// offload driver's device link, as tests/fixtures/clang19/build.sh does.
fn hip_link(out: &Path, inputs: &[&Path], extra: &[&str]) -> PathBuf {
    let mut cmd = Command::new("clang-19");
    cmd.args([
        "--offload-new-driver",
        "-fgpu-rdc",
        "--hip-link",
        "-no-hip-rt",
    ])
    .args(["-shared", "-o"])
    .arg(out)
    .args(extra)
    .args(inputs);
    tool(&mut cmd);
    out.to_path_buf()
}

#[test]
fn new_driver_object_pruned_to_one_arch_still_links() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("clang19/nd_kern_axpy.o");
    let fat = hip_link(&dir.path().join("fat.so"), &[&input], &[]);
    assert_eq!(linked_targets(&fat), ["gfx1100", "gfx942"]);
    for keep in ["gfx942", "gfx1100"] {
        let pruned = dir.path().join(format!("{keep}.o"));
        prune(&input, &pruned, keep);
        assert!(
            std::fs::metadata(&pruned).unwrap().len() < std::fs::metadata(&input).unwrap().len()
        );
        let listing = tool(
            Command::new("llvm-objdump-19")
                .arg("--offloading")
                .arg(&pruned),
        );
        let archs: Vec<&str> = listing
            .lines()
            .filter_map(|l| l.strip_prefix("arch"))
            .map(str::trim)
            .collect();
        assert_eq!(archs, [keep], "{listing}");
        // The host side is untouched: same symbols, relocations, sections.
        // (The file offsets readelf prints with each relocation section
        // move, by design.)
        let host = |f: &Path| {
            tool(Command::new("readelf").args(["-sW", "-rW"]).arg(f))
                .lines()
                .map(|l| l.split(" at offset ").next().unwrap_or(l).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(host(&pruned), host(&input));
        let linked = hip_link(&dir.path().join(format!("{keep}.so")), &[&pruned], &[]);
        assert_eq!(linked_targets(&linked), [keep]);
    }
}

#[test]
fn old_driver_objects_pruned_keep_one_code_object() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["kern_axpy_old.o", "kern_axpy_old_ccob.o"] {
        let input = fixture(&format!("clang19/{name}"));
        let pruned = dir.path().join(name);
        prune(&input, &pruned, "gfx1100");
        // The bundler reads `.hip_fatbin` as dumped by llvm-objcopy.
        let dump = |f: &Path, to: &str| {
            let out = dir.path().join(to);
            let mut arg = std::ffi::OsString::from(".hip_fatbin=");
            arg.push(&out);
            tool(
                Command::new("llvm-objcopy-19")
                    .arg("--dump-section")
                    .arg(arg)
                    .arg(f),
            );
            out
        };
        let (fat_in, fat_out) = (dump(&input, "in.bundle"), dump(&pruned, "out.bundle"));
        let list = |f: &Path| {
            let mut arg = std::ffi::OsString::from("--input=");
            arg.push(f);
            tool(
                Command::new("clang-offload-bundler-19")
                    .args(["--list", "--type=o"])
                    .arg(arg),
            )
        };
        assert_eq!(list(&fat_in).lines().count(), 3, "{name}");
        let ids: Vec<String> = list(&fat_out).lines().map(str::to_owned).collect();
        assert_eq!(ids.len(), 2, "{name}: {ids:?}");
        assert!(
            ids.iter().any(|i| i.starts_with("host-")),
            "{name}: {ids:?}"
        );
        assert!(
            ids.iter().any(|i| i.ends_with("gfx1100")),
            "{name}: {ids:?}"
        );
        // The kept code object is the original's, byte for byte.
        let unbundle = |f: &Path, id: &str, out: &Path| {
            let mut i = std::ffi::OsString::from("--input=");
            i.push(f);
            let mut o = std::ffi::OsString::from("--output=");
            o.push(out);
            tool(
                Command::new("clang-offload-bundler-19")
                    .args(["--unbundle", "--type=o", &format!("--targets={id}")])
                    .arg(i)
                    .arg(o),
            );
            std::fs::read(out).unwrap()
        };
        let id = ids.iter().find(|i| i.ends_with("gfx1100")).unwrap();
        let a = unbundle(&fat_in, id, &dir.path().join("a.co"));
        let b = unbundle(&fat_out, id, &dir.path().join("b.co"));
        assert!(!a.is_empty());
        assert_eq!(a, b, "{name}");
        // An old-driver object links like any object.
        let so = dir.path().join(format!("{name}.so"));
        tool(
            Command::new("cc")
                .args(["-shared", "-o"])
                .arg(&so)
                .arg(&pruned),
        );
        assert_eq!(linked_targets(&so), ["gfx1100"], "{name}");
    }
}

/// Symbol → member name, through `object`'s archive reader.
fn armap(path: &Path) -> BTreeMap<String, String> {
    let data = std::fs::read(path).unwrap();
    let ar = kpack_llvm_offload::Archive::parse(&data).unwrap();
    ar.symbols()
        .unwrap()
        .into_iter()
        .map(|s| {
            let m = s
                .member
                .unwrap_or_else(|| panic!("{}: {} dangles", path.display(), s.name));
            (s.name, ar.members()[m].name().into_owned())
        })
        .collect()
}

#[test]
fn archives_pruned_keep_a_valid_index_and_link() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "libnd_kernels.a",
        "libnd_bsd.a",
        "libnd_nosym.a",
        "libmixed.a",
    ] {
        let input = fixture(&format!("clang19/{name}"));
        let pruned = dir.path().join(name);
        prune(&input, &pruned, "gfx942");
        assert_eq!(armap(&pruned), armap(&input), "{name}");
        assert_eq!(
            kpack_llvm_offload::device_targets(&std::fs::read(&pruned).unwrap()).unwrap(),
            ["gfx942"],
            "{name}"
        );
        let members = |f: &Path| tool(Command::new("llvm-ar-19").arg("t").arg(f));
        assert_eq!(members(&pruned), members(&input), "{name}");
    }
    // GNU ld pulls the member defining a symbol an object needs through
    // the rewritten index, and clang's device link of the whole archive
    // finds only the kept arch.
    let pruned = dir.path().join("libnd_kernels.a");
    let user = dir.path().join("use.c");
    std::fs::write(
        &user,
        "extern void corpus_run_axpy(void);\nvoid use_it(void) { corpus_run_axpy(); }\n",
    )
    .unwrap();
    let user_o = dir.path().join("use.o");
    tool(
        Command::new("cc")
            .args(["-c", "-fPIC", "-o"])
            .arg(&user_o)
            .arg(&user),
    );
    let host_so = dir.path().join("host.so");
    tool(
        Command::new("cc")
            .args(["-shared", "-o"])
            .arg(&host_so)
            .arg(&user_o)
            .arg(&pruned),
    );
    let nm = tool(Command::new("nm").arg(&host_so));
    assert!(nm.contains(" T corpus_run_axpy"), "{nm}");
    let linked = hip_link(
        &dir.path().join("from_archive.so"),
        &[],
        &[
            "-Wl,--whole-archive",
            pruned.to_str().unwrap(),
            "-Wl,--no-whole-archive",
        ],
    );
    assert_eq!(linked_targets(&linked), ["gfx942"]);
}

#[test]
fn thin_archives_and_empty_keeps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let run = |input: &str, keep: &str| kpack_prune(&fixture(input), &out_path, keep, &[]);
    let out = run("clang19/libnd_thin.a", "gfx942");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("thin archive"), "{}", stderr(&out));
    let out = run("clang19/nd_kern_axpy.o", "gfx90a");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("keep nothing"), "{}", stderr(&out));
    assert!(!out_path.exists());
}
