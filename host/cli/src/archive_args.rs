//! Flags shared by the commands that write archives (`offload`, `split`,
//! `wheel split`): compression, hash checking, worker threads, archive
//! grouping.

use anyhow::Context;
use kpack_format::Compression;

/// How archives are written and inputs read.
#[derive(clap::Args)]
pub struct ArchiveArgs {
    /// Archive compression: `zstd` (scheme `zstd-per-kernel`, what AMD's
    /// loader reads), `none`, or `zstd-delta` (KPAK v2: siblings of an
    /// `--archive-group` stored as deltas; only our runtime reads it).
    #[arg(long, value_enum, default_value = "zstd")]
    compression: CompressionArg,
    /// zstd level, 1 (fastest) to 19 (smallest), for `zstd` and
    /// `zstd-delta`; levels above 3 also let a kernel match across the
    /// whole of itself (window up to 128 MiB, which AMD's loader decodes).
    #[arg(long = "compression-level", visible_alias = "level", value_name = "N",
          default_value_t = kpack_format::DEFAULT_LEVEL, value_parser = level_parser())]
    level: i32,
    /// Do not check the MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// Worker threads [default: all cores]; output is identical for any value.
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Archives per processor (`<name>_gfx1101.kpack`), or one per
    /// sub-family (`<name>_gfx110x.kpack`) or family (`<name>_gfx11.kpack`)
    /// of ROCm's packaging hierarchy; markers then list the group files.
    #[arg(long, value_enum, default_value = "target")]
    archive_group: ArchiveGroupArg,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

/// `--compression-level`'s parser: the writer's levels
/// ([`kpack_format::LEVELS`]), refused with clap's own range error.
pub fn level_parser() -> clap::builder::RangedI64ValueParser<i32> {
    let (lo, hi) = kpack_format::LEVELS.into_inner();
    clap::value_parser!(i32).range(i64::from(lo)..=i64::from(hi))
}

/// `--archive-group` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ArchiveGroupArg {
    Target,
    SubFamily,
    Family,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CompressionArg {
    None,
    #[value(alias = "zstd-per-kernel")]
    Zstd,
    ZstdDelta,
}

impl ArchiveArgs {
    /// The archive storage scheme.
    pub fn compression(&self) -> Compression {
        match self.compression {
            CompressionArg::None => Compression::None,
            CompressionArg::Zstd => Compression::Zstd { level: self.level },
            CompressionArg::ZstdDelta => Compression::ZstdDelta { level: self.level },
        }
    }

    /// Whether to check the MD5 of compressed bundles.
    pub fn verify_hash(&self) -> bool {
        !self.no_verify_hash
    }

    /// The `--archive-group` level.
    pub fn archive_group(&self) -> kpack_amdgpu::Level {
        match self.archive_group {
            ArchiveGroupArg::Target => kpack_amdgpu::Level::Target,
            ArchiveGroupArg::SubFamily => kpack_amdgpu::Level::SubFamily,
            ArchiveGroupArg::Family => kpack_amdgpu::Level::Family,
        }
    }

    /// A thread pool honouring `--jobs`; also applies `--max-memory`,
    /// since every command with these flags starts its work here.
    pub fn thread_pool(&self) -> anyhow::Result<rayon::ThreadPool> {
        self.memory.install(kpack_bundle::DEFAULT_MEMORY_LIMIT);
        let mut pool = rayon::ThreadPoolBuilder::new();
        if let Some(j) = self.jobs {
            pool = pool.num_threads(j.max(1));
        }
        pool.build().context("starting worker threads")
    }
}
