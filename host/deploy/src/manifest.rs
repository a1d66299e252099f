//! `kpack-deploy.json`: what a deploy wrote, why, and what it left out.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record's file name in the output directory.
pub const MANIFEST: &str = "kpack-deploy.json";

/// The record's schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// `kpack-deploy.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The GPUs the directory is for.
    pub gpus: Vec<String>,
    /// Every file written, by path.
    pub files: Vec<FileRecord>,
    /// Libraries and archives left out, and why.
    pub left_out: Vec<LeftOutRecord>,
    /// Per GPU, the bytes it needs against the inputs'.
    pub sizes: Vec<GpuSize>,
}

/// One file (or link) of the directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRecord {
    /// Relative to the directory, `/`-separated.
    pub path: String,
    /// `executable`, `library`, `runtime`, `archive`, `database` or
    /// `symlink`.
    pub kind: String,
    /// Bytes (0 for a link).
    pub size: u64,
    /// sha256 of the bytes (empty for a link).
    pub sha256: String,
    /// A link's target.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub link: Option<String>,
    /// Who needs it: `given`, `--also`, `the kpack runtime`, or the
    /// library names that need it (for an archive: whose marker finds it).
    pub needed_by: Vec<String>,
    /// The listed GPUs it has code for (archives, fat libraries).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub serves: Vec<String>,
    /// For a pruned fat library, the targets kept.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pruned_to: Option<Vec<String>>,
    /// A fat library offloaded in the copy (`--offload`): its code is in
    /// the archives beside it.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub offloaded: bool,
    /// A database file's handler and classification (`rocblas gfx1100`,
    /// `rocblas generic`, `unclaimed`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub database: Option<String>,
}

/// One library or archive not deployed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeftOutRecord {
    /// Its name.
    pub name: String,
    /// Who needs it (for an archive: whose marker names it).
    pub needed_by: Vec<String>,
    /// Why it stays out.
    pub reason: String,
}

/// Sizes for one GPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuSize {
    /// The GPU.
    pub gpu: String,
    /// Bytes of the directory this GPU uses: every binary and the archives
    /// and database files serving it.
    pub deployed_bytes: u64,
    /// Bytes of the fat closure: every binary as found, every archive
    /// their markers name and every file of the database directories.
    pub fat_closure_bytes: u64,
}

impl Manifest {
    pub(crate) fn new(
        gpus: &[String],
        mut files: Vec<FileRecord>,
        mut left_out: Vec<LeftOutRecord>,
        fat_bytes: u64,
    ) -> Manifest {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        left_out.sort_by(|a, b| a.name.cmp(&b.name));
        let sizes = gpus
            .iter()
            .map(|g| GpuSize {
                gpu: g.clone(),
                deployed_bytes: files
                    .iter()
                    .filter(|f| {
                        !matches!(f.kind.as_str(), "archive" | "database") || f.serves.contains(g)
                    })
                    .map(|f| f.size)
                    .sum(),
                fat_closure_bytes: fat_bytes,
            })
            .collect();
        Manifest {
            schema_version: SCHEMA_VERSION,
            gpus: gpus.to_vec(),
            files,
            left_out,
            sizes,
        }
    }

    /// Bytes of every file written.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
