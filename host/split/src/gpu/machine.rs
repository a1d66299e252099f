//! `kpack verify --gpu auto`: [`explain_gpu`] for every GPU of a machine,
//! then what would fill the gaps.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use super::{GpuReport, explain_gpu};
use crate::error::Result;

/// Where each of a machine's GPUs loads its kernels from, and what is
/// missing.
#[derive(Debug, Clone, Serialize)]
pub struct MachineReport {
    /// Kernels missing, over every GPU.
    pub missing: usize,
    /// The device wheels that provide the missing code, each once.
    pub fixes: Vec<String>,
    /// One report per GPU target.
    pub reports: Vec<GpuReport>,
    /// The trees checked.
    #[serde(skip)]
    dirs: Vec<PathBuf>,
    /// The GPU targets.
    #[serde(skip)]
    targets: Vec<String>,
}

/// [`explain_gpu`] of `dirs` for each of `targets`.
pub fn explain_machine(dirs: &[PathBuf], targets: &[String]) -> Result<MachineReport> {
    let reports = targets
        .iter()
        .map(|t| explain_gpu(dirs, t))
        .collect::<Result<Vec<_>>>()?;
    let mut fixes: Vec<String> = Vec::new();
    for f in reports.iter().flat_map(|r| r.providers()) {
        if !fixes.iter().any(|x| x == f) {
            fixes.push(f.to_owned());
        }
    }
    Ok(MachineReport {
        missing: reports.iter().map(|r| r.missing()).sum(),
        fixes,
        reports,
        dirs: dirs.to_vec(),
        targets: targets.to_vec(),
    })
}

impl MachineReport {
    /// Whether any tree held a binary with a marker.
    pub fn checked(&self) -> bool {
        self.reports.iter().any(|r| !r.binaries.is_empty())
    }
}

impl fmt::Display for MachineReport {
    /// Each GPU's report after a blank line, then the advice: nothing to
    /// check, all installed, or what fills the gap (the device wheels that
    /// provide the missing code, else where archives can come from).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.reports {
            write!(f, "\n{r}")?;
        }
        writeln!(f)?;
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        if !self.checked() {
            return writeln!(
                f,
                "Nothing to check: no binary with a kpack marker under {}.",
                dirs.join(", ")
            );
        }
        if self.missing == 0 {
            return writeln!(f, "Everything this machine needs is installed.");
        }
        writeln!(
            f,
            "{} kernels missing for this machine. To fill the gap:",
            self.missing
        )?;
        for x in &self.fixes {
            writeln!(f, "  {x}")?;
        }
        if self.fixes.is_empty() {
            writeln!(
                f,
                "  no installed package names the device wheel; fetch the archives for {} with `kpack fetch --index URL {}`",
                self.targets.join(", "),
                dirs.join(" ")
            )?;
        }
        Ok(())
    }
}
