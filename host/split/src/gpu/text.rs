//! The text form of [`GpuReport`]: where each kernel loads from (`verify
//! --gpu`, `fetch`'s check, the doctor).

use std::fmt;

use super::{GpuKernel, GpuOutcome, GpuReport};

impl fmt::Display for GpuReport {
    /// The arch list, each binary's kernels, each fat binary, a summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpu = &self.gpu;
        let asked = if self.arch_list.len() == 1 {
            "the device's target; its map names no generic target for it"
        } else {
            "the device's target and its map's generic target"
        };
        writeln!(
            f,
            "GPU {gpu}: loader arch list {} (what the HIP runtime asks for: {asked})",
            self.arch_list.join(", ")
        )?;
        let mut total = 0;
        for b in &self.binaries {
            writeln!(f, "{}", b.path)?;
            total += b.kernels.len();
            kernels_text(f, &b.kernels)?;
            // The advice once per binary, however many kernels miss.
            if let Some(p) = &b.provider {
                writeln!(f, "    => {p}")?;
            }
        }
        for b in &self.fat_binaries {
            writeln!(
                f,
                "{} (fat binary, device code not offloaded): carries {}",
                b.path,
                b.targets.join(", ")
            )?;
            match &b.serves {
                Some(t) => writeln!(f, "  embedded code for {t} loads")?,
                None => writeln!(
                    f,
                    "  MISSING: no code object for {gpu} or its generic target; the HIP runtime fails with hipErrorNoBinaryForGpu (rebuild it with --offload-arch={})",
                    kpack_amdgpu::processor_of(kpack_amdgpu::strip_target_prefix(gpu))
                )?,
            }
        }
        writeln!(
            f,
            "{} binaries, {total} kernels, {} missing for {gpu}",
            self.binaries.len() + self.fat_binaries.len(),
            self.missing()
        )
    }
}

/// A binary's kernels: each that loads on its line; those that miss for
/// one reason (error, diagnostic, SPIR-V note) in one group, named by its
/// first key and how many more, with the diagnostic once.
fn kernels_text(f: &mut fmt::Formatter<'_>, kernels: &[GpuKernel]) -> fmt::Result {
    let mut i = 0;
    while i < kernels.len() {
        let k = &kernels[i];
        match &k.outcome {
            GpuOutcome::Loads {
                archive,
                target,
                lacking,
            } => {
                writeln!(f, "  {}: {archive} as {target}", k.key)?;
                for (a, t) in lacking {
                    writeln!(f, "    (tried first: {a} as {t}, lacks it)")?;
                }
                i += 1;
            }
            GpuOutcome::Missing {
                error,
                code,
                diagnostic,
                spirv,
                ..
            } => {
                let same = |o: &GpuOutcome| {
                    matches!(o, GpuOutcome::Missing { error: e, diagnostic: d, spirv: s, .. }
                        if e == error && d == diagnostic && s == spirv)
                };
                let n = kernels[i..].iter().take_while(|x| same(&x.outcome)).count();
                let more = match n {
                    1 => String::new(),
                    n => format!(" and {} more kernels", n - 1),
                };
                writeln!(
                    f,
                    "  {}{more}: MISSING ({error}, kpack error {code})",
                    k.key
                )?;
                for line in diagnostic.lines() {
                    writeln!(f, "    {}", line.trim_start())?;
                }
                if let Some(s) = spirv {
                    writeln!(f, "    => {s}")?;
                }
                i += n;
            }
        }
    }
    Ok(())
}
