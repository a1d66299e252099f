//! `kpack verify-elf FILE...`: structural checks of host binaries (segment
//! coverage, program headers, marker, wrappers, relocations into removed
//! bytes), plus `readelf -lSW` when it is installed. PE images (DLL, EXE)
//! get kpack-pe's checks instead. Exit 1 on findings.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use kpack_binary::FileKind;
use kpack_format::{Finding, Severity};
use object::ReadCache;

use crate::exit::{CliError, CliResult};

/// Arguments of `kpack verify-elf`.
#[derive(clap::Args)]
pub struct Args {
    /// Host binaries to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Skip the `readelf -lSW` cross-check.
    #[arg(long)]
    no_readelf: bool,
    /// Print findings as JSON.
    #[arg(long)]
    json: bool,
    /// The files are outputs of `kpack prune`: wrappers stay HIPF and
    /// must point into `.hip_fatbin`'s file bytes; no marker.
    #[arg(long)]
    pruned: bool,
}

/// Run `kpack verify-elf`.
pub fn run(args: Args) -> CliResult {
    let mut all = Vec::new();
    for path in &args.files {
        crate::safety::regular_file(path)?;
        // PE images (DLL, EXE), told by magic: kpack-pe's structural checks.
        if FileKind::of_path(path).with_context(|| format!("cannot read {}", path.display()))?
            == FileKind::Pe
        {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            all.push((path.clone(), kpack_pe::verify_image(&bytes)));
            continue;
        }
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let cache = ReadCache::new(file);
        let verify = if args.pruned {
            kpack_elf::verify_pruned_image
        } else {
            kpack_elf::verify_image
        };
        let mut findings = verify(&cache).map_err(|e| e.in_file(path))?;
        if !args.no_readelf {
            findings.extend(readelf_complaints(path));
        }
        all.push((path.clone(), findings));
    }
    let is_error = |f: &&Finding| f.severity == Severity::Error;
    let failed = all.iter().any(|(_, f)| f.iter().any(|x| is_error(&x)));
    if args.json {
        /// One file's findings, errors apart from warnings.
        #[derive(serde::Serialize)]
        struct Checked<'a> {
            path: &'a std::path::Path,
            ok: bool,
            findings: Vec<String>,
            warnings: Vec<String>,
        }
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            files: Vec<Checked<'a>>,
        }
        let files = all
            .iter()
            .map(|(p, f)| {
                let (errors, warnings): (Vec<&Finding>, Vec<&Finding>) =
                    f.iter().partition(is_error);
                let messages = |v: Vec<&Finding>| -> Vec<String> {
                    v.iter().map(|f| f.message.clone()).collect()
                };
                Checked {
                    path: p,
                    ok: errors.is_empty(),
                    findings: messages(errors),
                    warnings: messages(warnings),
                }
            })
            .collect();
        crate::json::print(&Document { files })?;
    } else {
        for (p, f) in &all {
            if !f.iter().any(|x| is_error(&x)) {
                println!("{}: ok", p.display());
            }
            for finding in f {
                match finding.severity {
                    Severity::Error => println!("{}: {finding}", p.display()),
                    Severity::Warning => println!("{}: warning: {finding}", p.display()),
                }
            }
        }
    }
    if failed {
        Err(CliError::Findings)
    } else {
        Ok(())
    }
}

/// Lines of `readelf -lSW` output that complain; nothing if readelf is absent.
fn readelf_complaints(path: &std::path::Path) -> Vec<Finding> {
    let Ok(out) = Command::new("readelf").arg("-lSW").arg(path).output() else {
        return Vec::new();
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            [
                "warning",
                "error",
                "corrupt",
                "invalid",
                "not covered",
                "truncated",
                "overlaps",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .map(|l| Finding::error("readelf", format!("readelf: {}", l.trim())))
        .collect()
}
