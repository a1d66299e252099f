//! What `kpack extract` writes of a host binary or bundle file: one file
//! per selected device entry, named `bundle<N>-<target>.hsaco` (`:` in a
//! target id becomes `_`; a second entry with the same target in one
//! bundle gets `.<k>` before `.hsaco`), as a [`serde::Serialize`] plan
//! built by [`HostBinary::extract_plan`] and written by
//! [`HostBinary::write_extract`].

use std::collections::{BTreeSet, HashMap};

use kpack_amdgpu::TargetId;
use serde::Serialize;

use crate::host::HostBinary;

/// One code object to write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtractFile {
    /// The bundle's position in the file.
    pub bundle: usize,
    /// The entry's position in its bundle.
    pub entry: usize,
    /// The file name to write it under.
    pub name: String,
    /// The entry's target id.
    pub target: String,
}

/// The code objects `kpack extract` writes, and every target present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExtractPlan {
    /// The files, in bundle and entry order.
    pub files: Vec<ExtractFile>,
    /// Every device target in the file.
    pub found: BTreeSet<String>,
}

impl ExtractPlan {
    /// The first of `wanted` with no code object in the file.
    pub fn missing<'w>(&self, wanted: &'w [TargetId]) -> Option<&'w TargetId> {
        wanted.iter().find(|t| !self.found.contains(&t.to_string()))
    }
}

impl HostBinary {
    /// One file per selected device entry: every one with `all`, else
    /// those whose target is one of `wanted`.
    pub fn extract_plan(&self, all: bool, wanted: &[TargetId]) -> ExtractPlan {
        let mut plan = ExtractPlan::default();
        for (b, item) in self.bundles().iter().enumerate() {
            let mut seen = HashMap::<String, usize>::new();
            for (i, entry) in item.entries.iter().enumerate() {
                let Some(target) = entry.id.target().filter(|_| !entry.id.is_host()) else {
                    continue;
                };
                plan.found.insert(target.to_string());
                if !all && !wanted.contains(target) {
                    continue;
                }
                let k = seen.entry(target.to_string()).or_default();
                let suffix = if *k == 0 {
                    String::new()
                } else {
                    format!(".{k}")
                };
                *k += 1;
                plan.files.push(ExtractFile {
                    bundle: b,
                    entry: i,
                    name: format!("bundle{b}-{}{suffix}.hsaco", target.file_name()),
                    target: target.to_string(),
                });
            }
        }
        plan
    }
}
