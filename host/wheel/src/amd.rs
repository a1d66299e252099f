//! AMD's wheel layout ([`AmdLayout`]), what AMD's
//! `split_python_wheels` writes, for device wheels that sit on one index
//! with AMD's own:
//!
//! - one archive per target id for the whole wheel,
//!   `<overlay root>/.kpack/<group>_<target id>.kpack` (`group`: the
//!   METADATA `Name` lower-cased, `-` → `_`; `torch_gfx90a:xnack+.kpack`),
//!   assembled here from the per-binary archives the split wrote
//!   (`kpack_split::merge_archives`); every marker names `<group>_@GFXARCH@.kpack`
//!   relative to its binary, TOC keys `<path in the overlay root>#<n>`;
//! - device wheels per bundle key of rocm-bootstrap 0.3.0: a processor
//!   (its xnack and sramecc variants are archive files inside its wheel),
//!   or the sub-family or family a database handler names (AOTriton's
//!   `amd-gfx11xx` images: the **parent** wheel `<prefix>-gfx11`), named
//!   `<prefix>-<key, _ → ->`;
//! - METADATA as AMD writes it ([`device_metadata`], [`host_metadata`]):
//!   a target wheel requires its host release, the parent wheels of its
//!   packaging chain that this split wrote, and the `--device-requires-dist`
//!   entries with `@GFXARCH@` replaced; the host gains
//!   `Requires-Dist: rocm-bootstrap >= 0.3.0`, a `device-<target>` extra per target
//!   and `device-all`.
//!
//! Where kpack goes further than AMD (which stops on them): code for a
//! generic target or for SPIR-V gets a wheel of its own, which every
//! target wheel it runs on requires, like a parent.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kpack_format::GFXARCH;

use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::name::is_valid_name;

/// What AMD's host wheels require of rocm-bootstrap (AMD's splitter since
/// its provider and ownership data moved there).
pub(crate) const ROCM_BOOTSTRAP_REQUIREMENT: &str = "rocm-bootstrap >= 0.3.0";

/// The WHEEL `Generator` of AMD's device wheels.
pub(crate) const AMD_GENERATOR: &str = "rocm-kpack-split-python-wheels";

/// How split output is packaged in AMD's layout (`--overlay-root`).
#[derive(Debug, Clone, Default)]
pub struct AmdLayout {
    /// The directory of the wheel whose fat binaries and database files
    /// are split (`torch`, slashes trimmed); archives go to its `.kpack/`.
    /// Everything outside it is copied as it is.
    pub overlay_root: String,
    /// More `Requires-Dist` of each target device wheel, `@GFXARCH@`
    /// replaced by its target (`rocm-sdk-device-@GFXARCH@ == 7.1`).
    pub device_requires_dist: Vec<String>,
    /// Write each wheel as an unpacked directory (`--output-format
    /// directory`) instead of a `.whl` file.
    pub directories: bool,
    /// Also write the variant wheel (`--generate-variant-wheel`), with this
    /// label (`--variant-label`, default `variant`); experimental.
    pub variant_label: Option<String>,
    /// Whose variant wheels: AMD's one wheel, byte for byte (the default),
    /// or the PEP 850 layout naming kpack's or rocm-bootstrap's provider,
    /// one wheel per target ([`crate::label_wheels`]).
    pub variant_provider: crate::VariantProvider,
}

impl AmdLayout {
    /// Refuse what AMD's layout cannot write, before anything is read:
    /// an overlay root that is not a plain relative path, a device prefix
    /// that is not a distribution name, a `--device-requires-dist` without
    /// `@GFXARCH@` (every device wheel would require the same thing).
    pub fn check(&self, input: &Path, device_prefix: Option<&str>) -> Result<()> {
        let root = &self.overlay_root;
        if !kpack_fsafe::is_plain_relative(root) {
            return Err(Error::invalid(
                input,
                format!("--overlay-root {root:?} is not a directory path inside the wheel"),
            ));
        }
        let Some(prefix) = device_prefix else {
            return Err(Error::invalid(
                input,
                "--overlay-root needs --device-package-prefix (AMD's layout names device wheels <prefix>-<target>)",
            ));
        };
        if !is_valid_name(prefix) {
            return Err(Error::invalid(
                input,
                format!("--device-package-prefix {prefix:?} is not a valid distribution name"),
            ));
        }
        for d in &self.device_requires_dist {
            check_device_requirement(d).map_err(|why| {
                Error::invalid(input, format!("--device-requires-dist {d:?} {why}"))
            })?;
        }
        if let Some(label) = &self.variant_label {
            crate::name::check_variant_label(label)
                .map_err(|e| Error::invalid(input, format!("--{e}")))?;
        }
        Ok(())
    }
}

/// A `--device-requires-dist` value is one PEP 508 requirement line whose
/// distribution name holds [`GFXARCH`] once: one line (a newline would add
/// a METADATA header of its own), printable, and with a target in its
/// place a requirement `packaging` reads ([`crate::pep508`]). Returns why
/// not.
fn check_device_requirement(d: &str) -> std::result::Result<(), DeviceRequirementError> {
    if d.chars().any(char::is_control) {
        return Err(DeviceRequirementError::Control);
    }
    let n = d.matches(GFXARCH).count();
    if n != 1 {
        return Err(DeviceRequirementError::Placeholders { count: n });
    }
    let d = d.trim();
    let name_end = d
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@')))
        .unwrap_or(d.len());
    let name = &d[..name_end];
    if !name.contains(GFXARCH) {
        return Err(DeviceRequirementError::Outside { name: name.into() });
    }
    // The whole line as `packaging` reads it, with a target in place.
    Ok(crate::pep508::check(&d.replace(GFXARCH, "gfx942"))?)
}

/// Why a `--device-requires-dist` value is refused: a phrase that follows
/// the value in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DeviceRequirementError {
    /// A control character (a newline would start a METADATA line).
    #[error("holds a control character (a newline would add a METADATA line)")]
    Control,
    /// The placeholder is absent or repeated.
    #[error(
        "holds {GFXARCH} {count} times: it names one per-target package, with {GFXARCH} once for the target"
    )]
    Placeholders {
        /// How many times it appears.
        count: usize,
    },
    /// The placeholder is not in the distribution name.
    #[error("has {GFXARCH} outside the distribution name {name:?}")]
    Outside {
        /// The distribution name.
        name: String,
    },
    /// The line with a target in place is no PEP 508 requirement.
    #[error(transparent)]
    Pep508(#[from] crate::pep508::Pep508Error),
}

/// AMD's archive group name: METADATA `Name` lower-cased, `-` → `_`.
pub(crate) fn group_name(host: &str) -> String {
    host.to_lowercase().replace('-', "_")
}

/// The parent wheels among `keys` that target `target` needs: its
/// sub-family and family (its packaging chain, in that order), then the
/// generic and SPIR-V wheels whose code runs on it.
pub(crate) fn parents_of<'k>(target: &str, keys: &'k BTreeSet<String>) -> Vec<&'k str> {
    let chain = [
        kpack_amdgpu::sub_family(target).map(|s| s.key),
        kpack_amdgpu::family(target).map(|f| f.key),
    ];
    let mut out: Vec<&str> = chain
        .into_iter()
        .flatten()
        .filter_map(|k| keys.get(k).map(String::as_str))
        .collect();
    for k in keys {
        let runs = kpack_amdgpu::is_spirv_target(k)
            || kpack_amdgpu::covered_by(k).is_some_and(|c| c.contains(&target));
        if runs && !out.contains(&k.as_str()) {
            out.push(k);
        }
    }
    out
}

/// A device wheel's distribution name (rocm-bootstrap's `device_dist_name`).
pub(crate) fn dist(prefix: &str, key: &str) -> String {
    format!("{prefix}-{}", kpack_amdgpu::dist_name(key))
}

/// METADATA of the device wheel of bundle `key`, as AMD writes it.
pub(crate) fn device_metadata(
    prefix: &str,
    key: &str,
    host: &str,
    version: &str,
    keys: &BTreeSet<String>,
    requires: &[String],
) -> String {
    let label = kpack_amdgpu::display_name(key).unwrap_or(key);
    let mut lines = vec![
        "Metadata-Version: 2.4".to_string(),
        format!("Name: {}", dist(prefix, key)),
        format!("Version: {version}"),
        format!("Summary: AMD device kernels ({label}) for {host}"),
        format!("Requires-Dist: {host} == {version}"),
    ];
    // AMD's order: the `@GFXARCH@` requirements, then the parents.
    if !crate::name::is_parent(key) {
        for r in requires {
            lines.push(format!("Requires-Dist: {}", r.replace(GFXARCH, key)));
        }
        for p in parents_of(key, keys) {
            lines.push(format!("Requires-Dist: {} == {version}", dist(prefix, p)));
        }
    }
    lines.join("\n") + "\n"
}

/// WHEEL of a device wheel, as AMD writes it: the host's first tag.
pub(crate) fn wheel_file(wheel: &Headers) -> String {
    let mut s = format!("Wheel-Version: 1.0\nGenerator: {AMD_GENERATOR}\nRoot-Is-Purelib: false\n");
    if let Some(t) = wheel.get("Tag") {
        s.push_str(&format!("Tag: {t}\n"));
    }
    s
}

/// The host wheel's METADATA `text` with AMD's lines inserted at the end
/// of its headers: `Requires-Dist: rocm-bootstrap >= 0.3.0`, per target a
/// `device-<target>` extra requiring its wheel and its parents, and
/// `device-all` requiring every device wheel.
pub(crate) fn host_metadata(
    text: &str,
    prefix: &str,
    version: &str,
    keys: &BTreeSet<String>,
) -> String {
    let mut lines = vec![format!("Requires-Dist: {ROCM_BOOTSTRAP_REQUIREMENT}")];
    for t in keys.iter().filter(|k| !crate::name::is_parent(k)) {
        let extra = format!("device-{t}");
        lines.push(format!("Provides-Extra: {extra}"));
        for k in std::iter::once(t.as_str()).chain(parents_of(t, keys)) {
            lines.push(format!(
                "Requires-Dist: {} == {version}; extra == \"{extra}\"",
                dist(prefix, k)
            ));
        }
    }
    lines.push("Provides-Extra: device-all".into());
    let all: BTreeSet<String> = keys.iter().map(|k| dist(prefix, k)).collect();
    for d in all {
        lines.push(format!(
            "Requires-Dist: {d} == {version}; extra == \"device-all\""
        ));
    }
    let added = lines.join("\n") + "\n";
    match text.find("\n\n") {
        Some(i) => format!("{}{added}{}", &text[..=i], &text[i + 1..]),
        None if text.ends_with('\n') || text.is_empty() => format!("{text}{added}"),
        None => format!("{text}\n{added}"),
    }
}

/// The host extra that installs target `key`'s wheel, or `None` for a parent.
pub(crate) fn extra(key: &str) -> Option<String> {
    (!crate::name::is_parent(key)).then(|| format!("device-{key}"))
}

/// AMD's `--input DIR`: an unpacked wheel zipped into a wheel in `dest`,
/// named from its `.dist-info` (METADATA `Name` and `Version`, the first
/// WHEEL `Tag`), every regular file with its mode, RECORD regenerated.
/// The directory is only read. Returns the wheel and a warning per stale
/// row of the directory's RECORD (a sha256 or size that is not the
/// file's), as reading a wheel with one warns.
pub fn wheel_from_directory(dir: &Path, dest: &Path) -> Result<(PathBuf, Vec<String>)> {
    let files = crate::reader::list_files(dir)?;
    let mut dist_infos: BTreeSet<&str> = files
        .iter()
        .filter_map(|(rel, _)| rel.split_once('/').map(|(top, _)| top))
        .filter(|top| top.ends_with(".dist-info"))
        .collect();
    let (Some(dist_info), None) = (
        dist_infos.pop_first().map(str::to_string),
        dist_infos.pop_first(),
    ) else {
        return Err(Error::invalid(
            dir,
            "an unpacked wheel has exactly one .dist-info directory",
        ));
    };
    let read = |name: &str| -> Result<Headers> {
        let p = dir.join(&dist_info).join(name);
        let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, "cannot read", e))?;
        Headers::parse(&text).map_err(|e| Error::invalid(&p, "not a header file").with_source(e))
    };
    let (metadata, wheel) = (read("METADATA")?, read("WHEEL")?);
    let field = |h: &Headers, f: &str, file: &str| -> Result<String> {
        h.get(f)
            .map(str::to_string)
            .ok_or_else(|| Error::invalid(dir.join(&dist_info).join(file), format!("no {f}")))
    };
    let name = crate::name::escape(&field(&metadata, "Name", "METADATA")?);
    let version = field(&metadata, "Version", "METADATA")?;
    let tag = field(&wheel, "Tag", "WHEEL")?;
    let file = format!("{name}-{version}-{tag}.whl");
    crate::name::WheelName::parse(&file).map_err(|e| Error::invalid(dir, e.to_string()))?;
    let out = dest.join(&file);
    let mut w = crate::writer::WheelWriter::create(
        &out,
        crate::writer::zip_time(crate::writer::ZIP_EPOCH),
    )?;
    let record = format!("{dist_info}/RECORD");
    let mut files = files;
    files.retain(|(rel, _)| !rel.starts_with(&record));
    files.sort_by_cached_key(|(rel, _)| crate::job::entry_order(&dist_info, rel));
    for (rel, p) in &files {
        w.add_file(rel, p, file_mode(p)?)?;
    }
    let warnings = stale_rows(&dir.join(&record), w.rows())?;
    w.finish(&record)?;
    Ok((out, warnings))
}

/// The rows of the RECORD at `path` (if there is one) whose sha256 or size
/// is not what the file written (`written`) is.
fn stale_rows(path: &Path, written: &[crate::record::RecordEntry]) -> Result<Vec<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, "cannot read", e)),
    };
    let old = crate::record::parse_record(&text)
        .map_err(|e| Error::invalid(path, "not a RECORD").with_source(e))?;
    let mut out = Vec::new();
    for row in old {
        let Some(now) = written.iter().find(|r| r.path == row.path) else {
            continue;
        };
        // Only sha256 is compared: the file was hashed with it.
        let hash_stale = row.hash.starts_with("sha256=")
            && row.hash.trim_end_matches('=') != now.hash.trim_end_matches('=');
        let size_stale = row.size.is_some() && row.size != now.size;
        if hash_stale || size_stale {
            out.push(crate::record::stale_row(
                &row.path,
                &row.hash,
                row.size,
                &now.hash,
                now.size.unwrap_or(0),
            ));
        }
    }
    Ok(out)
}

/// A file's Unix permission bits (0o644 where there are none).
fn file_mode(p: &Path) -> Result<u32> {
    let meta = std::fs::metadata(p).map_err(|e| Error::io(p, "cannot stat", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Ok(meta.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Ok(0o644)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn target_wheels_require_the_parents_this_split_wrote() {
        let k = keys(&["gfx1100", "gfx11", "gfx110x", "gfx12_0", "gfx1201"]);
        assert_eq!(parents_of("gfx1100", &k), ["gfx110x", "gfx11"]);
        assert_eq!(parents_of("gfx1201", &k), ["gfx12_0"]);
        let m = device_metadata(
            "amd-torch-device",
            "gfx1100",
            "torch",
            "2.1",
            &k,
            &["rocm-sdk-device-@GFXARCH@ == 7.1".into()],
        );
        assert_eq!(
            m,
            "Metadata-Version: 2.4\nName: amd-torch-device-gfx1100\nVersion: 2.1\n\
             Summary: AMD device kernels (gfx1100) for torch\nRequires-Dist: torch == 2.1\n\
             Requires-Dist: rocm-sdk-device-gfx1100 == 7.1\n\
             Requires-Dist: amd-torch-device-gfx110x == 2.1\n\
             Requires-Dist: amd-torch-device-gfx11 == 2.1\n"
        );
        // A parent requires only its host, never @GFXARCH@ packages.
        let m = device_metadata(
            "amd-torch-device",
            "gfx12_0",
            "torch",
            "2.1",
            &k,
            &["rocm-sdk-device-@GFXARCH@ == 7.1".into()],
        );
        assert!(m.contains("Name: amd-torch-device-gfx12-0\n"), "{m}");
        assert!(
            m.contains("Summary: AMD device kernels (RDNA4) for torch\n"),
            "{m}"
        );
        assert!(m.ends_with("Requires-Dist: torch == 2.1\n"), "{m}");
    }

    #[test]
    fn host_metadata_gains_amds_extras_before_the_body() {
        let k = keys(&["gfx1100", "gfx11", "gfx942"]);
        let text = "Metadata-Version: 2.1\nName: torch\nVersion: 2.1\n\nThe body.\n";
        let m = host_metadata(text, "amd-torch-device", "2.1", &k);
        assert_eq!(
            m,
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.1\n\
             Requires-Dist: rocm-bootstrap >= 0.3.0\n\
             Provides-Extra: device-gfx1100\n\
             Requires-Dist: amd-torch-device-gfx1100 == 2.1; extra == \"device-gfx1100\"\n\
             Requires-Dist: amd-torch-device-gfx11 == 2.1; extra == \"device-gfx1100\"\n\
             Provides-Extra: device-gfx942\n\
             Requires-Dist: amd-torch-device-gfx942 == 2.1; extra == \"device-gfx942\"\n\
             Provides-Extra: device-all\n\
             Requires-Dist: amd-torch-device-gfx11 == 2.1; extra == \"device-all\"\n\
             Requires-Dist: amd-torch-device-gfx1100 == 2.1; extra == \"device-all\"\n\
             Requires-Dist: amd-torch-device-gfx942 == 2.1; extra == \"device-all\"\n\
             \nThe body.\n"
        );
        let bare = host_metadata("Name: t\nVersion: 1", "p", "1", &keys(&["gfx942"]));
        assert!(bare.starts_with("Name: t\nVersion: 1\nRequires-Dist: rocm-bootstrap >= 0.3.0\n"));
    }

    #[test]
    fn refuses_what_amds_layout_cannot_write() {
        let input = Path::new("w.whl");
        let ok = AmdLayout {
            overlay_root: "torch".into(),
            device_requires_dist: vec!["x-@GFXARCH@ == 1".into()],
            directories: false,
            variant_label: Some("amd".into()),
            variant_provider: crate::VariantProvider::Amd,
        };
        ok.check(input, Some("amd-torch-device")).unwrap();
        assert!(ok.check(input, None).is_err());
        assert!(ok.check(input, Some("bad prefix")).is_err());
        for root in ["", "../x", "a//b", "/abs"] {
            let l = AmdLayout {
                overlay_root: root.into(),
                ..ok.clone()
            };
            assert!(l.check(input, Some("p")).is_err(), "{root}");
        }
        let l = AmdLayout {
            device_requires_dist: vec!["rocm-sdk == 1".into()],
            ..ok.clone()
        };
        let e = l.check(input, Some("p")).unwrap_err().to_string();
        assert!(e.contains("@GFXARCH@"), "{e}");
        for bad in [
            "x-@GFXARCH@ == 1\nRequires-Dist: evil",
            "x-@GFXARCH@@GFXARCH@ == 1",
            "x == 1; extra == \"@GFXARCH@\"",
            "-x-@GFXARCH@",
            "x-@GFXARCH@ junk",
        ] {
            let l = AmdLayout {
                device_requires_dist: vec![bad.into()],
                ..ok.clone()
            };
            let e = l.check(input, Some("p")).unwrap_err().to_string();
            assert!(e.contains("--device-requires-dist"), "{bad}: {e}");
        }
        for good in [
            "rocm-sdk-device-@GFXARCH@ == 7.1",
            "x_@GFXARCH@[extra]>=1; python_version >= \"3.9\"",
            "x-@GFXARCH@",
        ] {
            let l = AmdLayout {
                device_requires_dist: vec![good.into()],
                ..ok.clone()
            };
            l.check(input, Some("p")).unwrap();
        }
    }
}
