//! `kpack plugins new NAME [--path DIR] [--sdk DIR]`: scaffold a handler
//! crate on `kpack-sdk` ([`kpack_plugin_host::scaffold`]), written here
//! through `Outputs`.

use std::path::PathBuf;

use anyhow::Context;
use kpack_fsafe::{Existing, Order, Outputs};

use crate::exit::CliResult;

/// Arguments of `kpack plugins new`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Handler name (registry name): lowercase letters, digits, `_`, `-`;
    /// starts with a letter.
    name: String,
    /// Directory to create [default: ./kpack-handler-NAME].
    #[arg(long, value_name = "DIR")]
    path: Option<PathBuf>,
    /// kpack's `sdk/` directory to depend on by path [default: found when
    /// DIR is inside a kpack checkout; else a version placeholder the
    /// generated README explains].
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// Run `kpack plugins new`.
pub fn run(args: Args) -> CliResult {
    let s = kpack_plugin_host::scaffold(&args.name, args.path.as_deref(), args.sdk.as_deref())?;
    // Staged and committed whole: a failure leaves no half-made crate.
    let mut outputs =
        crate::safety::create_outputs(Outputs::builder(&s.dir, "new", Existing::Refuse))?;
    for (rel, text) in &s.files {
        let p = outputs.plan(rel, Order::First)?;
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    outputs.commit()?;
    println!("created {}", s.dir.display());
    crate::ui::status(format_args!(
        "build: cd {} && cargo build --release --target wasm32-wasip2\n\
         use:   kpack plugins classify --plugin target/wasm32-wasip2/release/{}.wasm PREFIX",
        s.dir.display(),
        s.krate
    ));
    if s.sdk.is_none() {
        crate::ui::note(
            "kpack-sdk is not on crates.io: point its dependency in Cargo.toml at a kpack \
             checkout (see the crate's README), or rerun with --sdk DIR",
        );
    }
    Ok(())
}
