//! The plain index: a directory of `.kpack` archives, or an HTTP(S) URL
//! serving them beside a JSON listing ([`LISTING`]) that `kpack index DIR`
//! writes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_fsafe::{Existing, Order, Outputs};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, Options, Result};

/// The listing's file name in an index directory.
pub const LISTING: &str = "kpack-index.json";
/// The largest listing read over HTTP.
const MAX_LISTING_BYTES: u64 = kpack_http::MAX_DOCUMENT_BYTES;

/// The listing: every archive with its size and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// 1.
    pub schema_version: u32,
    /// Sorted by name.
    pub files: Vec<IndexFile>,
}

/// One archive of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexFile {
    /// Path relative to the index, `/`-separated.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

impl IndexFile {
    /// The file name (the last component of [`name`](Self::name)).
    pub fn file_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
}

/// The listing of every `.kpack` under `dir` (temp files skipped).
pub fn build_listing(dir: &Path) -> Result<Listing> {
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.map_err(|e| {
            let path = e.path().unwrap_or(dir).to_path_buf();
            Error::io(path, "cannot list", e.into())
        })?;
        let name = e.file_name().to_string_lossy();
        if !e.file_type().is_file()
            || !name.ends_with(".kpack")
            || e.file_name()
                .to_string_lossy()
                .starts_with(kpack_fsafe::TEMP_PREFIX)
        {
            continue;
        }
        let rel = e.path().strip_prefix(dir).unwrap_or(e.path());
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let (size, sha256) = hash_file(e.path())?;
        files.push(IndexFile {
            name: rel.join("/"),
            size,
            sha256,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listing {
        schema_version: 1,
        files,
    })
}

/// Write `dir`'s listing to `dir/kpack-index.json` (staged and committed
/// through [`Outputs`], readable by everyone as any new file is).
pub fn write_listing(dir: &Path) -> Result<(PathBuf, Listing)> {
    let listing = build_listing(dir)?;
    let path = dir.join(LISTING);
    let mut text = serde_json::to_string_pretty(&listing).map_err(|source| Error::Json {
        what: path.display().to_string(),
        source,
    })?;
    text.push('\n');
    let mut outputs = Outputs::create(dir, "index", Existing::Refuse)?;
    let staged = outputs.plan_update(LISTING, Order::Last)?;
    std::fs::write(&staged, text).map_err(|source| Error::io(&path, "cannot write", source))?;
    outputs.commit()?;
    Ok((path, listing))
}

/// Size and SHA-256 (hex) of a file.
pub fn hash_file(path: &Path) -> Result<(u64, String)> {
    let io = |source| Error::io(path, "cannot read", source);
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    let size = std::io::copy(&mut f, &mut HashWriter(&mut h)).map_err(io)?;
    Ok((size, hex::encode(h.finalize())))
}

/// An `io::Write` that feeds a hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where archives come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A local directory (its listing, or one built on the spot).
    Dir(PathBuf),
    /// An HTTP(S) base URL ending in `/`; the listing is `<base>kpack-index.json`.
    Http(String),
}

impl Source {
    /// `https://host/path/`, `https://host/path/kpack-index.json`, or a
    /// directory.
    pub fn parse(text: &str) -> Source {
        if text.starts_with("http://") || text.starts_with("https://") {
            let base = match text.strip_suffix(LISTING) {
                Some(b) => b.to_owned(),
                None if text.ends_with('/') => text.to_owned(),
                None => format!("{text}/"),
            };
            Source::Http(base)
        } else {
            Source::Dir(PathBuf::from(text))
        }
    }

    /// The listing.
    pub fn listing(&self) -> Result<Listing> {
        let listing: Listing = match self {
            Source::Dir(d) if !d.join(LISTING).is_file() => return build_listing(d),
            Source::Dir(d) => {
                let p = d.join(LISTING);
                let text =
                    std::fs::read(&p).map_err(|source| Error::io(&p, "cannot read", source))?;
                parse_listing(&text, &p.display().to_string())?
            }
            Source::Http(base) => {
                let url = format!("{base}{LISTING}");
                let body = kpack_http::get(&url, kpack_http::Deadline::Whole)?
                    .ok()?
                    .read_to_vec(MAX_LISTING_BYTES)?;
                parse_listing(&body, &url)?
            }
        };
        for f in &listing.files {
            check_name(&f.name)?;
        }
        Ok(listing)
    }

    /// A reader of `f`'s bytes, at most one more than the smaller of its
    /// listed size and [`Options::max_archive_size`] (so an overlong body
    /// is noticed, and a listing cannot set the bound). A local entry must
    /// be a regular file (a symlink to one will do, not to `/dev/zero`).
    pub(crate) fn open(&self, f: &IndexFile, options: &Options) -> Result<Box<dyn Read>> {
        let limit = f.size.min(options.max_archive_size).saturating_add(1);
        match self {
            Source::Dir(d) => {
                let p = d.join(&f.name);
                let io = |what, source| Error::io(&p, what, source);
                // Asked before opening: opening a FIFO would wait for a writer.
                if !std::fs::metadata(&p)
                    .map_err(|e| io("cannot open", e))?
                    .is_file()
                {
                    return Err(Error::NotRegular { path: p });
                }
                let file = std::fs::File::open(&p).map_err(|e| io("cannot open", e))?;
                if !file.metadata().map_err(|e| io("cannot open", e))?.is_file() {
                    return Err(Error::NotRegular { path: p });
                }
                Ok(Box::new(file.take(limit)))
            }
            Source::Http(base) => {
                let url = format!("{base}{}", url_path(&f.name));
                http_get(&url, limit, options.pace)
            }
        }
    }

    /// Where `f` comes from, for messages.
    pub fn location(&self, f: &IndexFile) -> String {
        match self {
            Source::Dir(d) => d.join(&f.name).display().to_string(),
            Source::Http(base) => format!("{base}{}", url_path(&f.name)),
        }
    }
}

fn parse_listing(bytes: &[u8], what: &str) -> Result<Listing> {
    let listing: Listing = serde_json::from_slice(bytes).map_err(|source| Error::Json {
        what: what.to_owned(),
        source,
    })?;
    if listing.schema_version != 1 {
        return Err(Error::Schema {
            what: what.to_owned(),
            version: listing.schema_version,
        });
    }
    Ok(listing)
}

/// A listed name is a plain relative path ([`kpack_fsafe::is_plain_relative`]).
fn check_name(name: &str) -> Result<()> {
    if kpack_fsafe::is_plain_relative(name) && name.ends_with(".kpack") {
        Ok(())
    } else {
        Err(Error::BadName(name.to_owned()))
    }
}

/// `name` with the characters a URL path cannot hold verbatim escaped.
fn url_path(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            '#' => out.push_str("%23"),
            '?' => out.push_str("%3F"),
            c => out.push(c),
        }
    }
    out
}

/// GET `url`, answered 200, and a reader of its body that fails after
/// `limit` bytes.
fn http_get(url: &str, limit: u64, pace: kpack_http::Pace) -> Result<Box<dyn Read>> {
    let response = kpack_http::get(url, kpack_http::Deadline::Start(pace))?.ok()?;
    Ok(Box::new(response.into_reader(limit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_request_names_the_url_and_keeps_the_client_error_as_source() {
        // Port 1 on the loopback: refused at once, no network involved.
        let Err(e) = http_get(
            "http://127.0.0.1:1/index.json",
            16,
            kpack_http::Pace::DEFAULT,
        ) else {
            panic!("a request to a closed port succeeded");
        };
        assert_eq!(
            e.to_string(),
            "http://127.0.0.1:1/index.json: request failed"
        );
        assert!(std::error::Error::source(&e).is_some(), "{e:?}");
    }

    #[test]
    fn listed_names_stay_inside_the_index() {
        assert!(check_name("axpy_gfx1100.kpack").is_ok());
        assert!(check_name("lib/.kpack/axpy_gfx90a:xnack+.kpack").is_ok());
        for bad in [
            "../x.kpack",
            "/etc/x.kpack",
            "a/../../x.kpack",
            "a/./x.kpack",
            "a//x.kpack",
            "x.so",
            "",
            "a\\b.kpack",
        ] {
            assert!(matches!(check_name(bad), Err(Error::BadName(_))), "{bad}");
        }
    }

    #[test]
    fn sources_from_urls_and_directories() {
        for (text, base) in [
            ("https://h/a", "https://h/a/"),
            ("https://h/a/", "https://h/a/"),
            ("http://h/a/kpack-index.json", "http://h/a/"),
        ] {
            assert!(
                matches!(Source::parse(text), Source::Http(b) if b == base),
                "{text}"
            );
        }
        assert!(matches!(Source::parse("dir/x"), Source::Dir(_)));
    }

    #[test]
    fn lists_archives_with_their_hashes() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b_gfx942.kpack"), b"abc").unwrap();
        std::fs::write(d.path().join("a_gfx1100.kpack"), b"").unwrap();
        std::fs::write(d.path().join("notes.txt"), b"x").unwrap();
        let (path, l) = write_listing(d.path()).unwrap();
        assert_eq!(path, d.path().join(LISTING));
        let names: Vec<&str> = l.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a_gfx1100.kpack", "sub/b_gfx942.kpack"]);
        assert_eq!(
            l.files[1].sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Source::Dir(d.path().into()).listing().unwrap(), l);
    }
}
