//! ISA target matching with feature flags (spec §11). The target prefix
//! and its stripping are `kpack_amdgpu`'s; the candidate order is AMD's
//! loader's, and deliberately looser than [`kpack_amdgpu::TargetId`]'s
//! grammar (features kept in the order the agent reports them, empty ones
//! skipped), because it must match what ROCr reports byte for byte.

use kpack_amdgpu::{TargetId, generic_for, strip_target_prefix};

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
    let mut parts = s.split(':');
    let processor = parts.next().unwrap_or("");
    if processor.is_empty() {
        return Vec::new();
    }
    let features: Vec<&str> = parts.filter(|f| !f.is_empty()).collect();
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

/// The arch list CLR hands the loader for device `gpu`: its target, then
/// its LLVM generic target with the same features (`gfx1101:xnack-` →
/// `gfx1101:xnack-`, `gfx11-generic:xnack-`). Each entry is then expanded
/// by [`compatible_targets`].
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
        && let Some(g) = generic_for(t.processor())
    {
        let features = gpu.split_once(':').map(|(_, f)| f);
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
