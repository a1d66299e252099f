//! `kpack deb split` and `kpack rpm split` end to end with the distributions' own
//! tools (`dpkg-deb`, `dpkg`, `lintian`; `rpmbuild`, `rpm`): a `.deb` built
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
fn fat_deb(dir: &Path, depends: &str) -> PathBuf {
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
    build_deb(&tree, NAME, depends, dir)
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
    let input = fat_deb(&dir, "");
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

/// `dpkg-deb --fsys-tarfile | tar -xO` of one member of a package.
fn member_bytes(deb: &Path, member: &str) -> Vec<u8> {
    let tar = ok(
        run(Command::new("dpkg-deb").arg("--fsys-tarfile").arg(deb)),
        "--fsys-tarfile",
    );
    let mut a = tar::Archive::new(tar.stdout.as_slice());
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        if e.path().unwrap().to_str().unwrap().trim_start_matches("./") == member {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut v).unwrap();
            return v;
        }
    }
    panic!("{member} not in {}", deb.display());
}

/// The `.kpack` archive a device package holds (its one archive).
fn device_archive(deb: &Path) -> kpack_format::Archive {
    let contents = stdout(&run(Command::new("dpkg-deb").arg("--contents").arg(deb)));
    let member = contents
        .split_whitespace()
        .find(|w| w.ends_with(".kpack"))
        .unwrap_or_else(|| panic!("no archive in {contents}"));
    let bytes = member_bytes(deb, member.trim_start_matches("./"));
    kpack_format::Archive::from_bytes(bytes).unwrap()
}

#[test]
fn deb_split_stores_archives_compressed_or_not_as_asked() {
    let dir = fresh("storage");
    let input = fat_deb(&dir, "");
    for (args, scheme) in [
        (&[][..], kpack_format::Scheme::ZstdPerKernel),
        (&["--compression", "none"][..], kpack_format::Scheme::None),
    ] {
        let out = dir.join(format!("out-{}", args.len()));
        let r = deb_split(&input, &out, args);
        let a = device_archive(&file_of(device(&r, "gfx1100")));
        assert_eq!(a.scheme(), scheme, "{args:?}");
        assert!(a.entries().count() > 0, "{args:?}");
    }
}

#[test]
fn deb_split_databases_only_keeps_the_host_library_and_moves_tensile_files() {
    let dir = fresh("databases-only");
    let input = fat_deb(&dir, "");
    let r = deb_split(
        &input,
        &dir.join("out"),
        &["--split-databases", "rocblas", "--databases-only"],
    );
    let keys: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["gfx1100", "gfx942"], "{r:#}");
    let host = file_of(&r["host"]);
    let lib = format!("{LIBDIR}/libaxpy.so.1");
    assert_eq!(member_bytes(&host, &lib), member_bytes(&input, &lib));
    let deps = stdout(&run(Command::new("dpkg-deb")
        .arg("-f")
        .arg(&host)
        .arg("Depends")));
    assert!(!deps.contains("librocm-kpack"), "{deps}");
    let dev = stdout(&run(Command::new("dpkg-deb")
        .arg("--contents")
        .arg(file_of(device(&r, "gfx942")))));
    assert!(
        dev.contains("TensileLibrary_Type_gfx942.dat") && !dev.contains(".kpack"),
        "{dev}"
    );
    let root = dir.join("root");
    dpkg_root(&root);
    ok(
        dpkg(
            &root,
            &[
                "-i".as_ref(),
                host.as_os_str(),
                file_of(device(&r, "gfx942")).as_os_str(),
            ],
        ),
        "dpkg -i",
    );
    assert!(
        root.join(LIBDIR)
            .join("rocblas/4.3.0/library/TensileLibrary_gfx942.co")
            .is_file()
    );
}

#[test]
fn deb_split_of_a_package_without_device_code_writes_nothing() {
    let dir = fresh("no-device-code");
    write(
        &dir.join("tree/usr/share/axpy/readme.txt"),
        b"nothing for a GPU\n",
    );
    let input = build_deb(&dir.join("tree"), NAME, "", &dir);
    let out = dir.join("out");
    let o = kpack([
        "deb".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to split"), "{}", stdout(&o));
    assert!(!out.exists(), "an output directory was written");
}

#[test]
fn deb_split_rejects_a_file_that_is_not_a_package() {
    let dir = fresh("not-a-package");
    let input = dir.join("fake_1.0_amd64.deb");
    std::fs::write(&input, b"!<arch>\nnot really\n").unwrap();
    let o = kpack([
        "deb".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a valid deb package"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("out").exists());
}

#[test]
fn deb_split_warns_about_database_files_no_handler_claims() {
    let dir = fresh("unclaimed");
    let input = fat_deb(&dir, "");
    let o = kpack([
        "deb".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no database handler claimed") && err.contains("TensileLibrary_gfx1100.co"),
        "{err}"
    );
}

#[test]
fn deb_split_writes_the_same_bytes_twice() {
    let dir = fresh("reproducible");
    let input = fat_deb(&dir, "");
    let a = deb_split(
        &input,
        &dir.join("a"),
        &["--split-databases", "rocblas", "--group", "family"],
    );
    let b = deb_split(
        &input,
        &dir.join("b"),
        &["--split-databases", "rocblas", "--group", "family"],
    );
    let names: Vec<&str> = a["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["package"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["libaxpy1-gfx11", "libaxpy1-gfx12", "libaxpy1-gfx9"]);
    for f in std::fs::read_dir(dir.join("a")).unwrap() {
        let f = f.unwrap();
        let other = dir.join("b").join(f.file_name());
        assert_eq!(
            std::fs::read(f.path()).unwrap(),
            std::fs::read(&other).unwrap(),
            "{:?}",
            f.file_name()
        );
    }
    assert_eq!(a["per_gpu"], b["per_gpu"]);
    let gpus: Vec<&str> = a["per_gpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(gpus, ["gfx1100", "gfx1201", "gfx942"]);
    // Each GPU downloads the host package and the device packages serving it.
    let host_bytes = a["host"]["bytes"].as_u64().unwrap();
    for g in a["per_gpu"].as_array().unwrap() {
        let dev: u64 = a["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| g["packages"].as_array().unwrap().contains(&d["package"]))
            .map(|d| d["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(g["bytes"].as_u64(), Some(host_bytes + dev), "{g}");
        assert_eq!(g["packages"].as_array().unwrap().len(), 2, "{g}");
    }
}

/// lintian's error tags (`E: pkg: tag ...` → `tag`).
fn lintian_errors(deb: &Path) -> std::collections::BTreeSet<String> {
    let o = run(Command::new("lintian").arg("--no-cfg").arg(deb));
    stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("E: "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(str::to_string)
        .collect()
}

#[test]
fn lintian_finds_no_error_in_the_outputs_it_did_not_find_in_the_input() {
    let dir = fresh("lintian");
    // A real library package depends on libc (its shlibs), which lintian
    // expects once a Depends field exists.
    let input = fat_deb(&dir, "Depends: libc6 (>= 2.34)\n");
    let r = deb_split(&input, &dir.join("out"), &["--split-databases", "rocblas"]);
    let before = lintian_errors(&input);
    let mut outputs = vec![file_of(&r["host"]), file_of(&r["all"])];
    outputs.extend(r["devices"].as_array().unwrap().iter().map(file_of));
    for deb in outputs {
        let new: Vec<String> = lintian_errors(&deb).difference(&before).cloned().collect();
        assert!(
            new.is_empty(),
            "{}: lintian errors the input did not have: {new:?}",
            deb.display()
        );
    }
}

/// `rpmbuild -bb` of `spec` with `tree` as its sources, an xz payload and
/// no automatic dependencies: the `.rpm` it wrote.
fn build_rpm(dir: &Path, spec: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let spec_file = dir.join("pkg.spec");
    std::fs::write(&spec_file, spec).unwrap();
    let top = dir.join("rpmbuild");
    ok(
        run(Command::new("rpmbuild")
            .arg("-bb")
            .arg("--define")
            .arg(format!("_topdir {}", top.display()))
            .arg("--define")
            .arg(format!("_sourcedir {}", dir.display()))
            .args(["--define", "__os_install_post %{nil}"])
            .args(["--define", "debug_package %{nil}"])
            .args(["--define", "_build_id_links none"])
            .args(["--define", "_binary_payload w6.xzdio"])
            .arg(&spec_file)),
        "rpmbuild -bb",
    );
    walkdir::WalkDir::new(top.join("RPMS"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.path().extension().is_some_and(|x| x == "rpm"))
        .map(|e| e.into_path())
        .expect("rpmbuild wrote no .rpm")
}

const RPM_LIBDIR: &str = "usr/lib64";

/// The fat `.rpm`: the fixture library (gfx1100, gfx1201, gfx942), a
/// rocBLAS-style Tensile database for gfx1100 and gfx942, a provide, an
/// obsolete and scriptlets.
fn fat_rpm(dir: &Path) -> PathBuf {
    let lib = dir.join("tree").join(RPM_LIBDIR);
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(
        fixture("clang19/libaxpy_plain.so"),
        lib.join("libaxpy.so.1"),
    )
    .unwrap();
    std::os::unix::fs::symlink("libaxpy.so.1", lib.join("libaxpy.so")).unwrap();
    let db = lib.join("rocblas/library");
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
    build_rpm(
        dir,
        &format!(
            "Name: {NAME}\nVersion: 1.2\nRelease: 1\nSummary: axpy test library\nLicense: MIT\n\
             AutoReqProv: no\nRequires: glibc\nProvides: axpy-blas = 1.2\nObsoletes: libaxpy0 < 1.0\n\
             %description\nA library with GPU code for the kpack tests.\n\
             %install\ncp -a %{{_sourcedir}}/tree/. %{{buildroot}}/\n\
             %post\n/sbin/ldconfig\n%postun\n/sbin/ldconfig\n\
             %files\n/{RPM_LIBDIR}/libaxpy.so.1\n/{RPM_LIBDIR}/libaxpy.so\n\
             %dir /{RPM_LIBDIR}/rocblas\n/{RPM_LIBDIR}/rocblas/library\n"
        ),
    )
}

/// `kpack rpm split INPUT -o OUT ARGS... --json`: the one report.
fn rpm_split(input: &Path, out: &Path, args: &[&str]) -> serde_json::Value {
    let o = ok(
        run(Command::new(crate::util::KPACK)
            .env("XDG_CACHE_HOME", component_cache())
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .args(["rpm", "split"])
            .arg(input)
            .arg("-o")
            .arg(out)
            .args(args)
            .arg("--json")),
        "kpack rpm split",
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["packages"][0].clone()
}

/// `rpm -qp --qf FORMAT PKG`.
fn rpm_query(pkg: &Path, args: &[&str]) -> String {
    stdout(&ok(
        run(Command::new("rpm").arg("-qp").args(args).arg(pkg)),
        "rpm -qp",
    ))
}

/// `rpm` on a scratch root and database.
fn rpm_root(root: &Path, args: &[&std::ffi::OsStr]) -> Output {
    run(Command::new("rpm")
        .arg(format!("--root={}", root.display()))
        .arg(format!("--dbpath={}", root.join("db").display()))
        .args(args))
}

#[test]
fn rpm_split_installs_host_and_one_device_package_with_rpm() {
    let dir = fresh("rpm-install");
    let input = fat_rpm(&dir);
    let r = rpm_split(&input, &dir.join("out"), &["--split-databases", "rocblas"]);
    assert_eq!(r["format"], "rpm", "{r:#}");
    assert_eq!(r["version"], "1.2-1", "{r:#}");
    let host = file_of(&r["host"]);
    let dev = file_of(device(&r, "gfx1100"));
    let mut all = vec![host.clone(), file_of(&r["all"])];
    all.extend(r["devices"].as_array().unwrap().iter().map(file_of));
    assert_eq!(all.len(), 5, "{r:#}");
    for pkg in &all {
        rpm_query(pkg, &["-i"]);
        ok(
            run(Command::new("rpm").args(["-K", "--nosignature"]).arg(pkg)),
            "rpm -K",
        );
    }
    let requires = rpm_query(&host, &["-R"]);
    assert!(
        requires.contains("rocm-kpack") && requires.contains("glibc"),
        "{requires}"
    );
    let provides = rpm_query(&host, &["--provides", "--obsoletes", "--scripts"]);
    for want in ["axpy-blas = 1.2", "libaxpy0 < 1.0", "/sbin/ldconfig"] {
        assert!(provides.contains(want), "{want}: {provides}");
    }
    assert!(rpm_query(&dev, &["-R"]).contains(&format!("{NAME} = 1.2-1")));
    let dev_files = rpm_query(&dev, &["-l"]);
    assert!(
        dev_files.contains("TensileLibrary_gfx1100.co") && dev_files.contains(".kpack"),
        "{dev_files}"
    );
    assert!(!rpm_query(&host, &["-l"]).contains("TensileLibrary_gfx1100"));

    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    ok(rpm_root(&root, &["--initdb".as_ref()]), "rpm --initdb");
    let alone = rpm_root(
        &root,
        &["-i".as_ref(), "--noscripts".as_ref(), dev.as_os_str()],
    );
    assert!(
        !alone.status.success(),
        "the device package installed without its host"
    );
    assert!(
        stderr(&alone).contains("Failed dependencies"),
        "{}",
        stderr(&alone)
    );
    let loader = build_rpm(
        &dir.join("loader"),
        "Name: rocm-kpack\nVersion: 1.0\nRelease: 1\nSummary: stub loader\nLicense: MIT\n\
         BuildArch: noarch\nProvides: glibc /bin/sh\n%description\nStub.\n%files\n",
    );
    ok(
        rpm_root(
            &root,
            &[
                "-i".as_ref(),
                "--noscripts".as_ref(),
                loader.as_os_str(),
                host.as_os_str(),
                dev.as_os_str(),
            ],
        ),
        "rpm -i loader host device",
    );
    verify_gpu_passes(&root, "gfx1100");
    ok(
        rpm_root(
            &root,
            &[
                "-e".as_ref(),
                "--noscripts".as_ref(),
                "libaxpy1-gfx1100".as_ref(),
            ],
        ),
        "rpm -e",
    );
    assert!(root.join(RPM_LIBDIR).join("libaxpy.so.1").is_file());
    assert!(
        !root
            .join(RPM_LIBDIR)
            .join("rocblas/library/TensileLibrary_gfx1100.co")
            .exists()
    );
}

#[test]
fn rpm_split_databases_only_keeps_the_host_library() {
    let dir = fresh("rpm-databases-only");
    let input = fat_rpm(&dir);
    let r = rpm_split(
        &input,
        &dir.join("out"),
        &["--split-databases", "rocblas", "--databases-only"],
    );
    let keys: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["gfx1100", "gfx942"], "{r:#}");
    let host = file_of(&r["host"]);
    assert!(!rpm_query(&host, &["-R"]).contains("rocm-kpack"));
    let digest = |p: &Path| {
        rpm_query(p, &["--qf", "[%{FILENAMES} %{FILEDIGESTS}\n]"])
            .lines()
            .find(|l| l.contains("libaxpy.so.1 "))
            .map(str::to_string)
            .unwrap()
    };
    assert_eq!(digest(&host), digest(&input));
    let dev = rpm_query(&file_of(device(&r, "gfx942")), &["-l"]);
    assert!(
        dev.contains("TensileLibrary_Type_gfx942.dat") && !dev.contains(".kpack"),
        "{dev}"
    );
}

#[test]
fn rpm_split_writes_the_same_bytes_twice() {
    let dir = fresh("rpm-reproducible");
    let input = fat_rpm(&dir);
    let a = rpm_split(&input, &dir.join("a"), &["--split-databases", "rocblas"]);
    rpm_split(&input, &dir.join("b"), &["--split-databases", "rocblas"]);
    let mut n = 0;
    for f in std::fs::read_dir(dir.join("a")).unwrap() {
        let f = f.unwrap();
        assert_eq!(
            std::fs::read(f.path()).unwrap(),
            std::fs::read(dir.join("b").join(f.file_name())).unwrap(),
            "{:?}",
            f.file_name()
        );
        n += 1;
    }
    assert_eq!(n, 5);
    let gpus: Vec<&str> = a["per_gpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(gpus, ["gfx1100", "gfx1201", "gfx942"]);
    let owners = rpm_query(
        &file_of(&a["host"]),
        &["--qf", "[%{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEMTIMES}\n]"],
    );
    assert!(
        owners.lines().all(|l| l == "root:root 1700000000"),
        "{owners}"
    );
}

#[test]
fn rpm_split_rejects_a_file_that_is_not_a_package() {
    let dir = fresh("rpm-not-a-package");
    let input = dir.join("fake-1.0-1.x86_64.rpm");
    std::fs::write(&input, b"\xed\xab\xee\xdbnot really").unwrap();
    let o = kpack([
        "rpm".as_ref(),
        "split".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a valid rpm package"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("out").exists());
}
