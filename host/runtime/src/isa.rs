//! ISA target matching with feature flags (spec §11). The target prefix
//! and its stripping are `kpack_amdgpu`'s; the candidate order is AMD's
//! loader's, and deliberately looser than [`kpack_amdgpu::TargetId`]'s
//! grammar (features kept in the order the agent reports them, empty ones
//! skipped), because it must match what ROCr reports byte for byte.

use kpack_amdgpu::{TargetId, features_of, processor_of, split_target, strip_target_prefix};

/// Targets an archive may be named for to serve device `agent_isa`, most
/// specific first, in AMD's order: with `n` features, masks from `2^n − 1`
/// down to 0, feature `i` included when bit `n−1−i` is set. The
/// triple prefix (`amdgcn-amd-amdhsa--` or AMD's `amdgcn-amd-amdhsa-unknown-`) is
/// stripped first. Empty input or an empty
/// processor gives nothing.
///
/// ```
/// use kpack_runtime::compatible_targets;
/// assert_eq!(
///     compatible_targets("gfx942:sramecc+:xnack-"),
///     ["gfx942:sramecc+:xnack-", "gfx942:sramecc+", "gfx942:xnack-", "gfx942"]
/// );
/// ```
pub fn compatible_targets(agent_isa: &str) -> Vec<String> {
    let s = strip_target_prefix(agent_isa);
    let processor = processor_of(s);
    if processor.is_empty() {
        return Vec::new();
    }
    let features: Vec<&str> = features_of(s).collect();
    // More than 16 features never occur; cap to keep the 2^n list bounded
    // for hostile input.
    let features = &features[..features.len().min(16)];
    let n = features.len();
    let mut out = Vec::with_capacity(1 << n);
    for mask in (0..(1u32 << n)).rev() {
        let mut t = processor.to_owned();
        for (i, f) in features.iter().enumerate() {
            if mask & (1 << (n - 1 - i)) != 0 {
                t.push(':');
                t.push_str(f);
            }
        }
        out.push(t);
    }
    out
}

/// The one generic target the HIP runtime asks for beside each processor:
/// CLR's `TargetGenericMap` (`hipamd/src/hip_fatbin.cpp`), a subset of
/// LLVM's generic table ([`kpack_amdgpu::GENERIC_TABLE`]). No entry for
/// gfx908, gfx90a, gfx940/941, gfx1170–1172, gfx1251 or gfx1310: their
/// runtime never asks for generic code, so `gfx11-7-generic` and
/// `gfx13-generic` code is never loaded, and `gfx12-5-generic` only on a
/// gfx1250 under a runtime whose map has that entry (earlier maps stop at
/// gfx1201; the spec's stored copy is one of those).
pub const CLR_GENERIC_MAP: &[(&str, &str)] = &[
    ("gfx900", "gfx9-generic"),
    ("gfx902", "gfx9-generic"),
    ("gfx904", "gfx9-generic"),
    ("gfx906", "gfx9-generic"),
    ("gfx909", "gfx9-generic"),
    ("gfx90c", "gfx9-generic"),
    ("gfx942", "gfx9-4-generic"),
    ("gfx950", "gfx9-4-generic"),
    ("gfx1010", "gfx10-1-generic"),
    ("gfx1011", "gfx10-1-generic"),
    ("gfx1012", "gfx10-1-generic"),
    ("gfx1013", "gfx10-1-generic"),
    ("gfx1030", "gfx10-3-generic"),
    ("gfx1031", "gfx10-3-generic"),
    ("gfx1032", "gfx10-3-generic"),
    ("gfx1033", "gfx10-3-generic"),
    ("gfx1034", "gfx10-3-generic"),
    ("gfx1035", "gfx10-3-generic"),
    ("gfx1036", "gfx10-3-generic"),
    ("gfx1100", "gfx11-generic"),
    ("gfx1101", "gfx11-generic"),
    ("gfx1102", "gfx11-generic"),
    ("gfx1103", "gfx11-generic"),
    ("gfx1150", "gfx11-generic"),
    ("gfx1151", "gfx11-generic"),
    ("gfx1152", "gfx11-generic"),
    ("gfx1153", "gfx11-generic"),
    ("gfx1200", "gfx12-generic"),
    ("gfx1201", "gfx12-generic"),
    ("gfx1250", "gfx12-5-generic"),
];

/// The generic target the HIP runtime asks for beside `processor`
/// ([`CLR_GENERIC_MAP`]); `None` when it asks for none.
///
/// ```
/// assert_eq!(kpack_runtime::runtime_generic_for("gfx942"), Some("gfx9-4-generic"));
/// assert_eq!(kpack_runtime::runtime_generic_for("gfx1170"), None);
/// ```
pub fn runtime_generic_for(processor: &str) -> Option<&'static str> {
    CLR_GENERIC_MAP
        .iter()
        .find(|(p, _)| *p == processor)
        .map(|(_, g)| *g)
}

/// The processors whose HIP runtime asks for `generic`'s code
/// ([`CLR_GENERIC_MAP`]): empty for a generic target no runtime asks for.
pub fn runtime_devices_of(generic: &str) -> Vec<&'static str> {
    CLR_GENERIC_MAP
        .iter()
        .filter(|(_, g)| *g == generic)
        .map(|(p, _)| *p)
        .collect()
}

/// Why code built for `target` (a target id) is loaded on fewer GPUs than
/// LLVM's generic table promises, for a warning beside an archive: `None`
/// for a non-generic target or one every processor it covers asks for.
///
/// ```
/// let w = kpack_runtime::unasked_generic("gfx11-7-generic").unwrap();
/// assert!(w.contains("never"), "{w}");
/// assert_eq!(kpack_runtime::unasked_generic("gfx11-generic"), None);
/// assert_eq!(kpack_runtime::unasked_generic("gfx90a"), None);
/// ```
pub fn unasked_generic(target: &str) -> Option<String> {
    let generic = kpack_amdgpu::processor_of(strip_target_prefix(target));
    let covered = kpack_amdgpu::covered_by(generic)?;
    let asking = runtime_devices_of(generic);
    // gfx940 and gfx941 are retired (LLVM 21 dropped them): no warning.
    let left: Vec<&str> = covered
        .iter()
        .copied()
        .filter(|p| !asking.contains(p) && !["gfx940", "gfx941"].contains(p))
        .collect();
    match (asking.is_empty(), left.is_empty()) {
        (_, true) => None,
        (true, false) => Some(format!(
            "no HIP runtime asks for {generic} code (its map names no generic target for {}): it is never loaded; build for those processors instead",
            left.join(", ")
        )),
        (false, false) => Some(format!(
            "the HIP runtime asks for {generic} code only on {} (not on {}){}",
            asking.join(", "),
            left.join(", "),
            if generic == "gfx12-5-generic" {
                ", and runtimes whose map predates its gfx1250 entry never do"
            } else {
                ""
            }
        )),
    }
}

/// The arch list CLR hands the loader for device `gpu`: exactly two names
/// at most, its target, then the generic target of [`CLR_GENERIC_MAP`]
/// with the same features (`gfx1101:xnack-` → `gfx1101:xnack-`,
/// `gfx11-generic:xnack-`; `gfx90a` → `gfx90a` alone). Each entry is then
/// expanded by [`compatible_targets`].
///
/// ```
/// assert_eq!(
///     kpack_runtime::gpu_arch_list("gfx1101:xnack-"),
///     ["gfx1101:xnack-", "gfx11-generic:xnack-"]
/// );
/// assert_eq!(kpack_runtime::gpu_arch_list("gfx90a"), ["gfx90a"]);
/// ```
pub fn gpu_arch_list(gpu: &str) -> Vec<String> {
    let gpu = strip_target_prefix(gpu.trim());
    let mut out = vec![gpu.to_owned()];
    if let Ok(t) = TargetId::parse(gpu)
        && let Some(g) = runtime_generic_for(t.processor())
    {
        let features = split_target(gpu).1;
        out.push(match features {
            Some(f) => format!("{g}:{f}"),
            None => g.to_owned(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_amds_candidate_order() {
        assert_eq!(compatible_targets("gfx1201"), ["gfx1201"]);
        assert_eq!(
            compatible_targets("gfx942:xnack+"),
            ["gfx942:xnack+", "gfx942"]
        );
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--gfx9-4-generic"),
            ["gfx9-4-generic"]
        );
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--gfx90a:xnack+"),
            ["gfx90a:xnack+", "gfx90a"]
        );
        // AMD's ROCm 10 spelling, environment field filled in.
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa-unknown-gfx942:sramecc+"),
            ["gfx942:sramecc+", "gfx942"]
        );
        // Mask order for three features: 100 precedes 011.
        let three = compatible_targets("p:a:b:c");
        assert_eq!(
            three,
            [
                "p:a:b:c", "p:a:b", "p:a:c", "p:a", "p:b:c", "p:b", "p:c", "p"
            ]
        );
        assert_eq!(
            compatible_targets("gfx90a::xnack+:"),
            ["gfx90a:xnack+", "gfx90a"]
        );
    }

    #[test]
    fn the_runtime_asks_for_clrs_generic_target_only() {
        // LLVM's table covers these; CLR's map does not ask for them.
        assert_eq!(gpu_arch_list("gfx1170"), ["gfx1170"]);
        assert_eq!(gpu_arch_list("gfx940"), ["gfx940"]);
        assert_eq!(gpu_arch_list("gfx1251"), ["gfx1251"]);
        assert_eq!(
            gpu_arch_list("gfx942:sramecc+:xnack-"),
            ["gfx942:sramecc+:xnack-", "gfx9-4-generic:sramecc+:xnack-"]
        );
        assert_eq!(gpu_arch_list("gfx1250"), ["gfx1250", "gfx12-5-generic"]);
        // Every generic target of the map is one of LLVM's, covering its
        // processors.
        for (p, g) in CLR_GENERIC_MAP {
            assert!(
                kpack_amdgpu::covered_by(g).is_some_and(|c| c.contains(p)),
                "{p} -> {g}"
            );
        }
        assert_eq!(unasked_generic("gfx9-4-generic"), None);
        assert_eq!(unasked_generic("gfx11-generic:xnack-"), None);
        let w = unasked_generic("gfx12-5-generic").unwrap();
        assert!(w.contains("only on gfx1250 (not on gfx1251)"), "{w}");
        let w = unasked_generic("gfx11-7-generic").unwrap();
        assert!(w.contains("gfx1170, gfx1171, gfx1172"), "{w}");
    }

    #[test]
    fn strict_targets_never_fall_back_to_their_base_processor() {
        // AMD keeps gfx1250-strict distinct from gfx1250, both ways.
        assert_eq!(
            compatible_targets("gfx1250-strict:xnack+"),
            ["gfx1250-strict:xnack+", "gfx1250-strict"]
        );
        assert_eq!(compatible_targets("gfx1250"), ["gfx1250"]);
    }

    #[test]
    fn empty_inputs_give_nothing() {
        assert!(compatible_targets("").is_empty());
        assert!(compatible_targets(":xnack+").is_empty());
        // The bare prefix is not stripped (nothing follows it): its processor
        // is the prefix itself.
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--"),
            ["amdgcn-amd-amdhsa--"]
        );
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa-unknown-"),
            ["amdgcn-amd-amdhsa-unknown-"]
        );
    }

    #[test]
    fn arch_list_is_clrs() {
        assert_eq!(gpu_arch_list("gfx1101"), ["gfx1101", "gfx11-generic"]);
        assert_eq!(
            gpu_arch_list("amdgcn-amd-amdhsa--gfx1101:xnack-"),
            ["gfx1101:xnack-", "gfx11-generic:xnack-"]
        );
        assert_eq!(gpu_arch_list("gfx90a:xnack+"), ["gfx90a:xnack+"]);
    }
}
