//! `kpack deb split` end to end with Debian's own tools: a `.deb` built
//! with `dpkg-deb --build` from a fixture library with device code for
//! three targets and a rocBLAS-style Tensile database, split, read back by
//! `dpkg-deb`, installed into a scratch root by `dpkg`, checked by
//! `kpack verify --gpu`, removed, and linted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_tests::{fixture, stderr, stdout};

use crate::split::write;
use crate::util::{component_cache, kpack, scratch, verify_gpu_passes};

const NAME: &str = "libaxpy1";
const VERSION: &str = "1.2-1";
const LIBDIR: &str = "usr/lib/x86_64-linux-gnu";

/// A fresh directory under the test scratch.
fn fresh(name: &str) -> PathBuf {
    let d = scratch().join("native-packages").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn ok(o: Output, what: &str) -> Output {
    assert!(o.status.success(), "{what}:\n{}{}", stdout(&o), stderr(&o));
    o
}

/// `dpkg-deb --build` of a tree with `DEBIAN/control` for `name`.
fn build_deb(tree: &Path, name: &str, depends: &str, out: &Path) -> PathBuf {
    let doc = tree.join(format!("usr/share/doc/{name}"));
    write(
        &doc.join("copyright"),
        b"Copyright: kpack tests\nLicense: MIT\n",
    );
    let control = format!(
        "Package: {name}\nVersion: {VERSION}\nArchitecture: amd64\nMaintainer: kpack tests <kpack@example.org>\n\
         Section: libs\nPriority: optional\n{depends}Description: axpy test library\n A library with GPU code for the kpack tests.\n"
    );
    write(&tree.join("DEBIAN/control"), control.as_bytes());
    let deb = out.join(format!("{name}_{VERSION}_amd64.deb"));
    ok(
        run(Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(tree)
            .arg(&deb)),
        "dpkg-deb --build",
    );
    deb
}

/// The fat package: the fixture library (gfx1100, gfx1201, gfx942) and a
/// Tensile database for gfx1100 and gfx942 where the rocBLAS handler
/// looks for Debian's layout.
fn fat_deb(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    let lib = tree.join(LIBDIR);
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(
        fixture("clang19/libaxpy_plain.so"),
        lib.join("libaxpy.so.1"),
    )
    .unwrap();
    std::os::unix::fs::symlink("libaxpy.so.1", lib.join("libaxpy.so")).unwrap();
    let db = lib.join("rocblas/4.3.0/library");
    for arch in ["gfx1100", "gfx942"] {
        write(
            &db.join(format!("TensileLibrary_{arch}.co")),
            format!("tensile code {arch}").as_bytes(),
        );
        write(
            &db.join(format!("TensileLibrary_Type_{arch}.dat")),
            b"tensile data",
        );
    }
    write(&db.join("TensileLibrary.dat"), b"generic tensile index");
    build_deb(&tree, NAME, "", dir)
}

/// `kpack deb split INPUT -o OUT ARGS... --json`: the one report.
fn deb_split(input: &Path, out: &Path, args: &[&str]) -> serde_json::Value {
    let o = ok(
        run(Command::new(crate::util::KPACK)
            .env("XDG_CACHE_HOME", component_cache())
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["deb", "split"])
            .arg(input)
            .arg("-o")
            .arg(out)
            .args(args)
            .arg("--json")),
        "kpack deb split",
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["packages"][0].clone()
}

/// A scratch dpkg database under `root`.
fn dpkg_root(root: &Path) {
    let admin = root.join("var/lib/dpkg");
    std::fs::create_dir_all(admin.join("info")).unwrap();
    std::fs::create_dir_all(admin.join("updates")).unwrap();
    std::fs::write(admin.join("status"), "").unwrap();
}

fn dpkg(root: &Path, args: &[&std::ffi::OsStr]) -> Output {
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args([
            "--force-not-root",
            "--force-script-chrootless",
            "--log=/dev/null",
        ])
        .args(args))
}

fn file_of(v: &serde_json::Value) -> PathBuf {
    PathBuf::from(v["path"].as_str().unwrap())
}

fn device<'a>(r: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["key"] == key)
        .unwrap_or_else(|| panic!("no device package {key}: {r:#}"))
}

#[test]
fn deb_split_installs_host_and_one_device_package_with_dpkg() {
    let dir = fresh("install");
    let input = fat_deb(&dir);
    let out = dir.join("out");
    let r = deb_split(&input, &out, &["--split-databases", "rocblas"]);
    assert_eq!(r["split"], true, "{r:#}");
    let keys: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["gfx1100", "gfx1201", "gfx942"]);
    let host = file_of(&r["host"]);
    let dev = file_of(device(&r, "gfx1100"));
    let mut all: Vec<PathBuf> = vec![host.clone(), file_of(&r["all"])];
    all.extend(r["devices"].as_array().unwrap().iter().map(file_of));
    for deb in &all {
        ok(
            run(Command::new("dpkg-deb").arg("--info").arg(deb)),
            "dpkg-deb --info",
        );
        ok(
            run(Command::new("dpkg-deb").arg("--contents").arg(deb)),
            "dpkg-deb --contents",
        );
    }
    let info = stdout(&ok(
        run(Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&dev)
            .arg("Depends")),
        "-f",
    ));
    assert_eq!(info.trim(), format!("{NAME} (= {VERSION})"));
    let contents = stdout(&run(Command::new("dpkg-deb").arg("--contents").arg(&dev)));
    assert!(contents.contains("TensileLibrary_gfx1100.co"), "{contents}");
    assert!(contents.contains(".kpack"), "{contents}");
    let host_contents = stdout(&run(Command::new("dpkg-deb").arg("--contents").arg(&host)));
    assert!(
        !host_contents.contains("TensileLibrary_gfx1100"),
        "{host_contents}"
    );
    assert!(
        host_contents.contains("TensileLibrary.dat"),
        "{host_contents}"
    );

    let root = dir.join("root");
    dpkg_root(&root);
    let alone = dpkg(&root, &["-i".as_ref(), dev.as_os_str()]);
    assert!(
        !alone.status.success(),
        "the device package installed without its host"
    );
    assert!(stderr(&alone).contains("depends on"), "{}", stderr(&alone));
    let loader = build_deb(&dir.join("loader"), "librocm-kpack0", "", &dir);
    ok(
        dpkg(&root, &["--purge".as_ref(), "libaxpy1-gfx1100".as_ref()]),
        "purge the half-installed device package",
    );
    ok(
        dpkg(
            &root,
            &[
                "-i".as_ref(),
                loader.as_os_str(),
                host.as_os_str(),
                dev.as_os_str(),
            ],
        ),
        "dpkg -i loader host device",
    );
    verify_gpu_passes(&root, "gfx1100");
    ok(
        dpkg(&root, &["--remove".as_ref(), "libaxpy1-gfx1100".as_ref()]),
        "dpkg --remove",
    );
    assert!(root.join(LIBDIR).join("libaxpy.so.1").is_file());
    assert!(
        !root
            .join(LIBDIR)
            .join("rocblas/4.3.0/library/TensileLibrary_gfx1100.co")
            .exists()
    );
    ok(dpkg(&root, &["--audit".as_ref()]), "dpkg --audit");
}
