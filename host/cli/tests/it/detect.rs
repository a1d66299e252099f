//! `kpack detect` on fake KFD topologies, and `auto` wherever targets are
//! taken (`verify --gpu auto` is the doctor).

use std::path::Path;
use std::process::{Command, Output};

use kpack_tests::{fixture, stderr, stdout};

use crate::util::KPACK;

const NODES: &str = "class/kfd/kfd/topology/nodes";

/// A sysfs root whose KFD topology holds a CPU node then one GPU node per
/// `gfx_target_version`.
pub(crate) fn topology(root: &Path, versions: &[u64]) {
    let cpu = root.join(NODES).join("0");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(
        cpu.join("properties"),
        "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n",
    )
    .unwrap();
    for (i, v) in versions.iter().enumerate() {
        let d = root.join(NODES).join((i + 1).to_string());
        std::fs::create_dir_all(&d).unwrap();
        let props = format!(
            "cpu_cores_count 0\nsimd_count 96\ngfx_target_version {v}\ndevice_id 29772\ngpu_id {}\n",
            1000 + i
        );
        std::fs::write(d.join("properties"), props).unwrap();
    }
}

/// `kpack ARGS` with only `env` among the detection variables.
pub(crate) fn kpack_with(args: &[&std::ffi::OsStr], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let mut cmd = Command::new(KPACK);
    cmd.args(args)
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
        .env_remove("KPACK_SYSFS_ROOT")
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .env("XDG_CACHE_HOME", crate::util::component_cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run kpack")
}

fn detect(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["detect".as_ref(), "--sysfs-root".as_ref()];
    args.push(root.as_os_str());
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_ref())).collect();
    kpack_with(&args, &env)
}

#[test]
fn no_kfd_is_no_gpus_and_exit_0() {
    let root = tempfile::tempdir().unwrap();
    let o = detect(root.path(), &["--plain"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(stderr(&o).contains("no KFD topology"), "{}", stderr(&o));
    let o = detect(root.path(), &["--json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["targets"], serde_json::json!([]));
    assert_eq!(v["detection"]["source"], "no-kfd");
}

#[test]
fn cpu_only_and_two_different_gpus() {
    let root = tempfile::tempdir().unwrap();
    topology(root.path(), &[]);
    let o = detect(root.path(), &["--plain"], &[]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), ""));

    let root = tempfile::tempdir().unwrap();
    topology(root.path(), &[90010, 110001, 90010]);
    let o = detect(root.path(), &["--plain"], &[]);
    assert_eq!(stdout(&o), "gfx90a\ngfx1101\n", "{}", stderr(&o));
    let o = detect(root.path(), &["--chain"], &[]);
    assert_eq!(stdout(&o), "gfx90a gfx9_0 gfx9\ngfx1101 gfx110x gfx11\n");
    let o = detect(root.path(), &[], &[]);
    let text = stdout(&o);
    assert!(
        text.contains("node 1: gfx90a  PCI 0x744c  gpu_id 1000\n"),
        "{text}"
    );
    assert!(
        text.contains("  packages: gfx1101 -> gfx110x -> gfx11\n"),
        "{text}"
    );
    let o = detect(root.path(), &["--json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["targets"], serde_json::json!(["gfx90a", "gfx1101"]));
    assert_eq!(v["detection"]["gpus"][2]["node"], 3);
    assert_eq!(v["detection"]["gpus"][1]["chain"]["sub_family"], "gfx110x");
    assert_eq!(v["detection"]["gpus"][1]["gfx_target_version"], 110001);
}

#[test]
fn honours_rocm_bootstraps_overrides() {
    let root = tempfile::tempdir().unwrap();
    topology(root.path(), &[90010]);
    let force = [("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx942,gfx1100")];
    let o = detect(root.path(), &["--plain"], &force);
    assert_eq!(stdout(&o), "gfx942\ngfx1100\n", "{}", stderr(&o));
    assert!(stderr(&o).contains("ROCM_BOOTSTRAP_FORCE_GFX_ARCH"));
    let o = detect(
        root.path(),
        &["--plain"],
        &[force[0], ("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")],
    );
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), ""));
    let o = detect(
        root.path(),
        &["--plain"],
        &[("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx942,bogus")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("\"bogus\" is not a GPU target"),
        "{}",
        stderr(&o)
    );
}

/// `--gpu auto` on an installed host wheel of a sub-family split: the
/// doctor names the machine's GPUs, what loads, and the exact pip command;
/// exit 1 until the device wheel is installed.
#[test]
fn verify_gpu_auto_is_the_doctor() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, site) = crate::verify_gpu::split_and_install_host(tmp.path());
    let sysfs = tmp.path().join("sys");
    topology(&sysfs, &[110000]);
    let env = [("KPACK_SYSFS_ROOT", sysfs.as_os_str())];
    let args = [
        "verify".as_ref(),
        "--gpu".as_ref(),
        "auto".as_ref(),
        site.as_os_str(),
    ];
    let o = kpack_with(&args, &env);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("This machine: node 1 is gfx1100 (packages gfx1100 -> gfx110x -> gfx11)"),
        "{text}"
    );
    assert!(
        text.contains(
            "To fill the gap:\n  the device wheel fatpkg-device-gfx110x provides it: pip install 'fatpkg[device-gfx110x]'\n"
        ),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json".as_ref());
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&kpack_with(&json_args, &env))).unwrap();
    assert_eq!(v["targets"], serde_json::json!(["gfx1100"]));
    assert!(v["missing"].as_u64().unwrap() > 0);
    crate::auditwheel::install(
        &[out.join("fatpkg_device_gfx110x-1.0-py3-none-linux_x86_64.whl")],
        &site,
    );
    let o = kpack_with(&args, &env);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("Everything this machine needs is installed."));
    // No GPU: `auto` is an error, not an empty answer.
    let none = [("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1".as_ref())];
    let o = kpack_with(&args, &none);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no AMD GPU detected"), "{}", stderr(&o));
}

/// `--keep auto` and `--gpu-targets auto` take the detected targets.
#[test]
fn keep_and_gpu_targets_auto() {
    let tmp = tempfile::tempdir().unwrap();
    let sysfs = tmp.path().join("sys");
    topology(&sysfs, &[110000]);
    let env = [("KPACK_SYSFS_ROOT", sysfs.as_os_str())];
    let lib = fixture("clang19/libaxpy_generic.so");
    let pruned = tmp.path().join("pruned.so");
    let o = kpack_with(
        &[
            "prune".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            pruned.as_os_str(),
            "--keep".as_ref(),
            "auto".as_ref(),
        ],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = kpack_with(&["inspect".as_ref(), pruned.as_os_str()], &[]);
    let text = stdout(&o);
    assert!(
        text.contains("gfx1100") && !text.contains("gfx12-generic"),
        "{text}"
    );

    let off = tmp.path().join("off");
    let o = kpack_with(
        &[
            "offload".as_ref(),
            lib.as_os_str(),
            "-o".as_ref(),
            off.join("libaxpy.so").as_os_str(),
            "--archives".as_ref(),
            off.join(".kpack").as_os_str(),
            "--gpu-targets".as_ref(),
            "auto,gfx11-generic".as_ref(),
        ],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(off.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.contains("gfx1100")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("gfx12")), "{names:?}");
}

#[test]
fn the_doctor_points_at_fetch_without_a_device_wheel_and_refuses_an_empty_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let force = [("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1100".as_ref())];
    let doctor = |dir: &Path| {
        kpack_with(
            &[
                "verify".as_ref(),
                "--gpu".as_ref(),
                "auto".as_ref(),
                dir.as_os_str(),
            ],
            &force,
        )
    };
    let o = doctor(&tree);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("Nothing to check"), "{}", stdout(&o));
    // An install prefix (no pip metadata) whose gfx1100 archive is missing.
    crate::util::offload_into(
        &fixture("clang19/libaxpy_plain.so"),
        &tree,
        &["--gpu-targets", "gfx942"],
    );
    let o = doctor(&tree);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("kpack fetch --index URL"),
        "{}",
        stdout(&o)
    );
}

/// A KFD node with a CU count: `simd_count` and `simd_per_cu`.
fn node(root: &Path, n: u32, gtv: u64, simds: u64) {
    let d = root.join(NODES).join(n.to_string());
    std::fs::create_dir_all(&d).unwrap();
    let props = format!(
        "cpu_cores_count 0\nsimd_count {simds}\nsimd_per_cu 2\ngfx_target_version {gtv}\ngpu_id {n}\n"
    );
    std::fs::write(d.join("properties"), props).unwrap();
}

/// An iGPU listed before a dGPU: every GPU with its compute units, the
/// integrated one marked, and the `HIP_VISIBLE_DEVICES` that keeps the
/// discrete one; every ecosystem's spelling of the detection.
#[test]
fn igpu_before_dgpu_in_every_format() {
    let root = tempfile::tempdir().unwrap();
    topology(root.path(), &[]);
    node(root.path(), 1, 110003, 24);
    node(root.path(), 2, 110000, 192);
    let o = detect(root.path(), &[], &[]);
    assert_eq!(
        stdout(&o),
        "node 1: gfx1103  gpu_id 1\n  HIP device 0, integrated, compute units: 12\n  \
generic target: gfx11-generic\n  packages: gfx1103 -> gfx110x -> gfx11\n\
node 2: gfx1100  gpu_id 2\n  HIP device 1, discrete, compute units: 96\n  \
generic target: gfx11-generic\n  packages: gfx1100 -> gfx110x -> gfx11\n\
HIP device 0 is the integrated gfx1103: programs that use the first device run there.\n\
To keep the discrete GPUs: export HIP_VISIBLE_DEVICES=1\n",
        "{}",
        stderr(&o)
    );
    let f = |fmt: &str, env: &[(&str, &str)]| {
        let o = detect(root.path(), &["--format", fmt], env);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // conda: the GPU with the most compute units.
    assert_eq!(f("conda", &[]), "__amdgpu=0=0\n__amdgpu_arch=11.0.0=0\n");
    assert_eq!(
        f("conda", &[("CONDA_OVERRIDE_AMDGPU_ARCH", "9.4.2")]),
        "__amdgpu=0=0\n__amdgpu_arch=9.4.2=0\n"
    );
    assert_eq!(f("conda", &[("CONDA_OVERRIDE_AMDGPU", "")]), "");
    assert_eq!(
        f("variant", &[]),
        "amd :: gfx_arch :: gfx1103\namd :: gfx_arch :: gfx1100\n"
    );
    assert_eq!(f("extras", &[]), "device-gfx1103,device-gfx1100\n");
    assert_eq!(f("plain", &[]), "gfx1103\ngfx1100\n");
    assert_eq!(
        f("chain", &[]),
        "gfx1103 gfx110x gfx11\ngfx1100 gfx110x gfx11\n"
    );
    let v: serde_json::Value = serde_json::from_str(&f("json", &[])).unwrap();
    assert_eq!(v["hip_visible_devices"]["value"], "1");
    assert_eq!(v["conda"]["amdgpu_arch"], "11.0.0");
    assert_eq!(v["detection"]["gpus"][0]["integrated"], true);
    assert_eq!(v["detection"]["gpus"][1]["compute_units"], 96);
    // A bad conda override is an error, as in conda.
    let o = detect(
        root.path(),
        &["--format", "conda"],
        &[("CONDA_OVERRIDE_AMDGPU", "1")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("CONDA_OVERRIDE_AMDGPU=\"1\""),
        "{}",
        stderr(&o)
    );
    // The doctor lists both and says the same.
    let sysfs = root.path().as_os_str();
    let o = kpack_with(
        &[
            "verify".as_ref(),
            "--gpu".as_ref(),
            "auto".as_ref(),
            root.path().as_os_str(),
        ],
        &[("KPACK_SYSFS_ROOT", sysfs)],
    );
    let text = stdout(&o);
    assert!(
        text.contains(
            "This machine: node 1 is gfx1103 (integrated; packages gfx1103 -> gfx110x -> gfx11)\n\
This machine: node 2 is gfx1100 (packages gfx1100 -> gfx110x -> gfx11)\n\
HIP device 0 is the integrated gfx1103; to keep the discrete GPUs: export HIP_VISIBLE_DEVICES=1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("GPU gfx1103: ") && text.contains("GPU gfx1100: "),
        "{text}"
    );
}

/// No KFD topology: the HIP runtime (the project's stub, taught devices by
/// `KPACK_STUB_DEVICES`) is asked, as rattler does on WSL and Windows.
#[test]
fn without_kfd_the_hip_runtime_is_asked() {
    let root = tempfile::tempdir().unwrap();
    let stub = crate::util::stub_hip(false);
    let lib_path = stub.as_os_str();
    let o = detect(
        root.path(),
        &["--format", "json"],
        &[
            ("LD_LIBRARY_PATH", lib_path.to_str().unwrap()),
            (
                "KPACK_STUB_DEVICES",
                "gfx1103=12,gfx90a:sramecc+:xnack-=110",
            ),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let det = &v["detection"];
    assert_eq!(det["source"], "hip", "{v}");
    assert_eq!(det["gpus"][0]["target"], "gfx1103");
    assert_eq!(det["gpus"][0]["compute_units"], 12);
    assert_eq!(det["gpus"][0]["integrated"], true);
    assert_eq!(det["gpus"][0]["name"], "Stub GPU 0");
    assert_eq!(det["gpus"][1]["target"], "gfx90a:sramecc+:xnack-");
    assert_eq!(v["conda"]["amdgpu_arch"], "9.0.10");
    assert_eq!(v["hip_visible_devices"]["value"], "1");
    // The runtime sees nothing: no GPU, and how to name one.
    let o = detect(
        root.path(),
        &[],
        &[("LD_LIBRARY_PATH", lib_path.to_str().unwrap())],
    );
    assert!(o.status.success());
    assert!(
        stdout(&o)
            .starts_with("No AMD GPUs detected.\nName one with ROCM_BOOTSTRAP_FORCE_GFX_ARCH="),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("the HIP runtime sees no GPU"),
        "{}",
        stderr(&o)
    );
}
