//! Machines with more than one kind of GPU: which are integrated, the
//! order the HIP runtime numbers them in, and the `HIP_VISIBLE_DEVICES`
//! value that keeps the discrete ones when an integrated GPU comes first
//! (programs that use device 0 then run on the small one, or fail on a
//! target the package was not built for).

use serde::Serialize;

use crate::{Detection, Gpu, Source};

/// Processors LLVM's processor table (AMDGPUUsage) lists as APUs.
const APU_PROCESSORS: &[&str] = &[
    "gfx902", "gfx909", "gfx90c", "gfx1013", "gfx1033", "gfx1035", "gfx1036", "gfx1103", "gfx1150",
    "gfx1151", "gfx1152", "gfx1153",
];

/// Whether `processor` is an APU's GPU in LLVM's processor table.
pub fn is_apu_processor(processor: &str) -> bool {
    APU_PROCESSORS.contains(&processor)
}

/// The indices into [`Detection::gpus`] in the HIP runtime's device
/// order: KFD nodes by number (`2` before `10`, unlike rocm-bootstrap's
/// listing), forced targets as given.
pub fn hip_order(det: &Detection) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..det.gpus.len()).collect();
    if det.source == Source::Kfd {
        idx.sort_by_key(|&i| det.gpus[i].node);
    }
    idx
}

/// What to tell the user of a machine whose first HIP device is
/// integrated while a discrete one exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisibleDevices {
    /// The HIP device index used first (`0`).
    pub first_index: usize,
    /// Its target.
    pub first_target: String,
    /// The `HIP_VISIBLE_DEVICES` value that keeps only the discrete GPUs
    /// (`1` or `1,2`).
    pub value: String,
}

/// The advice for `det`, when an integrated GPU comes before a discrete
/// one in HIP's order.
pub fn visible_devices(det: &Detection) -> Option<VisibleDevices> {
    let order = hip_order(det);
    let gpus: Vec<&Gpu> = order.iter().map(|&i| &det.gpus[i]).collect();
    let first_igpu = gpus.iter().position(|g| g.integrated)?;
    let discrete: Vec<usize> = (0..gpus.len()).filter(|&i| !gpus[i].integrated).collect();
    if !discrete.iter().any(|&d| d > first_igpu) {
        return None;
    }
    let value = discrete
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    Some(VisibleDevices {
        first_index: 0,
        first_target: gpus[0].target.clone(),
        value,
    })
}
