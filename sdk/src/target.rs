//! GPU target tokens in file names: `gfx90a`, `gfx90a-xnack+`,
//! `gfx90a:xnack+`, `gfx1250-strict`, `gfx11-generic`, and the glued
//! processor + CU-count names MIOpen uses (`gfx90878`).

use std::fmt;

/// A GPU target id found in a name, normalised to the bundle-id spelling:
/// features joined with `:` in LLVM's order (`sramecc` before `xnack`),
/// `-strict` kept as part of the processor (`gfx1250` and `gfx1250-strict`
/// are different targets).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    processor: String,
    strict: bool,
    sramecc: Option<bool>,
    xnack: Option<bool>,
}

impl Target {
    /// A plain processor with no features, e.g. `Target::new("gfx942")`.
    pub fn new(processor: &str) -> Self {
        Target {
            processor: processor.to_string(),
            strict: false,
            sramecc: None,
            xnack: None,
        }
    }

    /// The processor name without features, e.g. `gfx90a` or `gfx11-generic`.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// Whether the `-strict` variant of the processor was named.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// `Some(true)` for `xnack+`, `Some(false)` for `xnack-`, `None` when not named.
    pub fn xnack(&self) -> Option<bool> {
        self.xnack
    }

    /// `Some(true)` for `sramecc+`, `Some(false)` for `sramecc-`, `None` when not named.
    pub fn sramecc(&self) -> Option<bool> {
        self.sramecc
    }

    /// Set the xnack feature (used by sniffers that read ELF flags).
    pub fn with_xnack(mut self, on: Option<bool>) -> Self {
        self.xnack = on;
        self
    }

    /// Set the sramecc feature.
    pub fn with_sramecc(mut self, on: Option<bool>) -> Self {
        self.sramecc = on;
        self
    }

    /// Set or clear the `-strict` variant.
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        if self.strict {
            f.write_str("-strict")?;
        }
        for (name, value) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            if let Some(on) = value {
                write!(f, ":{name}{}", if on { '+' } else { '-' })?;
            }
        }
        Ok(())
    }
}

/// Find the first GPU target token in `name` (usually a file name).
///
/// The token is AMD's shared pattern: `gfx`, one or more digits, then any
/// lowercase letters (`gfx90a`, `gfx1100`, `gfx11xx`), or an LLVM generic
/// processor (`gfx9-4-generic`, `gfx11-generic`). It may be followed by
/// `-strict` and by `xnack`/`sramecc` features written with either `-`
/// (Tensile file names) or `:` (bundle ids). Unlike AMD's handlers the
/// features are kept, not dropped.
///
/// ```
/// use kpack_sdk::find_target;
/// let t = find_target("TensileLibrary_HH_gfx90a-xnack+.co").unwrap();
/// assert_eq!(t.to_string(), "gfx90a:xnack+");
/// assert_eq!(find_target("kernels_gfx90a:xnack+.hsaco").unwrap().to_string(), "gfx90a:xnack+");
/// assert_eq!(find_target("x_gfx1250-strict.co").unwrap().to_string(), "gfx1250-strict");
/// assert_eq!(find_target("TensileLibrary.dat"), None);
/// ```
pub fn find_target(name: &str) -> Option<Target> {
    let bytes = name.as_bytes();
    let mut from = 0;
    while let Some(off) = name.get(from..).and_then(|s| s.find("gfx")) {
        let start = from + off;
        if let Some((t, _)) = target_at(name, start) {
            return Some(t);
        }
        from = start + 3;
        if from >= bytes.len() {
            break;
        }
    }
    None
}

fn target_at(name: &str, start: usize) -> Option<(Target, usize)> {
    let b = name.as_bytes();
    let mut i = start + 3;
    let digits = count(b, i, |c| c.is_ascii_digit());
    if digits == 0 {
        return None;
    }
    i += digits;
    // LLVM generic processors: gfx9-generic, gfx9-4-generic, gfx10-3-generic.
    if let Some(end) = generic_suffix(b, i) {
        i = end;
    } else {
        i += count(b, i, |c| c.is_ascii_lowercase());
    }
    let mut target = Target::new(name.get(start..i)?);
    // Features, in any order, separated by '-' or ':'.
    while let Some(b'-' | b':') = b.get(i) {
        let rest = name.get(i + 1..).unwrap_or("");
        if rest.starts_with("strict") {
            target.strict = true;
            i += 1 + "strict".len();
        } else if let Some((feature, on, len)) = feature_at(rest) {
            match feature {
                "xnack" => target.xnack = Some(on),
                _ => target.sramecc = Some(on),
            }
            i += 1 + len;
        } else {
            break;
        }
    }
    Some((target, i))
}

/// Parse `s` as exactly one target token (all of it), e.g. a per-arch
/// directory name such as `gfx942` or `gfx90a-xnack+`.
///
/// ```
/// use kpack_sdk::parse_target;
/// assert_eq!(parse_target("gfx90a-xnack+").unwrap().to_string(), "gfx90a:xnack+");
/// assert_eq!(parse_target("gfx942_notadir"), None);
/// ```
pub fn parse_target(s: &str) -> Option<Target> {
    if !s.starts_with("gfx") {
        return None;
    }
    target_at(s, 0)
        .filter(|&(_, end)| end == s.len())
        .map(|(t, _)| t)
}

fn generic_suffix(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        if b.get(i) != Some(&b'-') {
            return None;
        }
        if b.get(i + 1..i + 8) == Some(b"generic".as_slice()) {
            return Some(i + 8);
        }
        let d = count(b, i + 1, |c| c.is_ascii_digit());
        if d == 0 {
            return None;
        }
        i += 1 + d;
    }
}

fn feature_at(rest: &str) -> Option<(&'static str, bool, usize)> {
    for feature in ["xnack", "sramecc"] {
        if let Some(after) = rest.strip_prefix(feature) {
            // CK's sanitized spelling `xnackp` is handled by the CK handler.
            match after.as_bytes().first() {
                Some(b'+') => return Some((feature, true, feature.len() + 1)),
                Some(b'-') => return Some((feature, false, feature.len() + 1)),
                _ => return None,
            }
        }
    }
    None
}

fn count(b: &[u8], from: usize, pred: impl Fn(u8) -> bool) -> usize {
    b.get(from..)
        .map_or(0, |s| s.iter().take_while(|&&c| pred(c)).count())
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
/// use kpack_sdk::split_processor;
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

/// Parse a *sanitized* target id as Composable Kernel and MIOpen put them
/// in library names: `:` became `_`, `+` became `p`, `-` became `_`
/// (`gfx950_xnackp`, `gfx1250_strict`, `gfx942_srameccp_xnack_`,
/// `gfx9_4_generic`). The whole string must be the token.
///
/// ```
/// use kpack_sdk::parse_sanitized_target;
/// assert_eq!(parse_sanitized_target("gfx950_xnackp").unwrap().to_string(), "gfx950:xnack+");
/// assert_eq!(parse_sanitized_target("gfx1250_strict").unwrap().to_string(), "gfx1250-strict");
/// assert_eq!(parse_sanitized_target("gfx942_srameccp_xnack_").unwrap().to_string(), "gfx942:sramecc+:xnack-");
/// assert_eq!(parse_sanitized_target("gfx9_4_generic").unwrap().to_string(), "gfx9-4-generic");
/// assert_eq!(parse_sanitized_target("gfx950_bogus"), None);
/// ```
pub fn parse_sanitized_target(s: &str) -> Option<Target> {
    let mut parts = s.split('_').peekable();
    let first = parts.next()?;
    let mut processor = parse_target(first)?.processor;
    // Generic processors: gfx9_4_generic, gfx11_generic.
    let mut numbers = Vec::new();
    while let Some(p) = parts.peek() {
        if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) {
            numbers.push(*p);
            parts.next();
        } else {
            break;
        }
    }
    if parts.peek() == Some(&"generic") {
        parts.next();
        for n in &numbers {
            processor.push('-');
            processor.push_str(n);
        }
        processor.push_str("-generic");
    } else if !numbers.is_empty() {
        return None;
    }
    let mut target = Target::new(&processor);
    while let Some(p) = parts.next() {
        match p {
            "strict" => target.strict = true,
            "xnackp" => target.xnack = Some(true),
            "srameccp" => target.sramecc = Some(true),
            // `xnack-` sanitizes to `xnack_`: the minus became an empty part.
            "xnack" | "sramecc" if parts.next_if_eq(&"").is_some() => {
                if p == "xnack" {
                    target.xnack = Some(false)
                } else {
                    target.sramecc = Some(false)
                }
            }
            "xnackm" => target.xnack = Some(false),
            "srameccm" => target.sramecc = Some(false),
            _ => return None,
        }
    }
    Some(target)
}

/// The bundle key for a family wildcard directory name, following AMD's
/// `rocm-bootstrap` hierarchy as its AOTriton handler does: `gfx11xx` →
/// `gfx11` (whole family), `gfx120x` → `gfx12_0` (gfx12 splits into
/// sub-families by minor version), everything else verbatim (`gfx110x`,
/// `gfx942`, `gfx90a`).
///
/// ```
/// use kpack_sdk::family_key;
/// assert_eq!(family_key("gfx11xx"), "gfx11");
/// assert_eq!(family_key("gfx120x"), "gfx12_0");
/// assert_eq!(family_key("gfx110x"), "gfx110x");
/// assert_eq!(family_key("gfx942"), "gfx942");
/// ```
pub fn family_key(wildcard: &str) -> String {
    if let Some(family) = wildcard.strip_suffix("xx") {
        return family.to_string();
    }
    if let Some(minor) = wildcard
        .strip_prefix("gfx12")
        .and_then(|r| r.strip_suffix('x'))
        && minor.len() == 1
        && minor.bytes().all(|c| c.is_ascii_digit())
    {
        return format!("gfx12_{minor}");
    }
    wildcard.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<String> {
        find_target(s).map(|t| t.to_string())
    }

    #[test]
    fn finds_amd_examples() {
        assert_eq!(t("TensileLibrary_gfx1100.co").as_deref(), Some("gfx1100"));
        assert_eq!(t("kernel_gfx1101.hsaco").as_deref(), Some("gfx1101"));
        assert_eq!(t("gfx90a_metadata.tn.model").as_deref(), Some("gfx90a"));
        assert_eq!(
            t("Kernels.so-000-gfx1100.hsaco").as_deref(),
            Some("gfx1100")
        );
        assert_eq!(t("generic.dat"), None);
    }

    #[test]
    fn keeps_features_in_both_spellings() {
        assert_eq!(t("x_gfx942-xnack-.co").as_deref(), Some("gfx942:xnack-"));
        assert_eq!(
            t("x_gfx942:xnack-:sramecc+.co").as_deref(),
            Some("gfx942:sramecc+:xnack-")
        );
        assert_eq!(
            t("x_gfx1250-strict-xnack+.co").as_deref(),
            Some("gfx1250-strict:xnack+")
        );
        assert_eq!(t("x_gfx90a-xnackp.a").as_deref(), Some("gfx90a"));
    }

    #[test]
    fn reads_generic_processors() {
        assert_eq!(t("k_gfx11-generic.co").as_deref(), Some("gfx11-generic"));
        assert_eq!(
            t("k_gfx9-4-generic:xnack+.co").as_deref(),
            Some("gfx9-4-generic:xnack+")
        );
        assert_eq!(t("k_gfx11-foo.co").as_deref(), Some("gfx11"));
    }

    #[test]
    fn skips_gfx_without_digits() {
        assert_eq!(t("gfxlib_gfx908.co").as_deref(), Some("gfx908"));
        assert_eq!(t("gfx"), None);
        assert_eq!(t("agfx"), None);
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
