//! Which extras of a split package serve this machine's GPUs: the host
//! wheel's `device-*` extras (at whatever grouping it was split) matched
//! against detected targets, narrowest first. Shared by `kpack detect
//! --format extras --for` and `kpack install`.
//!
//! The package is a host wheel file, a folder of split output, or a name
//! looked up in a folder of wheels or on a simple index (its PEP 658
//! `.metadata` when served, else the wheel itself, read up to a limit).

use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_detect::Detection;

use crate::{HostExtras, WheelName, normalize};

/// The most bytes a host wheel downloaded from an index to read its
/// METADATA may have (an index that serves no `.metadata` file).
pub const MAX_HOST_WHEEL_BYTES: u64 = 1 << 30;

/// Why the extras of a package could not be found.
#[derive(Debug, thiserror::Error)]
pub enum ExtrasError {
    /// A folder could not be listed.
    #[error("{}: cannot list", path.display())]
    List {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A host wheel could not be read.
    #[error("{}: cannot read its METADATA", path.display())]
    Wheel {
        /// The wheel.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<crate::Error>,
    },
    /// An index request failed.
    #[error("GET {url}")]
    Http {
        /// The URL.
        url: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Nothing named the package.
    #[error("{package}: no such wheel or folder; to look a package name up, give --index URL|DIR")]
    NotFound {
        /// What was asked for.
        package: String,
    },
    /// A place holds no host wheel of the package.
    #[error("{place}: no host wheel of {what} (a wheel providing device-* extras)")]
    NoHostWheel {
        /// The folder or index page.
        place: String,
        /// The package, or "a split package".
        what: String,
    },
    /// A folder holds host wheels of several packages.
    #[error("{place}: host wheels of several packages ({names}); name one")]
    Several {
        /// The folder or index page.
        place: String,
        /// Their names, comma-separated.
        names: String,
    },
}

/// What [`choose`] found for one package on this machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resolved {
    /// The host wheel's name, version and extras.
    pub host: HostExtras,
    /// The extras to install, as the package spells them, one per GPU
    /// served (duplicates dropped).
    pub extras: Vec<String>,
    /// GPUs (targets) the package has no device code for.
    pub unserved: Vec<String>,
}

impl Resolved {
    /// The requirement to install: `name[extra,…]`, or the plain name when
    /// no GPU is served (the host alone).
    pub fn requirement(&self, name: &str) -> String {
        if self.extras.is_empty() {
            name.to_string()
        } else {
            format!("{name}[{}]", self.extras.join(","))
        }
    }

    /// One line per GPU the package was not built for.
    pub fn unserved_lines(&self) -> Vec<String> {
        let provides = if self.host.extras.is_empty() {
            "no device extras".to_string()
        } else {
            self.host.extras.join(", ")
        };
        self.unserved
            .iter()
            .map(|t| {
                format!(
                    "{} {} was not built for {t}: it provides {provides}",
                    self.host.name, self.host.version
                )
            })
            .collect()
    }
}

/// The bundle keys that can hold a target's code, narrowest first: the
/// target, its sub-family, its family, its generic target.
fn candidates(target: &str) -> Vec<String> {
    let p = kpack_amdgpu::processor_of(target);
    let mut out = vec![kpack_detect::provider::owner(p)];
    if let Some(c) = kpack_detect::Chain::of(p) {
        out.push(c.sub_family);
        out.push(c.family);
    }
    out.extend(kpack_amdgpu::generic_for(p).map(str::to_string));
    out
}

/// The extras of `host` for the GPUs of `det`.
pub fn choose(host: HostExtras, det: &Detection) -> Resolved {
    let mut extras: Vec<String> = Vec::new();
    let mut unserved: Vec<String> = Vec::new();
    for t in det.targets() {
        match candidates(&t).iter().find_map(|k| host.find(k)) {
            Some(e) if !extras.iter().any(|x| x == e) => extras.push(e.to_string()),
            Some(_) => {}
            None if !unserved.contains(&t) => unserved.push(t),
            None => {}
        }
    }
    Resolved {
        host,
        extras,
        unserved,
    }
}

/// The host wheel's extras of `package` (a wheel file, a folder of split
/// output, or a name in `index`: a folder of wheels or a simple-index URL).
pub fn host_extras(package: &str, index: Option<&str>) -> Result<HostExtras, ExtrasError> {
    let path = Path::new(package);
    if path.is_file() {
        return read_wheel(path);
    }
    match index {
        _ if path.is_dir() => from_folder(path, None),
        Some(i) if i.contains("://") => from_index(i, package),
        Some(i) => from_folder(Path::new(i), Some(package)),
        None => Err(ExtrasError::NotFound {
            package: package.to_string(),
        }),
    }
}

fn read_wheel(path: &Path) -> Result<HostExtras, ExtrasError> {
    HostExtras::read(path).map_err(|e| ExtrasError::Wheel {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// The newest host wheel (the one providing `device-*` extras) in `dir`,
/// of distribution `name` when given.
fn from_folder(dir: &Path, name: Option<&str>) -> Result<HostExtras, ExtrasError> {
    let list = |source| ExtrasError::List {
        path: dir.to_path_buf(),
        source,
    };
    let mut found: Vec<HostExtras> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(list)? {
        let p = e.map_err(list)?.path();
        let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Ok(w) = WheelName::parse(file) else {
            continue;
        };
        if name.is_some_and(|n| normalize(n) != normalize(&w.distribution)) {
            continue;
        }
        if let Ok(h) = HostExtras::read(&p)
            && !h.extras.is_empty()
        {
            found.push(h);
        }
    }
    newest(found, &dir.display().to_string(), name)
}

/// The newest of `found` by PEP 440; an error naming `place` when it is
/// empty or holds several distributions.
fn newest(
    mut found: Vec<HostExtras>,
    place: &str,
    name: Option<&str>,
) -> Result<HostExtras, ExtrasError> {
    let Some(first) = found.first() else {
        return Err(ExtrasError::NoHostWheel {
            place: place.to_string(),
            what: name.unwrap_or("a split package").to_string(),
        });
    };
    let dist = normalize(&first.name);
    if found.iter().any(|h| normalize(&h.name) != dist) {
        let mut names: Vec<&str> = found.iter().map(|h| h.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        return Err(ExtrasError::Several {
            place: place.to_string(),
            names: names.join(", "),
        });
    }
    // A version PEP 440 cannot read sorts first (oldest).
    found.sort_by_cached_key(|h| h.version.parse::<pep440_rs::Version>().ok());
    found.pop().ok_or_else(|| ExtrasError::NoHostWheel {
        place: place.to_string(),
        what: name.unwrap_or("a split package").to_string(),
    })
}

/// The newest host wheel of `name` on the simple index at `index`: its
/// PEP 658 `.metadata` file when the index serves one, else the wheel.
fn from_index(index: &str, name: &str) -> Result<HostExtras, ExtrasError> {
    let page_url = format!("{}/{}/", index.trim_end_matches('/'), normalize(name));
    let page = get(&page_url, kpack_http::MAX_DOCUMENT_BYTES)?;
    let page = String::from_utf8_lossy(&page);
    let mut found = Vec::new();
    for href in page
        .split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
    {
        let url = kpack_http::join_url(&page_url, href.split('#').next().unwrap_or(href));
        let file = url.rsplit('/').next().unwrap_or_default();
        match WheelName::parse(file) {
            Ok(w) if normalize(&w.distribution) == normalize(name) => {}
            _ => continue,
        }
        if let Some(h) = index_wheel(&url)?
            && !h.extras.is_empty()
        {
            found.push(h);
        }
    }
    newest(found, &page_url, Some(name))
}

/// One wheel of an index page: its `.metadata`, else the whole wheel (at
/// most [`MAX_HOST_WHEEL_BYTES`]).
fn index_wheel(url: &str) -> Result<Option<HostExtras>, ExtrasError> {
    if let Ok(text) = get(&format!("{url}.metadata"), kpack_http::MAX_DOCUMENT_BYTES) {
        return Ok(HostExtras::from_metadata(&String::from_utf8_lossy(&text)));
    }
    let http = |source: Box<dyn std::error::Error + Send + Sync>| ExtrasError::Http {
        url: url.to_string(),
        source,
    };
    let dir = tempfile::tempdir().map_err(|e| http(Box::new(e)))?;
    // The wheel's own file name: its reader finds the .dist-info by it.
    let name = url.rsplit('/').next().unwrap_or_default();
    if !kpack_fsafe::is_plain_name(name) {
        return Ok(None);
    }
    let file = dir.path().join(name);
    let mut body = kpack_http::get(url, kpack_http::Deadline::Start(kpack_http::Pace::DEFAULT))
        .and_then(kpack_http::Response::ok)
        .map_err(|e| http(Box::new(e)))?
        .into_reader(MAX_HOST_WHEEL_BYTES);
    let mut out = std::fs::File::create(&file).map_err(|e| http(Box::new(e)))?;
    std::io::copy(&mut body, &mut out).map_err(|e| http(Box::new(e)))?;
    Ok(HostExtras::read(&file).ok())
}

/// The body of `url`, at most `limit` bytes.
fn get(url: &str, limit: u64) -> Result<Vec<u8>, ExtrasError> {
    let http = |source: Box<dyn std::error::Error + Send + Sync>| ExtrasError::Http {
        url: url.to_string(),
        source,
    };
    let mut v = Vec::new();
    kpack_http::get(url, kpack_http::Deadline::Whole)
        .and_then(kpack_http::Response::ok)
        .map_err(|e| http(Box::new(e)))?
        .into_reader(limit)
        .read_to_end(&mut v)
        .map_err(|e| http(Box::new(e)))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(version: &str) -> HostExtras {
        HostExtras {
            name: "fatpkg".into(),
            version: version.into(),
            extras: vec!["device-gfx110x".into()],
            file: None,
        }
    }

    #[test]
    fn the_newest_version_is_chosen_by_pep_440() {
        let found = vec![
            host("1.10"),
            host("1.9"),
            host("1.10rc1"),
            host("not a version"),
        ];
        assert_eq!(newest(found, "here", None).unwrap().version, "1.10");
        let mut other = host("1.0");
        other.name = "otherpkg".into();
        let e = newest(vec![host("1.0"), other], "here", None).unwrap_err();
        assert!(e.to_string().contains("several packages"), "{e}");
        let e = newest(Vec::new(), "here", Some("fatpkg")).unwrap_err();
        assert!(e.to_string().contains("no host wheel of fatpkg"), "{e}");
    }

    #[test]
    fn requirements_name_the_extras_or_the_plain_package() {
        let r = Resolved {
            host: host("1.0"),
            extras: vec!["device-gfx110x".into(), "device-gfx942".into()],
            unserved: vec!["gfx90a".into()],
        };
        assert_eq!(
            r.requirement("fatpkg"),
            "fatpkg[device-gfx110x,device-gfx942]"
        );
        assert_eq!(
            r.unserved_lines(),
            ["fatpkg 1.0 was not built for gfx90a: it provides device-gfx110x"]
        );
        let plain = Resolved {
            extras: Vec::new(),
            ..r
        };
        assert_eq!(plain.requirement("fatpkg"), "fatpkg");
    }
}
