//! `kpack index DIR`: write the listing (`kpack-index.json`: name, size,
//! SHA-256 of every `.kpack` under DIR) that `kpack fetch --index` reads,
//! so DIR can be served as is by any static HTTP server.

use std::path::PathBuf;

use anyhow::Context;

use crate::exit::CliResult;

/// Arguments of `kpack index`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory of archives (split output, or any tree of .kpack files).
    dir: PathBuf,
    /// Print the listing as JSON too.
    #[arg(long)]
    json: bool,
}

/// Run `kpack index`.
pub fn run(args: Args) -> CliResult {
    let (path, listing) = kpack_fetch::write_listing(&args.dir)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&listing).context("json")?
        );
    } else {
        let bytes: u64 = listing.files.iter().map(|f| f.size).sum();
        println!(
            "{}: {} archives, {bytes} bytes",
            path.display(),
            listing.files.len()
        );
    }
    Ok(())
}
