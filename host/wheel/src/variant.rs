//! Variant wheels (experimental): the wheel-variant proposal (PEP 817, since
//! split into PEP 825 and PEP 850, all drafts) as AMD's wheel splitter
//! writes it with `--generate-variant-wheel`.
//!
//! A variant wheel is a copy of the host wheel with
//! - the file name `<host wheel stem>-<label>.whl` (label `variant` unless
//!   `--variant-label` says otherwise);
//! - `<dist-info>/variant.json`: provider `amd` (installed at install time
//!   from `amd-variant-provider >= 1.0`, plugin
//!   `amd_variant_provider.plugin:AMDVariantPlugin`), one variant per
//!   target-level GPU (`amd :: gfx_arch :: <target>`), priorities in the
//!   same order;
//! - METADATA: after every `Requires-Dist: … ; extra == "device-<target>"`
//!   line, the same requirement with the marker
//!   `"amd :: gfx_arch :: <target>" in variant_properties`, so an installer
//!   that knows variants (uv's preview) picks the device wheels for the GPU
//!   its provider detects, and one that does not still has the extras.
//!
//! Everything here is text in, text out, byte for byte what AMD's splitter
//! writes (checked against its output in the side-by-side test); writing the
//! wheel is the caller's.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::job::{Source, WheelJob};
use crate::name::{VariantLabelError, WheelName, variant_wheel_file};
use crate::reader::Unpacked;

/// The variant wheel's label when none is given (AMD's default).
pub const DEFAULT_VARIANT_LABEL: &str = "variant";

/// The file the variant metadata is written to, inside `.dist-info/`.
pub const VARIANT_JSON: &str = "variant.json";

/// What the variant wheel consists of, beyond the host wheel's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantWheel {
    /// The variant wheel's file name.
    pub file: String,
    /// METADATA: the host's, with the variant markers added.
    pub metadata: String,
    /// `variant.json`, for `<dist-info>/variant.json`.
    pub variant_json: String,
}

/// The marker a requirement carries in a variant wheel for `target`.
pub fn variant_marker(target: &str) -> String {
    format!("\"amd :: gfx_arch :: {target}\" in variant_properties")
}

/// The variant wheel's parts: file name, METADATA with markers, and
/// `variant.json` for the target-level GPUs `targets` (sorted as strings,
/// duplicates dropped, as AMD does).
pub fn variant_wheel(
    host: &WheelName,
    label: &str,
    host_metadata: &str,
    targets: &[&str],
) -> Result<VariantWheel, VariantLabelError> {
    Ok(VariantWheel {
        file: variant_wheel_file(host, label)?,
        metadata: add_variant_markers(host_metadata),
        variant_json: variant_json(targets),
    })
}

/// Plan phase, AMD's layout: the variant wheel as a copy of the `host` job
/// with the variant METADATA (written under `stage`) and `variant.json` for
/// the target-level keys among `keys`.
pub(crate) fn variant_job(
    host: &WheelJob,
    un: &Unpacked,
    label: &str,
    keys: &BTreeSet<String>,
    stage: &Path,
) -> Result<WheelJob> {
    let metadata_path = format!("{}/METADATA", un.dist_info);
    let mut job = host.clone();
    let entry = job.entries.iter().find(|e| e.path == metadata_path);
    let classic = match entry.map(|e| &e.src) {
        Some(Source::Disk(p)) => {
            std::fs::read_to_string(p).map_err(|e| Error::io(p, "cannot read", e))?
        }
        _ => un.metadata_text.clone(),
    };
    let targets: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .filter(|k| !crate::amd::is_parent(k))
        .collect();
    let v = variant_wheel(&un.name, label, &classic, &targets)
        .map_err(|e| Error::invalid(un.name.to_string(), format!("--{e}")))?;
    let file = stage.join("variant-METADATA");
    std::fs::write(&file, &v.metadata).map_err(|e| Error::io(&file, "cannot write", e))?;
    if let Some(e) = job.entries.iter_mut().find(|e| e.path == metadata_path) {
        e.src = Source::Disk(file);
    }
    job.generated
        .push((format!("{}/{VARIANT_JSON}", un.dist_info), v.variant_json));
    job.file = v.file;
    Ok(job)
}

#[derive(Serialize)]
struct Provider {
    #[serde(rename = "install-time")]
    install_time: bool,
    #[serde(rename = "plugin-api")]
    plugin_api: &'static str,
    requires: [&'static str; 1],
}

#[derive(Serialize)]
struct Providers {
    amd: Provider,
}

#[derive(Serialize)]
struct GfxArch<'a> {
    gfx_arch: Vec<&'a str>,
}

#[derive(Serialize)]
struct Amd<'a> {
    amd: GfxArch<'a>,
}

#[derive(Serialize)]
struct Priorities<'a> {
    namespace: [&'static str; 1],
    property: Amd<'a>,
}

#[derive(Serialize)]
struct VariantJson<'a> {
    providers: Providers,
    #[serde(rename = "default-priorities")]
    default_priorities: Priorities<'a>,
    variants: std::collections::BTreeMap<&'a str, Amd<'a>>,
}

/// `variant.json` for the target-level GPUs `targets`: two-space indented
/// JSON and a final newline, keys in AMD's order.
pub fn variant_json(targets: &[&str]) -> String {
    let targets: Vec<&str> = targets
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let doc = VariantJson {
        providers: Providers {
            amd: Provider {
                install_time: true,
                plugin_api: "amd_variant_provider.plugin:AMDVariantPlugin",
                requires: ["amd-variant-provider >= 1.0"],
            },
        },
        default_priorities: Priorities {
            namespace: ["amd"],
            property: Amd {
                amd: GfxArch {
                    gfx_arch: targets.clone(),
                },
            },
        },
        variants: targets
            .iter()
            .map(|t| {
                (
                    *t,
                    Amd {
                        amd: GfxArch { gfx_arch: vec![*t] },
                    },
                )
            })
            .collect(),
    };
    // Serializing plain structs, string maps and string lists cannot fail.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

/// Add the variant marker lines to a host METADATA that already carries the
/// `device-<target>` extras: after each `Requires-Dist: <req>; extra ==
/// "device-<target>"` line (not `device-all`), the line `Requires-Dist:
/// <req>; "amd :: gfx_arch :: <target>" in variant_properties`. Lines are
/// split as Python's `str.splitlines` does and joined with `\n`, with a final
/// newline.
pub fn add_variant_markers(metadata: &str) -> String {
    let mut out = String::with_capacity(metadata.len() * 2);
    for line in python_lines(metadata) {
        out.push_str(line);
        out.push('\n');
        if let Some((req, target)) = extra_requirement(line) {
            out.push_str(req);
            out.push_str("; ");
            out.push_str(&variant_marker(
                target.strip_prefix("device-").unwrap_or(target),
            ));
            out.push('\n');
        }
    }
    out
}

/// `(requirement, extra)` of a `Requires-Dist: <name> == <version>; extra ==
/// "<extra>"` line that names a per-target extra.
fn extra_requirement(line: &str) -> Option<(&str, &str)> {
    const HEAD: &str = "Requires-Dist: ";
    const EXTRA: &str = "; extra == \"";
    if !line.starts_with("Requires-Dist:")
        || !line.contains("extra ==")
        || line.contains("extra == \"device-all\"")
    {
        return None;
    }
    // The longest requirement part whose tail is `; extra == "<word>"`.
    let mut end = line.len();
    while let Some(at) = line[..end].rfind(EXTRA) {
        let rest = &line[at + EXTRA.len()..];
        let word_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        let req = &line[..at];
        let pinned = req
            .get(HEAD.len() + 1..)
            .and_then(|r| r.find(" == "))
            .is_some_and(|i| HEAD.len() + 1 + i + 4 < req.len());
        if word_len > 0 && rest[word_len..].starts_with('"') && req.starts_with(HEAD) && pinned {
            return Some((req, &rest[..word_len]));
        }
        end = at;
    }
    None
}

/// Split like Python's `str.splitlines()`: on `\n`, `\r\n`, `\r`, `\v`,
/// `\f`, `\x1c`–`\x1e`, `\u{85}`, `\u{2028}`, `\u{2029}`; no empty last line.
fn python_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let breaks = matches!(
            c,
            '\n' | '\r'
                | '\u{b}'
                | '\u{c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if !breaks {
            continue;
        }
        lines.push(&text[start..i]);
        start = i + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
            chars.next();
            start += 1;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;
    use crate::name::check_variant_label;

    const HOST: &str = "Metadata-Version: 2.1\nName: torch\nVersion: 2.10.0\n\
Requires-Dist: rocm-bootstrap\n\
Provides-Extra: device-gfx1100\n\
Requires-Dist: amd-torch-device-gfx1100 == 2.10.0; extra == \"device-gfx1100\"\n\
Requires-Dist: amd-torch-device-gfx11 == 2.10.0; extra == \"device-gfx1100\"\n\
Provides-Extra: device-all\n\
Requires-Dist: amd-torch-device-gfx11 == 2.10.0; extra == \"device-all\"\n\
Requires-Dist: amd-torch-device-gfx1100 == 2.10.0; extra == \"device-all\"\n\
\n\
A description.\n";

    #[test]
    fn markers_follow_each_per_target_extra_and_not_device_all() {
        let got = add_variant_markers(HOST);
        let want = HOST.replace(
            "extra == \"device-gfx1100\"\nRequires-Dist: amd-torch-device-gfx11 ",
            "extra == \"device-gfx1100\"\nRequires-Dist: amd-torch-device-gfx1100 == 2.10.0; \
\"amd :: gfx_arch :: gfx1100\" in variant_properties\nRequires-Dist: amd-torch-device-gfx11 ",
        );
        let want = want.replace(
            "gfx11 == 2.10.0; extra == \"device-gfx1100\"\n",
            "gfx11 == 2.10.0; extra == \"device-gfx1100\"\nRequires-Dist: amd-torch-device-gfx11 \
== 2.10.0; \"amd :: gfx_arch :: gfx1100\" in variant_properties\n",
        );
        assert_eq!(got, want);
        assert_eq!(got.matches("variant_properties").count(), 2);
    }

    #[test]
    fn unpinned_or_other_lines_get_no_marker() {
        for line in [
            "Requires-Dist: foo; extra == \"device-gfx942\"",
            "Requires-Dist: foo >= 1; extra == \"device-gfx942\"",
            "Requires-Dist: foo == 1; extra == \"\"",
            "Requires-Dist: foo == 1; extra == 'device-gfx942'",
            "Provides-Extra: device-gfx942",
            "Requires-Dist: foo == 1; extra == \"device-all\"",
        ] {
            assert_eq!(extra_requirement(line), None, "{line}");
        }
        assert_eq!(
            extra_requirement("Requires-Dist: a == 1; extra == \"x\"; extra == \"device-gfx9\""),
            Some(("Requires-Dist: a == 1; extra == \"x\"", "device-gfx9"))
        );
        // A non-`device-` extra keeps its name as the target, as AMD's does.
        assert_eq!(
            add_variant_markers("Requires-Dist: a == 1; extra == \"gpu\""),
            "Requires-Dist: a == 1; extra == \"gpu\"\n\
Requires-Dist: a == 1; \"amd :: gfx_arch :: gpu\" in variant_properties\n"
        );
    }

    #[test]
    fn lines_split_as_python_does() {
        assert_eq!(python_lines("a\r\nb\rc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(python_lines("a\n\nb\n"), ["a", "", "b"]);
        assert_eq!(python_lines("a\u{2028}b\u{c}"), ["a", "b"]);
        assert!(python_lines("").is_empty());
        assert_eq!(add_variant_markers("X: 1\r\nY: 2"), "X: 1\nY: 2\n");
    }

    #[test]
    fn variant_json_is_amds_document() {
        let got = variant_json(&["gfx942", "gfx1100", "gfx942"]);
        let want = r#"{
  "providers": {
    "amd": {
      "install-time": true,
      "plugin-api": "amd_variant_provider.plugin:AMDVariantPlugin",
      "requires": [
        "amd-variant-provider >= 1.0"
      ]
    }
  },
  "default-priorities": {
    "namespace": [
      "amd"
    ],
    "property": {
      "amd": {
        "gfx_arch": [
          "gfx1100",
          "gfx942"
        ]
      }
    }
  },
  "variants": {
    "gfx1100": {
      "amd": {
        "gfx_arch": [
          "gfx1100"
        ]
      }
    },
    "gfx942": {
      "amd": {
        "gfx_arch": [
          "gfx942"
        ]
      }
    }
  }
}
"#;
        assert_eq!(got, want);
        assert!(variant_json(&[]).contains("\"gfx_arch\": []"));
        assert!(variant_json(&[]).contains("\"variants\": {}"));
    }

    #[test]
    fn file_name_and_labels() {
        let host =
            WheelName::parse("torch-2.10.0+rocm7.1-cp313-cp313-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!(
            variant_wheel_file(&host, "amd").unwrap(),
            "torch-2.10.0+rocm7.1-cp313-cp313-manylinux_2_28_x86_64-amd.whl"
        );
        assert_eq!(
            variant_wheel_file(&host, DEFAULT_VARIANT_LABEL).unwrap(),
            "torch-2.10.0+rocm7.1-cp313-cp313-manylinux_2_28_x86_64-variant.whl"
        );
        for bad in ["", "AMD", "a-b", "a/b", "ä"] {
            let e = check_variant_label(bad).unwrap_err();
            assert_eq!(e.label, bad);
            assert!(e.to_string().starts_with("variant label "), "{e}");
        }
        for good in ["amd", "rocm7.1", "gfx_9", "0"] {
            check_variant_label(good).unwrap();
        }
        let v = variant_wheel(&host, "amd", HOST, &["gfx1100"]).unwrap();
        assert_eq!(v.metadata, add_variant_markers(HOST));
        assert_eq!(v.variant_json, variant_json(&["gfx1100"]));
        assert!(variant_wheel(&host, "A", HOST, &[]).is_err());
    }
}
