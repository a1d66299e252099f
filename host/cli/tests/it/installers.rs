//! The real installers on kpack's split output (all pinned, installed by
//! `scripts/variant-venv.sh`): uv 0.13.9 with its wheel-variants preview,
//! pip 26.3, pip 23.2.1, and variantlib 0.2.2's own checks. One split of the
//! example wheel per grouping, with variant wheels, is shared by every test.
//!
//! What holds: every variant wheel passes variantlib's wheel-level check and
//! `variantlib generate-index-json` writes kpack's `*-variants.json`; uv and
//! both pips install the plain host from the folder holding the variant
//! wheels; uv selects a variant when a static provider stands in for
//! detection; `"fatpkg[$(kpack detect --format extras --for …)]"` installs
//! host and the right device wheels in all three installers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use kpack_tests::{stderr, stdout, workspace_root};

use crate::detect::{kpack_with, topology};
use crate::variant_provider::variant_python;

const EXAMPLE: &str = "tests/fixtures/examples/fatpkg-1.0-py3-none-linux_x86_64.whl";
const HOST: &str = "fatpkg-1.0-py3-none-linux_x86_64.whl";

/// `kpack wheel split --group G --variant-wheel` of the example wheel for
/// G in target, sub-family, family: `<dir>/<G>/`, made once.
pub(crate) fn split_output() -> &'static Path {
    static OUT: OnceLock<tempfile::TempDir> = OnceLock::new();
    OUT.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        for g in ["target", "sub-family", "family"] {
            let o = crate::wheel::kpack_env(
                &[
                    "wheel".as_ref(),
                    "split".as_ref(),
                    workspace_root().join(EXAMPLE).as_os_str(),
                    "-o".as_ref(),
                    tmp.path().join(g).as_os_str(),
                    "--group".as_ref(),
                    g.as_ref(),
                    "--variant-wheel".as_ref(),
                ],
                &[],
            );
            assert!(o.status.success(), "{g}: {}", stderr(&o));
        }
        tmp
    })
    .path()
}

/// The venv's `bin/`.
fn bin() -> PathBuf {
    variant_python().parent().unwrap().to_path_buf()
}

/// A fresh, empty environment made by uv (fast, no pip inside).
fn fresh_env(tmp: &Path, name: &str) -> PathBuf {
    let env = tmp.join(name);
    run(Command::new(bin().join("uv"))
        .args(["venv", "-q"])
        .arg(&env));
    env
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd
        .env(
            "UV_CACHE_DIR",
            std::env::temp_dir().join("kpack-tests-uv-cache"),
        )
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .expect("run installer");
    assert!(o.status.success(), "{cmd:?}:\n{}{}", stdout(&o), stderr(&o));
    o
}

/// The installers under test: `(name, command installing into ENV from
/// FOLDER, no index)`.
fn install(installer: &str, env: &Path, folder: &Path, spec: &str) -> Output {
    let py = env.join("bin/python");
    let mut cmd;
    match installer {
        "uv" => {
            cmd = Command::new(bin().join("uv"));
            cmd.args([
                "pip",
                "install",
                "--preview-features",
                "wheel-variants",
                "-p",
            ])
            .arg(&py);
        }
        "pip26" => {
            cmd = Command::new(bin().join("python"));
            cmd.args(["-m", "pip", "--python"]).arg(&py).arg("install");
        }
        _ => {
            let pip23 = bin().join("../../pip23-venv/bin/python");
            cmd = Command::new(pip23);
            cmd.args(["-m", "pip", "--python"]).arg(&py).arg("install");
        }
    }
    cmd.args(["-q", "--no-index", "--find-links"])
        .arg(folder)
        .arg(spec);
    run(&mut cmd)
}

/// The distributions installed in `env` (`.dist-info` names, sorted).
fn installed(env: &Path) -> Vec<String> {
    let lib = std::fs::read_dir(env.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut out: Vec<String> = std::fs::read_dir(lib.join("site-packages"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".dist-info").map(str::to_string)
        })
        .filter(|n| n.starts_with("fatpkg"))
        .collect();
    out.sort();
    out
}

#[test]
fn variant_wheels_pass_variantlibs_checks_and_its_index_is_kpacks() {
    let out = split_output();
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
import json, sys, zipfile, pathlib
from variantlib.variant_dist_info import VariantDistInfo
for w in sys.argv[1:]:
    label = pathlib.Path(w).stem.rsplit("-", 1)[1]
    with zipfile.ZipFile(w) as z:
        VariantDistInfo(z.read("fatpkg-1.0.dist-info/variant.json"), label)
    print(label)
"#;
    for g in ["target", "sub-family", "family"] {
        let variants: Vec<PathBuf> = std::fs::read_dir(out.join(g))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_str().unwrap();
                n.starts_with("fatpkg-1.0-py3-none-linux_x86_64-") && n.ends_with(".whl")
            })
            .collect();
        assert_eq!(variants.len(), 3, "{g}: {variants:?}");
        let o = run(Command::new(variant_python())
            .arg("-c")
            .arg(script)
            .args(&variants));
        assert_eq!(stdout(&o).lines().count(), 3, "{g}");
        // variantlib's index of the variant wheels alone is kpack's.
        let dir = tmp.path().join(g);
        std::fs::create_dir(&dir).unwrap();
        for v in &variants {
            std::fs::copy(v, dir.join(v.file_name().unwrap())).unwrap();
        }
        run(Command::new(bin().join("variantlib"))
            .args(["generate-index-json", "-d"])
            .arg(&dir));
        let read = |p: PathBuf| {
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            v.as_object_mut().unwrap().remove("$schema");
            v
        };
        assert_eq!(
            read(dir.join("fatpkg-1.0-variants.json")),
            read(out.join(g).join("fatpkg-1.0-variants.json")),
            "{g}"
        );
    }
}

/// Without a provider it vendors, uv installs the plain host (exit 0);
/// both pips skip the variant wheels and the JSON alike. With a static
/// provider standing in for a gfx1100, uv selects the gfx1100 variant and
/// its device wheel.
#[test]
fn installers_take_the_plain_host_and_uv_a_variant_when_a_provider_answers() {
    let out = split_output().join("target");
    let tmp = tempfile::tempdir().unwrap();
    for installer in ["uv", "pip26", "pip23"] {
        let env = fresh_env(tmp.path(), installer);
        install(installer, &env, &out, "fatpkg");
        assert_eq!(installed(&env), ["fatpkg-1.0"], "{installer}");
    }
    let stand_in = tmp.path().join("static");
    std::fs::create_dir(&stand_in).unwrap();
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, stand_in.join(p.file_name().unwrap())).unwrap();
    }
    run(Command::new("python3")
        .arg(workspace_root().join("python/variant-provider/tests/static_stand_in.py"))
        .arg(&stand_in)
        .arg("gfx1100"));
    let env = fresh_env(tmp.path(), "uv-static");
    let o = install("uv", &env, &stand_in, "fatpkg");
    assert_eq!(
        installed(&env),
        ["fatpkg-1.0", "fatpkg_device_gfx1100-1.0"],
        "{}",
        stderr(&o)
    );
}

/// `kpack detect --format extras --for HOST` on one-GPU and two-GPU
/// machines, split by target and by sub-family: one line that every
/// installer takes, installing host and exactly the right device wheels.
#[test]
fn detected_extras_install_the_right_device_wheels_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    topology(&one, &[110000]);
    topology(&two, &[110000, 90402]);
    // (machine, grouping, extras, device wheels); every installer on each.
    let cases = [
        (&one, "target", "device-gfx1100", &["gfx1100"][..]),
        (&one, "sub-family", "device-gfx110x", &["gfx110x"]),
        (
            &two,
            "target",
            "device-gfx1100,device-gfx942",
            &["gfx1100", "gfx942"],
        ),
        (
            &two,
            "sub-family",
            "device-gfx110x,device-gfx9-4",
            &["gfx110x", "gfx9_4"],
        ),
    ];
    for (n, (root, group, want, devices)) in cases.into_iter().enumerate() {
        let folder = split_output().join(group);
        let o = kpack_with(
            &[
                "detect".as_ref(),
                "--format".as_ref(),
                "extras".as_ref(),
                "--for".as_ref(),
                folder.join(HOST).as_os_str(),
            ],
            &[("KPACK_SYSFS_ROOT", root.as_os_str())],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), format!("{want}\n"), "{root:?} {group}");
        let mut expect = vec!["fatpkg-1.0".to_string()];
        expect.extend(devices.iter().map(|d| format!("fatpkg_device_{d}-1.0")));
        for installer in ["uv", "pip26", "pip23"] {
            let env = fresh_env(tmp.path(), &format!("{n}-{installer}"));
            install(installer, &env, &folder, &format!("fatpkg[{want}]"));
            assert_eq!(installed(&env), expect, "{installer} {root:?} {group}");
        }
    }
}

/// `--for NAME --index DIR` finds the host wheel among the outputs; a GPU
/// the package was not built for is named, and the exit code is 1.
#[test]
fn extras_for_a_name_say_which_gpu_was_left_out() {
    let folder = split_output().join("family");
    let o = kpack_with(
        &[
            "detect".as_ref(),
            "--format".as_ref(),
            "extras".as_ref(),
            "--for".as_ref(),
            "fatpkg".as_ref(),
            "--index".as_ref(),
            folder.as_os_str(),
        ],
        &[("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1151,gfx1030".as_ref())],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "device-gfx11\n");
    assert!(
        stderr(&o).contains("warning: fatpkg 1.0 was not built for gfx1030: it provides device-gfx11, device-gfx12, device-gfx9"),
        "{}",
        stderr(&o)
    );
}

/// `kpack install` prints the installer command it runs and installs host
/// and device wheel.
#[test]
fn kpack_install_runs_the_installer_with_the_extras() {
    let folder = split_output().join("sub-family");
    let tmp = tempfile::tempdir().unwrap();
    let env = fresh_env(tmp.path(), "install");
    let path = format!(
        "{}:{}",
        bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = kpack_with(
        &[
            "install".as_ref(),
            "fatpkg".as_ref(),
            "--index".as_ref(),
            folder.as_os_str(),
            "--installer".as_ref(),
            "uv".as_ref(),
            "--".as_ref(),
            "-p".as_ref(),
            env.join("bin/python").as_os_str(),
            "--no-index".as_ref(),
        ],
        &[
            ("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1101".as_ref()),
            ("PATH", path.as_ref()),
            (
                "UV_CACHE_DIR",
                std::env::temp_dir()
                    .join("kpack-tests-uv-cache")
                    .as_os_str(),
            ),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The host wheel is named by a direct reference to its file.
    let host = folder.join("fatpkg-1.0-py3-none-linux_x86_64.whl");
    assert!(
        stderr(&o).contains(&format!(
            "+ uv pip install --find-links {} fatpkg[device-gfx110x] @ file://{} -p",
            folder.display(),
            host.display()
        )),
        "{}",
        stderr(&o)
    );
    assert_eq!(installed(&env), ["fatpkg-1.0", "fatpkg_device_gfx110x-1.0"]);
}

/// An index holding the fat wheel of the same version (PyPI, for a real
/// package) does not win over the split host wheel `kpack install` was
/// given: pip takes the host from its file and installs the device wheel
/// (pip 26 prefers the index's wheel of an equal version otherwise).
#[test]
fn a_fat_wheel_of_the_same_version_on_the_index_is_never_installed_instead() {
    let folder = split_output().join("sub-family");
    let tmp = tempfile::tempdir().unwrap();
    let fat = tmp.path().join("fat");
    std::fs::create_dir_all(&fat).unwrap();
    let example = workspace_root().join(EXAMPLE);
    std::fs::copy(&example, fat.join(example.file_name().unwrap())).unwrap();
    simple_index(&fat, &tmp.path().join("index"));
    let index = format!("file://{}/", tmp.path().join("index/simple").display());
    let site = tmp.path().join("site");
    let o = kpack_with(
        &[
            "install".as_ref(),
            folder.as_os_str(),
            "--".as_ref(),
            "-q".as_ref(),
            "--target".as_ref(),
            site.as_os_str(),
            "--index-url".as_ref(),
            index.as_ref(),
        ],
        &[
            ("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1101".as_ref()),
            ("PYTHON", bin().join("python").as_os_str()),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1".as_ref()),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut got: Vec<String> = std::fs::read_dir(&site)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".dist-info").map(str::to_string)
        })
        .collect();
    got.sort();
    assert_eq!(got, ["fatpkg-1.0", "fatpkg_device_gfx110x-1.0"]);
}

/// A PEP 503 simple index of `folder` under `root/simple/`: one page per
/// project, linking its wheels and its `*-variants.json` in `root/files/`.
fn simple_index(folder: &Path, root: &Path) {
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let mut pages: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for e in std::fs::read_dir(folder).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        std::fs::copy(folder.join(&name), files.join(&name)).unwrap();
        let project = name.split('-').next().unwrap().replace('_', "-");
        pages.entry(project).or_default().push(name);
    }
    for (project, names) in pages {
        let dir = root.join("simple").join(&project);
        std::fs::create_dir_all(&dir).unwrap();
        let links: String = names
            .iter()
            .map(|n| format!("<a href=\"../../files/{n}\">{n}</a><br>\n"))
            .collect();
        std::fs::write(
            dir.join("index.html"),
            format!("<html><body>\n{links}</body></html>\n"),
        )
        .unwrap();
    }
}

/// A static file server on loopback for `root` (python's http.server),
/// stopped when dropped.
struct Server(std::process::Child, String);

impl Server {
    fn start(root: &Path) -> Server {
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                "0",
                "--directory",
            ])
            .arg(root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        // "Serving HTTP on 127.0.0.1 port 43210 (http://127.0.0.1:43210/) ..."
        let port = line
            .split(" port ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        Server(child, format!("http://127.0.0.1:{port}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// From a simple index served over HTTP: `--for NAME --index URL` reads
/// the host wheel's extras, uv's preview reads the `*-variants.json` on the
/// project page and still installs host and device wheel by the extra, and
/// after a host-only install `verify --gpu auto` names the extra to add.
#[test]
fn an_index_url_serves_extras_variants_and_the_doctor_names_the_extra() {
    let tmp = tempfile::tempdir().unwrap();
    simple_index(&split_output().join("sub-family"), tmp.path());
    let server = Server::start(tmp.path());
    let simple = format!("{}/simple", server.1);
    let force = [("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1101".as_ref())];
    let o = kpack_with(
        &[
            "detect".as_ref(),
            "--format".as_ref(),
            "extras".as_ref(),
            "--for".as_ref(),
            "fatpkg".as_ref(),
            "--index".as_ref(),
            simple.as_ref(),
        ],
        &force,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "device-gfx110x\n");
    let env = fresh_env(tmp.path(), "from-index");
    let mut uv = Command::new(bin().join("uv"));
    uv.args([
        "pip",
        "install",
        "--preview-features",
        "wheel-variants",
        "-q",
        "-p",
    ])
    .arg(env.join("bin/python"))
    .args(["--index-url", &simple, "fatpkg[device-gfx110x]"]);
    run(&mut uv);
    assert_eq!(installed(&env), ["fatpkg-1.0", "fatpkg_device_gfx110x-1.0"]);
    // The plain host alone: the doctor says which extra brings the code.
    let host_only = fresh_env(tmp.path(), "host-only");
    let mut uv = Command::new(bin().join("uv"));
    uv.args(["pip", "install", "-q", "-p"])
        .arg(host_only.join("bin/python"))
        .args(["--index-url", &simple, "fatpkg"]);
    run(&mut uv);
    let site = std::fs::read_dir(host_only.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let o = kpack_with(
        &[
            "verify".as_ref(),
            "--gpu".as_ref(),
            "auto".as_ref(),
            site.join("site-packages").as_os_str(),
        ],
        &force,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains("pip install 'fatpkg[device-gfx110x]'"),
        "{text}"
    );
}

/// AMD's layout keeps AMD's one variant wheel unless a provider is named;
/// `--provider rocm-bootstrap` writes the PEP 850 layout, one wheel per
/// target naming rocm-bootstrap, which variantlib's wheel check accepts.
#[test]
fn amds_layout_writes_the_pep_850_layout_when_a_provider_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let split = |out: &Path, extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "wheel".as_ref(),
            "split".as_ref(),
            EXAMPLE.as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            "--overlay-root".as_ref(),
            "fatpkg".as_ref(),
            "--device-package-prefix".as_ref(),
            "fatpkg-device".as_ref(),
            "--generate-variant-wheel".as_ref(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let o = Command::new(crate::util::KPACK)
            .args(&args)
            .current_dir(workspace_root())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let mut names: Vec<String> = std::fs::read_dir(out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("fatpkg-"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        split(&tmp.path().join("amd"), &[]),
        ["fatpkg-1.0-py3-none-linux_x86_64-variant.whl", HOST]
    );
    let pep850 = tmp.path().join("pep850");
    assert_eq!(
        split(&pep850, &["--provider", "rocm-bootstrap"]),
        [
            "fatpkg-1.0-py3-none-linux_x86_64-gfx1100.whl",
            "fatpkg-1.0-py3-none-linux_x86_64-gfx1201.whl",
            "fatpkg-1.0-py3-none-linux_x86_64-gfx942.whl",
            HOST,
            "fatpkg-1.0-variants.json",
        ]
    );
    let script = r#"
import sys, zipfile
from variantlib.variant_dist_info import VariantDistInfo
with zipfile.ZipFile(sys.argv[1]) as z:
    v = VariantDistInfo(z.read("fatpkg-1.0.dist-info/variant.json"), "gfx1100")
    print(v.providers["amd"].plugin_api)
    print(z.read("fatpkg-1.0.dist-info/METADATA").decode())
"#;
    let o = run(Command::new(variant_python())
        .arg("-c")
        .arg(script)
        .arg(pep850.join("fatpkg-1.0-py3-none-linux_x86_64-gfx1100.whl")));
    let text = stdout(&o);
    assert!(
        text.starts_with("rocm_bootstrap.variant_provider:AMDVariantPlugin\n"),
        "{text}"
    );
    assert!(
        text.contains("\nRequires-Dist: rocm-bootstrap >= 0.3.0\n"),
        "{text}"
    );
    assert!(
        text.contains("\nRequires-Dist: fatpkg-device-gfx1100 == 1.0\n"),
        "{text}"
    );
    assert!(!text.contains("variant_properties"), "{text}");
}
