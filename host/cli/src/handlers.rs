//! The flags that choose database handlers, shared by every command that
//! classifies files (`plugins classify`, `plugins list`, and `split`):
//! `--split-databases NAME[@REQ]...`, `--plugin FILE.wasm`,
//! `--plugin-dir DIR`, `--registry DIR|file://URL|https://URL`.
//!
//! Handlers named with `--split-databases` are looked for, in order, in:
//! `--plugin-dir` directories, `$KPACK_PLUGIN_DIR` (`:`-separated), the
//! install directory of `kpack plugins add` (`$XDG_DATA_HOME/kpack/plugins`),
//! `<exe dir>/plugins`, and `<exe dir>/../wasm32-wasip2/plugin` (what
//! `scripts/build-plugins.sh` produces in the cargo target directory), and
//! last the standard handlers embedded in the binary (origin `embedded`),
//! so a copied `kpack` needs no file beside it and a handler on disk
//! overrides the embedded one. With `--registry`, names resolve from that
//! registry instead.
//!
//! A kpack built without the `handlers` feature (`scripts/demo.sh`'s quick
//! build: no WebAssembly runtime) takes the same flags and refuses them.

use std::path::PathBuf;

#[cfg(feature = "handlers")]
use anyhow::Context;
#[cfg(feature = "handlers")]
use kpack_plugin_host::{EmbeddedHandler, HandlerSet, HandlerSpec, LoadOptions, Registry};

/// Database-handler selection flags; `#[command(flatten)]` them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HandlerArgs {
    /// Database handlers to use, in probe order (first claim wins): names
    /// such as `rocblas`, or `NAME@REQ` with a semver requirement (`rocblas@^1.2`).
    #[arg(long = "split-databases", value_name = "NAME[@REQ]", num_args = 1.., value_delimiter = ',')]
    pub split_databases: Vec<String>,
    /// A third-party handler component; asked after the `--split-databases` ones.
    #[arg(long = "plugin", value_name = "FILE.wasm")]
    pub plugins: Vec<PathBuf>,
    /// Extra directory to look for handlers in (searched first; repeatable).
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,
    /// Resolve handler names from this registry (directory, file:// or http(s):// URL).
    #[arg(long, value_name = "DIR|URL")]
    pub registry: Option<String>,
}

impl HandlerArgs {
    /// Whether any handler was asked for.
    pub fn is_empty(&self) -> bool {
        self.split_databases.is_empty() && self.plugins.is_empty()
    }

    /// The chosen handlers, as the split and wheel commands take them
    /// (none if none were asked for).
    #[cfg(feature = "handlers")]
    pub fn databases(&self) -> anyhow::Result<Option<Box<dyn kpack_split::Databases>>> {
        if self.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(self.load()?)))
    }

    /// Without the `handlers` feature: none, or an error saying how to get
    /// a kpack that has them.
    #[cfg(not(feature = "handlers"))]
    pub fn databases(&self) -> anyhow::Result<Option<Box<dyn kpack_split::Databases>>> {
        if self.is_empty() && self.plugin_dirs.is_empty() && self.registry.is_none() {
            return Ok(None);
        }
        Err(anyhow::anyhow!(
            "this kpack was built without database handlers (cargo feature `handlers`), \
             so --split-databases, --plugin, --plugin-dir and --registry cannot be used; \
             `cargo build --release -p kpack-cli` builds the full kpack"
        ))
    }

    /// The validated handler specs, in probe order.
    #[cfg(feature = "handlers")]
    pub fn specs(&self) -> anyhow::Result<Vec<HandlerSpec>> {
        let mut specs = self
            .split_databases
            .iter()
            .map(|s| HandlerSpec::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        specs.extend(self.plugins.iter().cloned().map(HandlerSpec::File));
        Ok(specs)
    }

    /// Where to look, per the search order above.
    #[cfg(feature = "handlers")]
    pub fn options(&self) -> anyhow::Result<LoadOptions> {
        let mut options =
            LoadOptions::standard(&self.plugin_dirs, &crate::environment::handler_places());
        options.embedded = kpack_guests::EMBEDDED
            .iter()
            .map(|&(name, wasm)| EmbeddedHandler { name, wasm })
            .collect();
        if let Some(r) = &self.registry {
            options.registry = Some(Registry::new(r)?);
        }
        Ok(options)
    }

    /// Load the chosen handlers (none if none were asked for).
    #[cfg(feature = "handlers")]
    pub fn load(&self) -> anyhow::Result<HandlerSet> {
        let specs = self.specs()?;
        load(&specs, &self.options()?).context("loading database handlers")
    }
}

/// Load handlers and say what loading them had to say (the library
/// reports, the CLI prints).
#[cfg(feature = "handlers")]
pub fn load(specs: &[HandlerSpec], options: &LoadOptions) -> kpack_plugin_host::Result<HandlerSet> {
    let set = HandlerSet::load(specs, options)?;
    for w in set.warnings() {
        crate::ui::warn_above(None, w);
    }
    Ok(set)
}
