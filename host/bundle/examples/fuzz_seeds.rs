//! Writes the `bundle` fuzz target's seed corpus into the directory named
//! by the first argument: the real bundle file, every corpus fixture's
//! `.hip_fatbin`, and CCOB v1/v2/v3 x zlib/zstd of the real bundle.
//!
//! `cargo run -p kpack-bundle --example fuzz_seeds -- fuzz/corpus/bundle`
//! (run by `fuzz/seed.sh`). A tool, not a test: a test that does nothing
//! unless an environment variable is set passes without checking anything.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kpack_bundle::{Method, deflate};
use object::{Object, ObjectSection};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: fuzz_seeds DIR");
        return ExitCode::from(2);
    };
    match run(Path::new(&dir)) {
        Ok(n) => {
            eprintln!("wrote {n} seeds to {}", Path::new(&dir).display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(dir: &Path) -> Result<usize, String> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/corpus");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, data: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, data).map_err(|e| format!("{}: {e}", p.display()))
    };
    let real = corpus.join("kern_axpy_2arch.co");
    let b = std::fs::read(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    write("kern_axpy_2arch.co", &b)?;
    let mut n = 1;
    for version in 1..=3u16 {
        for (method, name) in [(Method::Zlib, "zlib"), (Method::Zstd, "zstd")] {
            let c = deflate(&b, version, method, 3).map_err(|e| e.to_string())?;
            write(&format!("ccob_v{version}_{name}.bin"), &c)?;
            n += 1;
        }
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .map_err(|e| format!("{}: {e}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    // Sorted so two runs write the same seeds in the same order.
    names.sort();
    for path in names {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(obj) = object::File::parse(&*bytes) else {
            continue;
        };
        let Some(data) = obj
            .section_by_name(".hip_fatbin")
            .and_then(|s| s.data().ok())
        else {
            continue;
        };
        if data.is_empty() || data.len() > 256 << 10 {
            continue;
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        write(&format!("{name}.hip_fatbin"), data)?;
        n += 1;
    }
    Ok(n)
}
