//! Target ids per LLVM's grammar (`gfx90a:sramecc+:xnack-`), the `-strict`
//! variant, and the processor grammar (`gfx` + major + minor + stepping).

use std::fmt;

/// The target triple of HSA code objects.
pub const TARGET_TRIPLE: &str = "amdgcn-amd-amdhsa";

/// The prefix ROCr puts before a target id in agent ISA names and
/// `amdhsa.target` (`amdgcn-amd-amdhsa--gfx942:xnack-`): the triple plus
/// an empty environment field. AMD's compiler for ROCm 10 fills the
/// environment in (`amdgcn-amd-amdhsa-unknown-gfx942`); [`QualifiedTarget`]
/// reads both.
pub const TARGET_PREFIX: &str = "amdgcn-amd-amdhsa--";

/// The architecture field of portable SPIR-V bundle entries
/// (`hipv4-spirv64-amd-amdhsa--amdgcnspirv`).
pub const SPIRV_ARCH: &str = "spirv64";

/// The target id of portable SPIR-V (the SPIR-V module's own rules live
/// in `spirv.rs`, which builds on this grammar).
pub const SPIRV_TARGET: &str = "amdgcnspirv";

/// The vendor and OS fields every HSA triple carries, with the dashes
/// around them.
const VENDOR_OS: &str = "-amd-amdhsa-";

/// A target id with what may be written before it: an offload kind
/// (`hip`, `hipv4`, `openmp`, ...), an architecture (`amdgcn` or
/// `spirv64`), the HSA vendor and OS, and an environment field that LLVM
/// leaves empty (`amdgcn-amd-amdhsa--gfx942`) and AMD's ROCm 10 compiler
/// writes as `unknown` (`amdgcn-amd-amdhsa-unknown-gfx942`). This is the
/// one reader of every such spelling: code-object notes, bundle entry ids,
/// agent ISA names, command-line targets.
///
/// ```
/// use kpack_amdgpu::QualifiedTarget;
/// let q = QualifiedTarget::split("hip-amdgcn-amd-amdhsa-unknown-gfx942:xnack-").unwrap();
/// assert_eq!((q.kind, q.arch, q.environment, q.target), (Some("hip"), "amdgcn", "unknown", "gfx942:xnack-"));
/// let q = QualifiedTarget::split("amdgcn-amd-amdhsa--gfx9-4-generic").unwrap();
/// assert_eq!((q.kind, q.environment, q.target), (None, "", "gfx9-4-generic"));
/// assert!(QualifiedTarget::split("gfx942").is_none());
/// assert!(QualifiedTarget::split("host-x86_64-unknown-linux-gnu").is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QualifiedTarget<'a> {
    /// The offload kind before the triple, if any (`hipv4`).
    pub kind: Option<&'a str>,
    /// `amdgcn` or `spirv64`.
    pub arch: &'a str,
    /// The environment field: empty or, from AMD's compiler, `unknown`.
    pub environment: &'a str,
    /// The target id text after the triple (never empty).
    pub target: &'a str,
}

impl<'a> QualifiedTarget<'a> {
    /// Split `[kind-]arch-amd-amdhsa-[environment]-target`; `None` when
    /// `s` is not spelled so (a bare target id, a host entry, a triple
    /// with nothing after it).
    pub fn split(s: &'a str) -> Option<QualifiedTarget<'a>> {
        let at = s.find(VENDOR_OS)?;
        let head = &s[..at];
        let (kind, arch) = match head.rsplit_once('-') {
            Some((kind, arch)) => (Some(kind), arch),
            None => (None, head),
        };
        let word = |w: &str| w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !(arch == "amdgcn" || arch == SPIRV_ARCH)
            || kind.is_some_and(|k| k.is_empty() || !word(k))
        {
            return None;
        }
        let (environment, target) = s[at + VENDOR_OS.len()..].split_once('-')?;
        if !word(environment) || target.is_empty() {
            return None;
        }
        Some(QualifiedTarget {
            kind,
            arch,
            environment,
            target,
        })
    }

    /// Whether the entry holds portable SPIR-V rather than an AMDGPU code
    /// object.
    pub fn is_spirv(&self) -> bool {
        self.arch == SPIRV_ARCH
    }
}

/// Drop whatever [`QualifiedTarget`] reads before a target id (offload
/// kind, triple with either environment spelling) when something follows
/// it; anything else is returned unchanged, so a bare prefix never becomes
/// an empty target.
///
/// ```
/// use kpack_amdgpu::strip_target_prefix;
/// assert_eq!(strip_target_prefix("amdgcn-amd-amdhsa--gfx942"), "gfx942");
/// assert_eq!(strip_target_prefix("amdgcn-amd-amdhsa-unknown-gfx942:sramecc+"), "gfx942:sramecc+");
/// assert_eq!(strip_target_prefix("hipv4-amdgcn-amd-amdhsa--gfx90a"), "gfx90a");
/// assert_eq!(strip_target_prefix("gfx942"), "gfx942");
/// assert_eq!(strip_target_prefix("amdgcn-amd-amdhsa--"), "amdgcn-amd-amdhsa--");
/// ```
pub fn strip_target_prefix(s: &str) -> &str {
    QualifiedTarget::split(s).map_or(s, |q| q.target)
}

/// The suffix that names a processor's strict variant (`gfx1250-strict`).
const STRICT_SUFFIX: &str = "-strict";

/// One target feature with its requested state, e.g. `xnack+`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Feature {
    /// Feature name, such as `xnack` or `sramecc`.
    pub name: String,
    /// `true` for `+`, `false` for `-`.
    pub on: bool,
}

/// A GPU target id: a processor and the features it states, kept in
/// canonical (alphabetical: `sramecc` before `xnack`) order.
///
/// The processor keeps a `-strict` suffix: `gfx1250` and `gfx1250-strict`
/// are different targets everywhere (directory names, archive keys), so
/// [`processor`](TargetId::processor) returns `gfx1250-strict` and
/// [`base_processor`](TargetId::base_processor) the LLVM processor.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetId {
    processor: String,
    features: Vec<Feature>,
}

/// A string that is not a target id; it says which and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetIdError {
    text: String,
    reason: &'static str,
}

impl TargetIdError {
    /// `text` parses but names no GPU LLVM knows ([`is_known_target`]).
    pub(crate) fn unknown(text: &str) -> TargetIdError {
        TargetIdError {
            text: text.to_string(),
            reason: "not a known AMD GPU (name one such as gfx90a, gfx942 or gfx1100)",
        }
    }

    /// The text that failed to parse.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Why it is not a target id, e.g. `feature given twice`.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

impl fmt::Display for TargetIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "target id {:?}: {}", self.text, self.reason)
    }
}

impl std::error::Error for TargetIdError {}

impl TargetId {
    /// Parse `processor(:feature(+|-))*`, the target-id field of a bundle
    /// entry id. The processor is ASCII letters, digits, `-` and `_`
    /// (generic processors and `-strict` keep their dashes); a feature is
    /// letters and digits. Features are stored in canonical order; a
    /// feature given twice is an error.
    ///
    /// ```
    /// use kpack_amdgpu::TargetId;
    /// let t = TargetId::parse("gfx908:xnack-:sramecc+").unwrap();
    /// assert_eq!(t.to_string(), "gfx908:sramecc+:xnack-");
    /// assert!(TargetId::parse("gfx90a:xnack").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<TargetId, TargetIdError> {
        let bad = |reason| TargetIdError {
            text: text.to_string(),
            reason,
        };
        let mut parts = text.split(':');
        let processor = parts.next().unwrap_or_default();
        if processor.is_empty()
            || !processor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad("bad processor name"));
        }
        let mut features = Vec::new();
        for part in parts {
            let (name, on) = match part.as_bytes().last() {
                Some(b'+') => (&part[..part.len() - 1], true),
                Some(b'-') => (&part[..part.len() - 1], false),
                _ => return Err(bad("a feature must end in + or -")),
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(bad("bad feature name"));
            }
            if features.iter().any(|f: &Feature| f.name == name) {
                return Err(bad("feature given twice"));
            }
            features.push(Feature {
                name: name.to_string(),
                on,
            });
        }
        Ok(TargetId::new(processor, features))
    }

    /// Parse a target id in any spelling [`strip_target_prefix`] reads
    /// (`gfx942`, `amdgcn-amd-amdhsa--gfx942`,
    /// `amdgcn-amd-amdhsa-unknown-gfx942`, `hip-amdgcn-amd-amdhsa--gfx942`),
    /// surrounding whitespace ignored.
    ///
    /// ```
    /// use kpack_amdgpu::TargetId;
    /// let t = TargetId::parse_qualified("amdgcn-amd-amdhsa-unknown-gfx942:xnack-").unwrap();
    /// assert_eq!(t.to_string(), "gfx942:xnack-");
    /// ```
    pub fn parse_qualified(text: &str) -> Result<TargetId, TargetIdError> {
        TargetId::parse(strip_target_prefix(text.trim()))
    }

    /// Build a target id from parts (features are put in canonical order).
    pub fn new(processor: impl Into<String>, mut features: Vec<Feature>) -> TargetId {
        features.sort();
        TargetId {
            processor: processor.into(),
            features,
        }
    }

    /// A processor with no features, e.g. `TargetId::bare("gfx942")`.
    pub fn bare(processor: impl Into<String>) -> TargetId {
        TargetId::new(processor, Vec::new())
    }

    /// The processor as named, `-strict` included: `gfx90a`,
    /// `gfx9-4-generic`, `gfx1250-strict`.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// The LLVM processor: [`processor`](TargetId::processor) without a
    /// `-strict` suffix (the name [`crate::mach_for_processor`] knows).
    pub fn base_processor(&self) -> &str {
        self.processor
            .strip_suffix(STRICT_SUFFIX)
            .unwrap_or(&self.processor)
    }

    /// Whether the `-strict` variant of the processor is named.
    pub fn is_strict(&self) -> bool {
        self.processor.len() > STRICT_SUFFIX.len() && self.processor.ends_with(STRICT_SUFFIX)
    }

    /// The features in canonical order.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// State of one feature: `Some(true)` for `+`, `Some(false)` for `-`,
    /// `None` when the target does not state it ("any").
    pub fn feature(&self, name: &str) -> Option<bool> {
        self.features.iter().find(|f| f.name == name).map(|f| f.on)
    }

    /// `xnack` as stated: `Some(true)` for `xnack+`, `None` when not named.
    pub fn xnack(&self) -> Option<bool> {
        self.feature("xnack")
    }

    /// `sramecc` as stated: `Some(true)` for `sramecc+`, `None` when not named.
    pub fn sramecc(&self) -> Option<bool> {
        self.feature("sramecc")
    }

    /// Set (`Some`) or drop (`None`) one feature, keeping canonical order.
    pub fn with_feature(mut self, name: &str, state: Option<bool>) -> TargetId {
        self.features.retain(|f| f.name != name);
        if let Some(on) = state {
            self.features.push(Feature {
                name: name.to_string(),
                on,
            });
            self.features.sort();
        }
        self
    }

    /// Set or drop `xnack`.
    pub fn with_xnack(self, state: Option<bool>) -> TargetId {
        self.with_feature("xnack", state)
    }

    /// Set or drop `sramecc`.
    pub fn with_sramecc(self, state: Option<bool>) -> TargetId {
        self.with_feature("sramecc", state)
    }

    /// Name or drop the `-strict` variant of the processor.
    pub fn with_strict(mut self, strict: bool) -> TargetId {
        if strict && !self.is_strict() {
            self.processor.push_str(STRICT_SUFFIX);
        } else if !strict && self.is_strict() {
            self.processor
                .truncate(self.processor.len() - STRICT_SUFFIX.len());
        }
        self
    }

    /// A spelling safe in file and directory names on every platform:
    /// `:` becomes `_`, `+` and `-` stay (`gfx90a_xnack+`).
    pub fn file_name(&self) -> String {
        self.to_string().replace(':', "_")
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for feat in &self.features {
            write!(f, ":{}{}", feat.name, if feat.on { '+' } else { '-' })?;
        }
        Ok(())
    }
}

impl std::str::FromStr for TargetId {
    type Err = TargetIdError;

    fn from_str(s: &str) -> Result<TargetId, TargetIdError> {
        TargetId::parse(s)
    }
}

/// The processor of a target id or processor name, its features dropped
/// (`gfx90a:xnack+` → `gfx90a`, `gfx11-generic:xnack-` → `gfx11-generic`,
/// `gfx1250-strict` stays). Text is not checked against the grammar (TOC
/// arches, detected GPUs and table keys all go through it);
/// [`TargetId::parse`] is the checked way. The one place a target string is
/// cut at its first `:`.
///
/// ```
/// use kpack_amdgpu::processor_of;
/// assert_eq!(processor_of("gfx942:sramecc+:xnack-"), "gfx942");
/// assert_eq!(processor_of("gfx90a"), "gfx90a");
/// ```
pub fn processor_of(target: &str) -> &str {
    split_target(target).0
}

/// A target string cut at its first `:` into the processor and the
/// features text as written (`gfx942:sramecc+:xnack-` → `gfx942`,
/// `Some("sramecc+:xnack-")`), unchecked like [`processor_of`]: for code
/// that keeps features as it found them (the runtime's compatible-target
/// expansion).
///
/// ```
/// use kpack_amdgpu::split_target;
/// assert_eq!(split_target("gfx1101:xnack-"), ("gfx1101", Some("xnack-")));
/// assert_eq!(split_target("gfx90a"), ("gfx90a", None));
/// ```
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once(':') {
        Some((processor, features)) => (processor, Some(features)),
        None => (target, None),
    }
}

/// The features of a target string as written, in order, empty ones
/// skipped (`gfx942::xnack-` → `xnack-`), unchecked like
/// [`processor_of`].
///
/// ```
/// use kpack_amdgpu::features_of;
/// let f: Vec<&str> = features_of("gfx942:sramecc+::xnack-").collect();
/// assert_eq!(f, ["sramecc+", "xnack-"]);
/// assert_eq!(features_of("gfx90a").count(), 0);
/// ```
pub fn features_of(target: &str) -> impl Iterator<Item = &str> {
    split_target(target)
        .1
        .into_iter()
        .flat_map(|f| f.split(':'))
        .filter(|f| !f.is_empty())
}

/// Split a concrete LLVM processor name off the front of `s`, using the
/// processor grammar instead of a list of known GPUs.
///
/// Every AMDGPU processor is `gfx` + major + minor + stepping, where the
/// major version is one digit for 6–9 and two digits from 10 on, the minor
/// is one digit and the stepping one hex digit (`gfx908`, `gfx90a`,
/// `gfx1030`, `gfx1201`). So whatever follows is not part of the name: this
/// is how MIOpen's glued `gfx90878` (gfx908 with 78 CUs) or `gfx942130`
/// split without a hard-coded table that must be edited for each new GPU.
///
/// ```
/// use kpack_amdgpu::split_processor;
/// assert_eq!(split_processor("gfx90878.HIP.fdb.txt"), Some(("gfx908", "78.HIP.fdb.txt")));
/// assert_eq!(split_processor("gfx942130.db.txt"), Some(("gfx942", "130.db.txt")));
/// assert_eq!(split_processor("gfx1030_36.db.txt"), Some(("gfx1030", "_36.db.txt")));
/// assert_eq!(split_processor("gfx90a"), Some(("gfx90a", "")));
/// assert_eq!(split_processor("gfx11"), None);
/// ```
pub fn split_processor(s: &str) -> Option<(&str, &str)> {
    let b = s.as_bytes();
    if !s.starts_with("gfx") {
        return None;
    }
    let major = match b.get(3)? {
        b'1' => 2,
        c if c.is_ascii_digit() => 1,
        _ => return None,
    };
    let minor_at = 3 + major;
    if !b.get(3..minor_at)?.iter().all(u8::is_ascii_digit) || !b.get(minor_at)?.is_ascii_digit() {
        return None;
    }
    let step = *b.get(minor_at + 1)?;
    if !(step.is_ascii_digit() || (b'a'..=b'f').contains(&step)) {
        return None;
    }
    let end = minor_at + 2;
    Some((s.get(..end)?, s.get(end..)?))
}

/// Whether `id` names a GPU LLVM knows (its processor, `-strict` aside,
/// has an `EF_AMDGPU_MACH` value; generic processors included) or the
/// portable SPIR-V target: the check every list of targets a user types
/// goes through (`--gpu-targets`, `--exclude-arch`, `--keep`, `--gpu`), so
/// a typo is an error rather than a GPU silently left out.
///
/// ```
/// use kpack_amdgpu::{TargetId, is_known_target};
/// assert!(is_known_target(&TargetId::parse("gfx90a:xnack+").unwrap()));
/// assert!(is_known_target(&TargetId::parse("gfx1250-strict").unwrap()));
/// assert!(!is_known_target(&TargetId::parse("gfx9000").unwrap()));
/// ```
pub fn is_known_target(id: &TargetId) -> bool {
    crate::mach_for_processor(id.base_processor()).is_some() || id.processor() == SPIRV_TARGET
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalizes_feature_order() {
        let t = TargetId::parse("gfx908:xnack-:sramecc+").unwrap();
        assert_eq!(t.to_string(), "gfx908:sramecc+:xnack-");
        assert_eq!(t.feature("xnack"), Some(false));
        assert_eq!(t.xnack(), Some(false));
        assert_eq!(t.sramecc(), Some(true));
        assert_eq!(t.file_name(), "gfx908_sramecc+_xnack-");
    }

    #[test]
    fn parse_and_format_round_trip() {
        for text in [
            "gfx942",
            "gfx90a:xnack+",
            "gfx942:sramecc+:xnack-",
            "gfx1250-strict",
            "gfx1250-strict:xnack+",
            "gfx9-4-generic:xnack+",
            "gfx11-generic",
            "gfx10-3-generic",
        ] {
            let t = TargetId::parse(text).unwrap();
            assert_eq!(t.to_string(), text);
            assert_eq!(TargetId::parse(&t.to_string()).unwrap(), t);
        }
    }

    #[test]
    fn keeps_strict_distinct() {
        let strict = TargetId::parse("gfx1250-strict:xnack+").unwrap();
        let plain = TargetId::parse("gfx1250:xnack+").unwrap();
        assert_ne!(strict, plain);
        assert!(strict.is_strict() && !plain.is_strict());
        assert_eq!(strict.processor(), "gfx1250-strict");
        assert_eq!(strict.base_processor(), "gfx1250");
        assert_eq!(plain.clone().with_strict(true), strict);
        assert_eq!(strict.with_strict(false), plain);
        assert!(!TargetId::bare("-strict").is_strict());
    }

    #[test]
    fn builder_keeps_canonical_order() {
        let t = TargetId::bare("gfx942")
            .with_xnack(Some(true))
            .with_sramecc(Some(false));
        assert_eq!(t.to_string(), "gfx942:sramecc-:xnack+");
        assert_eq!(t.with_xnack(None).to_string(), "gfx942:sramecc-");
    }

    #[test]
    fn rejects_bad_target_ids_saying_why() {
        for (bad, why) in [
            ("", "bad processor name"),
            ("gfx 90a", "bad processor name"),
            ("gfx90a:xnack", "a feature must end in + or -"),
            ("gfx90a::xnack+", "a feature must end in + or -"),
            ("gfx90a:+", "bad feature name"),
            ("gfx90a:xnack+:xnack-", "feature given twice"),
        ] {
            let e = TargetId::parse(bad).unwrap_err();
            assert_eq!(e.reason(), why, "{bad:?}");
            assert_eq!(e.to_string(), format!("target id {bad:?}: {why}"));
        }
    }

    #[test]
    fn reads_both_environment_spellings_and_any_kind() {
        for (text, want) in [
            ("amdgcn-amd-amdhsa--gfx942", "gfx942"),
            ("amdgcn-amd-amdhsa-unknown-gfx942", "gfx942"),
            (
                "amdgcn-amd-amdhsa-unknown-gfx942:sramecc+:xnack-",
                "gfx942:sramecc+:xnack-",
            ),
            (
                "hip-amdgcn-amd-amdhsa-unknown-gfx90a:xnack+",
                "gfx90a:xnack+",
            ),
            ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "gfx9-4-generic"),
            ("openmp-amdgcn-amd-amdhsa--gfx1100", "gfx1100"),
            ("hipv4-spirv64-amd-amdhsa--amdgcnspirv", "amdgcnspirv"),
            (" amdgcn-amd-amdhsa-unknown-gfx1201 ", "gfx1201"),
        ] {
            assert_eq!(
                TargetId::parse_qualified(text).unwrap().to_string(),
                want,
                "{text}"
            );
        }
        for text in [
            "amdgcn-amd-amdhsa--",
            "amdgcn-amd-amdhsa-unknown-",
            "x86_64-amd-amdhsa--gfx942",
            "-amdgcn-amd-amdhsa--gfx942",
            "host-x86_64-unknown-linux-gnu",
        ] {
            assert_eq!(strip_target_prefix(text), text, "{text}");
        }
        assert!(
            QualifiedTarget::split("hipv4-spirv64-amd-amdhsa--amdgcnspirv")
                .unwrap()
                .is_spirv()
        );
    }

    #[test]
    fn splits_processor_by_grammar() {
        assert_eq!(split_processor("gfx1151"), Some(("gfx1151", "")));
        assert_eq!(split_processor("gfx90c64"), Some(("gfx90c", "64")));
        assert_eq!(split_processor("gfx110048"), Some(("gfx1100", "48")));
        assert_eq!(split_processor("gfx90g"), None);
        assert_eq!(split_processor("gfxa"), None);
        assert_eq!(split_processor(""), None);
    }
}
