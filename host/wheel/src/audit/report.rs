//! The text table and the Markdown page of an [`Audit`].

use std::fmt::Write as _;

use super::{Audit, FatBinary, Hole, Load, Package};

/// One letter per answer.
fn cell(l: Option<&Load>) -> &'static str {
    match l {
        Some(Load::Native) => "N",
        Some(Load::Generic) => "G",
        Some(Load::Spirv) => "S",
        Some(Load::Nothing) | None => "-",
    }
}

/// The targets some binary of `p` loads anything for, or that it claims,
/// in the audit's order.
fn columns<'a>(a: &'a Audit, p: &Package) -> Vec<&'a str> {
    a.targets
        .iter()
        .map(String::as_str)
        .filter(|t| {
            p.claimed.iter().any(|c| c == t)
                || p.binaries
                    .iter()
                    .any(|b| matches!(b.targets.get(*t), Some(Load::Native | Load::Generic)))
        })
        .collect()
}

/// A hole in one line.
fn hole_line(h: &Hole) -> String {
    match h {
        Hole::MissingTarget {
            package,
            binary,
            target,
        } => format!(
            "{package}: {binary} has no code for {target}, which the package serves elsewhere"
        ),
        Hole::MissingParent { device, requires } => {
            format!("{device} requires {requires}, which the set lacks")
        }
        Hole::UnreachableArchive { archive, targets } => format!(
            "{archive} holds only {} code, which no HIP runtime asks for",
            targets.join(", ")
        ),
    }
}

const LEGEND: &str = "N native code, G the generic target's code, S only SPIR-V (never asked for by CLR's two-name list), - nothing";

/// The readable report.
pub(super) fn text(a: &Audit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} wheels, {} targets asked",
        a.wheels.len(),
        a.targets.len()
    );
    for p in &a.packages {
        let cols = columns(a, p);
        let _ = writeln!(s, "\n{} {}", p.name, p.version);
        let width = p.binaries.iter().map(|b| b.path.len()).max().unwrap_or(0);
        let _ = writeln!(s, "  {:width$}  {}", "binary", cols.join(" "));
        for b in &p.binaries {
            let row: Vec<String> = cols
                .iter()
                .map(|t| format!("{:<w$}", cell(b.targets.get(*t)), w = t.len()))
                .collect();
            let _ = writeln!(s, "  {:width$}  {}", b.path, row.join(" ").trim_end());
        }
        let none = uncovered(a, &cols);
        if !none.is_empty() {
            let _ = writeln!(s, "  nothing for: {}", none.join(", "));
        }
    }
    for (package, bins) in fat_by_package(a) {
        let _ = writeln!(
            s,
            "\n{package}: carries its device code inside (never split; the HIP runtime loads it from each binary)"
        );
        for b in bins {
            let _ = writeln!(s, "  {}: {}", b.path, b.targets.join(", "));
        }
    }
    if !a.packages.is_empty() {
        let _ = writeln!(s, "\n{LEGEND}");
    } else {
        s.push('\n');
    }
    if a.holes.is_empty() {
        let _ = writeln!(s, "No holes.");
    } else {
        let _ = writeln!(s, "{} holes:", a.holes.len());
        for h in &a.holes {
            let _ = writeln!(s, "  {}", hole_line(h));
        }
    }
    s
}

/// The fat binaries by `<package> <version>`, in path order.
fn fat_by_package(a: &Audit) -> std::collections::BTreeMap<String, Vec<&FatBinary>> {
    let mut out: std::collections::BTreeMap<String, Vec<&FatBinary>> = Default::default();
    for b in &a.fat_binaries {
        out.entry(format!("{} {}", b.package, b.version))
            .or_default()
            .push(b);
    }
    out
}

/// The targets of the audit that no binary of the package (its columns
/// `cols`) has code for.
fn uncovered<'a>(a: &'a Audit, cols: &[&str]) -> Vec<&'a str> {
    a.targets
        .iter()
        .map(String::as_str)
        .filter(|t| !cols.contains(t))
        .collect()
}

/// The Markdown page.
pub(super) fn markdown(a: &Audit) -> String {
    let mut s = String::from("# GPU coverage\n\n");
    let _ = writeln!(
        s,
        "What the HIP runtime loads on each AMD GPU target from these {} wheels (`kpack audit`): {LEGEND}.",
        a.wheels.len()
    );
    for p in &a.packages {
        let cols = columns(a, p);
        let _ = writeln!(s, "\n## {} {}\n", p.name, p.version);
        let _ = writeln!(s, "| binary | {} |", cols.join(" | "));
        let _ = writeln!(s, "|---|{}", "---|".repeat(cols.len()));
        for b in &p.binaries {
            let row: Vec<&str> = cols.iter().map(|t| cell(b.targets.get(*t))).collect();
            let _ = writeln!(s, "| `{}` | {} |", b.path, row.join(" | "));
        }
        let none = uncovered(a, &cols);
        if !none.is_empty() {
            let _ = writeln!(s, "\nNothing for: {}.", none.join(", "));
        }
    }
    for (package, bins) in fat_by_package(a) {
        let _ = writeln!(
            s,
            "\n## {package}\n\nCarries its device code inside (never split); per binary, the targets it carries:\n"
        );
        for b in bins {
            let _ = writeln!(s, "- `{}`: {}", b.path, b.targets.join(", "));
        }
    }
    let _ = writeln!(s, "\n## Holes\n");
    if a.holes.is_empty() {
        let _ = writeln!(s, "None.");
    }
    for h in &a.holes {
        let _ = writeln!(s, "- {}", hole_line(h));
    }
    s
}
