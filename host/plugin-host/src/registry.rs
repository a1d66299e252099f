//! A handler registry modelled on cargo's sparse index: a directory, a
//! `file://` URL, or an `http://`/`https://` URL (cargo's `sparse+` prefix
//! accepted) serving
//!
//! * `config.json`: `{"dl": "blobs/{name}/{name}-{vers}.wasm", "api-version": 1}`;
//! * one index file per handler name, at cargo's paths (`1/a`, `2/ab`,
//!   `3/a/abc`, `ro/cb/rocblas`), with one JSON line per published version:
//!   `{"name","vers","wit","cksum","yanked"}` (`cksum` = sha256 of the blob);
//! * the blobs, `blobs/<name>/<name>-<vers>.wasm`.
//!
//! Published versions are immutable; yanking hides a version from resolution
//! without deleting it. Every fetched blob is checked against its `cksum`.
//!
//! Over HTTP the registry is read-only (publish into the directory the web
//! server serves): an index file is fetched per name (404 or 410 = nothing
//! published, as for cargo), the blob from `config.json`'s `dl` template
//! (`{name}`/`{crate}`, `{vers}`/`{version}`, `{cksum}`/`{sha256-checksum}`;
//! relative to the index URL unless absolute), each with a timeout and a
//! size limit.

use std::path::{Path, PathBuf};

use semver::{Version, VersionReq};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::spec::{NameError, check_name};
use crate::{Error, ErrorKind, Result};

/// Largest `config.json` read over HTTP.
const MAX_CONFIG_BYTES: u64 = 64 << 10;
/// Largest index file read over HTTP (one line per version: thousands fit).
const MAX_INDEX_BYTES: u64 = kpack_http::MAX_DOCUMENT_BYTES;
/// Largest handler blob read over HTTP: handlers are a few MiB at most, and
/// the sandbox caps their memory at 64 MiB anyway.
const MAX_BLOB_BYTES: u64 = 64 << 20;

/// One published version: a line of an index file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Handler name.
    pub name: String,
    /// Handler version (semver).
    pub vers: String,
    /// `kpack:handler` WIT version it was built against.
    pub wit: String,
    /// sha256 of the `.wasm`, lowercase hex.
    pub cksum: String,
    /// Hidden from resolution.
    #[serde(default)]
    pub yanked: bool,
}

/// A registry location (directory, `file://` or `http(s)://` URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    location: String,
    transport: Transport,
}

/// Where the index and blobs are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Transport {
    /// A directory (read and written).
    Dir(PathBuf),
    /// An HTTP(S) URL ending in `/` (read only).
    Http(String),
}

/// cargo's index path for a name.
fn index_rel(name: &str) -> String {
    match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    }
}

impl Registry {
    /// A registry at a directory path or `file://` URL (it need not exist
    /// yet: [`Registry::publish`] creates it).
    pub fn new(location: &str) -> Result<Registry> {
        let url = location.strip_prefix("sparse+").unwrap_or(location);
        let transport = match url.split_once("://") {
            Some(("file", path)) => Transport::Dir(PathBuf::from(path)),
            Some(("http" | "https", rest)) if !rest.is_empty() => {
                // The index files are relative to the index URL, as in cargo.
                let base = if url.ends_with('/') {
                    url.to_string()
                } else {
                    format!("{url}/")
                };
                Transport::Http(base)
            }
            Some((scheme, _)) => {
                return Err(Error::new(
                    ErrorKind::Usage,
                    format!(
                        "registry {location:?}: only directories and file://, http:// and https:// URLs are supported, not {scheme}://"
                    ),
                ));
            }
            None => Transport::Dir(PathBuf::from(location)),
        };
        Ok(Registry {
            location: location.to_string(),
            transport,
        })
    }

    /// The location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The directory of a registry that can be written to.
    fn dir(&self, what: &str) -> Result<&Path> {
        match &self.transport {
            Transport::Dir(root) => Ok(root),
            Transport::Http(_) => Err(Error::new(
                ErrorKind::Usage,
                format!(
                    "registry {}: cannot {what} over HTTP; use the directory the server serves",
                    self.location
                ),
            )),
        }
    }

    fn index_path(root: &Path, name: &str) -> PathBuf {
        root.join(index_rel(name))
    }

    fn blob_path(root: &Path, name: &str, vers: &str) -> PathBuf {
        root.join("blobs")
            .join(name)
            .join(format!("{name}-{vers}.wasm"))
    }

    /// Every published version of `name` (yanked included), in index order.
    pub fn versions(&self, name: &str) -> Result<Vec<IndexEntry>> {
        check_name(name).map_err(|m| Error::new(ErrorKind::Usage, m.to_string()))?;
        let (where_, text) = match &self.transport {
            Transport::Dir(root) => {
                let path = Self::index_path(root, name);
                match std::fs::read_to_string(&path) {
                    Ok(t) => (path.display().to_string(), t),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => {
                        return Err(Error::io(format!("registry index {}", path.display()), e));
                    }
                }
            }
            Transport::Http(base) => {
                let url = format!("{base}{}", index_rel(name));
                let Some(bytes) = http_get(&url, "registry index", MAX_INDEX_BYTES, true)? else {
                    return Ok(Vec::new());
                };
                let text = String::from_utf8(bytes).map_err(|e| {
                    Error::with_source(
                        ErrorKind::Registry,
                        format!("registry index {url} is not UTF-8"),
                        e,
                    )
                })?;
                (url, text)
            }
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                let line = || format!("registry index {where_} line {}", i + 1);
                let line_err =
                    |m: String| Error::new(ErrorKind::Registry, format!("{}: {m}", line()));
                let entry = serde_json::from_str::<IndexEntry>(l)
                    .map_err(|e| Error::with_source(ErrorKind::Registry, line(), e))?;
                // The index file of `name` speaks for `name` only: a line naming
                // another handler (or a path) is refused, not followed.
                if entry.name != name {
                    return Err(line_err(format!(
                        "entry names {:?}, but this is the index of {name:?}",
                        cut(&entry.name)
                    )));
                }
                check_entry(&entry).map_err(|e| line_err(e.to_string()))?;
                Ok(entry)
            })
            .collect()
    }

    /// The newest non-yanked version of `name` matching `req`.
    pub fn resolve(&self, name: &str, req: &VersionReq) -> Result<IndexEntry> {
        let all = self.versions(name)?;
        let best = all
            .iter()
            .filter(|e| !e.yanked)
            .filter_map(|e| Version::parse(&e.vers).ok().map(|v| (v, e)))
            .filter(|(v, _)| req.matches(v))
            .max_by(|a, b| a.0.cmp(&b.0));
        match best {
            Some((_, e)) => Ok(e.clone()),
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "registry {}: no version of {name:?} matches {req} (published: {})",
                    self.location,
                    if all.is_empty() {
                        "none".to_string()
                    } else {
                        all.iter()
                            .map(|e| {
                                format!("{}{}", e.vers, if e.yanked { " (yanked)" } else { "" })
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            )),
        }
    }

    /// The blob of `entry`, checked against its checksum.
    pub fn fetch(&self, entry: &IndexEntry) -> Result<Vec<u8>> {
        // Name and version become a path (or URL): check them before either is built.
        check_entry(entry).map_err(|m| {
            Error::new(
                ErrorKind::Registry,
                format!("registry {}: {m}", self.location),
            )
        })?;
        let bytes = match &self.transport {
            Transport::Dir(root) => {
                let path = Self::blob_path(root, &entry.name, &entry.vers);
                std::fs::read(&path)
                    .map_err(|e| Error::io(format!("registry blob {}", path.display()), e))?
            }
            Transport::Http(base) => {
                let url = blob_url(base, entry)?;
                http_get(&url, "registry blob", MAX_BLOB_BYTES, false)?.unwrap_or_default()
            }
        };
        let sum = hex::encode(Sha256::digest(&bytes));
        if sum != entry.cksum {
            return Err(Error::new(
                ErrorKind::Registry,
                format!(
                    "registry {}: {} {} has checksum {sum}, but the index says {}; refusing to use it",
                    self.location, entry.name, entry.vers, entry.cksum
                ),
            ));
        }
        Ok(bytes)
    }

    /// Publish `wasm` as version `version` of handler `name`, built against
    /// `kpack:handler@{wit}`. Callers take these from loading the component
    /// (`HandlerSet::handlers`), which checks that it is a handler.
    pub fn publish(
        &self,
        name: &str,
        version: &Version,
        wit: &Version,
        wasm: &[u8],
    ) -> Result<IndexEntry> {
        let root = self.dir("publish")?;
        let entry = IndexEntry {
            name: name.to_string(),
            vers: version.to_string(),
            wit: wit.to_string(),
            cksum: hex::encode(Sha256::digest(wasm)),
            yanked: false,
        };
        if self
            .versions(&entry.name)?
            .iter()
            .any(|e| e.vers == entry.vers)
        {
            return Err(Error::new(
                ErrorKind::Registry,
                format!(
                    "registry {}: {} {} is already published; versions are immutable",
                    self.location, entry.name, entry.vers
                ),
            ));
        }
        let config = root.join("config.json");
        if !config.exists() {
            write_atomic(
                &config,
                b"{\"dl\":\"blobs/{name}/{name}-{vers}.wasm\",\"api-version\":1}\n",
            )?;
        }
        // Blob first, then the index line: a reader never sees a line without its blob.
        write_atomic(&Self::blob_path(root, &entry.name, &entry.vers), wasm)?;
        let mut line = serde_json::to_string(&entry)
            .map_err(|e| Error::with_source(ErrorKind::Registry, "encoding index entry", e))?;
        line.push('\n');
        let index = Self::index_path(root, &entry.name);
        let mut text = std::fs::read(&index).or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(Vec::new()),
            _ => Err(Error::io(index.display(), e)),
        })?;
        text.extend_from_slice(line.as_bytes());
        write_atomic(&index, &text)?;
        Ok(entry)
    }

    /// Set or clear the `yanked` flag of `name` `vers`.
    pub fn yank(&self, name: &str, vers: &str, yanked: bool) -> Result<()> {
        let root = self.dir("yank")?;
        let mut all = self.versions(name)?;
        let Some(e) = all.iter_mut().find(|e| e.vers == vers) else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("registry {}: {name} {vers} is not published", self.location),
            ));
        };
        e.yanked = yanked;
        let mut text = String::new();
        for e in &all {
            text.push_str(&serde_json::to_string(e).map_err(|source| {
                Error::with_source(
                    ErrorKind::Registry,
                    format!(
                        "registry {}: cannot write the index of {name}",
                        self.location
                    ),
                    source,
                )
            })?);
            text.push('\n');
        }
        write_atomic(&Self::index_path(root, name), text.as_bytes())
    }

    /// Resolve `name`@`req`, fetch it (checksum verified) and install it as
    /// `dest/<name>-<vers>.wasm`. Returns the entry and the installed path.
    pub fn install(
        &self,
        name: &str,
        req: &VersionReq,
        dest: &Path,
    ) -> Result<(IndexEntry, PathBuf)> {
        let entry = self.resolve(name, req)?;
        let path = self.install_entry(&entry, dest)?;
        Ok((entry, path))
    }

    /// Fetch `entry` (checksum verified before anything is written) and
    /// install it as `dest/<name>-<vers>.wasm`. Returns the installed path.
    pub fn install_entry(&self, entry: &IndexEntry, dest: &Path) -> Result<PathBuf> {
        let bytes = self.fetch(entry)?;
        let path = dest.join(format!("{}-{}.wasm", entry.name, entry.vers));
        write_atomic(&path, &bytes)?;
        Ok(path)
    }
}

/// `entry`'s name is a handler name and its version a semver version
/// written the one way semver writes it, so that both are safe to put in a
/// path or URL (no `/`, no `..`); the error says which is not.
fn check_entry(entry: &IndexEntry) -> std::result::Result<(), EntryError> {
    check_name(&entry.name).map_err(|why| EntryError::Name {
        name: cut(&entry.name).into(),
        why,
    })?;
    match Version::parse(&entry.vers) {
        Ok(v) if v.to_string() == entry.vers => Ok(()),
        _ => Err(EntryError::Version {
            name: entry.name.clone(),
            vers: cut(&entry.vers).into(),
        }),
    }
}

/// Why an index entry is refused: its name or its version.
#[derive(Debug, thiserror::Error)]
enum EntryError {
    /// The name is no handler name.
    #[error("index entry {name:?}: {why}")]
    Name {
        /// The name, cut to 64 characters.
        name: String,
        /// What is wrong with it.
        why: NameError,
    },
    /// The version is no semver version in semver's own spelling.
    #[error("index entry {name}: version {vers:?} is not a semver version")]
    Version {
        /// The handler's name.
        name: String,
        /// The version, cut to 64 characters.
        vers: String,
    },
}

/// At most the first 64 characters of an untrusted string, for messages.
fn cut(s: &str) -> &str {
    s.char_indices().nth(64).map_or(s, |(i, _)| &s[..i])
}

/// The `config.json` of a sparse index: where blobs are downloaded from.
#[derive(Deserialize)]
struct Config {
    dl: String,
}

/// The download URL of `entry` on the HTTP registry at `base`, from the
/// `dl` template of its `config.json`.
fn blob_url(base: &str, entry: &IndexEntry) -> Result<String> {
    let url = format!("{base}config.json");
    let bytes = http_get(&url, "registry config", MAX_CONFIG_BYTES, false)?.unwrap_or_default();
    let config: Config = serde_json::from_slice(&bytes).map_err(|e| {
        Error::with_source(
            ErrorKind::Registry,
            format!("registry config {url}: not a config.json with a \"dl\" string"),
            e,
        )
    })?;
    Ok(expand_dl(base, config.dl, entry))
}

/// `dl` with `entry`'s fields filled in, made absolute against `base`.
fn expand_dl(base: &str, mut dl: String, entry: &IndexEntry) -> String {
    // cargo appends its default layout to a template without markers.
    if !dl.contains('{') {
        dl = format!(
            "{}/{{name}}/{{name}}-{{vers}}.wasm",
            dl.trim_end_matches('/')
        );
    }
    let dl = dl
        .replace("{name}", &entry.name)
        .replace("{crate}", &entry.name)
        .replace("{vers}", &entry.vers)
        .replace("{version}", &entry.vers)
        .replace("{cksum}", &entry.cksum)
        .replace("{sha256-checksum}", &entry.cksum);
    if dl.contains("://") {
        dl
    } else if let Some(path) = dl.strip_prefix('/') {
        // Absolute path: on the index's scheme and host.
        let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
        let host = rest.split('/').next().unwrap_or(rest);
        format!("{scheme}://{host}/{path}")
    } else {
        format!("{base}{dl}")
    }
}

/// GET `url` (`what` names it in errors) and read at most `limit` bytes.
/// `Ok(None)` for 404/410 when `missing_ok` (cargo's "not published");
/// any other non-200 status is an error naming the URL and status.
fn http_get(url: &str, what: &str, limit: u64, missing_ok: bool) -> Result<Option<Vec<u8>>> {
    let http = |e| http_error(what, e);
    let response = kpack_http::get(url, kpack_http::Deadline::Whole).map_err(http)?;
    if missing_ok && matches!(response.status(), 404 | 410) {
        return Ok(None);
    }
    let bytes = response
        .ok()
        .map_err(http)?
        .read_to_vec(limit)
        .map_err(http)?;
    Ok(Some(bytes))
}

/// A failed request for `what` as a registry error: not found for 404,
/// and a hint for a redirect to another origin.
fn http_error(what: &str, e: kpack_http::Error) -> Error {
    let kind = match e {
        kpack_http::Error::Status { status: 404, .. } => ErrorKind::NotFound,
        _ => ErrorKind::Registry,
    };
    let hint = match e {
        kpack_http::Error::CrossOrigin { .. } => {
            " (serve the registry from one origin, or name the other one in config.json's \"dl\")"
        }
        _ => "",
    };
    let message = format!("{what} {e}{hint}");
    match e {
        kpack_http::Error::Request { source, .. } | kpack_http::Error::Body { source, .. } => {
            Error::with_source(kind, message, source)
        }
        _ => Error::new(kind, message),
    }
}

/// Write `bytes` to `path` through a temporary file and a rename
/// (`.kpack-tmp-<pid>-registry-…`, so a later run can tell a stale one).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    kpack_fsafe::write_atomically(path, "registry", bytes, None)
        .map_err(|e| Error::io(e.path.display(), e.source))
}

#[cfg(test)]
mod tests {
    use kpack_http::testing::serve;

    use super::*;

    #[test]
    fn index_paths_follow_cargo() {
        assert_eq!(index_rel("a"), "1/a");
        assert_eq!(index_rel("ab"), "2/ab");
        assert_eq!(index_rel("abc"), "3/a/abc");
        assert_eq!(index_rel("rocblas"), "ro/cb/rocblas");
    }

    fn entry(vers: &str, yanked: bool) -> IndexEntry {
        IndexEntry {
            name: "demo".into(),
            vers: vers.into(),
            wit: "1.1.0".into(),
            cksum: "00".into(),
            yanked,
        }
    }

    #[test]
    fn resolves_newest_matching_unyanked() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(&format!("file://{}", dir.path().display())).unwrap();
        let text: String = [
            entry("1.2.0", false),
            entry("1.3.0", false),
            entry("1.4.0", true),
            entry("2.0.0", false),
        ]
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect();
        write_atomic(&Registry::index_path(dir.path(), "demo"), text.as_bytes()).unwrap();
        assert_eq!(
            reg.resolve("demo", &VersionReq::parse("^1.2").unwrap())
                .unwrap()
                .vers,
            "1.3.0"
        );
        assert_eq!(
            reg.resolve("demo", &VersionReq::STAR).unwrap().vers,
            "2.0.0"
        );
        let err = reg
            .resolve("demo", &VersionReq::parse("^1.4").unwrap())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.to_string().contains("1.4.0 (yanked)"), "{err}");
        reg.yank("demo", "1.3.0", true).unwrap();
        assert_eq!(
            reg.resolve("demo", &VersionReq::parse("^1.2").unwrap())
                .unwrap()
                .vers,
            "1.2.0"
        );
    }

    #[test]
    fn rejects_a_blob_that_does_not_match_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path().to_str().unwrap()).unwrap();
        write_atomic(
            &Registry::blob_path(dir.path(), "demo", "1.2.0"),
            b"not what was published",
        )
        .unwrap();
        let err = reg.fetch(&entry("1.2.0", false)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().contains("refusing"), "{err}");
    }

    #[test]
    fn publishes_once_and_fetches_what_was_published() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::new(dir.path().to_str().unwrap()).unwrap();
        let (v, wit) = (Version::new(1, 2, 0), Version::new(1, 1, 0));
        let entry = reg.publish("demo", &v, &wit, b"wasm bytes").unwrap();
        assert_eq!(
            (entry.vers.as_str(), entry.wit.as_str()),
            ("1.2.0", "1.1.0")
        );
        let found = reg.resolve("demo", &VersionReq::STAR).unwrap();
        assert_eq!(found, entry);
        assert_eq!(reg.fetch(&found).unwrap(), b"wasm bytes");
        let again = reg.publish("demo", &v, &wit, b"other").unwrap_err();
        assert_eq!(again.kind(), ErrorKind::Registry);
        let bad = reg.publish("Demo", &v, &wit, b"x").unwrap_err();
        assert_eq!(bad.kind(), ErrorKind::Usage);
    }

    #[test]
    fn refuses_other_schemes() {
        assert_eq!(
            Registry::new("ftp://example.invalid/x").unwrap_err().kind(),
            ErrorKind::Usage
        );
    }

    #[test]
    fn download_urls_follow_the_dl_template() {
        let base = "https://h.example/kpack/index/";
        let e = entry("1.2.0", false);
        let dl = |t: &str| expand_dl(base, t.to_string(), &e);
        assert_eq!(
            dl("blobs/{name}/{name}-{vers}.wasm"),
            "https://h.example/kpack/index/blobs/demo/demo-1.2.0.wasm"
        );
        assert_eq!(
            dl("/dl/{crate}/{version}/{sha256-checksum}"),
            "https://h.example/dl/demo/1.2.0/00"
        );
        assert_eq!(
            dl("https://cdn.example/x/"),
            "https://cdn.example/x/demo/demo-1.2.0.wasm"
        );
    }

    #[test]
    fn http_registries_are_read_only_and_end_in_a_slash() {
        let reg = Registry::new("sparse+https://example.invalid/index").unwrap();
        assert_eq!(
            reg.transport,
            Transport::Http("https://example.invalid/index/".into())
        );
        let err = reg.yank("demo", "1.0.0", true).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Usage);
        assert!(err.to_string().contains("over HTTP"), "{err}");
    }

    /// A directory registry whose `demo` index holds `line` (with `{cksum}`
    /// replaced by the sha256 of `blob`), and `blob` written where a
    /// traversing name would lead: `<tmp>/escaped/PWNED-1.0.0.wasm`.
    fn hostile_registry(line: &str, blob: &[u8]) -> (tempfile::TempDir, Registry) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        std::fs::create_dir_all(tmp.path().join("escaped/PWNED")).unwrap();
        std::fs::write(tmp.path().join("escaped/PWNED-1.0.0.wasm"), blob).unwrap();
        let line = line.replace("{cksum}", &hex::encode(Sha256::digest(blob)));
        write_atomic(&Registry::index_path(&root, "demo"), line.as_bytes()).unwrap();
        let reg = Registry::new(root.to_str().unwrap()).unwrap();
        (tmp, reg)
    }

    #[test]
    fn refuses_an_index_line_naming_another_handler() {
        let (tmp, reg) = hostile_registry(
            r#"{"name":"../../escaped/PWNED","vers":"1.0.0","wit":"1.1.0","cksum":"{cksum}"}"#,
            b"payload",
        );
        let dest = tmp.path().join("plugins/a/b");
        let err = reg.install("demo", &VersionReq::STAR, &dest).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().contains("index of \"demo\""), "{err}");
        assert!(!dest.exists(), "nothing may be installed");
    }

    #[test]
    fn an_index_line_that_is_no_json_keeps_the_parser_error_as_its_source() {
        use std::error::Error as _;
        let (_tmp, reg) = hostile_registry("{\"name\":\"demo\",", b"payload");
        let err = reg.versions("demo").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().ends_with("line 1"), "{err}");
        let cause = err.source().expect("the JSON error is the source");
        assert!(
            cause.downcast_ref::<serde_json::Error>().is_some(),
            "{cause}"
        );
    }

    #[test]
    fn refuses_an_index_version_that_is_a_path() {
        let (tmp, reg) = hostile_registry(
            r#"{"name":"demo","vers":"1.0.0+x/../../../../escaped/PWNED-1.0.0","wit":"1.1.0","cksum":"{cksum}"}"#,
            b"payload",
        );
        let dest = tmp.path().join("plugins");
        let err = reg.install("demo", &VersionReq::STAR, &dest).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().contains("not a semver version"), "{err}");
        assert!(!dest.exists(), "nothing may be installed");
    }

    #[test]
    fn fetch_checks_a_hand_made_entry_before_building_a_path() {
        let (_tmp, reg) = hostile_registry("", b"payload");
        let mut e = entry("1.0.0", false);
        e.name = "../../escaped/PWNED".into();
        e.cksum = hex::encode(Sha256::digest(b"payload"));
        let err = reg.fetch(&e).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().contains("may only contain"), "{err}");
    }

    #[test]
    fn follows_same_origin_redirects_and_refuses_cross_origin_ones() {
        let line = serde_json::to_string(&entry("1.0.0", false)).unwrap() + "\n";
        let elsewhere = serve(move |_| ("200 OK".into(), line.clone().into_bytes())).unwrap();
        let here = serve(move |path| {
            if let Some(rest) = path.strip_prefix("/same/") {
                (format!("302 Found\r\nLocation: /real/{rest}"), Vec::new())
            } else if path.starts_with("/real/") {
                let line = serde_json::to_string(&entry("1.0.0", false)).unwrap() + "\n";
                ("200 OK".into(), line.into_bytes())
            } else {
                (
                    format!("302 Found\r\nLocation: {elsewhere}x{path}"),
                    Vec::new(),
                )
            }
        })
        .unwrap();
        let same = Registry::new(&format!("{here}same")).unwrap();
        assert_eq!(same.versions("demo").unwrap().len(), 1);
        let other = Registry::new(&format!("{here}other")).unwrap();
        let err = other.versions("demo").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Registry);
        assert!(err.to_string().contains("another origin"), "{err}");
    }
}
