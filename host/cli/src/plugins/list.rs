//! `kpack plugins list`: every handler findable by name, plus `--plugin`
//! files, with name, version, WIT version, origin and sha256.

use kpack_plugin_host::{HandlerSpec, SUPPORTED_WIT};

use crate::exit::CliResult;
use crate::handlers::HandlerArgs;

/// Arguments of `kpack plugins list`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    handlers: HandlerArgs,
    /// Print JSON (`schema_version` 1).
    #[arg(long)]
    json: bool,
}

/// Run `kpack plugins list`.
pub fn run(args: Args) -> CliResult {
    let options = args.handlers.options()?;
    let mut specs: Vec<HandlerSpec> = if args.handlers.split_databases.is_empty() {
        options.available().into_iter().map(|(_, s)| s).collect()
    } else {
        args.handlers
            .specs()?
            .into_iter()
            .filter(|s| matches!(s, HandlerSpec::Name { .. }))
            .collect()
    };
    specs.extend(args.handlers.plugins.iter().cloned().map(HandlerSpec::File));
    let set = crate::handlers::load(&specs, &options)?;
    if args.json {
        /// The `--json` document.
        #[derive(serde::Serialize)]
        struct Document<'a> {
            supported_wit: &'a str,
            handlers: Vec<kpack_plugin_host::Listed<'a>>,
        }
        crate::json::print(&Document {
            supported_wit: SUPPORTED_WIT,
            handlers: set.listed(),
        })?;
        return Ok(());
    }
    if set.handlers().len() == 0 {
        eprintln!(
            "no handlers found; build them with scripts/build-plugins.sh or pass --plugin-dir"
        );
    }
    print!("{}", set.table());
    Ok(())
}
