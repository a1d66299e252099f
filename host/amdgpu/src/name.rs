//! Target ids as they are spelled in file and directory names: AMD's
//! `gfx\d+[a-z]*` token, features written with `-` (Tensile) or `:`
//! (bundle ids), `-strict`, generic processors, and the sanitized
//! spelling of Composable Kernel and MIOpen (`gfx950_xnackp`).

use crate::target::TargetId;

/// The `gfx` tokens in `s` by AMD's `gfx\d+[a-z]*` rule, in order
/// (`amd-gfx942/x_gfx1100.co` → `gfx942`, `gfx1100`). Generic processors
/// and features are not followed: `gfx9-4-generic` gives `gfx9`.
///
/// ```
/// assert_eq!(kpack_amdgpu::gfx_tokens("gfx90878.db.txt"), ["gfx90878"]);
/// ```
pub fn gfx_tokens(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = s.get(from..).and_then(|rest| rest.find("gfx")) {
        let start = from + pos;
        let digits_end = start + 3 + count(b, start + 3, |c| c.is_ascii_digit());
        if digits_end > start + 3 {
            let end = digits_end + count(b, digits_end, |c| c.is_ascii_lowercase());
            if let Some(token) = s.get(start..end) {
                out.push(token);
            }
        }
        from = start + 3;
    }
    out
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
/// use kpack_amdgpu::find_target;
/// let t = find_target("TensileLibrary_HH_gfx90a-xnack+.co").unwrap();
/// assert_eq!(t.to_string(), "gfx90a:xnack+");
/// assert_eq!(find_target("kernels_gfx90a:xnack+.hsaco").unwrap().to_string(), "gfx90a:xnack+");
/// assert_eq!(find_target("x_gfx1250-strict.co").unwrap().to_string(), "gfx1250-strict");
/// assert_eq!(find_target("TensileLibrary.dat"), None);
/// ```
pub fn find_target(name: &str) -> Option<TargetId> {
    let mut from = 0;
    while let Some(off) = name.get(from..).and_then(|s| s.find("gfx")) {
        let start = from + off;
        if let Some((t, _)) = target_at(name, start) {
            return Some(t);
        }
        from = start + 3;
        if from >= name.len() {
            break;
        }
    }
    None
}

/// Parse `s` as exactly one target token (all of it), e.g. a per-arch
/// directory name such as `gfx942` or `gfx90a-xnack+`.
///
/// ```
/// use kpack_amdgpu::parse_target;
/// assert_eq!(parse_target("gfx90a-xnack+").unwrap().to_string(), "gfx90a:xnack+");
/// assert_eq!(parse_target("gfx942_notadir"), None);
/// ```
pub fn parse_target(s: &str) -> Option<TargetId> {
    if !s.starts_with("gfx") {
        return None;
    }
    target_at(s, 0)
        .filter(|&(_, end)| end == s.len())
        .map(|(t, _)| t)
}

/// Parse a *sanitized* target id as Composable Kernel and MIOpen put them
/// in library names: `:` became `_`, `+` became `p`, `-` became `_`
/// (`gfx950_xnackp`, `gfx1250_strict`, `gfx942_srameccp_xnack_`,
/// `gfx9_4_generic`). The whole string must be the token.
///
/// ```
/// use kpack_amdgpu::parse_sanitized_target;
/// assert_eq!(parse_sanitized_target("gfx950_xnackp").unwrap().to_string(), "gfx950:xnack+");
/// assert_eq!(parse_sanitized_target("gfx1250_strict").unwrap().to_string(), "gfx1250-strict");
/// assert_eq!(parse_sanitized_target("gfx942_srameccp_xnack_").unwrap().to_string(), "gfx942:sramecc+:xnack-");
/// assert_eq!(parse_sanitized_target("gfx9_4_generic").unwrap().to_string(), "gfx9-4-generic");
/// assert_eq!(parse_sanitized_target("gfx950_bogus"), None);
/// ```
pub fn parse_sanitized_target(s: &str) -> Option<TargetId> {
    let mut parts = s.split('_').peekable();
    let first = parts.next()?;
    // Only the processor token of the first part counts (its own features
    // or `-strict`, if any, are dropped).
    let mut processor = parse_target(first)?.base_processor().to_string();
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
    let mut target = TargetId::bare(processor);
    while let Some(p) = parts.next() {
        target = match p {
            "strict" => target.with_strict(true),
            "xnackp" => target.with_xnack(Some(true)),
            "srameccp" => target.with_sramecc(Some(true)),
            // `xnack-` sanitizes to `xnack_`: the minus became an empty part.
            "xnack" | "sramecc" if parts.next_if_eq(&"").is_some() => {
                target.with_feature(p, Some(false))
            }
            "xnackm" => target.with_xnack(Some(false)),
            "srameccm" => target.with_sramecc(Some(false)),
            _ => return None,
        };
    }
    Some(target)
}

/// The target token starting at `start` (which holds `gfx`) and where it ends.
fn target_at(name: &str, start: usize) -> Option<(TargetId, usize)> {
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
    let mut target = TargetId::bare(name.get(start..i)?);
    // Features, in any order, separated by '-' or ':'.
    while let Some(b'-' | b':') = b.get(i) {
        let rest = name.get(i + 1..).unwrap_or("");
        if rest.starts_with("strict") {
            target = target.with_strict(true);
            i += 1 + "strict".len();
        } else if let Some((feature, on, len)) = feature_at(rest) {
            target = target.with_feature(feature, Some(on));
            i += 1 + len;
        } else {
            break;
        }
    }
    Some((target, i))
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
            // CK's sanitized spelling `xnackp` is handled by
            // `parse_sanitized_target`, not here.
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
        assert_eq!(
            t("x_gfx1250-xnack+-strict.co").as_deref(),
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
    fn sanitized_strict_is_distinct() {
        let s = parse_sanitized_target("gfx1250_strict").unwrap();
        assert!(s.is_strict());
        assert_ne!(s, parse_sanitized_target("gfx1250").unwrap());
        assert_eq!(
            parse_sanitized_target("gfx942_sramecc__xnackm")
                .unwrap()
                .to_string(),
            "gfx942:sramecc-:xnack-"
        );
        assert_eq!(parse_sanitized_target("gfx9_4"), None);
    }

    #[test]
    fn gfx_tokens_follow_amds_rule() {
        assert_eq!(gfx_tokens("TensileLibrary_gfx90a.co"), ["gfx90a"]);
        assert_eq!(gfx_tokens("gfx90878.db.txt"), ["gfx90878"]);
        assert_eq!(gfx_tokens("amd-gfx942/x_gfx1100.co"), ["gfx942", "gfx1100"]);
        assert_eq!(gfx_tokens("k_gfx9-4-generic.co"), ["gfx9"]);
        assert!(gfx_tokens("gfx.txt").is_empty());
        assert!(gfx_tokens("gfxgfx").is_empty());
    }
}
