//! Loading: resolve [`HandlerSpec`]s through [`LoadOptions`] (a file, the
//! search path, or a registry), compile or fetch from the cache, link by
//! WIT version, and check what the handler says about itself.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;
use semver::{Version, VersionReq};
use sha2::{Digest, Sha256};

use crate::places::Places;
use crate::registry::Registry;
use crate::run::{HandlerSet, Loaded};
use crate::sandbox::{self, Limits};
use crate::search::{self, SearchDir};
use crate::spec::{HandlerSpec, check_name};
use crate::types::{EmbeddedHandler, HandlerMeta, Origin};
use crate::{Error, ErrorKind, Result, cache, wit};

/// Where handlers are looked for, and how they run.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Searched in order for handlers given by name.
    pub search: Vec<SearchDir>,
    /// When set, handlers given by name resolve from this registry.
    pub registry: Option<Registry>,
    /// Compiled-component cache directory; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Sandbox limits for every call.
    pub limits: Limits,
    /// Handlers compiled into the executable: used for a name no search
    /// directory holds (a handler on disk overrides one of these; with
    /// [`registry`](Self::registry) set, names resolve there instead).
    pub embedded: Vec<EmbeddedHandler>,
}

impl LoadOptions {
    /// kpack's standard search path, in order: `flag_dirs` (`--plugin-dir`),
    /// `$KPACK_PLUGIN_DIR` (a `:`-separated list), the install directory
    /// ([`Places::install_dir`]), `<exe dir>/plugins`, and
    /// `<exe dir>/../wasm32-wasip2/plugin` (where
    /// `scripts/build-plugins.sh` puts them in a cargo target directory).
    /// Cache at [`Places::cache_dir`].
    pub fn standard(flag_dirs: &[PathBuf], places: &Places) -> LoadOptions {
        LoadOptions {
            search: search::standard_dirs(flag_dirs, places),
            registry: None,
            cache_dir: places.cache_dir(),
            limits: Limits::default(),
            embedded: Vec::new(),
        }
    }

    /// Handlers findable by name: `(name, spec)` per name, sorted by name,
    /// from the search directories and the embedded handlers.
    pub fn available(&self) -> Vec<(String, HandlerSpec)> {
        let mut all: BTreeMap<String, HandlerSpec> =
            search::discover(&self.search).into_iter().collect();
        for e in &self.embedded {
            if check_name(e.name).is_ok() {
                all.entry(e.name.to_string())
                    .or_insert_with(|| HandlerSpec::Name {
                        name: e.name.to_string(),
                        req: None,
                    });
            }
        }
        all.into_iter().collect()
    }
}

/// A component's bytes and how they were found, before loading.
struct Candidate {
    wasm: Cow<'static, [u8]>,
    origin: Origin,
    expect_name: Option<String>,
    req: Option<VersionReq>,
}

impl HandlerSet {
    /// Resolve and load `specs`, in order (compiling in parallel, or from the
    /// cache). Fails if any spec cannot be found, is not a compatible
    /// handler, or names a handler twice.
    pub fn load(specs: &[HandlerSpec], options: &LoadOptions) -> Result<HandlerSet> {
        let engine = sandbox::engine()?;
        let candidates = specs
            .iter()
            .map(|s| resolve(s, options))
            .collect::<Result<Vec<_>>>()?;
        let loaded = candidates
            .into_par_iter()
            .map(|c| load_one(&engine, c, options))
            .collect::<Result<Vec<_>>>()?;
        // Said once per run: every handler meets the same cache.
        let mut warnings: Vec<String> = Vec::new();
        let mut handlers = Vec::new();
        for (h, said) in loaded {
            for w in said {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
            handlers.push(h);
        }
        for (i, h) in handlers.iter().enumerate() {
            if let Some(first) = handlers[..i].iter().find(|o| o.meta.name == h.meta.name) {
                return Err(Error::new(
                    ErrorKind::Usage,
                    format!(
                        "handler {} is given twice ({} and {})",
                        h.meta.name, first.meta.origin, h.meta.origin
                    ),
                ));
            }
        }
        Ok(HandlerSet {
            engine,
            limits: options.limits.clone(),
            handlers,
            logs: Mutex::new(Vec::new()),
            warnings,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("reading handler {}", path.display()), e))
}

fn resolve(spec: &HandlerSpec, options: &LoadOptions) -> Result<Candidate> {
    let (name, req) = match spec {
        HandlerSpec::File(p) => {
            return Ok(Candidate {
                wasm: Cow::Owned(read(p)?),
                origin: Origin::File(p.clone()),
                expect_name: None,
                req: None,
            });
        }
        HandlerSpec::Name { name, req } => (name, req),
    };
    if let Some(reg) = &options.registry {
        let entry = reg.resolve(name, req.as_ref().unwrap_or(&VersionReq::STAR))?;
        let wasm = reg.fetch(&entry)?;
        return Ok(Candidate {
            wasm: Cow::Owned(wasm),
            origin: Origin::Registry(reg.location().to_string()),
            expect_name: Some(name.clone()),
            req: req.clone(),
        });
    }
    if let Some((dir, path)) = search::find(&options.search, name, req.as_ref()) {
        return Ok(Candidate {
            wasm: Cow::Owned(read(&path)?),
            origin: Origin::Dir(dir, path),
            expect_name: Some(name.clone()),
            req: req.clone(),
        });
    }
    if let Some(e) = options.embedded.iter().find(|e| e.name == name) {
        return Ok(Candidate {
            wasm: Cow::Borrowed(e.wasm),
            origin: Origin::Embedded,
            expect_name: Some(name.clone()),
            req: req.clone(),
        });
    }
    let looked: Vec<String> = options
        .search
        .iter()
        .map(|d| d.path.display().to_string())
        .collect();
    let available = options
        .available()
        .into_iter()
        .map(|(n, _)| n)
        .collect::<Vec<_>>();
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "no database handler named {name:?}{} (looked in: {}); available: {}. \
             pass --plugin FILE.wasm, --plugin-dir DIR or --registry",
            req.as_ref()
                .map(|r| format!(" matching {r}"))
                .unwrap_or_default(),
            if looked.is_empty() {
                "nowhere".to_string()
            } else {
                looked.join(", ")
            },
            if available.is_empty() {
                "none".to_string()
            } else {
                available.join(", ")
            },
        ),
    ))
}

/// Load one handler; returns it and the warnings its loading gave.
fn load_one(
    engine: &wasmtime::Engine,
    c: Candidate,
    options: &LoadOptions,
) -> Result<(Loaded, Vec<String>)> {
    let origin_text = c.origin.to_string();
    let sha: [u8; 32] = Sha256::digest(&c.wasm).into();
    let mut warnings = Vec::new();
    let (component, source) = cache::load(
        engine,
        &c.wasm,
        &sha,
        options.cache_dir.as_deref(),
        &origin_text,
        &mut warnings,
    )?;
    let wit_version = wit::guest_version(&component, engine, &origin_text)?;
    let bindings = wit::link(engine, &component, &wit_version, &origin_text)?;
    let who = format!("handler at {origin_text} (kpack:handler@{wit_version})");
    let mut store = sandbox::store(engine, &options.limits);
    let fuel = sandbox::refuel(&mut store, &options.limits, 0)?;
    let guest = bindings
        .instantiate(&mut store)
        .map_err(|e| sandbox::call_error(&who, "instantiation", &e, &mut store, fuel))?;
    let info = guest
        .info(&mut store)
        .map_err(|e| sandbox::call_error(&who, "info", &e, &mut store, fuel))?;
    let hints = guest
        .path_hints(&mut store)
        .map_err(|e| sandbox::call_error(&who, "path-hints", &e, &mut store, fuel))?;
    let bad = |m: String| Error::new(ErrorKind::Invalid, format!("{who}: {m}"));
    check_name(&info.name).map_err(|e| bad(e.to_string()))?;
    let version = Version::parse(&info.version).map_err(|e| {
        Error::with_source(
            ErrorKind::Invalid,
            format!("{who}: version {:?} is not semver", info.version),
            e,
        )
    })?;
    if let Some(expect) = &c.expect_name
        && *expect != info.name
    {
        return Err(bad(format!(
            "it is handler {:?}, not {expect:?}",
            info.name
        )));
    }
    if let Some(req) = &c.req
        && !req.matches(&version)
    {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "{who}: {} {version} does not match the requirement {req}",
                info.name
            ),
        ));
    }
    let meta = HandlerMeta {
        name: info.name,
        version,
        wit: wit_version,
        origin: c.origin,
        sha256: hex::encode(sha),
        prefix_bytes: info.prefix_bytes.min(options.limits.max_prefix_bytes),
        path_hints: hints.into_iter().filter(|h| !h.is_empty()).collect(),
        from_cache: source == cache::Source::Cache,
    };
    Ok((Loaded { meta, bindings }, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::DirKind;

    #[test]
    fn unknown_name_lists_the_search_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kpack_handler_rocblas.wasm"), b"").unwrap();
        let options = LoadOptions {
            search: vec![SearchDir {
                path: dir.path().into(),
                kind: DirKind::Flag,
            }],
            ..LoadOptions::default()
        };
        let Err(err) = resolve(&HandlerSpec::parse("rocblass").unwrap(), &options) else {
            panic!("resolved")
        };
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.to_string().contains("available: rocblas"), "{err}");
    }

    #[test]
    fn embedded_handler_is_the_fallback_after_every_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = LoadOptions {
            search: vec![SearchDir {
                path: dir.path().into(),
                kind: DirKind::Flag,
            }],
            embedded: vec![EmbeddedHandler {
                name: "rocblas",
                wasm: b"embedded",
            }],
            ..LoadOptions::default()
        };
        let spec = HandlerSpec::parse("rocblas").unwrap();
        let Ok(c) = resolve(&spec, &options) else {
            panic!("not resolved")
        };
        assert_eq!(c.origin, Origin::Embedded);
        assert_eq!(&*c.wasm, b"embedded");
        assert_eq!(options.available().len(), 1);

        let on_disk = dir.path().join("kpack_handler_rocblas.wasm");
        std::fs::write(&on_disk, b"disk").unwrap();
        let Ok(c) = resolve(&spec, &options) else {
            panic!("not resolved")
        };
        assert_eq!(c.origin, Origin::Dir(options.search[0].clone(), on_disk));

        // A registry replaces the search, embedded handlers included.
        options.registry = Some(Registry::new(dir.path().to_str().unwrap()).unwrap());
        assert!(resolve(&spec, &options).is_err());
    }
}
