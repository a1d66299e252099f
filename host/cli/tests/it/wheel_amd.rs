//! `kpack wheel split` with AMD's `split_python_wheels` flags
//! (`--overlay-root`): AMD's layout (one archive per target id for the
//! whole wheel in `<overlay root>/.kpack/`, markers naming
//! `<name>_@GFXARCH@.kpack`), AMD's names and METADATA, parent wheels for
//! database files a handler files under a family, pip resolving a target
//! wheel to its parent, `kpack verify --gpu` on the installed tree, and
//! the inputs refused before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_format::{Archive, Marker};
use kpack_tests::{fixture, stderr};

use crate::util::{KPACK, Venv, verify_gpu_passes};
use crate::wheel::{build_fat_wheel, kpack_env, read_wheel};

const HOST_DI: &str = "fatpkg-1.0.dist-info";
const TAGS: &str = "1.0-py3-none-linux_x86_64.whl";

/// A fat wheel of clang-19 libraries under `fatpkg/` (gfx942 with its
/// xnack variants, gfx1100, gfx1201; one binary at the overlay root
/// itself), AOTriton images for the gfx11 family and for gfx942, and a
/// file outside the overlay root.
fn fat_files() -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut f = BTreeMap::new();
    let mut add = |p: &str, b: Vec<u8>, m: u32| {
        f.insert(p.to_string(), (b, m));
    };
    for (p, fx) in [
        ("fatpkg/lib/libplain.so", "clang19/libaxpy_plain.so"),
        ("fatpkg/lib/libxnack.so", "clang19/libaxpy_xnack.so"),
        ("fatpkg/lib2tu.so", "clang19/lib2tu_plain.so"),
    ] {
        add(p, std::fs::read(fixture(fx)).unwrap(), 0o755);
    }
    add("fatpkg/__init__.py", b"".to_vec(), 0o644);
    let images = "fatpkg/lib/aotriton.images";
    add(
        &format!("{images}/amd-gfx11xx/flash/attn.aks2"),
        b"gfx11 images".to_vec(),
        0o644,
    );
    add(
        &format!("{images}/amd-gfx942/flash/attn.aks2"),
        b"gfx942 images".to_vec(),
        0o644,
    );
    add(
        "fatpkg_data/notes.txt",
        b"outside the overlay".to_vec(),
        0o644,
    );
    add(
        &format!("{HOST_DI}/METADATA"),
        b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\nSummary: a fat test package\n\nThe description.\n".to_vec(),
        0o644,
    );
    add(
        &format!("{HOST_DI}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n".to_vec(),
        0o644,
    );
    f
}

/// AMD's invocation as TheRock writes it, program name changed.
fn amd_args(input: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "wheel",
        "split",
        "--input",
        input.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "fatpkg-device",
        "--overlay-root",
        "fatpkg/",
        "--wheel-type",
        "torch-fat",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn amd_split(input: &Path, out: &Path, extra: &[&str]) -> Output {
    kpack_env(&amd_args(input, out, extra), &[])
}

/// The wheels in `dir`, by file name.
fn wheels(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn text(w: &BTreeMap<String, (Vec<u8>, u32)>, path: &str) -> String {
    String::from_utf8(w[path].0.clone()).unwrap()
}

#[test]
fn writes_amds_layout_names_and_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let o = amd_split(
        &fat,
        &out,
        &["--device-requires-dist", "rocm-sdk-device-@GFXARCH@ == 7.1"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        wheels(&out),
        [
            format!("fatpkg-{TAGS}"),
            format!("fatpkg_device_gfx11-{TAGS}"),
            format!("fatpkg_device_gfx1100-{TAGS}"),
            format!("fatpkg_device_gfx1201-{TAGS}"),
            format!("fatpkg_device_gfx942-{TAGS}"),
        ]
    );
    // The processor's wheel: one archive per target id, its images.
    let gfx942 = read_wheel(&out.join(format!("fatpkg_device_gfx942-{TAGS}")));
    let di = "fatpkg_device_gfx942-1.0.dist-info";
    let paths: Vec<&str> = gfx942.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "fatpkg/.kpack/fatpkg_gfx942.kpack",
            "fatpkg/.kpack/fatpkg_gfx942:xnack+.kpack",
            "fatpkg/.kpack/fatpkg_gfx942:xnack-.kpack",
            "fatpkg/lib/aotriton.images/amd-gfx942/flash/attn.aks2",
            &format!("{di}/METADATA"),
            &format!("{di}/RECORD"),
            &format!("{di}/WHEEL"),
            &format!("{di}/top_level.txt"),
        ]
    );
    assert_eq!(
        text(&gfx942, &format!("{di}/METADATA")),
        "Metadata-Version: 2.4\nName: fatpkg-device-gfx942\nVersion: 1.0\n\
         Summary: AMD device kernels (gfx942) for fatpkg\nRequires-Dist: fatpkg == 1.0\n\
         Requires-Dist: rocm-sdk-device-gfx942 == 7.1\n"
    );
    assert_eq!(
        text(&gfx942, &format!("{di}/WHEEL")),
        "Wheel-Version: 1.0\nGenerator: rocm-kpack-split-python-wheels\n\
         Root-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
    );
    assert_eq!(text(&gfx942, &format!("{di}/top_level.txt")), "fatpkg\n");
    // The archive for the whole wheel: every binary's gfx942:xnack+ code.
    let dir = tempfile::tempdir().unwrap();
    let plus = dir.path().join("plus.kpack");
    std::fs::write(&plus, &gfx942["fatpkg/.kpack/fatpkg_gfx942:xnack+.kpack"].0).unwrap();
    let a = Archive::open(&plus).unwrap();
    assert_eq!(a.group_name(), "fatpkg");
    assert_eq!(a.gfx_arch_family(), "gfx942:xnack+");
    assert_eq!(a.arches(), ["gfx942:xnack+"]);
    let keys: Vec<&str> = a.entries().map(|e| e.key()).collect();
    assert_eq!(keys, ["lib/libxnack.so#0"]);
    let plain = dir.path().join("plain.kpack");
    std::fs::write(&plain, &gfx942["fatpkg/.kpack/fatpkg_gfx942.kpack"].0).unwrap();
    let keys: Vec<String> = Archive::open(&plain)
        .unwrap()
        .entries()
        .map(|e| e.key().to_string())
        .collect();
    assert_eq!(keys, ["lib/libplain.so#0", "lib2tu.so#0", "lib2tu.so#1"]);

    // The family's images are a parent wheel, which the target requires;
    // @GFXARCH@ requirements are for target wheels only.
    let gfx11 = read_wheel(&out.join(format!("fatpkg_device_gfx11-{TAGS}")));
    assert_eq!(
        text(&gfx11, "fatpkg_device_gfx11-1.0.dist-info/METADATA"),
        "Metadata-Version: 2.4\nName: fatpkg-device-gfx11\nVersion: 1.0\n\
         Summary: AMD device kernels (RDNA3) for fatpkg\nRequires-Dist: fatpkg == 1.0\n"
    );
    assert!(gfx11.contains_key("fatpkg/lib/aotriton.images/amd-gfx11xx/flash/attn.aks2"));
    let gfx1100 = read_wheel(&out.join(format!("fatpkg_device_gfx1100-{TAGS}")));
    assert!(
        text(&gfx1100, "fatpkg_device_gfx1100-1.0.dist-info/METADATA").ends_with(
            "Requires-Dist: fatpkg == 1.0\nRequires-Dist: rocm-sdk-device-gfx1100 == 7.1\n\
             Requires-Dist: fatpkg-device-gfx11 == 1.0\n"
        )
    );
    check_host(&read_wheel(&out.join(format!("fatpkg-{TAGS}"))));
}

/// The host wheel: AMD's lines inserted before the description, markers
/// naming the wheel's archives relative to each binary, the images moved
/// out, the file outside the overlay root kept.
fn check_host(host: &BTreeMap<String, (Vec<u8>, u32)>) {
    assert_eq!(
        text(host, &format!("{HOST_DI}/METADATA")),
        "Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\nSummary: a fat test package\n\
         Requires-Dist: rocm-bootstrap >= 0.3.0\n\
         Provides-Extra: device-gfx1100\n\
         Requires-Dist: fatpkg-device-gfx1100 == 1.0; extra == \"device-gfx1100\"\n\
         Requires-Dist: fatpkg-device-gfx11 == 1.0; extra == \"device-gfx1100\"\n\
         Provides-Extra: device-gfx1201\n\
         Requires-Dist: fatpkg-device-gfx1201 == 1.0; extra == \"device-gfx1201\"\n\
         Provides-Extra: device-gfx942\n\
         Requires-Dist: fatpkg-device-gfx942 == 1.0; extra == \"device-gfx942\"\n\
         Provides-Extra: device-all\n\
         Requires-Dist: fatpkg-device-gfx11 == 1.0; extra == \"device-all\"\n\
         Requires-Dist: fatpkg-device-gfx1100 == 1.0; extra == \"device-all\"\n\
         Requires-Dist: fatpkg-device-gfx1201 == 1.0; extra == \"device-all\"\n\
         Requires-Dist: fatpkg-device-gfx942 == 1.0; extra == \"device-all\"\n\
         \nThe description.\n"
    );
    assert!(!host.keys().any(|p| p.contains("aotriton")));
    assert_eq!(host["fatpkg_data/notes.txt"].0, b"outside the overlay");
    let dir = tempfile::tempdir().unwrap();
    for (path, kernel, search) in [
        (
            "fatpkg/lib/libxnack.so",
            "lib/libxnack.so",
            "../.kpack/fatpkg_@GFXARCH@.kpack",
        ),
        (
            "fatpkg/lib2tu.so",
            "lib2tu.so",
            ".kpack/fatpkg_@GFXARCH@.kpack",
        ),
    ] {
        let p = dir.path().join("bin.so");
        std::fs::write(&p, &host[path].0).unwrap();
        let m = marker_of(&p);
        assert_eq!(m.kernel_name, kernel, "{path}");
        assert_eq!(m.search_paths, [search], "{path}");
    }
}

fn marker_of(binary: &Path) -> Marker {
    use kpack_bundle::ReadAt;
    let walk = kpack_bundle::WalkOptions { verify_hash: true };
    let fat = kpack_elf::read_fat_binary(binary, walk).unwrap();
    let sec = fat.marker.unwrap();
    let mut bytes = vec![0u8; sec.size as usize];
    fat.source.read_exact_at(sec.offset, &mut bytes).unwrap();
    Marker::parse(&bytes).unwrap()
}

/// A stand-in for rocm-bootstrap (the host wheel requires it), so pip
/// resolves from a local directory only.
fn stub_rocm_bootstrap(dir: &Path) {
    let path = dir.join("rocm_bootstrap-0.3.0-py3-none-any.whl");
    let di = "rocm_bootstrap-0.3.0.dist-info";
    let files = [
        ("rocm_bootstrap/__init__.py", "".to_string()),
        (
            &format!("{di}/METADATA") as &str,
            "Metadata-Version: 2.1\nName: rocm-bootstrap\nVersion: 0.3.0\n".to_string(),
        ),
        (
            &format!("{di}/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: kpack-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_string(),
        ),
    ];
    let members = files.iter().map(|(p, b)| (*p, b.as_bytes(), 0o644));
    crate::util::write_wheel(&path, di, members);
}

/// `python -m kpack` (this checkout's package, this build's binary).
fn python_kpack(args: &[String]) -> Output {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    Command::new("python3")
        .arg("-m")
        .arg("kpack")
        .args(args)
        .env("PYTHONPATH", python)
        .env("KPACK_BIN", KPACK)
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", crate::util::component_cache())
        .output()
        .unwrap()
}

#[test]
fn pip_installs_a_target_wheel_with_its_parent_and_verify_gpu_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let o = python_kpack(&amd_args(&fat, &out, &["-j", "1"]));
    assert!(o.status.success(), "python -m kpack:\n{}", stderr(&o));
    stub_rocm_bootstrap(&out);
    let venv = Venv::create(tmp.path());
    venv.install_from(&out, "fatpkg-device-gfx1100");
    let installed = venv.installed("fatpkg");
    // The target pulls its host and its family's parent wheel.
    assert_eq!(
        installed,
        [
            "fatpkg-device-gfx1100==1.0",
            "fatpkg-device-gfx11==1.0",
            "fatpkg==1.0"
        ]
    );
    let site = venv.platlib();
    assert!(
        site.join("fatpkg/lib/aotriton.images/amd-gfx11xx/flash/attn.aks2")
            .is_file()
    );
    assert!(site.join("fatpkg/.kpack/fatpkg_gfx1100.kpack").is_file());
    verify_gpu_passes(&site, "gfx1100");
    // The host's extra installs the processor's wheel with its variants.
    venv.install_from(&out, "fatpkg[device-gfx942]");
    // A gfx942 reports xnack+ or xnack-: libxnack.so has code for each only.
    for gpu in ["gfx942:xnack+", "gfx942:xnack-"] {
        verify_gpu_passes(&site, gpu);
    }
}

#[test]
fn same_bytes_at_any_thread_count_from_a_directory_and_as_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    assert!(amd_split(&fat, &a, &["-j", "1"]).status.success());
    assert!(amd_split(&fat, &b, &["--jobs", "4"]).status.success());
    for w in wheels(&a) {
        assert_eq!(
            std::fs::read(a.join(&w)).unwrap(),
            std::fs::read(b.join(&w)).unwrap(),
            "{w}"
        );
    }
    // AMD's unpacked-wheel input gives the same device wheels.
    let unpacked = tmp.path().join("unpacked");
    let mut z = zip::ZipArchive::new(std::fs::File::open(&fat).unwrap()).unwrap();
    z.extract(&unpacked).unwrap();
    let u = tmp.path().join("u");
    let o = amd_split(&unpacked, &u, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(wheels(&u), wheels(&a));
    for w in wheels(&a).iter().filter(|w| w.contains("_device_")) {
        assert_eq!(
            std::fs::read(a.join(w)).unwrap(),
            std::fs::read(u.join(w)).unwrap(),
            "{w}"
        );
    }
    let d = tmp.path().join("d");
    let o = amd_split(&fat, &d, &["--output-format", "directory"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dirs = wheels(&d);
    let expected: Vec<String> = wheels(&a)
        .iter()
        .map(|w| w.trim_end_matches(".whl").to_string())
        .collect();
    assert_eq!(dirs, expected);
    let in_dir = d.join(format!(
        "fatpkg_device_gfx942-{}",
        TAGS.trim_end_matches(".whl")
    ));
    assert!(
        in_dir
            .join("fatpkg/.kpack/fatpkg_gfx942:xnack+.kpack")
            .is_file()
    );
    assert!(
        in_dir
            .join("fatpkg_device_gfx942-1.0.dist-info/RECORD")
            .is_file()
    );
}

/// Bad inputs are exit 2 with one line saying what is wrong, and nothing
/// is written (not even the output directory).
#[test]
fn refuses_bad_amd_inputs_before_writing_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    let amd = |extra: &[&str], overlay: &str, prefix: &str| -> Output {
        let mut a = amd_args(&fat, &out, extra);
        let at = |flag: &str, a: &Vec<String>| a.iter().position(|x| x == flag).unwrap() + 1;
        let i = at("--overlay-root", &a);
        a[i] = overlay.into();
        let i = at("--device-package-prefix", &a);
        a[i] = prefix.into();
        kpack_env(&a, &[])
    };
    let cases: Vec<(Output, &str)> = vec![
        (
            amd(&[], "nosuchdir/", "fatpkg-device"),
            "overlay root 'nosuchdir' does not exist in wheel",
        ),
        (
            amd(&[], "fatpkg-1.0.dist-info", "fatpkg-device"),
            "does not exist in wheel",
        ),
        (
            amd(&[], "../x", "fatpkg-device"),
            "is not a directory path inside the wheel",
        ),
        (
            amd(&[], "fatpkg/", "bad prefix!"),
            "is not a valid distribution name",
        ),
        (
            amd(
                &["--device-requires-dist", "rocm-sdk == 7.1"],
                "fatpkg/",
                "fatpkg-device",
            ),
            "holds @GFXARCH@ 0 times",
        ),
        (
            amd(&["--group", "family"], "fatpkg/", "fatpkg-device"),
            "--group",
        ),
        (
            amd(&["--archive-group", "family"], "fatpkg/", "fatpkg-device"),
            "--archive-group",
        ),
        (
            amd(&["--compression", "zstd-delta"], "fatpkg/", "fatpkg-device"),
            "zstd-delta",
        ),
        (
            kpack_env(
                &[
                    "wheel",
                    "split",
                    fat.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                    "--device-requires-dist",
                    "x-@GFXARCH@",
                ],
                &[],
            ),
            "--device-requires-dist needs --overlay-root",
        ),
        (
            kpack_env(
                &[
                    "wheel",
                    "split",
                    "--input",
                    fat.to_str().unwrap(),
                    "--output-dir",
                    out.to_str().unwrap(),
                    "--overlay-root",
                    "fatpkg",
                ],
                &[],
            ),
            "--overlay-root needs --device-package-prefix",
        ),
    ];
    for (o, want) in cases {
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "want {want:?} in:\n{err}");
        assert!(!out.exists(), "{want}: output written");
    }
    assert_eq!(leftovers(tmp.path()), [fat]);
}

/// Everything in `dir` (one level).
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Split output in AMD's layout is never split again: a device wheel by
/// its WHEEL `Generator`, a host wheel by its offloaded binaries.
#[test]
fn refuses_to_split_its_amd_output_again() {
    let tmp = tempfile::tempdir().unwrap();
    let fat = build_fat_wheel(tmp.path(), &fat_files());
    let out = tmp.path().join("out");
    assert!(amd_split(&fat, &out, &[]).status.success());
    for (w, want) in [
        (
            format!("fatpkg_device_gfx942-{TAGS}"),
            "Generator: rocm-kpack-split-python-wheels",
        ),
        (format!("fatpkg-{TAGS}"), "already offloaded"),
    ] {
        let again = tmp.path().join("again");
        let o = amd_split(&out.join(&w), &again, &[]);
        assert_eq!(o.status.code(), Some(2), "{w}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{w}: {}", stderr(&o));
        assert!(!again.exists());
    }
}
