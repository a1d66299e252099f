//! The human form of an [`ArtifactReport`] ([`ArtifactReport::text`]),
//! what `kpack split` prints per artifact.

use std::fmt::Write as _;

use crate::ArtifactReport;

impl ArtifactReport {
    /// The report as text: one line for the artifact (or its failure),
    /// then outputs left alone, database verdicts and exclusions.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let input = self.input.display();
        if !self.errors.is_empty() {
            let n = self.errors.len();
            let _ = writeln!(out, "{input}: FAILED ({n} errors), nothing written");
            return out;
        }
        let kind = if self.generic_only {
            "generic-only".to_string()
        } else {
            format!("archs {}", self.arches.join(", "))
        };
        let _ = writeln!(
            out,
            "{input} -> {}: {} files, {} -> {} bytes, {} binaries offloaded ({} code objects), {kind}",
            self.outputs.join(", "),
            self.files,
            self.bytes_in,
            self.bytes_out,
            self.binaries_offloaded,
            self.code_objects
        );
        for o in &self.identical {
            let _ = writeln!(out, "  {o}: identical to the existing output, left alone");
        }
        for (h, m) in &self.databases {
            let parts: Vec<String> = m.iter().map(|(v, n)| format!("{v}: {n}")).collect();
            let _ = writeln!(out, "  database {h}: {}", parts.join(", "));
        }
        for (t, n) in &self.excluded {
            let _ = writeln!(out, "  excluded {t}: {n}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn report() -> ArtifactReport {
        ArtifactReport {
            input: "in/rand_lib_gfx110X".into(),
            component: "rand_lib".into(),
            outputs: vec!["rand_lib_generic".into(), "rand_lib_gfx1100".into()],
            arches: vec!["gfx1100".into()],
            generic_only: false,
            files: 3,
            bytes_in: 300,
            bytes_out: 200,
            binaries_offloaded: 1,
            code_objects: 2,
            databases: BTreeMap::from([(
                "rocblas".into(),
                BTreeMap::from([("arch".into(), 4), ("generic".into(), 1)]),
            )]),
            excluded: BTreeMap::from([("gfx1101".into(), 1)]),
            warnings: vec![],
            errors: vec![],
            identical: vec!["rand_lib_generic".into()],
            prefixes: vec![],
        }
    }

    #[test]
    fn split_artifact_reads_outputs_sizes_and_verdicts() {
        assert_eq!(
            report().text(),
            "in/rand_lib_gfx110X -> rand_lib_generic, rand_lib_gfx1100: 3 files, 300 -> 200 \
             bytes, 1 binaries offloaded (2 code objects), archs gfx1100\n  \
             rand_lib_generic: identical to the existing output, left alone\n  \
             database rocblas: arch: 4, generic: 1\n  excluded gfx1101: 1\n"
        );
    }

    #[test]
    fn failed_artifact_is_one_line() {
        let mut r = report();
        r.errors = vec!["bad".into(), "worse".into()];
        assert_eq!(
            r.text(),
            "in/rand_lib_gfx110X: FAILED (2 errors), nothing written\n"
        );
    }
}
