//! A handler registry modelled on cargo's sparse index: a directory (or a
//! `file://` URL) holding
//!
//! * `config.json`: `{"dl": "blobs/{name}/{name}-{vers}.wasm", "api-version": 1}`;
//! * one index file per handler name, at cargo's paths (`1/a`, `2/ab`,
//!   `3/a/abc`, `ro/cb/rocblas`), with one JSON line per published version:
//!   `{"name","vers","wit","cksum","yanked"}` (`cksum` = sha256 of the blob);
//! * the blobs, `blobs/<name>/<name>-<vers>.wasm`.
//!
//! Published versions are immutable; yanking hides a version from resolution
//! without deleting it. Every fetched blob is checked against its `cksum`.

use std::io::Write;
use std::path::{Path, PathBuf};

use semver::{Version, VersionReq};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::spec::check_name;
use crate::{Error, ErrorKind, Result};

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

/// A registry location (directory or `file://` URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    location: String,
    root: PathBuf,
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
        let root = match location.split_once("://") {
            Some(("file", path)) => PathBuf::from(path),
            Some((scheme, _)) => {
                return Err(Error::new(
                    ErrorKind::Usage,
                    format!(
                        "registry {location:?}: only directories and file:// URLs are supported, not {scheme}://"
                    ),
                ));
            }
            None => PathBuf::from(location),
        };
        Ok(Registry {
            location: location.to_string(),
            root,
        })
    }

    /// The location as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn index_path(&self, name: &str) -> PathBuf {
        self.root.join(index_rel(name))
    }

    fn blob_path(&self, name: &str, vers: &str) -> PathBuf {
        self.root
            .join("blobs")
            .join(name)
            .join(format!("{name}-{vers}.wasm"))
    }

    /// Every published version of `name` (yanked included), in index order.
    pub fn versions(&self, name: &str) -> Result<Vec<IndexEntry>> {
        check_name(name).map_err(|m| Error::new(ErrorKind::Usage, m))?;
        let path = self.index_path(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(format!("registry index {}", path.display()), e)),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str::<IndexEntry>(l).map_err(|e| {
                    Error::new(
                        ErrorKind::Registry,
                        format!("registry index {} line {}: {e}", path.display(), i + 1),
                    )
                })
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
        let path = self.blob_path(&entry.name, &entry.vers);
        let bytes = std::fs::read(&path)
            .map_err(|e| Error::io(format!("registry blob {}", path.display()), e))?;
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
        let config = self.root.join("config.json");
        if !config.exists() {
            write_atomic(
                &config,
                b"{\"dl\":\"blobs/{name}/{name}-{vers}.wasm\",\"api-version\":1}\n",
            )?;
        }
        // Blob first, then the index line: a reader never sees a line without its blob.
        write_atomic(&self.blob_path(&entry.name, &entry.vers), wasm)?;
        let mut line = serde_json::to_string(&entry)
            .map_err(|e| Error::new(ErrorKind::Registry, format!("encoding index entry: {e}")))?;
        line.push('\n');
        let index = self.index_path(&entry.name);
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
            text.push_str(
                &serde_json::to_string(e)
                    .map_err(|e| Error::new(ErrorKind::Registry, e.to_string()))?,
            );
            text.push('\n');
        }
        write_atomic(&self.index_path(name), text.as_bytes())
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
        let bytes = self.fetch(&entry)?;
        let path = dest.join(format!("{}-{}.wasm", entry.name, entry.vers));
        write_atomic(&path, &bytes)?;
        Ok((entry, path))
    }
}

/// Write `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(dir.display(), e))?;
    tmp.write_all(bytes)
        .map_err(|e| Error::io(path.display(), e))?;
    tmp.persist(path)
        .map_err(|e| Error::io(path.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
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
        write_atomic(&reg.index_path("demo"), text.as_bytes()).unwrap();
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
        write_atomic(&reg.blob_path("demo", "1.2.0"), b"not what was published").unwrap();
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
            Registry::new("https://example.invalid/x")
                .unwrap_err()
                .kind(),
            ErrorKind::Usage
        );
    }
}
