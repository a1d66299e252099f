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
use crate::name::{VariantLabelError, WheelName, normalize, variant_wheel_file};
use crate::reader::Unpacked;

/// The variant wheel's label when none is given (AMD's default).
pub const DEFAULT_VARIANT_LABEL: &str = "variant";

/// The file the variant metadata is written to, inside `.dist-info/`.
pub const VARIANT_JSON: &str = "variant.json";

/// Which provider a variant wheel's `variant.json` names for namespace
/// `amd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VariantProvider {
    /// AMD's, byte for byte as AMD's splitter writes it: one wheel with
    /// every target's variant, plugin
    /// `amd_variant_provider.plugin:AMDVariantPlugin` from
    /// `amd-variant-provider >= 1.0` (a package on no index), in the
    /// document layout of an earlier draft (`install-time`,
    /// `default-priorities.property`). No installer reads it today: uv
    /// 0.13.9 and variantlib 0.2.2 refuse it.
    #[default]
    Amd,
    /// kpack's: `kpack-variant-provider` (built from this repository), in
    /// the PEP 825/850 layout uv 0.13 and variantlib 0.2 read: one wheel
    /// per label ([`label_wheels`]).
    Kpack,
    /// AMD's public provider, rocm-bootstrap 0.3.0's `AMDVariantPlugin`,
    /// in the same layout as [`Kpack`](Self::Kpack).
    RocmBootstrap,
}

impl VariantProvider {
    /// `(plugin-api, requirement)` of a provider in the PEP 850 layout.
    fn plugin(self) -> (&'static str, &'static str) {
        use kpack_detect::provider as p;
        match self {
            VariantProvider::RocmBootstrap => {
                (p::ROCM_BOOTSTRAP_PLUGIN_API, p::ROCM_BOOTSTRAP_REQUIREMENT)
            }
            _ => (p::PLUGIN_API, p::REQUIREMENT),
        }
    }
}

/// The `$schema` of every `variant.json` and `*-variants.json` kpack
/// writes in the PEP 850 layout (one uv 0.13.9 knows).
pub const VARIANT_SCHEMA: &str = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json";

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

/// Whether `v` can be a property value (`[a-z0-9_.]+`): generic targets
/// (`gfx11-generic`) cannot, and get no variant of their own.
pub fn is_property_value(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.'))
}

/// The `gfx_arch` value of a device wheel key or its distribution-name
/// spelling: property values hold no `-`, so `gfx9-0` is `gfx9_0`.
pub fn variant_value(key: &str) -> String {
    kpack_amdgpu::archive_group_level(key).map_or_else(|| key.to_string(), |(_, k)| k.to_string())
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

/// A `*-variants.json` to write: file name and text.
pub(crate) type IndexFile = (String, String);

/// Plan phase: the variant wheels, as copies of the `host` job, and the
/// `*-variants.json` (file name, text) to write beside them when the
/// layout has one. AMD's layout: one wheel labelled `label` with AMD's
/// METADATA markers and `variant.json` for the target-level keys among
/// `keys`. The PEP 850 layout: [`label_wheels`].
pub(crate) fn variant_jobs(
    host: &WheelJob,
    un: &Unpacked,
    (provider, label): (VariantProvider, &str),
    keys: &BTreeSet<String>,
    stage: &Path,
) -> Result<(Vec<WheelJob>, Option<IndexFile>)> {
    let metadata_path = format!("{}/METADATA", un.dist_info);
    let entry = host.entries.iter().find(|e| e.path == metadata_path);
    let classic = match entry.map(|e| &e.src) {
        Some(Source::Disk(p)) => {
            std::fs::read_to_string(p).map_err(|e| Error::io(p, "cannot read", e))?
        }
        _ => un.metadata_text.clone(),
    };
    let bad_label = |e: VariantLabelError| Error::invalid(un.name.to_string(), format!("--{e}"));
    let job = |file: String, metadata: &str, json: String, n: usize| -> Result<WheelJob> {
        let mut job = host.clone();
        let path = stage.join(format!("variant-METADATA-{n}"));
        std::fs::write(&path, metadata).map_err(|e| Error::io(&path, "cannot write", e))?;
        if let Some(e) = job.entries.iter_mut().find(|e| e.path == metadata_path) {
            e.src = Source::Disk(path);
        }
        job.generated
            .push((format!("{}/{VARIANT_JSON}", un.dist_info), json));
        job.file = file;
        Ok(job)
    };
    if provider == VariantProvider::Amd {
        let targets: Vec<&str> = keys
            .iter()
            .map(String::as_str)
            .filter(|k| !crate::name::is_parent(k))
            .collect();
        let v = variant_wheel(&un.name, label, &classic, &targets).map_err(bad_label)?;
        return Ok((vec![job(v.file, &v.metadata, v.variant_json, 0)?], None));
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (wheels, index) = label_wheels(provider, &un.name, &classic, &keys).map_err(bad_label)?;
    let jobs = wheels
        .into_iter()
        .enumerate()
        .map(|(n, w)| job(w.file, &w.metadata, w.variant_json, n))
        .collect::<Result<Vec<_>>>()?;
    Ok((jobs, Some((variants_json_file(&un.name), index))))
}

/// One variant wheel of the PEP 850 layout: a copy of the host wheel for
/// one device wheel key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelWheel {
    /// The device wheel key it selects (`gfx1100`, `gfx110x`, `gfx9-0`).
    pub key: String,
    /// Its label: the key as a property value (`gfx9_0`).
    pub label: String,
    /// Its file name, `<host stem>-<label>.whl`.
    pub file: String,
    /// METADATA: the host's, plus plain `Requires-Dist` lines on the
    /// device wheels the key's extra installs (no variant markers).
    pub metadata: String,
    /// `variant.json`: `$schema`, `default-priorities`, the provider, and
    /// this label's variant alone.
    pub variant_json: String,
}

/// The index file written beside variant wheels (`fatpkg-1.0-variants.json`).
pub fn variants_json_file(host: &WheelName) -> String {
    format!("{}-{}-variants.json", host.distribution, host.version)
}

/// The PEP 850 layout: one [`LabelWheel`] per device wheel key that names
/// GPUs (generic and SPIR-V wheels get none: their code comes through the
/// target wheels' requirements), and the `*-variants.json` text, the
/// union of their variants. `host_metadata` is the host wheel's, with the
/// `device-*` extras.
pub fn label_wheels(
    provider: VariantProvider,
    host: &WheelName,
    host_metadata: &str,
    keys: &[&str],
) -> Result<(Vec<LabelWheel>, String), VariantLabelError> {
    let mut out = Vec::new();
    let mut all = serde_json::Map::new();
    for key in keys {
        let label = variant_value(key);
        let values = kpack_detect::provider::variant_values(key);
        if !is_property_value(&label) || values.is_empty() {
            continue;
        }
        let variant = serde_json::json!({ "amd": { "gfx_arch": values } });
        all.insert(label.clone(), variant.clone());
        let one = serde_json::Map::from_iter([(label.clone(), variant)]);
        let extra = format!("device-{}", kpack_amdgpu::dist_name(key));
        out.push(LabelWheel {
            key: key.to_string(),
            file: variant_wheel_file(host, &label)?,
            metadata: add_plain_requirements(host_metadata, &extra),
            variant_json: pep850_json(provider, one),
            label,
        });
    }
    Ok((out, pep850_json(provider, all)))
}

/// A `variant.json` / `*-variants.json` document of the PEP 850 layout.
fn pep850_json(
    provider: VariantProvider,
    variants: serde_json::Map<String, serde_json::Value>,
) -> String {
    let (api, requires) = provider.plugin();
    let doc = serde_json::json!({
        "$schema": VARIANT_SCHEMA,
        "default-priorities": { "namespace": [kpack_detect::provider::NAMESPACE] },
        "providers": { "amd": { "plugin-api": api, "requires": [requires] } },
        "variants": variants,
    });
    // Serializing a JSON value cannot fail.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

/// `metadata` with, after each `Requires-Dist: <req>; extra == "<extra>"`
/// line, the plain line `Requires-Dist: <req>`.
fn add_plain_requirements(metadata: &str, extra: &str) -> String {
    let mut out = String::with_capacity(metadata.len() + 256);
    for line in python_lines(metadata) {
        out.push_str(line);
        out.push('\n');
        if let Some((req, e)) = extra_requirement(line)
            && e == extra
        {
            out.push_str(req);
            out.push('\n');
        }
    }
    out
}

/// What a host wheel offers an installer: its distribution, version, and
/// the `device-*` extras its METADATA provides, spelled as written
/// (`device-all` left out).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostExtras {
    /// The distribution name, as in METADATA.
    pub name: String,
    /// The version.
    pub version: String,
    /// The per-GPU extras (`device-gfx1100`, `device-gfx110x`), in file order.
    pub extras: Vec<String>,
    /// The host wheel's file, when it was read from one on this machine.
    #[serde(skip)]
    pub file: Option<std::path::PathBuf>,
}

impl HostExtras {
    /// From a METADATA text; `None` for one that is not a header file or
    /// names no distribution.
    pub fn from_metadata(text: &str) -> Option<HostExtras> {
        let h = crate::headers::Headers::parse(text).ok()?;
        Some(HostExtras {
            name: h.get("Name")?.to_string(),
            version: h.get("Version")?.to_string(),
            extras: h
                .get_all("Provides-Extra")
                .map(str::trim)
                .filter(|e| e.starts_with("device-") && *e != "device-all")
                .map(str::to_string)
                .collect(),
            file: None,
        })
    }

    /// Read from the wheel at `path`, without unpacking it.
    pub fn read(path: &Path) -> Result<HostExtras> {
        let (_, text) = crate::reader::read_metadata(path)?;
        let host = HostExtras::from_metadata(&text).ok_or_else(|| {
            Error::invalid(path, "METADATA is not a header file with Name and Version")
        })?;
        Ok(HostExtras {
            file: Some(path.to_path_buf()),
            ..host
        })
    }

    /// The extra, as this wheel spells it, whose name normalises (PEP 685:
    /// lower case, runs of `-`, `_`, `.` as one `-`) to `device-<key>`'s.
    pub fn find(&self, key: &str) -> Option<&str> {
        let want = normalize(&format!("device-{key}"));
        self.extras
            .iter()
            .find(|e| normalize(e) == want)
            .map(String::as_str)
    }
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
        if let Some((req, extra)) = extra_requirement(line) {
            out.push_str(req);
            out.push_str("; ");
            out.push_str(&variant_marker(
                extra.strip_prefix("device-").unwrap_or(extra),
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
    use crate::name::{MAX_VARIANT_LABEL, check_variant_label};

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
        let long = "a".repeat(MAX_VARIANT_LABEL + 1);
        for bad in [
            "", "AMD", "a-b", "a/b", "ä", ".", "..", "a..b", ".a", "a.", &long,
        ] {
            let e = check_variant_label(bad).unwrap_err();
            assert_eq!(e.label, bad);
            assert!(e.to_string().starts_with("variant label "), "{e}");
        }
        for good in ["amd", "rocm7.1", "gfx_9", "0", "a.b.c", &long[1..]] {
            check_variant_label(good).unwrap();
        }
        let v = variant_wheel(&host, "amd", HOST, &["gfx1100"]).unwrap();
        assert_eq!(v.metadata, add_variant_markers(HOST));
        assert_eq!(v.variant_json, variant_json(&["gfx1100"]));
        assert!(variant_wheel(&host, "A", HOST, &[]).is_err());
    }

    #[test]
    fn label_wheels_carry_one_variant_each_with_target_level_values() {
        let host = WheelName::parse("fatpkg-1.0-py3-none-linux_x86_64.whl").unwrap();
        let meta = "Name: fatpkg\nVersion: 1.0\nProvides-Extra: device-gfx110x\n\
Requires-Dist: fatpkg-device-gfx110x == 1.0; extra == \"device-gfx110x\"\n\
Requires-Dist: fatpkg-device-gfx11-generic == 1.0; extra == \"device-gfx110x\"\n\
Provides-Extra: device-gfx9-0\n\
Requires-Dist: fatpkg-device-gfx9-0 == 1.0; extra == \"device-gfx9-0\"\n";
        let keys = ["gfx110x", "gfx9-0", "gfx11-generic", "amdgcnspirv"];
        let (wheels, index) = label_wheels(VariantProvider::Kpack, &host, meta, &keys).unwrap();
        let labels: Vec<&str> = wheels.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(labels, ["gfx110x", "gfx9_0"]);
        assert_eq!(
            wheels[0].file,
            "fatpkg-1.0-py3-none-linux_x86_64-gfx110x.whl"
        );
        let one: serde_json::Value = serde_json::from_str(&wheels[0].variant_json).unwrap();
        assert_eq!(
            one,
            serde_json::json!({
                "$schema": VARIANT_SCHEMA,
                "default-priorities": {"namespace": ["amd"]},
                "providers": {"amd": {
                    "plugin-api": "kpack_variant_provider.plugin:AmdVariantPlugin",
                    "requires": ["kpack-variant-provider >= 0.2"],
                }},
                "variants": {"gfx110x": {"amd": {"gfx_arch":
                    ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]}}},
            })
        );
        let m = &wheels[0].metadata;
        assert!(
            m.contains("\nRequires-Dist: fatpkg-device-gfx110x == 1.0\n"),
            "{m}"
        );
        assert!(
            m.contains("\nRequires-Dist: fatpkg-device-gfx11-generic == 1.0\n"),
            "{m}"
        );
        assert!(!m.contains("fatpkg-device-gfx9-0 == 1.0\n"), "{m}");
        assert!(!m.contains("variant_properties"), "{m}");
        let all: serde_json::Value = serde_json::from_str(&index).unwrap();
        let labels: Vec<&String> = all["variants"].as_object().unwrap().keys().collect();
        assert_eq!(labels, ["gfx110x", "gfx9_0"]);
        assert_eq!(variants_json_file(&host), "fatpkg-1.0-variants.json");
        let (rb, _) = label_wheels(VariantProvider::RocmBootstrap, &host, meta, &keys).unwrap();
        let v: serde_json::Value = serde_json::from_str(&rb[0].variant_json).unwrap();
        assert_eq!(
            v["providers"]["amd"],
            serde_json::json!({
                "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin",
                "requires": ["rocm-bootstrap >= 0.3.0"],
            })
        );
    }
}
