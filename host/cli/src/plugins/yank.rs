//! `kpack plugins yank NAME@VERSION --registry DIR [--undo]`.

use kpack_plugin_host::Registry;

use crate::exit::CliResult;

/// Arguments of `kpack plugins yank`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// `NAME@VERSION` (an exact published version).
    spec: String,
    /// Registry directory or file:// URL.
    #[arg(long)]
    registry: String,
    /// Un-yank instead.
    #[arg(long)]
    undo: bool,
}

/// Run `kpack plugins yank`.
pub fn run(args: Args) -> CliResult {
    let Some((name, vers)) = args.spec.split_once('@') else {
        return Err(anyhow::anyhow!("expected NAME@VERSION, got {:?}", args.spec).into());
    };
    Registry::new(&args.registry)?.yank(name, vers, !args.undo)?;
    println!(
        "{} {name} {vers}",
        if args.undo { "un-yanked" } else { "yanked" }
    );
    Ok(())
}
