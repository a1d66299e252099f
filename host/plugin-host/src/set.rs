//! [`HandlerSet`]: handlers resolved from specs, loaded, and asked in order.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;
use semver::{Version, VersionReq};
use sha2::{Digest, Sha256};

use crate::registry::Registry;
use crate::sandbox::{self, Limits, LogLine};
use crate::wit::{self, Bindings, GuestError};
use crate::{Error, ErrorKind, Result, cache};

/// How a handler is asked for: `rocblas`, `rocblas@^1.2`, or a `.wasm` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerSpec {
    /// A handler by name, optionally with a semver requirement.
    Name {
        /// Handler name.
        name: String,
        /// Version requirement (`NAME@REQ`); `None` takes what is found first.
        req: Option<VersionReq>,
    },
    /// A component file (`--plugin FILE.wasm`).
    File(PathBuf),
}

impl HandlerSpec {
    /// Parse `NAME`, `NAME@REQ` or a path (anything with `/` or ending `.wasm`).
    ///
    /// ```
    /// use kpack_plugin_host::HandlerSpec;
    /// assert!(matches!(HandlerSpec::parse("rocblas@^1.2").unwrap(), HandlerSpec::Name { .. }));
    /// assert!(matches!(HandlerSpec::parse("./x.wasm").unwrap(), HandlerSpec::File(_)));
    /// assert!(HandlerSpec::parse("Bad Name").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<HandlerSpec> {
        if s.ends_with(".wasm") || s.contains('/') {
            return Ok(HandlerSpec::File(PathBuf::from(s)));
        }
        let (name, req) = match s.split_once('@') {
            Some((n, r)) => {
                let req = VersionReq::parse(r).map_err(|e| {
                    Error::new(
                        ErrorKind::Usage,
                        format!("handler spec {s:?}: bad version requirement {r:?}: {e}"),
                    )
                })?;
                (n, Some(req))
            }
            None => (s, None),
        };
        check_name(name)
            .map_err(|m| Error::new(ErrorKind::Usage, format!("handler spec {s:?}: {m}")))?;
        Ok(HandlerSpec::Name {
            name: name.to_string(),
            req,
        })
    }
}

impl fmt::Display for HandlerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerSpec::Name { name, req: None } => f.write_str(name),
            HandlerSpec::Name { name, req: Some(r) } => write!(f, "{name}@{r}"),
            HandlerSpec::File(p) => write!(f, "{}", p.display()),
        }
    }
}

pub(crate) fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("handler names are 1 to 64 characters".into());
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
    {
        return Err(format!(
            "handler name {name:?} may only contain a-z, 0-9, '_' and '-'"
        ));
    }
    Ok(())
}

/// How a directory on the search path was configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirKind {
    /// `--plugin-dir`.
    Flag,
    /// `$KPACK_PLUGIN_DIR`.
    Env,
    /// Handlers installed by `kpack plugins add` (`NAME-VERSION.wasm`).
    Installed,
    /// Shipped with kpack: `<exe dir>/plugins`, or a cargo target dir's
    /// `wasm32-wasip2/plugin` next to the executable.
    Bundled,
}

/// One directory searched for handlers by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchDir {
    /// The directory.
    pub path: PathBuf,
    /// Why it is searched.
    pub kind: DirKind,
}

/// Where a loaded handler came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Given as a file.
    File(PathBuf),
    /// Found by name in a search directory.
    Dir(SearchDir, PathBuf),
    /// Resolved from a registry (its location).
    Registry(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "file {}", p.display()),
            Origin::Dir(d, p) => {
                let how = match d.kind {
                    DirKind::Flag => "--plugin-dir",
                    DirKind::Env => "KPACK_PLUGIN_DIR",
                    DirKind::Installed => "installed",
                    DirKind::Bundled => "bundled",
                };
                write!(f, "{how} {}", p.display())
            }
            Origin::Registry(r) => write!(f, "registry {r}"),
        }
    }
}

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
}

impl LoadOptions {
    /// kpack's standard search path, in order: `flag_dirs` (`--plugin-dir`),
    /// `$KPACK_PLUGIN_DIR` (a `:`-separated list), the install directory
    /// ([`default_install_dir`]), `<exe dir>/plugins`, and
    /// `<exe dir>/../wasm32-wasip2/plugin` (where `scripts/build-plugins.sh`
    /// puts them in a cargo target directory). Cache at
    /// [`cache::default_cache_dir`](crate::default_cache_dir).
    pub fn standard(flag_dirs: &[PathBuf]) -> LoadOptions {
        let mut search: Vec<SearchDir> = flag_dirs
            .iter()
            .map(|p| SearchDir {
                path: p.clone(),
                kind: DirKind::Flag,
            })
            .collect();
        if let Some(v) = std::env::var_os("KPACK_PLUGIN_DIR") {
            search.extend(
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(|path| SearchDir {
                        path,
                        kind: DirKind::Env,
                    }),
            );
        }
        if let Some(path) = default_install_dir() {
            search.push(SearchDir {
                path,
                kind: DirKind::Installed,
            });
        }
        if let Some(exe_dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            search.push(SearchDir {
                path: exe_dir.join("plugins"),
                kind: DirKind::Bundled,
            });
            if let Some(target) = exe_dir.parent() {
                search.push(SearchDir {
                    path: target.join("wasm32-wasip2/plugin"),
                    kind: DirKind::Bundled,
                });
            }
        }
        LoadOptions {
            search,
            registry: None,
            cache_dir: cache::default_cache_dir(),
            limits: Limits::default(),
        }
    }
}

/// Where `kpack plugins add` installs handlers: `$XDG_DATA_HOME/kpack/plugins`
/// or `~/.local/share/kpack/plugins`.
pub fn default_install_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .map(|d| d.join("kpack/plugins"))
}

/// What a loaded handler is.
#[derive(Clone, Debug)]
pub struct HandlerMeta {
    /// Handler name (from the component's `info`).
    pub name: String,
    /// Handler version (from `info`).
    pub version: Version,
    /// The `kpack:handler` WIT version it was built against (from its export).
    pub wit: Version,
    /// Where it came from.
    pub origin: Origin,
    /// sha256 of the `.wasm`, lowercase hex.
    pub sha256: String,
    /// Leading bytes it wants per file (after the host's cap).
    pub prefix_bytes: u32,
    /// Its path hints (empty = every file).
    pub path_hints: Vec<String>,
    /// Whether the compiled component came from the cache.
    pub from_cache: bool,
}

impl HandlerMeta {
    /// `rocblas 0.1.0 (kpack:handler@1.1.0)`: how errors name a handler.
    pub fn label(&self) -> String {
        format!(
            "handler {} {} (kpack:handler@{})",
            self.name, self.version, self.wit
        )
    }
}

/// One file to classify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Path relative to the install prefix, `/`-separated, no leading `/`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The file's first bytes: at least [`HandlerSet::prefix_bytes_for`] of
    /// them when the file is that long (more is fine; fewer hides content).
    pub prefix: Vec<u8>,
}

impl FileInfo {
    /// A file with no content prefix.
    pub fn new(path: impl Into<String>, size: u64) -> Self {
        FileInfo {
            path: path.into(),
            size,
            prefix: Vec::new(),
        }
    }

    /// Read size and the first `prefix_bytes` bytes of `root/rel`.
    pub fn read(root: &Path, rel: &str, prefix_bytes: usize) -> Result<Self> {
        use std::io::Read;
        let full = root.join(rel);
        let meta = std::fs::metadata(&full).map_err(|e| Error::io(full.display(), e))?;
        let mut prefix = Vec::new();
        if prefix_bytes > 0 {
            let f = std::fs::File::open(&full).map_err(|e| Error::io(full.display(), e))?;
            f.take(prefix_bytes as u64)
                .read_to_end(&mut prefix)
                .map_err(|e| Error::io(full.display(), e))?;
        }
        Ok(FileInfo {
            path: rel.to_string(),
            size: meta.len(),
            prefix,
        })
    }
}

/// A handler's verdict on a file it claims.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Classification {
    /// Needed on every GPU target.
    Generic,
    /// Needed only for this bundle key (`gfx942`, `gfx90a:xnack+`, `gfx11`).
    Arch(String),
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classification::Generic => f.write_str("generic"),
            Classification::Arch(k) => f.write_str(k),
        }
    }
}

/// Which handler claimed a file, and its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    /// Name of the claiming handler.
    pub handler: String,
    /// Its verdict.
    pub classification: Classification,
}

struct Loaded {
    meta: HandlerMeta,
    bindings: Box<dyn Bindings>,
}

impl Loaded {
    fn wants(&self, path: &str) -> bool {
        self.meta.path_hints.is_empty()
            || self
                .meta
                .path_hints
                .iter()
                .any(|h| path.contains(h.as_str()))
    }
}

/// Database handlers, loaded and ready, asked in the order given.
pub struct HandlerSet {
    engine: wasmtime::Engine,
    limits: Limits,
    handlers: Vec<Loaded>,
    logs: Mutex<Vec<LogLine>>,
}

impl fmt::Debug for HandlerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerSet")
            .field("handlers", &self.handlers().collect::<Vec<_>>())
            .finish()
    }
}

/// A component's bytes and how they were found, before loading.
struct Candidate {
    wasm: Vec<u8>,
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
        let handlers = candidates
            .into_par_iter()
            .map(|c| load_one(&engine, c, options))
            .collect::<Result<Vec<_>>>()?;
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
        })
    }

    /// The loaded handlers, in probe order.
    pub fn handlers(&self) -> impl ExactSizeIterator<Item = &HandlerMeta> {
        self.handlers.iter().map(|h| &h.meta)
    }

    /// How many leading bytes of `path` the handlers that may claim it want
    /// (0 for most files, thanks to path hints).
    pub fn prefix_bytes_for(&self, path: &str) -> usize {
        self.handlers
            .iter()
            .filter(|h| h.wants(path))
            .map(|h| h.meta.prefix_bytes as usize)
            .max()
            .unwrap_or(0)
    }

    /// Classify `files`: for each, the first handler (in load order) that
    /// claims it, or `None`. A handler that traps, times out or runs out of
    /// memory fails the whole call with an error naming it.
    pub fn classify(&self, files: &[FileInfo]) -> Result<Vec<Option<Claim>>> {
        let mut out: Vec<Option<Claim>> = vec![None; files.len()];
        for h in &self.handlers {
            let pending: Vec<usize> = (0..files.len())
                .filter(|&i| out[i].is_none() && h.wants(&files[i].path))
                .collect();
            if pending.is_empty() {
                continue;
            }
            let batches = self.batches(&pending, files, h.meta.prefix_bytes as usize);
            let results = batches
                .par_iter()
                .map(|batch| self.run_batch(h, files, batch))
                .collect::<Result<Vec<_>>>()?;
            for (batch, verdicts) in batches.iter().zip(results) {
                for (&i, v) in batch.iter().zip(verdicts) {
                    out[i] = v.map(|classification| Claim {
                        handler: h.meta.name.clone(),
                        classification,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Walk `root` (sorted, regular files only, symlinks not followed) and
    /// classify every file; paths are relative to `root`.
    pub fn classify_tree(&self, root: &Path) -> Result<Vec<(String, Option<Claim>)>> {
        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
            let entry = entry.map_err(|e| {
                Error::new(ErrorKind::Io, format!("walking {}: {e}", root.display()))
            })?;
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            let rel = rel
                .to_str()
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Io,
                        format!("{}: path is not UTF-8", entry.path().display()),
                    )
                })?
                .replace(std::path::MAIN_SEPARATOR, "/");
            let want = self.prefix_bytes_for(&rel);
            files.push(FileInfo::read(root, &rel, want)?);
        }
        let claims = self.classify(&files)?;
        Ok(files.into_iter().map(|f| f.path).zip(claims).collect())
    }

    /// Log lines handlers sent since the last call (at most 1,000 per call).
    pub fn take_logs(&self) -> Vec<LogLine> {
        self.logs
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    fn batches(&self, pending: &[usize], files: &[FileInfo], prefix: usize) -> Vec<Vec<usize>> {
        // Guest memory per entry: the lowered record (~32 B), the path and
        // prefix copies, the result, and allocator slack; keep a batch's
        // payload within a quarter of the memory cap.
        let budget = (self.limits.memory_bytes / 4)
            .saturating_sub(1 << 20)
            .max(64 << 10);
        let mut out = Vec::new();
        let mut cur = Vec::new();
        let mut bytes = 0usize;
        for &i in pending {
            let cost = 96 + files[i].path.len() * 2 + prefix.min(files[i].prefix.len());
            if !cur.is_empty() && (cur.len() >= self.limits.max_batch || bytes + cost > budget) {
                out.push(std::mem::take(&mut cur));
                bytes = 0;
            }
            cur.push(i);
            bytes += cost;
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    fn run_batch(
        &self,
        h: &Loaded,
        files: &[FileInfo],
        batch: &[usize],
    ) -> Result<Vec<Option<Classification>>> {
        let who = h.meta.label();
        let mut store = sandbox::store(&self.engine, &self.limits);
        let fuel = sandbox::refuel(&mut store, &self.limits, batch.len())?;
        let guest = h
            .bindings
            .instantiate(&mut store)
            .map_err(|e| sandbox::call_error(&who, "instantiation", &e, &mut store, fuel))?;
        let refs: Vec<&FileInfo> = batch.iter().map(|&i| &files[i]).collect();
        let result = guest.classify(&mut store, &refs, h.meta.prefix_bytes as usize);
        let what = format!(
            "classify of {} files (first: {})",
            batch.len(),
            refs.first().map_or("", |f| f.path.as_str())
        );
        let outcome = match result {
            Ok(Ok(v)) if v.len() == batch.len() => Ok(v),
            Ok(Ok(v)) => Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "{who} returned {} results for {} files",
                    v.len(),
                    batch.len()
                ),
            )),
            Ok(Err(GuestError::InvalidInput(m))) => Err(Error::new(
                ErrorKind::Handler,
                format!("{who} rejected the input of {what}: {m}"),
            )),
            Ok(Err(GuestError::Internal(m))) => Err(Error::new(
                ErrorKind::Handler,
                format!("{who} failed during {what}: {m}"),
            )),
            Err(e) => Err(sandbox::call_error(&who, &what, &e, &mut store, fuel)),
        };
        let logs = store.data_mut().take_logs();
        if !logs.is_empty()
            && let Ok(mut sink) = self.logs.lock()
        {
            let room = 1000usize.saturating_sub(sink.len());
            sink.extend(logs.into_iter().take(room).map(|(level, message)| LogLine {
                handler: h.meta.name.clone(),
                level,
                message,
            }));
        }
        outcome
    }
}

fn handler_file_names(name: &str) -> [String; 2] {
    [format!("kpack_handler_{name}.wasm"), format!("{name}.wasm")]
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("reading handler {}", path.display()), e))
}

/// Versions installed as `NAME-VERSION.wasm` in `dir`, newest first.
pub(crate) fn installed_versions(dir: &Path, name: &str) -> Vec<(Version, PathBuf)> {
    let mut out: Vec<(Version, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let vers = file
                .strip_prefix(name)?
                .strip_prefix('-')?
                .strip_suffix(".wasm")?;
            Some((Version::parse(vers).ok()?, e.path()))
        })
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out
}

fn resolve(spec: &HandlerSpec, options: &LoadOptions) -> Result<Candidate> {
    let (name, req) = match spec {
        HandlerSpec::File(p) => {
            return Ok(Candidate {
                wasm: read(p)?,
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
            wasm,
            origin: Origin::Registry(reg.location().to_string()),
            expect_name: Some(name.clone()),
            req: req.clone(),
        });
    }
    let mut looked = Vec::new();
    for dir in &options.search {
        looked.push(dir.path.display().to_string());
        let found = if dir.kind == DirKind::Installed {
            installed_versions(&dir.path, name)
                .into_iter()
                .find(|(v, _)| req.as_ref().is_none_or(|r| r.matches(v)))
                .map(|(_, p)| p)
        } else {
            handler_file_names(name)
                .iter()
                .map(|f| dir.path.join(f))
                .find(|p| p.is_file())
        };
        if let Some(path) = found {
            return Ok(Candidate {
                wasm: read(&path)?,
                origin: Origin::Dir(dir.clone(), path),
                expect_name: Some(name.clone()),
                req: req.clone(),
            });
        }
    }
    let available = discover(options)
        .into_iter()
        .map(|(n, _)| n)
        .collect::<Vec<_>>();
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "no database handler named {name:?}{} (looked in: {}); available: {}. \
             Build the standard ones with scripts/build-plugins.sh, or pass --plugin FILE.wasm",
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

/// Handlers findable by name on the search path: `(name, spec)` per name,
/// the one that would be used, sorted by name.
pub fn discover(options: &LoadOptions) -> Vec<(String, HandlerSpec)> {
    let mut seen = std::collections::BTreeMap::new();
    for dir in &options.search {
        let Ok(rd) = std::fs::read_dir(&dir.path) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for file in names {
            let name = if dir.kind == DirKind::Installed {
                file.strip_suffix(".wasm")
                    .and_then(|s| s.rsplit_once('-'))
                    .map(|(n, _)| n.to_string())
            } else {
                file.strip_prefix("kpack_handler_")
                    .and_then(|s| s.strip_suffix(".wasm"))
                    .map(str::to_string)
            };
            if let Some(name) = name.filter(|n| check_name(n).is_ok()) {
                seen.entry(name.clone())
                    .or_insert(HandlerSpec::Name { name, req: None });
            }
        }
    }
    seen.into_iter().collect()
}

fn load_one(engine: &wasmtime::Engine, c: Candidate, options: &LoadOptions) -> Result<Loaded> {
    let origin_text = c.origin.to_string();
    let sha: [u8; 32] = Sha256::digest(&c.wasm).into();
    let (component, source) = cache::load(
        engine,
        &c.wasm,
        &sha,
        options.cache_dir.as_deref(),
        &origin_text,
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
    check_name(&info.name).map_err(bad)?;
    let version = Version::parse(&info.version)
        .map_err(|e| bad(format!("version {:?} is not semver: {e}", info.version)))?;
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
    Ok(Loaded { meta, bindings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_handler_specs() {
        assert_eq!(
            HandlerSpec::parse("rocblas").unwrap(),
            HandlerSpec::Name {
                name: "rocblas".into(),
                req: None
            }
        );
        let HandlerSpec::Name {
            name,
            req: Some(req),
        } = HandlerSpec::parse("hipblaslt@^1.2").unwrap()
        else {
            panic!("not a name spec")
        };
        assert_eq!(name, "hipblaslt");
        assert!(req.matches(&Version::new(1, 3, 0)) && !req.matches(&Version::new(2, 0, 0)));
        assert_eq!(
            HandlerSpec::parse("x/y").unwrap(),
            HandlerSpec::File("x/y".into())
        );
        assert_eq!(
            HandlerSpec::parse("my.wasm").unwrap(),
            HandlerSpec::File("my.wasm".into())
        );
        assert_eq!(
            HandlerSpec::parse("rocblas@notsemver").unwrap_err().kind(),
            ErrorKind::Usage
        );
        assert_eq!(
            HandlerSpec::parse("RocBLAS").unwrap_err().kind(),
            ErrorKind::Usage
        );
        assert_eq!(HandlerSpec::parse("").unwrap_err().kind(), ErrorKind::Usage);
    }

    #[test]
    fn finds_installed_versions_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "demo-1.2.0.wasm",
            "demo-1.10.0.wasm",
            "demo-x.wasm",
            "demolition-9.0.0.wasm",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let v: Vec<String> = installed_versions(dir.path(), "demo")
            .into_iter()
            .map(|(v, _)| v.to_string())
            .collect();
        assert_eq!(v, ["1.10.0", "1.2.0"]);
    }

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
}
