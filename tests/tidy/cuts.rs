//! Target strings are cut by `kpack_amdgpu` only (`processor_of`,
//! `TargetId::parse`, `strip_target_prefix`): a hand cut such as
//! `t.split(':').next()` elsewhere drifts from the grammar (`-strict`,
//! generic targets, the `amdgcn-amd-amdhsa--` prefix).

use super::homes::Rule;

/// Hand cuts of a target string, with the files that may make them.
pub const CUTS: &[Rule] = &[Rule {
    name: "hand cut of a target string",
    spellings: &[
        "split(':')",
        "split_once(':')",
        "rsplit(':')",
        "rsplit_once(':')",
        "splitn(2, ':')",
        "find(':')",
        "strip_suffix(\"-strict\")",
        "\"amdgcn-amd-amdhsa--\"",
        "rsplit(\"--\")",
    ],
    homes: &[
        "host/amdgpu/src/target.rs",
        "bench/torch-scale/src/main.rs", // known: skips processors the fixtures hold; could ask processor_of
        "host/detect/src/conda.rs", // known: conda's ISA version from the processor; could ask processor_of
        "host/detect/src/provider.rs", // known: the std-only provider installers vendor has no kpack-amdgpu
        "host/wheel/src/headers.rs",   // not a target: splits a `Name: value` metadata header line
    ],
    ask: "kpack_amdgpu::processor_of or TargetId::parse",
}];

#[cfg(test)]
mod tests {
    use super::super::homes::check;
    use super::super::source::SourceFile;
    use super::*;

    #[test]
    fn rejects_a_processor_cut_by_hand_outside_kpack_amdgpu() {
        let files = [SourceFile::new(
            "host/offload/src/flow.rs",
            "let processor = target.split(':').next().unwrap_or(target);",
        )];
        let problems = check(CUTS, &files);
        assert!(
            problems[0].starts_with("host/offload/src/flow.rs:1: `split(':')`"),
            "{problems:?}"
        );
    }
}
