//! The variant wheel's texts against what AMD's splitter wrote for the same
//! split (`tests/fixtures/amd-wheel/reference/variant-uncompressed.json`):
//! from AMD's classic host METADATA, `add_variant_markers` gives AMD's
//! variant METADATA line for line, `variant_json` gives AMD's `variant.json`,
//! and the file name is AMD's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use kpack_wheel::{WheelName, add_variant_markers, variant_wheel};
use serde_json::Value;

fn reference() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/amd-wheel/reference/variant-uncompressed.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn lines(v: &Value) -> String {
    let mut s = String::new();
    for l in v.as_array().unwrap() {
        s.push_str(l.as_str().unwrap());
        s.push('\n');
    }
    s
}

#[test]
fn variant_texts_are_what_amd_wrote() {
    let r = reference();
    let outputs = r["outputs"].as_object().unwrap();
    let (variant_file, variant) = outputs
        .iter()
        .find(|(k, v)| v["dist_info"].get("variant.json").is_some() && k.ends_with(".whl"))
        .expect("AMD wrote a variant wheel");
    let host_file = outputs
        .keys()
        .find(|k| k.starts_with("torch-") && *k != variant_file)
        .unwrap();
    let host = &outputs[host_file];
    let classic = lines(&host["dist_info"]["METADATA"]);
    let want_metadata = lines(&variant["dist_info"]["METADATA"]);
    assert_eq!(add_variant_markers(&classic), want_metadata);

    // Target-level GPUs: the per-target extras of the classic METADATA.
    let targets: Vec<&str> = classic
        .lines()
        .filter_map(|l| l.strip_prefix("Provides-Extra: device-"))
        .filter(|t| *t != "all")
        .collect();
    assert_eq!(targets, ["gfx1100", "gfx1201", "gfx942"]);
    let name = WheelName::parse(host_file).unwrap();
    let v = variant_wheel(&name, "amd", &classic, &targets).unwrap();
    assert_eq!(&v.file, variant_file);
    assert_eq!(v.metadata, want_metadata);
    assert_eq!(v.variant_json, lines(&variant["dist_info"]["variant.json"]));
}
