//! kpack's conda answer (`__amdgpu`, `__amdgpu_arch`) against rattler's
//! (`rattler_virtual_packages`, the implementation of conda/ceps #189) on
//! every fake KFD topology of the suite. rattler reads `/sys` itself and
//! keeps its topology reader private, so its public parts are the oracle:
//! each node's `properties` are read here as rattler reads them
//! (`gfx_target_version`, `simd_count / simd_per_cu`), decoded with its
//! `AmdGpuArchInfo::from_gfx_target_version` and ranked with its
//! `select_device`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;

use kpack_detect::{Options, TOPOLOGY, conda, detect, mixed};
use rattler_virtual_packages::amdgpu::{AmdGpuArchInfo, AmdGpuDevice, select_device};

/// A KFD node: `gfx_target_version`, `simd_count`, `simd_per_cu` (None:
/// no such line), `cpu_cores_count`.
type Node = (u64, u64, Option<u64>, u64);

const CPU: Node = (0, 0, None, 16);

/// The suite's topologies, by name.
fn topologies() -> Vec<(&'static str, Vec<Node>)> {
    vec![
        ("one GPU", vec![CPU, (110000, 192, Some(2), 0)]),
        (
            "two GPUs of different sizes",
            vec![CPU, (90402, 1216, Some(4), 0), (110001, 120, Some(2), 0)],
        ),
        (
            "bigger GPU listed second",
            vec![CPU, (110001, 120, Some(2), 0), (90010, 440, Some(4), 0)],
        ),
        (
            "iGPU before dGPU",
            vec![CPU, (110003, 24, Some(2), 0), (110000, 192, Some(2), 0)],
        ),
        (
            "equal CU counts",
            vec![CPU, (110000, 96, Some(2), 0), (120001, 96, Some(2), 0)],
        ),
        (
            "no simd_per_cu",
            vec![CPU, (110000, 192, None, 0), (90010, 440, None, 0)],
        ),
        (
            "one with simd_per_cu, one without",
            vec![CPU, (110000, 8, Some(2), 0), (90010, 440, None, 0)],
        ),
        ("no GPU", vec![CPU]),
    ]
}

fn properties((gtv, simds, per_cu, cpus): Node) -> String {
    let mut p = format!(
        "cpu_cores_count {cpus}\nsimd_count {simds}\ngfx_target_version {gtv}\nvendor_id 4098\n"
    );
    if let Some(per) = per_cu {
        p.push_str(&format!("simd_per_cu {per}\n"));
    }
    p
}

fn write_topology(root: &Path, nodes: &[Node]) {
    for (i, n) in nodes.iter().enumerate() {
        let d = root.join(TOPOLOGY).join(i.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("properties"), properties(*n)).unwrap();
    }
}

/// rattler's reading of one `properties` file.
fn rattler_device(text: &str) -> Option<AmdGpuDevice> {
    let (mut gtv, mut simds, mut per_cu) = (None, None, None);
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next()) else {
            continue;
        };
        let slot = match k {
            "gfx_target_version" => &mut gtv,
            "simd_count" => &mut simds,
            "simd_per_cu" => &mut per_cu,
            _ => continue,
        };
        *slot = v.parse::<u32>().ok();
    }
    let arch = AmdGpuArchInfo::from_gfx_target_version(gtv?)?;
    let compute_units = match (simds, per_cu) {
        (Some(s), Some(p)) if p > 0 => Some(s / p),
        _ => None,
    };
    Some(AmdGpuDevice {
        arch,
        compute_units,
        name: None,
    })
}

fn rattler_answer(root: &Path) -> Vec<String> {
    let nodes = root.join(TOPOLOGY);
    let mut devices: Vec<AmdGpuDevice> = std::fs::read_dir(&nodes)
        .unwrap()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.unwrap().path().join("properties")).ok()?;
            rattler_device(&text)
        })
        .collect();
    devices.sort_by_key(|d| (d.arch, d.compute_units));
    match select_device(&devices) {
        Some(d) => vec![
            "__amdgpu=0=0".to_string(),
            format!("__amdgpu_arch={}=0", d.arch),
        ],
        None => Vec::new(),
    }
}

fn no_overrides(_: &str) -> Option<String> {
    None
}

#[test]
fn conda_answer_is_rattlers_on_every_topology() {
    for (name, nodes) in topologies() {
        let root = tempfile::tempdir().unwrap();
        write_topology(root.path(), &nodes);
        let det = detect(&Options {
            sysfs_root: root.path().to_path_buf(),
            force: None,
            disable: false,
            hip_fallback: false,
        })
        .unwrap();
        let ours = conda::conda(&det, &no_overrides).unwrap().lines();
        assert_eq!(ours, rattler_answer(root.path()), "{name}");
    }
}

#[test]
fn the_answers_are_the_ones_expected() {
    let want = [
        "11.0.0", "9.4.2", "9.0.10", "11.0.0", "12.0.1", "11.0.0", "11.0.0",
    ];
    for ((name, nodes), want) in topologies().into_iter().zip(want) {
        let root = tempfile::tempdir().unwrap();
        write_topology(root.path(), &nodes);
        let det = detect(&Options {
            sysfs_root: root.path().to_path_buf(),
            force: None,
            disable: false,
            hip_fallback: false,
        })
        .unwrap();
        let c = conda::conda(&det, &no_overrides).unwrap();
        assert_eq!(c.amdgpu_arch.as_deref(), Some(want), "{name}");
        // Only the iGPU-first machine needs HIP_VISIBLE_DEVICES.
        let advice = mixed::visible_devices(&det).map(|v| v.value);
        let expect = (name == "iGPU before dGPU").then(|| "1".to_string());
        assert_eq!(advice, expect, "{name}");
    }
}
