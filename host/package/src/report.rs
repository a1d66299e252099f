//! The human form of a [`PackageReport`] ([`PackageReport::text`]): the
//! packages written with their sizes and what each GPU's user downloads.

use std::fmt::Write as _;

use crate::PackageReport;

impl PackageReport {
    /// The report as text: the input and the packages written, the
    /// download per GPU against the fat package, and how to sign; one line
    /// when nothing was split.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if !self.split {
            let what = if self.databases_only {
                "no database file a handler assigns to a GPU"
            } else {
                "no device code"
            };
            let _ = writeln!(
                out,
                "{}: {what}: nothing to split, nothing written",
                self.input.file
            );
            return out;
        }
        let _ = writeln!(
            out,
            "{} ({}) ->",
            self.input.file,
            human_size(self.input.bytes)
        );
        let devices = self.devices.iter().map(|d| &d.package);
        for p in self.host.iter().chain(devices).chain(&self.all) {
            let _ = writeln!(out, "  {} ({})", p.file, human_size(p.bytes));
        }
        out.push_str("download per GPU (host + its device packages, against the fat package):\n");
        for g in &self.per_gpu {
            let pct = 100.0 * g.bytes as f64 / g.fat_bytes.max(1) as f64;
            let _ = writeln!(
                out,
                "  {}: {} of {} ({pct:.0}%)",
                g.gpu,
                human_size(g.bytes),
                human_size(g.fat_bytes)
            );
        }
        let sign = match self.format {
            "rpm" => "rpmsign --addsign",
            _ => "debsigs or dpkg-sig",
        };
        let _ = writeln!(out, "unsigned: sign with {sign} before publishing");
        out
    }
}

/// `bytes` in MiB from 1 MiB up, else in KiB, with one decimal.
fn human_size(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{DevicePackage, GpuDownload, PackageFile};

    fn file(name: &str, bytes: u64) -> PackageFile {
        PackageFile {
            package: name.into(),
            file: format!("{name}.deb"),
            path: format!("out/{name}.deb").into(),
            bytes,
        }
    }

    fn report(split: bool) -> PackageReport {
        PackageReport {
            input: file("foo", 4 << 20),
            format: "deb",
            version: "1".into(),
            architecture: "amd64".into(),
            split,
            databases_only: false,
            host: split.then(|| file("foo", 1 << 20)),
            devices: vec![DevicePackage {
                package: file("foo-gfx1100", 512),
                key: "gfx1100".into(),
                targets: vec!["gfx1100".into()],
            }],
            all: split.then(|| file("foo-gfx-all", 1024)),
            per_gpu: vec![GpuDownload {
                gpu: "gfx1100".into(),
                packages: vec![],
                bytes: 1 << 20,
                fat_bytes: 4 << 20,
            }],
            binaries: vec![],
            databases: BTreeMap::new(),
            warnings: vec![],
        }
    }

    #[test]
    fn split_package_lists_packages_downloads_and_signing() {
        assert_eq!(
            report(true).text(),
            "foo.deb (4.0 MiB) ->\n  foo.deb (1.0 MiB)\n  foo-gfx1100.deb (0.5 KiB)\n  \
             foo-gfx-all.deb (1.0 KiB)\n\
             download per GPU (host + its device packages, against the fat package):\n  \
             gfx1100: 1.0 MiB of 4.0 MiB (25%)\n\
             unsigned: sign with debsigs or dpkg-sig before publishing\n"
        );
    }

    #[test]
    fn package_without_device_code_is_one_line() {
        assert_eq!(
            report(false).text(),
            "foo.deb: no device code: nothing to split, nothing written\n"
        );
    }
}
