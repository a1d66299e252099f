use std::path::Path;

use super::*;

/// A CPU node as KFD writes it (from rocm-bootstrap's test fixtures).
const CPU: &str = "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n";

fn gpu_props(gtv: u64, device: u32, gpu_id: u32) -> String {
    format!(
        "cpu_cores_count 0\nsimd_count 128\ngfx_target_version {gtv}\nvendor_id 4098\n\
         device_id {device}\ngpu_id {gpu_id}\nname weird words here\n"
    )
}

/// A sysfs root holding `nodes` (name, properties; `None`: no file).
fn topology(nodes: &[(&str, Option<String>)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for (name, props) in nodes {
        let dir = root.path().join(TOPOLOGY).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(p) = props {
            std::fs::write(dir.join("properties"), p).unwrap();
        }
    }
    root
}

fn opts(root: &Path) -> Options {
    Options {
        sysfs_root: root.to_path_buf(),
        force: None,
        disable: false,
        hip_fallback: false,
    }
}

#[test]
fn decodes_versions_as_llvm_names_processors() {
    for (v, name) in [
        (90010, "gfx90a"),
        (90012, "gfx90c"),
        (90000, "gfx900"),
        (110001, "gfx1101"),
        (110501, "gfx1151"),
        (120001, "gfx1201"),
        (120500, "gfx1250"),
        (90402, "gfx942"),
    ] {
        assert_eq!(decode_gfx_target_version(v).as_deref(), Some(name), "{v}");
    }
    assert_eq!(decode_gfx_target_version(0), None);
    assert_eq!(decode_gfx_target_version(90016), None);
    assert_eq!(decode_gfx_target_version(91700), None);
}

#[test]
fn no_kfd_is_no_gpus() {
    let root = tempfile::tempdir().unwrap();
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.source, Source::NoKfd);
    assert!(det.gpus.is_empty());
}

#[test]
fn cpu_only_nodes_are_skipped() {
    let root = topology(&[("0", Some(CPU.into())), ("1", Some(CPU.into()))]);
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.source, Source::Kfd);
    assert!(det.gpus.is_empty());
}

#[test]
fn one_gpu_with_its_chain() {
    let root = topology(&[
        ("0", Some(CPU.into())),
        ("1", Some(gpu_props(110001, 29772, 5555))),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.targets(), ["gfx1101"]);
    let g = &det.gpus[0];
    assert_eq!(g.node, 1);
    assert_eq!(g.gfx_target_version, Some(110001));
    assert_eq!(g.gpu_id, Some(5555));
    assert_eq!(g.pci_id.as_deref(), Some("0x744c"));
    assert_eq!(g.generic.as_deref(), Some("gfx11-generic"));
    let c = g.chain.as_ref().unwrap();
    assert_eq!(
        (&*c.target, &*c.sub_family, &*c.family),
        ("gfx1101", "gfx110x", "gfx11")
    );
}

/// The answers of rocm-bootstrap 0.3.0 on this same topology
/// (`rocm_bootstrap.detect.main(["--unique"])` and `["--hierarchy"]` with
/// `_platform.KFD_TOPOLOGY` pointed at it):
///
/// ```text
/// gfx1101 gfx110x gfx11
/// gfx90a gfx9_0 gfx9
/// gfx942 gfx9_4 gfx9
/// gfx1201 gfx12_0 gfx12
/// ```
///
/// Nodes sort as strings (`10` before `2`); a node without a properties
/// file and a directory that is not a number are skipped.
#[test]
fn two_different_gpus_match_rocm_bootstrap() {
    let root = topology(&[
        ("0", Some(CPU.into())),
        ("1", Some(gpu_props(110001, 29772, 5555))),
        ("2", Some(gpu_props(120001, 30032, 777))),
        ("3", Some(gpu_props(110001, 29772, 5556))),
        ("10", Some(gpu_props(90010, 29824, 42))),
        ("11", Some(gpu_props(90402, 29856, 43))),
        ("x", Some(gpu_props(90000, 1, 1))),
        ("4", None),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.gpus.len(), 5);
    let nodes: Vec<u32> = det.gpus.iter().map(|g| g.node).collect();
    assert_eq!(nodes, [1, 10, 11, 2, 3]);
    let hierarchy: Vec<String> = det
        .targets()
        .iter()
        .map(|t| {
            let c = Chain::of(t).unwrap();
            format!("{} {} {}", c.target, c.sub_family, c.family)
        })
        .collect();
    assert_eq!(
        hierarchy,
        [
            "gfx1101 gfx110x gfx11",
            "gfx90a gfx9_0 gfx9",
            "gfx942 gfx9_4 gfx9",
            "gfx1201 gfx12_0 gfx12"
        ]
    );
}

#[test]
fn unknown_version_is_a_note_not_a_failure() {
    let root = topology(&[
        ("1", Some(gpu_props(91700, 1, 1))),
        ("2", Some(gpu_props(90402, 2, 2))),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.targets(), ["gfx942"]);
    assert_eq!(det.notes.len(), 1);
    assert!(det.notes[0].contains("91700"), "{:?}", det.notes);
}

#[test]
fn overrides_win_over_the_topology() {
    let root = topology(&[("1", Some(gpu_props(110001, 1, 1)))]);
    let mut o = opts(root.path());
    o.force = Some(" gfx942, gfx1100,,gfx942 ".into());
    let det = detect(&o).unwrap();
    assert_eq!(det.source, Source::Forced);
    assert_eq!(det.gpus.len(), 3);
    assert_eq!(det.targets(), ["gfx942", "gfx1100"]);
    assert_eq!(det.gpus[1].node, 1);
    assert_eq!(det.gpus[0].chain.as_ref().unwrap().sub_family, "gfx9_4");

    o.disable = true;
    let det = detect(&o).unwrap();
    assert_eq!(det.source, Source::Disabled);
    assert!(det.gpus.is_empty());

    o.disable = false;
    o.force = Some("gfx942,not a target".into());
    assert!(matches!(detect(&o), Err(Error::Forced { name, .. }) if name == "not a target"));
    o.force = Some("gfx90a:xnack+,bogus".into());
    assert!(matches!(detect(&o), Err(Error::UnknownProcessor(name)) if name == "bogus"));
    o.force = Some("amdgcn-amd-amdhsa--gfx90a:xnack+,gfx1250-strict".into());
    assert_eq!(
        detect(&o).unwrap().targets(),
        ["gfx90a:xnack+", "gfx1250-strict"]
    );
    for bad in ["gfx11-generic", "GFX1100", "../../x"] {
        o.force = Some(bad.into());
        assert!(detect(&o).is_err(), "{bad}");
    }
}

#[test]
fn unknown_processor_has_no_chain() {
    assert_eq!(Chain::of("gfx803"), None);
    assert_eq!(
        Chain::of("gfx1250-strict").map(|c| c.target),
        Some("gfx1250".to_owned())
    );
}

/// A properties file that is a FIFO, a device, huge, or not UTF-8 skips
/// its node with a note; the other nodes are still read.
#[cfg(unix)]
#[test]
fn a_bad_properties_file_skips_its_node_with_a_note() {
    let root = topology(&[
        ("1", None),
        ("2", None),
        ("3", Some("simd_count 4\ngfx_target_version 9\u{ff}".into())),
        ("4", Some(gpu_props(90402, 2, 2))),
        ("5", None),
    ]);
    let nodes = root.path().join(TOPOLOGY);
    let fifo = nodes.join("1/properties");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", nodes.join("2/properties")).unwrap();
    std::fs::write(nodes.join("3/properties"), b"simd_count 4\n\xff\n").unwrap();
    let big = gpu_props(110000, 1, 1) + &"x 1\n".repeat(8 << 10);
    std::fs::write(nodes.join("5/properties"), big).unwrap();
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(det.targets(), ["gfx942"]);
    let notes = det.notes.join("\n");
    assert_eq!(det.notes.len(), 4, "{notes}");
    assert!(
        notes.contains("1/properties: not a regular file; node skipped"),
        "{notes}"
    );
    assert!(
        notes.contains("2/properties: not a regular file; node skipped"),
        "{notes}"
    );
    assert!(
        notes.contains("3/properties: not UTF-8 text (byte 0xff at offset 0xd)"),
        "{notes}"
    );
    assert!(
        notes.contains("5/properties: longer than 16384 bytes"),
        "{notes}"
    );
}

#[test]
fn compute_units_and_integrated_gpus() {
    let root = topology(&[
        ("0", Some(CPU.into())),
        (
            "1",
            Some("simd_count 24\nsimd_per_cu 2\ngfx_target_version 110003\n".into()),
        ),
        (
            "2",
            Some("simd_count 192\nsimd_per_cu 2\ngfx_target_version 110000\n".into()),
        ),
        (
            "3",
            Some("simd_count 440\ngfx_target_version 90010\n".into()),
        ),
        (
            "10",
            Some(
                "cpu_cores_count 24\nsimd_count 912\nsimd_per_cu 4\ngfx_target_version 90402\n"
                    .into(),
            ),
        ),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    let got: Vec<(u32, Option<u32>, bool)> = det
        .gpus
        .iter()
        .map(|g| (g.node, g.compute_units, g.integrated))
        .collect();
    // rocm-bootstrap's order lists node 10 before 2; HIP numbers by node.
    assert_eq!(
        got,
        [
            (1, Some(12), true),
            (10, Some(228), true),
            (2, Some(96), false),
            (3, None, false)
        ]
    );
    assert_eq!(mixed::hip_order(&det), [0, 2, 3, 1]);
    let v = mixed::visible_devices(&det).unwrap();
    assert_eq!(
        (v.first_index, &*v.first_target, &*v.value),
        (0, "gfx1103", "1,2")
    );
}

#[test]
fn target_of_properties_reads_bytes() {
    assert_eq!(
        target_of_properties(gpu_props(90402, 1, 1).as_bytes()),
        Ok(Some("gfx942".into()))
    );
    assert_eq!(target_of_properties(CPU.as_bytes()), Ok(None));
    assert!(target_of_properties(b"\xff").is_err());
}

#[test]
fn properties_refusals_keep_their_wording() {
    let text = |b: &[u8]| target_of_properties(b).unwrap_err().to_string();
    assert_eq!(
        text(b"a 1\n\xff"),
        "not UTF-8 text (byte 0xff at offset 0x4)"
    );
    assert_eq!(
        text(b"a \xe2\x82"),
        "not UTF-8 text (byte 0xe2 at offset 0x2)"
    );
    assert_eq!(
        text(gpu_props(1, 1, 1).as_bytes()),
        "gfx_target_version 1 names no GPU target"
    );
}

#[test]
fn an_unreadable_properties_file_keeps_the_os_error_as_its_source() {
    let os = std::io::Error::other("disk on fire");
    let why = super::Unread::Io(os);
    assert_eq!(why.to_string(), "cannot read");
    let cause = std::error::Error::source(&why).expect("the I/O error is the source");
    assert_eq!(cause.to_string(), "disk on fire");
}

#[test]
fn no_advice_when_the_discrete_gpu_comes_first() {
    let root = topology(&[
        ("1", Some(gpu_props(110000, 1, 1))),
        ("2", Some(gpu_props(110003, 2, 2))),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    assert!(det.gpus[1].integrated && !det.gpus[0].integrated);
    assert_eq!(mixed::visible_devices(&det), None);
}

#[test]
fn conda_overrides() {
    let root = topology(&[("1", Some(gpu_props(90010, 1, 1)))]);
    let det = detect(&opts(root.path())).unwrap();
    let with = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let c = conda::conda(&det, &with(&[])).unwrap();
    assert_eq!(c.lines(), ["__amdgpu=0=0", "__amdgpu_arch=9.0.10=0"]);
    let c = conda::conda(&det, &with(&[(conda::OVERRIDE_AMDGPU_ARCH, "11.0.1")])).unwrap();
    assert_eq!(c.lines(), ["__amdgpu=0=0", "__amdgpu_arch=11.0.1=0"]);
    let c = conda::conda(&det, &with(&[(conda::OVERRIDE_AMDGPU, "")])).unwrap();
    assert!(c.lines().is_empty());
    assert!(conda::conda(&det, &with(&[(conda::OVERRIDE_AMDGPU, "1")])).is_err());
    assert!(conda::conda(&det, &with(&[(conda::OVERRIDE_AMDGPU_ARCH, "gfx90a")])).is_err());
    let none = detect(&Options {
        disable: true,
        ..opts(root.path())
    })
    .unwrap();
    let c = conda::conda(&none, &with(&[(conda::OVERRIDE_AMDGPU, "0")])).unwrap();
    assert_eq!(c.lines(), ["__amdgpu=0=0"]);
    // Forced targets carry no CU count: the highest ISA version wins.
    let forced = detect(&Options {
        force: Some("gfx1103,gfx942,gfx90a".into()),
        ..opts(root.path())
    })
    .unwrap();
    let c = conda::conda(&forced, &with(&[])).unwrap();
    assert_eq!(c.amdgpu_arch.as_deref(), Some("11.0.3"));
    assert_eq!(
        conda::IsaVersion::from_target("gfx90a:xnack-"),
        Some(conda::IsaVersion(9, 0, 10))
    );
}

/// The provider answers as rocm-bootstrap 0.3.0's `AMDVariantPlugin`:
/// target-level package owners in detection order, strict targets folded.
#[test]
fn provider_reports_target_level_owners() {
    let p =
        |t: &[&str]| provider::properties_for(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(p(&["gfx1100"]), ["gfx1100"]);
    assert_eq!(
        p(&["gfx1100", "gfx942", "gfx1101", "gfx942"]),
        ["gfx1100", "gfx942", "gfx1101"]
    );
    assert_eq!(p(&["gfx1250-strict", "gfx1250"]), ["gfx1250"]);
    assert_eq!(p(&["amdgcn-amd-amdhsa--gfx90a:xnack+"]), ["gfx90a"]);
    assert_eq!(p(&["gfx803"]), ["gfx803"]);
    assert!(p(&[]).is_empty());
    let all = provider::all_values();
    assert!(all.contains(&"gfx950".to_string()) && !all.contains(&"gfx1250-strict".to_string()));
    assert!(!all.iter().any(|v| v.contains('_') || v.ends_with('x')));
    const { assert!(provider::MULTI_VALUE) };
}

/// A variant lists the processors its code serves, at target level.
#[test]
fn variant_values_are_the_processors_a_key_serves() {
    assert_eq!(provider::variant_values("gfx1100"), ["gfx1100"]);
    assert_eq!(
        provider::variant_values("gfx110x"),
        ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
    );
    assert_eq!(
        provider::variant_values("gfx9-0"),
        provider::variant_values("gfx9_0")
    );
    assert_eq!(provider::variant_values("gfx12_5"), ["gfx1250", "gfx1251"]);
    assert_eq!(provider::variant_values("gfx11").len(), 8);
    assert_eq!(
        provider::variant_values("gfx12-generic"),
        ["gfx1200", "gfx1201"]
    );
    assert!(provider::variant_values("amdgcnspirv").is_empty());
    assert!(provider::variant_values("../x").is_empty());
}

/// The provider's detection is kpack's, bounds and overrides included.
#[test]
fn provider_detects_as_kpack_does() {
    let root = topology(&[
        ("0", Some(CPU.into())),
        ("1", Some(gpu_props(110001, 29772, 5555))),
        ("10", Some(gpu_props(90010, 29824, 42))),
        ("2", Some(gpu_props(120001, 30032, 777))),
        ("3", Some(gpu_props(91700, 1, 1))),
    ]);
    let det = detect(&opts(root.path())).unwrap();
    assert_eq!(provider::supported(&det), ["gfx1101", "gfx90a", "gfx1201"]);
    let o = provider::provider_options(Some(root.path().to_path_buf()), |_| None);
    assert!(!o.hip_fallback);
    let p = provider::AmdVariantProvider::new(o.clone());
    assert_eq!(
        (p.namespace(), p.package_name(), p.plugin_api()),
        (
            "amd",
            "kpack-variant-provider",
            "kpack_variant_provider.plugin:AmdVariantPlugin"
        )
    );
}

#[test]
fn options_come_from_the_lookup_they_are_given() {
    let vars = [
        (FORCE_ENV, "gfx942,gfx1100"),
        (DISABLE_ENV, "0"),
        (SYSFS_ENV, "/fake/sys"),
    ];
    let look = |k: &str| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| std::ffi::OsString::from(v))
    };
    let o = Options::from_vars(None, look);
    assert_eq!(o.force.as_deref(), Some("gfx942,gfx1100"));
    assert!(!o.disable && o.hip_fallback);
    assert_eq!(o.sysfs_root, PathBuf::from("/fake/sys"));
    let flag = Options::from_vars(Some(PathBuf::from("/flag")), look);
    assert_eq!(flag.sysfs_root, PathBuf::from("/flag"));
    let none = Options::from_vars(None, |k| (k == DISABLE_ENV).then(|| "1".into()));
    assert!(none.disable && none.force.is_none());
    assert_eq!(none.sysfs_root, PathBuf::from("/sys"));
    let det = detect(&Options::from_vars(None, look)).unwrap();
    assert_eq!(det.targets(), ["gfx942", "gfx1100"]);
}
