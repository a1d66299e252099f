//! LLVM's generic processors (`gfx11-generic`, …) and the processors each
//! one's code runs on.

/// Each generic processor and the processors its code objects run on, from
/// LLVM's AMDGPUUsage "Generic Processors" table (and `GCNProcessors.td`).
///
/// Membership is a list, never derived from the digits of a name: gfx908
/// and gfx90a are gfx9 parts that `gfx9-generic` does not cover, and
/// gfx1170 belongs to `gfx11-7-generic`, not `gfx11-generic`. gfx940 and
/// gfx941 are kept under `gfx9-4-generic` for code built by LLVM ≤ 20.
pub const GENERIC_TABLE: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx11-7-generic", &["gfx1170", "gfx1171", "gfx1172"]),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
    ("gfx12-5-generic", &["gfx1250", "gfx1251"]),
    ("gfx13-generic", &["gfx1310"]),
];

/// Whether `processor` is one of LLVM's generic processors.
pub fn is_generic(processor: &str) -> bool {
    GENERIC_TABLE.iter().any(|(g, _)| *g == processor)
}

/// The processors a generic processor's code runs on; `None` when
/// `generic` is not a generic processor.
///
/// ```
/// let covered = kpack_amdgpu::covered_by("gfx12-generic").unwrap();
/// assert_eq!(covered, ["gfx1200", "gfx1201"]);
/// ```
pub fn covered_by(generic: &str) -> Option<&'static [&'static str]> {
    GENERIC_TABLE
        .iter()
        .find(|(g, _)| *g == generic)
        .map(|(_, covered)| *covered)
}

/// The generic processor whose code runs on `processor`, if there is one
/// (`gfx1101` → `gfx11-generic`; `gfx90a` → `None`).
///
/// ```
/// assert_eq!(kpack_amdgpu::generic_for("gfx1101"), Some("gfx11-generic"));
/// assert_eq!(kpack_amdgpu::generic_for("gfx90a"), None);
/// ```
pub fn generic_for(processor: &str) -> Option<&'static str> {
    GENERIC_TABLE
        .iter()
        .find(|(_, covered)| covered.contains(&processor))
        .map(|(g, _)| *g)
}

/// Processors some of whose steppings reject code built for the generic
/// processor that covers them: ROCr's tests show gfx1250 A0 parts refuse
/// `gfx12-5-generic` code objects.
pub const GENERIC_REJECTED_BY_STEPPINGS: &[&str] = &["gfx1250"];

/// The warning for a `processor` whose code would come only from the
/// generic target `served_by` (a target id, as a bundle or archive names
/// it), when some steppings of `processor` reject that generic code;
/// `None` otherwise.
///
/// ```
/// let w = kpack_amdgpu::generic_only_warning("gfx1250", "gfx12-5-generic").unwrap();
/// assert!(w.contains("A0"), "{w}");
/// assert_eq!(kpack_amdgpu::generic_only_warning("gfx1251", "gfx12-5-generic"), None);
/// assert_eq!(kpack_amdgpu::generic_only_warning("gfx1100", "gfx11-generic"), None);
/// ```
pub fn generic_only_warning(processor: &str, served_by: &str) -> Option<String> {
    let generic = crate::processor_of(crate::strip_target_prefix(served_by));
    (GENERIC_REJECTED_BY_STEPPINGS.contains(&processor)
        && generic_for(processor) == Some(generic))
    .then(|| {
        format!(
            "{processor} would get only {generic} code, which {processor} A0 steppings reject (ROCr refuses to load it there): build for {processor} too"
        )
    })
}

/// For one binary carrying `targets` (target ids): the warning of
/// [`generic_only_warning`] for each processor whose code would come only
/// from a generic target some of its steppings reject, in
/// [`GENERIC_REJECTED_BY_STEPPINGS`] order.
///
/// ```
/// let w = kpack_amdgpu::generic_only_warnings(["gfx12-5-generic", "gfx942"]);
/// assert_eq!(w.len(), 1);
/// assert!(kpack_amdgpu::generic_only_warnings(["gfx12-5-generic", "gfx1250:xnack-"]).is_empty());
/// ```
pub fn generic_only_warnings<'t>(targets: impl IntoIterator<Item = &'t str>) -> Vec<String> {
    let processors: Vec<&str> = targets
        .into_iter()
        .map(|t| crate::processor_of(crate::strip_target_prefix(t)))
        .collect();
    GENERIC_REJECTED_BY_STEPPINGS
        .iter()
        .filter(|p| !processors.contains(p))
        .filter_map(|p| processors.iter().find_map(|t| generic_only_warning(p, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mach::mach_for_processor;

    #[test]
    fn gfx9_generic_covers_neither_908_nor_90a() {
        assert_eq!(generic_for("gfx906"), Some("gfx9-generic"));
        assert_eq!(generic_for("gfx90c"), Some("gfx9-generic"));
        assert_eq!(generic_for("gfx908"), None);
        assert_eq!(generic_for("gfx90a"), None);
    }

    #[test]
    fn covers_llvms_lists() {
        assert_eq!(generic_for("gfx1101"), Some("gfx11-generic"));
        assert_eq!(generic_for("gfx1153"), Some("gfx11-generic"));
        assert_eq!(generic_for("gfx1170"), Some("gfx11-7-generic"));
        assert_eq!(generic_for("gfx942"), Some("gfx9-4-generic"));
        assert_eq!(generic_for("gfx950"), Some("gfx9-4-generic"));
        assert_eq!(generic_for("gfx1036"), Some("gfx10-3-generic"));
        assert_eq!(generic_for("gfx1013"), Some("gfx10-1-generic"));
        assert_eq!(generic_for("gfx1201"), Some("gfx12-generic"));
        assert_eq!(generic_for("gfx1251"), Some("gfx12-5-generic"));
        assert_eq!(generic_for("gfx803"), None);
        assert_eq!(covered_by("gfx1100"), None);
        assert!(is_generic("gfx10-1-generic"));
        assert!(!is_generic("gfx1010"));
    }

    #[test]
    fn every_generic_and_member_has_a_mach_value() {
        let mut seen = Vec::new();
        for (generic, covered) in GENERIC_TABLE {
            assert!(mach_for_processor(generic).is_some(), "{generic}");
            for p in *covered {
                assert!(mach_for_processor(p).is_some(), "{p}");
                assert!(!seen.contains(p), "{p} under two generics");
                seen.push(*p);
            }
        }
    }

    #[test]
    fn gfx1250_served_only_by_gfx12_5_generic_is_warned_about() {
        let w = generic_only_warnings(["amdgcn-amd-amdhsa--gfx12-5-generic", "gfx90a"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("gfx1250") && w[0].contains("gfx12-5-generic"),
            "{w:?}"
        );
        // Its own code object serves it; gfx1251 has no such stepping.
        assert!(generic_only_warnings(["gfx12-5-generic", "gfx1250"]).is_empty());
        assert!(generic_only_warnings(["gfx1251", "gfx1200"]).is_empty());
        assert!(generic_only_warning("gfx1251", "gfx12-5-generic").is_none());
        assert!(generic_only_warning("gfx1250", "gfx12-generic").is_none());
        assert!(generic_only_warning("gfx1250", "gfx12-5-generic:xnack-").is_some());
    }
}
