//! Wheel and distribution names: PEP 503 normalization, the escaped form
//! used in file names (PEP 427, as amended by the binary distribution format
//! spec), parsing `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`,
//! and the label of a variant wheel's file name ([`check_variant_label`]).

/// A distribution name normalized per PEP 503: lowercase, each run of
/// `-`, `_`, `.` replaced by one `-` (`Torch_Device.gfx90a` → `torch-device-gfx90a`).
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// A distribution name as it appears in wheel and `.dist-info` file names:
/// normalized, with `_` for `-` (`torch_device_gfx90a`).
pub fn escape(name: &str) -> String {
    normalize(name).replace('-', "_")
}

/// Whether `name` is a valid distribution name (PEP 508: ASCII letters and
/// digits, with `-`, `_`, `.` inside).
pub fn is_valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The parts of a wheel file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    /// Distribution, as spelled in the file name (escaped).
    pub distribution: String,
    /// Version, as spelled in the file name.
    pub version: String,
    /// Build tag, if any.
    pub build: Option<String>,
    /// Python tag(s), `.`-separated.
    pub python: String,
    /// ABI tag(s).
    pub abi: String,
    /// Platform tag(s).
    pub platform: String,
}

/// A file name that is not a wheel's (PEP 427), by what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WheelNameError {
    /// No `.whl` at the end.
    #[error("{0:?} does not end in .whl")]
    Suffix(String),
    /// Two `-` in a row, or one at either end.
    #[error("{0:?} has an empty component")]
    EmptyComponent(String),
    /// Not five or six `-`-separated components.
    #[error("{0:?} is not name-version[-build]-python-abi-platform.whl")]
    Components(String),
    /// A build tag that does not start with a digit.
    #[error("{file_name:?}: build tag {build:?} must start with a digit")]
    Build {
        /// The file name.
        file_name: String,
        /// Its build tag.
        build: String,
    },
    /// A distribution name outside PEP 508's grammar.
    #[error("{file_name:?}: {distribution:?} is not a valid distribution name")]
    Distribution {
        /// The file name.
        file_name: String,
        /// Its distribution component.
        distribution: String,
    },
}

impl WheelName {
    /// Parse a wheel file name (no directory).
    pub fn parse(file_name: &str) -> Result<WheelName, WheelNameError> {
        let name = || file_name.to_string();
        let stem = file_name
            .strip_suffix(".whl")
            .ok_or_else(|| WheelNameError::Suffix(name()))?;
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(WheelNameError::EmptyComponent(name()));
        }
        let (build, tags) = match parts.as_slice() {
            [_, _, p, a, pl] => (None, [*p, *a, *pl]),
            [_, _, b, p, a, pl] => {
                if !b.starts_with(|c: char| c.is_ascii_digit()) {
                    return Err(WheelNameError::Build {
                        file_name: name(),
                        build: b.to_string(),
                    });
                }
                (Some(b.to_string()), [*p, *a, *pl])
            }
            _ => return Err(WheelNameError::Components(name())),
        };
        if !is_valid_name(parts[0]) {
            return Err(WheelNameError::Distribution {
                file_name: name(),
                distribution: parts[0].to_string(),
            });
        }
        Ok(WheelName {
            distribution: parts[0].to_string(),
            version: parts[1].to_string(),
            build,
            python: tags[0].to_string(),
            abi: tags[1].to_string(),
            platform: tags[2].to_string(),
        })
    }

    /// This name with another distribution (escaped per [`escape`]), same
    /// version, build tag and tags.
    pub fn with_distribution(&self, distribution: &str) -> WheelName {
        WheelName {
            distribution: escape(distribution),
            ..self.clone()
        }
    }

    /// `{distribution}-{version}`: the stem of `.dist-info` and `.data`.
    pub fn dist_stem(&self) -> String {
        format!("{}-{}", self.distribution, self.version)
    }
}

impl std::fmt::Display for WheelName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.distribution, self.version)?;
        if let Some(b) = &self.build {
            write!(f, "-{b}")?;
        }
        write!(f, "-{}-{}-{}.whl", self.python, self.abi, self.platform)
    }
}

/// A variant label a wheel-variant installer cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("variant label {label:?} {why}")]
pub struct VariantLabelError {
    /// The label as given.
    pub label: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// The longest variant label (PEP 817: 1 to 16 characters).
pub const MAX_VARIANT_LABEL: usize = 16;

/// Check a variant label: 1 to [`MAX_VARIANT_LABEL`] characters, only
/// lowercase ASCII letters, digits, `_` and `.` (what uv's preview accepts
/// in a file name), and not `.`/`..`-like: no leading or trailing `.` and
/// no `..`, which would make the wheel's file name one no installer reads.
pub fn check_variant_label(label: &str) -> Result<(), VariantLabelError> {
    let why = if label.is_empty() {
        "is empty"
    } else if label.len() > MAX_VARIANT_LABEL {
        "is longer than 16 characters"
    } else if !label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_'))
    {
        "may hold only lowercase letters, digits, '_' and '.'"
    } else if label.starts_with('.') || label.ends_with('.') || label.contains("..") {
        "may not start or end with '.' or hold '..'"
    } else {
        return Ok(());
    };
    Err(VariantLabelError {
        label: label.to_string(),
        why,
    })
}

/// The variant wheel's file name: the host wheel's with `-<label>` before
/// `.whl`.
pub fn variant_wheel_file(host: &WheelName, label: &str) -> Result<String, VariantLabelError> {
    check_variant_label(label)?;
    let name = host.to_string();
    let stem = name.strip_suffix(".whl").unwrap_or(&name);
    Ok(format!("{stem}-{label}.whl"))
}

/// Whether a device wheel's bundle key is a **parent**: a family or
/// sub-family of rocm-bootstrap, a generic target, or SPIR-V (code that
/// runs on many processors); anything else is a target.
pub(crate) fn is_parent(key: &str) -> bool {
    matches!(
        kpack_amdgpu::key_level(key),
        Some(kpack_amdgpu::Level::Family | kpack_amdgpu::Level::SubFamily)
    ) || kpack_amdgpu::is_generic(key)
        || kpack_amdgpu::is_spirv_target(key)
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

    #[test]
    fn normalizes_per_pep_503() {
        assert_eq!(normalize("Friendly-Bard"), "friendly-bard");
        assert_eq!(normalize("FRIENDLY__._bard"), "friendly-bard");
        assert_eq!(escape("torch-device.gfx90a"), "torch_device_gfx90a");
    }

    #[test]
    fn parses_and_prints_file_names() {
        let n =
            WheelName::parse("torch-2.10.0+rocm7.1-cp312-cp312-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!(
            (
                n.distribution.as_str(),
                n.version.as_str(),
                n.build.as_deref()
            ),
            ("torch", "2.10.0+rocm7.1", None)
        );
        assert_eq!(n.platform, "manylinux_2_28_x86_64");
        assert_eq!(
            n.with_distribution("torch-device-gfx90a").to_string(),
            "torch_device_gfx90a-2.10.0+rocm7.1-cp312-cp312-manylinux_2_28_x86_64.whl"
        );
        let b = WheelName::parse("pkg-1.0-1abc-py3-none-any.whl").unwrap();
        assert_eq!(b.build.as_deref(), Some("1abc"));
        assert_eq!(b.to_string(), "pkg-1.0-1abc-py3-none-any.whl");
        assert_eq!(b.dist_stem(), "pkg-1.0");
    }

    #[test]
    fn rejects_bad_file_names() {
        for bad in [
            "pkg-1.0-py3-none.whl",
            "pkg-1.0-py3-none-any.zip",
            "pkg-1.0-x-py3-none-any.whl",
            "-1.0-py3-none-any.whl",
            "p$g-1.0-py3-none-any.whl",
        ] {
            assert!(WheelName::parse(bad).is_err(), "{bad}");
        }
    }
}
