//! `--max-memory`, shared by every command that reads code objects
//! (`inspect`, `extract`, `offload`, `split`, `wheel split`).

use kpack_bundle::{DEFAULT_MEMORY_LIMIT, MemoryBudget};

/// The ceiling on inflated code-object bytes held at once.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct MemoryArgs {
    /// Most inflated code-object bytes held in memory at once, across all
    /// worker threads (512M, 2G, or bytes) [default: 1G]. A single code
    /// object larger than this is an error.
    #[arg(long, value_name = "SIZE", value_parser = kpack_bundle::parse_size)]
    max_memory: Option<u64>,
}

impl MemoryArgs {
    /// Set the process-wide budget; call before reading any input.
    pub fn install(&self) {
        MemoryBudget::set_process_limit(self.max_memory.unwrap_or(DEFAULT_MEMORY_LIMIT));
    }
}
