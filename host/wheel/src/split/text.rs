//! `wheel split`'s table of what it wrote ([`WheelReport::table`]).

use std::fmt::Write as _;

use super::WheelReport;

/// `bytes` in B, KiB, MiB, … with one decimal (`12.3 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl WheelReport {
    /// The table of a split: input, host and device wheels with their
    /// sizes against the input, the binaries offloaded, database verdicts,
    /// exclusions and, with groups, how to install one; one line for a
    /// wheel without device code.
    pub fn table(&self) -> String {
        let r = self;
        if !r.device_code {
            return format!(
                "{}: no device code; copied unchanged to {}\n",
                r.input.file,
                r.host.path.display()
            );
        }
        let mut out = String::new();
        let mut rows: Vec<(&str, &str, u64, String)> = vec![
            ("input", &r.input.file, r.input.bytes, String::new()),
            ("host", &r.host.file, r.host.bytes, String::new()),
        ];
        // With --group, the last column is the extra to type (the group's
        // key, `gfx10_1`, is not), with the processors it installs.
        let grouped = r.devices.iter().any(|d| d.extra.is_some());
        for d in &r.devices {
            let last = match &d.extra {
                Some(extra) => format!("{extra} ({})", d.targets.join(", ")),
                None => d.arch.clone(),
            };
            rows.push(("device", &d.wheel.file, d.wheel.bytes, last));
        }
        let w = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let last = if grouped { "extra" } else { "arch" };
        let _ = writeln!(
            out,
            "{:<6}  {:<w$}  {:>10}  {:>6}  {last}",
            "wheel", "file", "size", "%input"
        );
        for (kind, file, bytes, arch) in &rows {
            let pct = if r.input.bytes == 0 {
                0.0
            } else {
                100.0 * *bytes as f64 / r.input.bytes as f64
            };
            let size = human_bytes(*bytes);
            let _ = writeln!(
                out,
                "{kind:<6}  {file:<w$}  {size:>10}  {pct:>5.1}%  {arch}"
            );
        }
        let code_objects: usize = r.binaries.iter().map(|b| b.code_objects).sum();
        // Grouped, the processors (the groups' keys are in no command line).
        let archs: Vec<&str> = if grouped {
            r.devices
                .iter()
                .flat_map(|d| d.targets.iter().map(String::as_str))
                .collect()
        } else {
            r.archs()
        };
        let _ = writeln!(
            out,
            "{} binaries offloaded ({code_objects} code objects); archs: {}",
            r.binaries.len(),
            archs.join(", ")
        );
        self.footer(&mut out);
        out
    }

    /// Database verdicts, exclusions and, with groups, how to install one.
    fn footer(&self, out: &mut String) {
        for (h, m) in &self.databases {
            let parts: Vec<String> = m.iter().map(|(v, n)| format!("{v}: {n}")).collect();
            let _ = writeln!(out, "database {h}: {}", parts.join(", "));
        }
        for (t, n) in &self.excluded {
            let _ = writeln!(out, "excluded {t}: {n}");
        }
        if let Some(d) = self.devices.iter().find_map(|d| d.extra.as_ref()) {
            let _ = writeln!(
                out,
                "install one: pip install '{}[{d}]' (or [device-all])",
                self.host.distribution
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_largest_unit_below_1024() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
