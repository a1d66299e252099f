//! The human form of a [`PruneReport`] ([`PruneReport::text`]), what
//! `kpack wheel prune` prints.

use std::fmt::Write as _;

use crate::{PruneReport, human_bytes};

impl PruneReport {
    /// The report as text: input and output with their sizes, the targets
    /// kept and dropped, and how many files were pruned or left out; one
    /// line for a wheel without device code.
    pub fn text(&self) -> String {
        let (input, output) = (&self.input, &self.output);
        if !self.device_code {
            return format!(
                "{}: no device code; copied unchanged to {}\n",
                input.file,
                output.path.display()
            );
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} -> {}: {} -> {} ({:.1}%)",
            input.file,
            output.path.display(),
            human_bytes(input.bytes),
            human_bytes(output.bytes),
            100.0 * output.bytes as f64 / input.bytes.max(1) as f64
        );
        let _ = writeln!(out, "  kept {}", self.kept.join(", "));
        if !self.dropped.is_empty() {
            let _ = writeln!(out, "  dropped {}", self.dropped.join(", "));
        }
        let _ = writeln!(
            out,
            "  {} binaries pruned, {} database files left out",
            self.binaries.len(),
            self.dropped_files.len()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WheelFile;

    fn wheel(path: &str, bytes: u64) -> WheelFile {
        WheelFile {
            file: "foo-1-py3-none-any.whl".into(),
            path: path.into(),
            distribution: "foo".into(),
            bytes,
            files: 1,
        }
    }

    fn report(device_code: bool) -> PruneReport {
        PruneReport {
            input: wheel("in/foo-1-py3-none-any.whl", 4096),
            output: wheel("out/foo-1-py3-none-any.whl", 1024),
            device_code,
            kept: vec!["gfx1100".into(), "gfx90a".into()],
            dropped: vec!["gfx942".into()],
            missing: vec![],
            binaries: vec![],
            dropped_files: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn pruned_wheel_reads_sizes_and_targets() {
        assert_eq!(
            report(true).text(),
            "foo-1-py3-none-any.whl -> out/foo-1-py3-none-any.whl: 4.0 KiB -> 1.0 KiB (25.0%)\n  \
             kept gfx1100, gfx90a\n  dropped gfx942\n  \
             0 binaries pruned, 0 database files left out\n"
        );
    }

    #[test]
    fn wheel_without_device_code_is_one_line() {
        assert_eq!(
            report(false).text(),
            "foo-1-py3-none-any.whl: no device code; copied unchanged to out/foo-1-py3-none-any.whl\n"
        );
    }
}
