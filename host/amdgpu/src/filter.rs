//! Which GPU targets a command keeps: `--gpu-targets` (AMD's flag for
//! sharded builds) and `--exclude-arch`, one matcher for every command
//! (`offload`, `split`, `wheel split`, later `prune --keep`).

use std::fmt;

use crate::name::parse_target;
use crate::target::{TargetId, TargetIdError, strip_target_prefix};

/// One pattern of a target list: a bare processor (`gfx90a`) matches every
/// feature variant of it; a target with features (`gfx90a:xnack+`) matches
/// exactly that target. `-strict` and generic processors are processors of
/// their own (`gfx1250` does not match `gfx1250-strict`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetPattern(TargetId);

impl TargetPattern {
    /// Parse one pattern. Accepts the target-id spelling (`gfx90a:xnack-`),
    /// AMD's folded file-name spelling (`gfx90a-xnack-`), `_` for `:`
    /// (`gfx90a_xnack-`, the name of a per-target directory) and the
    /// `amdgcn-amd-amdhsa--` prefix.
    ///
    /// ```
    /// use kpack_amdgpu::TargetPattern;
    /// assert_eq!(TargetPattern::parse("gfx90a-xnack-").unwrap().to_string(), "gfx90a:xnack-");
    /// assert!(TargetPattern::parse("gfx90a:xnack").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<TargetPattern, TargetIdError> {
        let s = strip_target_prefix(text.trim());
        let id = if s.starts_with("gfx") {
            // The folded spelling first: `TargetId::parse` would read
            // `gfx90a-xnack-` as a processor name with dashes.
            parse_target(s)
                .or_else(|| parse_target(&s.replace('_', ":")))
                .map_or_else(|| TargetId::parse(s), Ok)?
        } else {
            TargetId::parse(s)?
        };
        Ok(TargetPattern(id))
    }

    /// Whether `target` is named by this pattern.
    pub fn matches(&self, target: &TargetId) -> bool {
        self.0.processor() == target.processor()
            && (self.0.features().is_empty() || self.0.features() == target.features())
    }
}

impl fmt::Display for TargetPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Which targets to keep: those named by `--gpu-targets` (all when none
/// are given) minus those named by `--exclude-arch`.
///
/// ```
/// use kpack_amdgpu::TargetFilter;
/// let f = TargetFilter::new("gfx90a,gfx942:sramecc+", "gfx90a-xnack-").unwrap();
/// assert!(f.keeps("gfx90a:xnack+"));
/// assert!(!f.keeps("gfx90a:xnack-"));
/// assert!(f.keeps("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+"));
/// assert!(!f.keeps("gfx942:sramecc+:xnack-"));
/// assert!(!f.keeps("gfx1100"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetFilter {
    include: Vec<TargetPattern>,
    exclude: Vec<TargetPattern>,
}

impl TargetFilter {
    /// A filter from comma-separated lists (either may be empty).
    pub fn new(gpu_targets: &str, exclude: &str) -> Result<TargetFilter, TargetIdError> {
        Ok(TargetFilter {
            include: parse_list(gpu_targets)?,
            exclude: parse_list(exclude)?,
        })
    }

    /// A filter from already split lists, as clap hands them over (each
    /// item may itself hold commas).
    pub fn from_lists(
        gpu_targets: &[String],
        exclude: &[String],
    ) -> Result<TargetFilter, TargetIdError> {
        TargetFilter::new(&gpu_targets.join(","), &exclude.join(","))
    }

    /// Whether the filter keeps everything.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// The `--gpu-targets` patterns.
    pub fn include(&self) -> &[TargetPattern] {
        &self.include
    }

    /// The `--exclude-arch` patterns.
    pub fn exclude(&self) -> &[TargetPattern] {
        &self.exclude
    }

    /// Whether `target` is kept. `target` is a target id, a bundle entry id
    /// (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`) or a per-target
    /// directory name (`gfx90a_xnack+`, `gfx90a-xnack+`). Text that is no
    /// target at all is kept unless the filter names it verbatim, so a
    /// filter never silently drops what it cannot read.
    pub fn keeps(&self, target: &str) -> bool {
        if self.is_empty() {
            return true;
        }
        let text = strip_target_prefix(target.trim());
        let Ok(TargetPattern(id)) = TargetPattern::parse(text) else {
            let named = |p: &TargetPattern| p.to_string() == text;
            return !self.exclude.iter().any(named)
                && (self.include.is_empty() || self.include.iter().any(named));
        };
        self.keeps_id(&id)
    }

    /// Whether the parsed target `id` is kept.
    pub fn keeps_id(&self, id: &TargetId) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| p.matches(id)))
            && !self.exclude.iter().any(|p| p.matches(id))
    }
}

fn parse_list(list: &str) -> Result<Vec<TargetPattern>, TargetIdError> {
    let mut out: Vec<TargetPattern> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|t| {
            TargetPattern::parse(t).and_then(|p| match crate::is_known_target(&p.0) {
                true => Ok(p),
                false => Err(TargetIdError::unknown(t)),
            })
        })
        .collect::<Result<_, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeps(include: &str, exclude: &str, target: &str) -> bool {
        TargetFilter::new(include, exclude).unwrap().keeps(target)
    }

    #[test]
    fn reads_every_qualified_spelling_on_both_sides() {
        let four = "amdgcn-amd-amdhsa-unknown-gfx942";
        assert!(keeps(four, "", "gfx942:sramecc+"));
        assert!(keeps(
            "gfx942",
            "",
            "hip-amdgcn-amd-amdhsa-unknown-gfx942:xnack-"
        ));
        assert!(!keeps("", four, "hipv4-amdgcn-amd-amdhsa--gfx942"));
        assert!(keeps("", four, "amdgcn-amd-amdhsa-unknown-gfx90a"));
        assert!(keeps(
            "amdgcnspirv",
            "",
            "hip-spirv64-amd-amdhsa--amdgcnspirv"
        ));
        assert!(!keeps("amdgcnspirv", "", "gfx942"));
        assert!(!keeps(
            "",
            "amdgcnspirv",
            "hipv4-spirv64-amd-amdhsa--amdgcnspirv"
        ));
    }

    #[test]
    fn bare_processor_matches_every_feature_variant() {
        for t in [
            "gfx90a",
            "gfx90a:xnack+",
            "gfx90a:xnack-",
            "gfx90a:sramecc+:xnack-",
        ] {
            assert!(keeps("gfx90a", "", t), "{t}");
        }
        assert!(!keeps("gfx90a", "", "gfx908"));
        assert!(!keeps("gfx90a", "", "gfx90"));
    }

    #[test]
    fn target_with_features_matches_exactly() {
        assert!(keeps("gfx90a:xnack+", "", "gfx90a:xnack+"));
        assert!(!keeps("gfx90a:xnack+", "", "gfx90a"));
        assert!(!keeps("gfx90a:xnack+", "", "gfx90a:xnack-"));
        assert!(!keeps("gfx90a:xnack+", "", "gfx90a:sramecc+:xnack+"));
        // Feature order in the pattern does not matter (canonical order).
        assert!(keeps(
            "gfx942:xnack-:sramecc+",
            "",
            "gfx942:sramecc+:xnack-"
        ));
    }

    #[test]
    fn strict_and_generic_are_their_own_processors() {
        assert!(!keeps("gfx1250", "", "gfx1250-strict"));
        assert!(keeps("gfx1250-strict", "", "gfx1250-strict"));
        assert!(!keeps("gfx1250-strict", "", "gfx1250"));
        assert!(!keeps("gfx11-generic", "", "gfx1100"));
        assert!(!keeps("gfx1100", "", "gfx11-generic"));
        assert!(keeps("gfx9-4-generic", "", "gfx9-4-generic:xnack+"));
    }

    #[test]
    fn folded_and_directory_spellings_are_accepted() {
        assert_eq!(
            TargetPattern::parse("gfx90a-xnack-").unwrap(),
            TargetPattern::parse("gfx90a:xnack-").unwrap()
        );
        assert_eq!(
            TargetPattern::parse("gfx90a_xnack-").unwrap(),
            TargetPattern::parse("gfx90a:xnack-").unwrap()
        );
        assert_eq!(
            TargetPattern::parse("amdgcn-amd-amdhsa--gfx942").unwrap(),
            TargetPattern::parse("gfx942").unwrap()
        );
        assert!(keeps("gfx90a-xnack-", "", "gfx90a:xnack-"));
        assert!(!keeps("gfx90a-xnack-", "", "gfx90a:xnack+"));
        assert!(keeps("", "", "gfx90a-xnack+"));
        assert!(!keeps("gfx942", "", "gfx90a_xnack+"));
    }

    #[test]
    fn bundle_ids_are_matched_by_their_target() {
        assert!(keeps(
            "gfx90a:xnack+",
            "",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
        ));
        assert!(!keeps(
            "gfx942",
            "",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
        ));
    }

    #[test]
    fn exclude_is_the_inverse_and_wins() {
        assert!(!keeps("", "gfx906", "gfx906:xnack-"));
        assert!(keeps("", "gfx906", "gfx908"));
        assert!(!keeps("gfx90a", "gfx90a:xnack+", "gfx90a:xnack+"));
        assert!(keeps("gfx90a", "gfx90a:xnack+", "gfx90a:xnack-"));
    }

    #[test]
    fn bad_patterns_are_errors_naming_the_text() {
        let e = TargetFilter::new("gfx942,gfx90a:xnack", "").unwrap_err();
        assert_eq!(e.text(), "gfx90a:xnack");
        assert!(TargetFilter::new("", "gfx9 0a").is_err());
        // Empty items are skipped, so a trailing comma is fine.
        assert!(TargetFilter::new("gfx942,", "").unwrap().keeps("gfx942"));
    }

    #[test]
    fn unreadable_targets_are_kept_unless_named_verbatim() {
        assert!(keeps("", "gfx906", "not a target"));
    }
}
