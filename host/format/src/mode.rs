//! Named compression modes (`--compression-mode speed|balance|size`): each
//! a fixed bundle of scheme, archive grouping and level, and which runtimes
//! read what it writes. The figures behind each choice are in the guide's
//! performance page ("Compression modes").

use kpack_amdgpu::Level;

use crate::write::{Compression, DEFAULT_LEVEL};

/// One named bundle of archive settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionMode {
    /// `zstd-per-kernel` at level 3, one archive per processor: the
    /// default, fastest to write, and what AMD's runtime reads.
    #[default]
    Speed,
    /// `zstd-delta` at level 3, one archive per family: about a third of
    /// `speed`'s bytes for about 1.5× its time; kpack's runtime only.
    Balance,
    /// `zstd-delta` at level 19, one archive per family: smaller than the
    /// fat binary's own compressed bundles, at about 25× `speed`'s time;
    /// kpack's runtime only.
    Size,
}

/// The level of [`CompressionMode::Size`].
pub const SIZE_LEVEL: i32 = 19;

impl CompressionMode {
    /// Every mode, fastest first.
    pub const ALL: [CompressionMode; 3] = [
        CompressionMode::Speed,
        CompressionMode::Balance,
        CompressionMode::Size,
    ];

    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CompressionMode::Speed => "speed",
            CompressionMode::Balance => "balance",
            CompressionMode::Size => "size",
        }
    }

    /// The mode's scheme and level.
    pub fn compression(self) -> Compression {
        match self {
            CompressionMode::Speed => Compression::Zstd {
                level: DEFAULT_LEVEL,
            },
            CompressionMode::Balance => Compression::ZstdDelta {
                level: DEFAULT_LEVEL,
            },
            CompressionMode::Size => Compression::ZstdDelta { level: SIZE_LEVEL },
        }
    }

    /// The mode's archive grouping.
    pub fn group(self) -> Level {
        match self {
            CompressionMode::Speed => Level::Target,
            CompressionMode::Balance | CompressionMode::Size => Level::Family,
        }
    }
}

/// Which runtimes read archives of a scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// KPAK v1 (`none`, `zstd-per-kernel`): AMD's runtime and kpack's.
    AmdAndKpack,
    /// KPAK v2 (`zstd-delta`): kpack's runtime only; AMD's refuses the
    /// header version.
    KpackOnly,
}

impl Readers {
    /// Who reads archives written with `compression`.
    pub fn of(compression: Compression) -> Readers {
        match compression {
            Compression::None | Compression::Zstd { .. } => Readers::AmdAndKpack,
            Compression::ZstdDelta { .. } => Readers::KpackOnly,
        }
    }
}

impl std::fmt::Display for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Readers::AmdAndKpack => "AMD's runtime and kpack's",
            Readers::KpackOnly => "kpack's runtime only (not AMD's: KPAK v2)",
        })
    }
}

/// One line saying what archives written with `compression` under `mode`
/// are (grouped per `group`) and who reads them, for the commands that
/// write archives to say before they start.
pub fn describe_archives(compression: Compression, mode: CompressionMode, group: Level) -> String {
    let level = match compression {
        Compression::None => String::new(),
        Compression::Zstd { level } | Compression::ZstdDelta { level } => {
            format!(" level {level}")
        }
    };
    let group = match group {
        Level::Target => "per target",
        Level::SubFamily => "per sub-family",
        Level::Family => "per family",
    };
    format!(
        "archives: {}{level}, {group} (mode {}); read by {}",
        compression.scheme_name(),
        mode.name(),
        Readers::of(compression)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_scheme_level_grouping_and_readers() {
        let c = Compression::ZstdDelta { level: 19 };
        assert_eq!(
            describe_archives(c, CompressionMode::Size, Level::SubFamily),
            "archives: zstd-delta level 19, per sub-family (mode size); read by kpack's runtime only (not AMD's: KPAK v2)"
        );
    }

    #[test]
    fn speed_is_the_default_and_amd_reads_it() {
        let m = CompressionMode::default();
        assert_eq!(m, CompressionMode::Speed);
        assert_eq!(m.compression(), Compression::default());
        assert_eq!(m.group(), Level::Target);
        assert_eq!(Readers::of(m.compression()), Readers::AmdAndKpack);
    }

    #[test]
    fn balance_and_size_are_family_delta_archives_for_kpack_only() {
        for m in [CompressionMode::Balance, CompressionMode::Size] {
            assert_eq!(m.group(), Level::Family);
            assert_eq!(Readers::of(m.compression()), Readers::KpackOnly);
        }
        assert_eq!(
            CompressionMode::Size.compression(),
            Compression::ZstdDelta { level: 19 }
        );
    }
}
