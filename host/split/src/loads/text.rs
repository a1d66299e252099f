//! The text form of [`MarkerLoads`], shaped like `kpack inspect`'s
//! listing of a fat binary's bundles (entries per code-object index,
//! totals per target), so that a `diff` of the two shows what moved.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::path::Path;

use kpack_binary::inspect::code_object_summary;

use super::MarkerLoads;

/// [`MarkerLoads::text`]: the report, whether kernel names are listed,
/// and the directory paths are shown relative to.
pub struct MarkerLoadsText<'a> {
    loads: &'a MarkerLoads,
    kernels: bool,
    base: Option<&'a Path>,
}

impl MarkerLoads {
    /// The readable listing (kernel names with `kernels`); paths under
    /// `base` (the caller's working directory, canonical) are shown
    /// relative to it.
    pub fn text<'a>(&'a self, kernels: bool, base: Option<&'a Path>) -> MarkerLoadsText<'a> {
        MarkerLoadsText {
            loads: self,
            kernels,
            base,
        }
    }
}

impl MarkerLoadsText<'_> {
    /// `path` relative to the base when it lies under it.
    fn shown(&self, path: &Path) -> String {
        self.base
            .and_then(|d| path.strip_prefix(d).ok())
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

impl fmt::Display for MarkerLoadsText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.loads;
        match (&m.gpu, &m.arch_list) {
            (Some(gpu), Some(list)) => writeln!(
                f,
                "  through the marker, for {gpu} (the loader is asked for {}):",
                list.join(", ")
            )?,
            _ => writeln!(f, "  through the marker (every archive it names):")?,
        }
        for a in &m.archives {
            let what = match &a.error {
                None => format!("arches {}", a.arches.join(", ")),
                Some(e) => e.clone(),
            };
            writeln!(
                f,
                "    archive {}: {what} ({})",
                self.shown(&a.path),
                a.origin
            )?;
        }
        let totals = self.code_objects(f)?;
        if !totals.is_empty() {
            writeln!(f, "  totals per target:")?;
            for (arch, (n, bytes)) in totals {
                writeln!(f, "    {arch:<28} {n:>4} code objects {bytes:>12} bytes")?;
            }
        }
        for finding in &m.findings {
            writeln!(f, "  problem: {finding}")?;
        }
        Ok(())
    }
}

impl<'a> MarkerLoadsText<'a> {
    /// The code objects per index; their count and bytes per target.
    fn code_objects(
        &self,
        f: &mut impl Write,
    ) -> Result<BTreeMap<&'a str, (usize, u64)>, fmt::Error> {
        let mut totals: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
        let mut last = None;
        for co in &self.loads.code_objects {
            if last != Some(co.bundle) {
                writeln!(f, "  bundle {} from key {:?}", co.bundle, co.key)?;
                last = Some(co.bundle);
            }
            let desc = co.code_object.as_ref().map_or_else(
                || "not a code object".to_owned(),
                |c| code_object_summary(c.code_object_version, co.kernel_count),
            );
            writeln!(
                f,
                "    {:<44} {:>10} bytes  {desc}  in {}",
                co.target,
                co.size,
                self.shown(&co.archive)
            )?;
            if self.kernels {
                for k in co.code_object.iter().flat_map(|c| &c.kernels) {
                    writeln!(f, "      {k}")?;
                }
            }
            let t = totals.entry(&co.target).or_default();
            t.0 += 1;
            t.1 += co.size;
        }
        Ok(totals)
    }
}
