//! Benchmark (not a test): handler cold/warm start and classification
//! throughput through the WebAssembly boundary. Run by `bench/plugins.sh`:
//!
//! ```text
//! cargo run --release -p kpack-plugin-host --example bench -- PLUGIN_DIR [PATHS]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kpack_plugin_host::{DirKind, HandlerSet, HandlerSpec, LoadOptions, SearchDir};
use kpack_split::FileInfo;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const STANDARD: &[&str] = &[
    "rocblas",
    "hipblaslt",
    "hipsparselt",
    "aotriton",
    "miopen",
    "composablekernel",
    "hipkernelprovider",
    "hotswap",
];

fn options(dir: &std::path::Path, cache: &tempfile::TempDir) -> LoadOptions {
    let mut o = LoadOptions::standard(
        &[],
        &kpack_plugin_host::Places::from_vars(|k| std::env::var_os(k), None),
    );
    o.search = vec![SearchDir {
        path: dir.to_path_buf(),
        kind: DirKind::Flag,
    }];
    o.cache_dir = Some(cache.path().to_path_buf());
    o
}

fn specs(names: &[&str]) -> Res<Vec<HandlerSpec>> {
    Ok(names
        .iter()
        .map(|n| HandlerSpec::parse(n))
        .collect::<Result<Vec<_>, _>>()?)
}

fn best<T>(runs: usize, mut f: impl FnMut() -> Res<T>) -> Res<(Duration, T)> {
    let mut best = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f()?;
        let d = t.elapsed();
        if best.as_ref().is_none_or(|(b, _)| d < *b) {
            best = Some((d, v));
        }
    }
    best.ok_or_else(|| "no runs".into())
}

/// Paths shaped like a ROCm install: Tensile libraries, MIOpen databases,
/// AOTriton images, and a majority of ordinary files.
fn rocm_like_paths(n: usize) -> Vec<FileInfo> {
    let arches = ["gfx90a", "gfx942", "gfx1100", "gfx1201", "gfx950"];
    (0..n)
        .map(|i| {
            let a = arches[i % arches.len()];
            let path = match i % 10 {
                0..=2 => format!(
                    "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_{i}_{a}.co"
                ),
                3 => format!("lib/hipblaslt/library/TensileLibrary_HH_{i}_{a}.dat"),
                4 => format!("share/miopen/db/{a}{}.HIP.fdb.txt", i % 120),
                5 => format!("lib/aotriton.images/amd-{a}/flash/attn_fwd/FONLY__{i}.aks2"),
                _ => format!("include/rocm/some/header_number_{i}_of_many_files.h"),
            };
            FileInfo::new(path, 4096)
        })
        .collect()
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(args.get(1).ok_or("usage: bench PLUGIN_DIR [PATHS]")?);
    let n: usize = args
        .get(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let all = specs(STANDARD)?;

    // Cold: empty cache, every handler JIT-compiled (in parallel).
    let (cold, _) = best(3, || {
        let cache = tempfile::tempdir()?;
        Ok(HandlerSet::load(&all, &options(&dir, &cache))?)
    })?;
    let cache = tempfile::tempdir()?;
    HandlerSet::load(&all, &options(&dir, &cache))?;
    let (warm, set) = best(10, || Ok(HandlerSet::load(&all, &options(&dir, &cache))?))?;
    println!(
        "start, all {} standard handlers: cold {:.1} ms, warm {:.2} ms",
        STANDARD.len(),
        ms(cold),
        ms(warm)
    );
    if set.handlers().any(|h| !h.from_cache) {
        return Err("warm load did not come from the cache".into());
    }

    // Every path crosses the boundary: one handler, every path matching its hints.
    let rocblas_only = specs(&["rocblas"])?;
    let set1 = HandlerSet::load(&rocblas_only, &options(&dir, &cache))?;
    let paths: Vec<FileInfo> = (0..n)
        .map(|i| {
            FileInfo::new(
                format!("lib/rocblas/library/TensileLibrary_Type_HH_Contraction_{i}_gfx942.co"),
                4096,
            )
        })
        .collect();
    let (d, out) = best(5, || Ok(set1.classify(&paths)?))?;
    check(out.iter().all(Option::is_some), "rocblas claims every path")?;
    println!(
        "boundary, rocblas, {n} paths (all sent to the guest): {:.2} M paths/s ({:.0} ms)",
        rate(n, d),
        ms(d)
    );

    // The realistic mix through all standard handlers (path hints skip most crossings).
    let mix = rocm_like_paths(n);
    let (d, out) = best(5, || Ok(set.classify(&mix)?))?;
    let claimed = out.iter().filter(|c| c.is_some()).count();
    check(
        claimed.abs_diff(n * 6 / 10) <= 10,
        "60% of the mix is claimed",
    )?;
    println!(
        "mix, {} handlers, {n} paths ({claimed} claimed): {:.2} M paths/s ({:.0} ms)",
        STANDARD.len(),
        rate(n, d),
        ms(d)
    );

    // Batch size sweep (one handler, every path crossing).
    for batch in [100usize, 1000, 4096, 16384] {
        let mut o = options(&dir, &cache);
        o.limits.max_batch = batch;
        let s = HandlerSet::load(&rocblas_only, &o)?;
        let (d, _) = best(3, || Ok(s.classify(&paths)?))?;
        println!("  batch {batch:>6}: {:.2} M paths/s", rate(n, d));
    }
    Ok(())
}

fn check(ok: bool, what: &str) -> Res<()> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64() / 1e6
}
