//! Flags shared by the commands that write archives (`offload`, `split`,
//! `wheel split`): compression, hash checking, worker threads, archive
//! grouping, and the named modes that bundle the three.

use kpack_format::{Compression, CompressionMode};

/// How archives are written and inputs read.
#[derive(clap::Args)]
pub struct ArchiveArgs {
    /// A named bundle of scheme, grouping and level: `speed` (`zstd`
    /// level 3 per target: AMD's runtime and kpack's read it), `balance`
    /// (`zstd-delta` level 3 per family) or `size` (`zstd-delta` level 19
    /// per family, slow): the last two are read by kpack's runtime only.
    /// `--compression`, `--compression-level` and `--archive-group` given
    /// beside it win.
    #[arg(long, value_enum, default_value = "speed")]
    compression_mode: ModeArg,
    /// Archive compression: `zstd` (scheme `zstd-per-kernel`, what AMD's
    /// loader reads), `none`, or `zstd-delta` (KPAK v2: siblings of an
    /// `--archive-group` stored as deltas; only our runtime reads it)
    /// [default: the mode's].
    #[arg(long, value_enum)]
    compression: Option<CompressionArg>,
    /// zstd level, 1 (fastest) to 19 (smallest), for `zstd` and
    /// `zstd-delta`; levels above 3 also let a kernel match across the
    /// whole of itself (window up to 128 MiB, which AMD's loader decodes)
    /// [default: the mode's].
    #[arg(long = "compression-level", visible_alias = "level", value_name = "N",
          value_parser = level_parser())]
    level: Option<i32>,
    /// Do not check the MD5 of compressed bundles.
    #[arg(long)]
    no_verify_hash: bool,
    /// Worker threads, 1 to 256 [default: all cores]; output is identical
    /// for any value.
    #[arg(short, long, value_parser = jobs_parser())]
    jobs: Option<usize>,
    /// Archives per processor (`<name>_gfx1101.kpack`), or one per
    /// sub-family (`<name>_gfx110x.kpack`) or family (`<name>_gfx11.kpack`)
    /// of ROCm's packaging hierarchy; markers then list the group files
    /// [default: the mode's].
    #[arg(long, value_enum)]
    archive_group: Option<ArchiveGroupArg>,
    #[command(flatten)]
    memory: crate::memory_args::MemoryArgs,
}

/// `--compression-level` of the archive commands that re-encode (`archive
/// pack`, `convert`, `replace`, `merge`): zstd level 1 (fastest) to 19
/// (smallest), default 3.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct LevelArg {
    /// zstd level the output is written at, 1 (fastest) to 19 (smallest).
    #[arg(long = "compression-level", visible_alias = "level", value_name = "N",
          default_value_t = kpack_format::DEFAULT_LEVEL,
          value_parser = level_parser())]
    pub level: i32,
}

/// `--compression-level`'s parser: the writer's levels
/// ([`kpack_format::LEVELS`]), refused with clap's own range error.
pub fn level_parser() -> clap::builder::RangedI64ValueParser<i32> {
    let (lo, hi) = kpack_format::LEVELS.into_inner();
    clap::value_parser!(i32).range(i64::from(lo)..=i64::from(hi))
}

/// The most worker threads `--jobs` takes: far more than the cores of
/// any machine kpack runs on, far fewer than the threads it takes minutes
/// to start (`-j 99999`).
pub const MAX_JOBS: u16 = 256;

/// `--jobs`'s parser: 1 to [`MAX_JOBS`], refused with clap's range error.
fn jobs_parser() -> impl clap::builder::TypedValueParser<Value = usize> {
    use clap::builder::TypedValueParser as _;
    clap::value_parser!(u16)
        .range(1..=i64::from(MAX_JOBS))
        .map(usize::from)
}

/// `--archive-group` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ArchiveGroupArg {
    Target,
    SubFamily,
    Family,
}

/// `--compression-mode` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Speed,
    Balance,
    Size,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CompressionArg {
    None,
    #[value(alias = "zstd-per-kernel")]
    Zstd,
    ZstdDelta,
}

impl ArchiveArgs {
    /// The `--compression-mode`.
    pub fn mode(&self) -> CompressionMode {
        match self.compression_mode {
            ModeArg::Speed => CompressionMode::Speed,
            ModeArg::Balance => CompressionMode::Balance,
            ModeArg::Size => CompressionMode::Size,
        }
    }

    /// The archive storage scheme: the mode's, with `--compression` and
    /// `--compression-level` in its place where given.
    pub fn compression(&self) -> Compression {
        let mode = self.mode().compression();
        let level = self.level.unwrap_or(match mode {
            Compression::Zstd { level } | Compression::ZstdDelta { level } => level,
            Compression::None => kpack_format::DEFAULT_LEVEL,
        });
        match self.compression {
            None => match mode {
                Compression::None => Compression::None,
                Compression::Zstd { .. } => Compression::Zstd { level },
                Compression::ZstdDelta { .. } => Compression::ZstdDelta { level },
            },
            Some(CompressionArg::None) => Compression::None,
            Some(CompressionArg::Zstd) => Compression::Zstd { level },
            Some(CompressionArg::ZstdDelta) => Compression::ZstdDelta { level },
        }
    }

    /// [`archive_group`](Self::archive_group), where the mode chose it no
    /// coarser than `ceiling` (a wheel split's device-wheel `--group`: an
    /// archive never spans two wheels); an explicit `--archive-group` is
    /// kept as given (and refused later if coarser).
    pub fn archive_group_at_most(&self, ceiling: kpack_amdgpu::Level) -> kpack_amdgpu::Level {
        match self.archive_group {
            Some(_) => self.archive_group(),
            None => self.mode().group().min(ceiling),
        }
    }

    /// The flag that chose the archive grouping, for messages.
    pub fn group_flag(&self) -> String {
        match self.archive_group {
            Some(_) => "--archive-group".into(),
            None => format!("--compression-mode {}", self.mode().name()),
        }
    }

    /// The flag that chose the scheme, for messages.
    pub fn compression_flag(&self) -> String {
        match self.compression {
            Some(_) => "--compression".into(),
            None => format!("--compression-mode {}", self.mode().name()),
        }
    }

    /// One line saying what the archives are (grouped per `group`) and
    /// who reads them.
    pub fn describe(&self, group: kpack_amdgpu::Level) -> String {
        kpack_format::describe_archives(self.compression(), self.mode(), group)
    }

    /// Print [`describe`](Self::describe) on stderr (unless `-q`).
    pub fn say_readers(&self, group: kpack_amdgpu::Level) {
        crate::ui::status(self.describe(group));
    }

    /// Whether to check the MD5 of compressed bundles.
    pub fn verify_hash(&self) -> bool {
        !self.no_verify_hash
    }

    /// The `--archive-group` level.
    pub fn archive_group(&self) -> kpack_amdgpu::Level {
        match self.archive_group {
            None => self.mode().group(),
            Some(ArchiveGroupArg::Target) => kpack_amdgpu::Level::Target,
            Some(ArchiveGroupArg::SubFamily) => kpack_amdgpu::Level::SubFamily,
            Some(ArchiveGroupArg::Family) => kpack_amdgpu::Level::Family,
        }
    }

    /// The run's memory budget (`--max-memory`), shared by every reader
    /// of the run.
    pub fn budget(&self) -> kpack_bundle::MemoryBudget {
        self.memory.budget(kpack_bundle::DEFAULT_MEMORY_LIMIT)
    }

    /// The command's job: `--max-memory`, `--jobs`, the `existing` rule
    /// for outputs, a progress bar on a terminal with `bar`.
    pub fn job(
        &self,
        existing: kpack_fsafe::Existing,
        bar: bool,
    ) -> anyhow::Result<crate::job::CommandJob> {
        crate::job::build(self.budget(), self.jobs, existing, bar)
    }
}
