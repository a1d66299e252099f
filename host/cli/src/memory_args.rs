//! `--max-memory`, shared by every command that reads code objects
//! (`inspect`, `extract`, `offload`, `split`, `wheel split`).

use kpack_bundle::MemoryBudget;

/// The ceiling on inflated code-object bytes held at once.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct MemoryArgs {
    /// Most inflated bytes held in memory at once, across all worker
    /// threads: code objects and zstd decoder windows (512M, 2G, or bytes)
    /// [default: 128M for inspect and extract, 256M otherwise]. A single
    /// code object larger than this is an error; a bundle whose decoder
    /// window does not fit beside it is inflated alone.
    #[arg(long, value_name = "SIZE", value_parser = kpack_bundle::parse_size)]
    max_memory: Option<u64>,
}

impl MemoryArgs {
    /// The command's budget (`default` unless `--max-memory` was given),
    /// passed to everything of the run that inflates bundles.
    pub fn budget(&self, default: u64) -> MemoryBudget {
        MemoryBudget::new(self.max_memory.unwrap_or(default))
    }
}
