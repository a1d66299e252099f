//! Reading a wheel: validate its name, `.dist-info` (WHEEL, METADATA,
//! RECORD), every entry's path and RECORD hash, and unpack it into a
//! directory with one subtree per install scheme ([`Unpacked`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::Digest;

use crate::error::{Error, Result};
use crate::headers::Headers;
use crate::name::{WheelName, normalize};
use crate::record::{format_sha256, hash_matches, parse_record};

/// The install schemes whose trees are split (their files install relative
/// to one another, so a marker's relative search path keeps working).
/// `root` is the wheel's root (purelib or platlib per `Root-Is-Purelib`).
pub(crate) const SPLIT_SCHEMES: [&str; 3] = ["root", "purelib", "platlib"];

/// One file of the input wheel.
#[derive(Debug, Clone)]
pub(crate) struct FileMeta {
    /// Unix permission bits from the zip's external attributes (0o644 if none).
    pub mode: u32,
    /// Index of the entry in the input zip.
    pub index: usize,
    /// Uncompressed size.
    pub size: u64,
    /// Its RECORD hash (sha256), as checked.
    pub hash: String,
}

/// Where an entry was unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Into the split tree of a scheme (`root`, `purelib`, `platlib`), at `rel`.
    Split(&'static str, String),
    /// Kept as is (`.dist-info`, other `.data` schemes), at its wheel path.
    Keep,
}

/// A wheel unpacked into `dir`: `dir/<scheme>/…` per split scheme;
/// everything else is only checked, not written out.
#[derive(Debug)]
pub(crate) struct Unpacked {
    pub name: WheelName,
    /// `<name>-<version>.dist-info`
    pub dist_info: String,
    /// `<name>-<version>.data`
    pub data_dir: String,
    pub wheel: Headers,
    pub metadata: Headers,
    /// Every file, by wheel path.
    pub files: BTreeMap<String, FileMeta>,
    /// Directory entries (without the trailing `/`) and their modes.
    pub dirs: BTreeMap<String, u32>,
    /// Problems that do not stop the split.
    pub warnings: Vec<String>,
    /// Bytes of the input file.
    pub bytes: u64,
}

impl Unpacked {
    /// Where a wheel path goes.
    pub fn route(&self, path: &str) -> Route {
        if let Some(rest) = path
            .strip_prefix(&self.data_dir)
            .and_then(|r| r.strip_prefix('/'))
        {
            if let Some((scheme, rel)) = rest.split_once('/')
                && let Some(s) = SPLIT_SCHEMES[1..].iter().find(|s| **s == scheme)
            {
                return Route::Split(s, rel.to_string());
            }
            return Route::Keep;
        }
        if path.starts_with(&format!("{}/", self.dist_info)) {
            return Route::Keep;
        }
        Route::Split("root", path.to_string())
    }

    /// The wheel path of a file at `rel` in split scheme `scheme`, for a
    /// wheel whose `.data` directory is `data_dir`.
    pub fn wheel_path(data_dir: &str, scheme: &str, rel: &str) -> String {
        if scheme == "root" {
            rel.to_string()
        } else {
            format!("{data_dir}/{scheme}/{rel}")
        }
    }

    /// `Root-Is-Purelib` as written in WHEEL.
    pub fn root_is_purelib(&self) -> &str {
        self.wheel.get("Root-Is-Purelib").unwrap_or("false")
    }
}

fn read_small(zip: &mut zip::ZipArchive<File>, input: &Path, name: &str) -> Result<String> {
    let mut f = zip
        .by_name(name)
        .map_err(|e| Error::zip(input, &format!("entry {name}"), e))?;
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| {
        Error::invalid(input, format!("entry {name}: cannot read as UTF-8 text")).with_source(e)
    })?;
    Ok(text)
}

/// A wheel path that is safe and canonical: relative, `/`-separated, no
/// empty, `.` or `..` components, no backslashes or NULs.
fn check_path(name: &str) -> std::result::Result<(), String> {
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if trimmed.is_empty()
        || trimmed.starts_with('/')
        || trimmed.contains(['\\', '\0'])
        || trimmed
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(format!("unsafe or non-canonical path {name:?}"));
    }
    Ok(())
}

/// Open and unpack `input` into `dir` (which must exist and be empty).
pub(crate) fn unpack(input: &Path, dir: &Path) -> Result<Unpacked> {
    let file_name = input
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::invalid(input, "file name is not UTF-8"))?;
    let name = WheelName::parse(file_name).map_err(|e| Error::invalid(input, e))?;
    let file = File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    let bytes = file
        .metadata()
        .map_err(|e| Error::io(input, "cannot stat", e))?
        .len();
    let mut zip = zip::ZipArchive::new(file).map_err(|e| Error::zip(input, "not a zip file", e))?;

    // The one top-level `.dist-info` directory.
    let mut dist_infos: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.split_once('/').map(|(top, _)| top))
        .filter(|top| top.ends_with(".dist-info"))
        .map(str::to_string)
        .collect();
    dist_infos.sort();
    dist_infos.dedup();
    let dist_info = match dist_infos.as_slice() {
        [one] => one.clone(),
        [] => return Err(Error::invalid(input, "no .dist-info directory")),
        many => {
            return Err(Error::invalid(
                input,
                format!("several .dist-info directories: {}", many.join(", ")),
            ));
        }
    };
    let stem = dist_info.trim_end_matches(".dist-info");
    let dist_name = stem.split('-').next().unwrap_or(stem);
    if normalize(dist_name) != normalize(&name.distribution) {
        return Err(Error::invalid(
            input,
            format!(
                "{dist_info} does not belong to distribution {:?}",
                name.distribution
            ),
        ));
    }
    let data_dir = format!("{stem}.data");

    let wheel_text = read_small(&mut zip, input, &format!("{dist_info}/WHEEL"))?;
    let wheel = Headers::parse(&wheel_text)
        .map_err(|e| Error::invalid(input, format!("{dist_info}/WHEEL")).with_source(e))?;
    let version = wheel
        .get("Wheel-Version")
        .ok_or_else(|| Error::invalid(input, format!("{dist_info}/WHEEL has no Wheel-Version")))?;
    if version.split('.').next() != Some("1") {
        return Err(Error::invalid(
            input,
            format!("Wheel-Version {version} is not supported (major version 1 only)"),
        ));
    }
    let metadata_text = read_small(&mut zip, input, &format!("{dist_info}/METADATA"))?;
    let metadata = Headers::parse(&metadata_text)
        .map_err(|e| Error::invalid(input, format!("{dist_info}/METADATA")).with_source(e))?;
    for field in ["Name", "Version"] {
        if metadata.get(field).is_none() {
            return Err(Error::invalid(
                input,
                format!("{dist_info}/METADATA has no {field}"),
            ));
        }
    }
    let record_name = format!("{dist_info}/RECORD");
    let record_text = read_small(&mut zip, input, &record_name)?;
    let record = parse_record(&record_text)
        .map_err(|e| Error::invalid(input, record_name.as_str()).with_source(e))?;
    let mut expected: BTreeMap<String, (String, Option<u64>)> = BTreeMap::new();
    for r in record {
        if expected.insert(r.path.clone(), (r.hash, r.size)).is_some() {
            return Err(Error::invalid(
                input,
                format!("RECORD lists {} twice", r.path),
            ));
        }
    }
    let unhashed = |p: &str| {
        p == record_name || p == format!("{record_name}.jws") || p == format!("{record_name}.p7s")
    };

    let mut un = Unpacked {
        name,
        dist_info,
        data_dir,
        wheel,
        metadata,
        files: BTreeMap::new(),
        dirs: BTreeMap::new(),
        warnings: Vec::new(),
        bytes,
    };
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| Error::zip(input, &format!("entry #{i}"), e))?;
        let path = entry.name().to_string();
        check_path(&path).map_err(|e| Error::invalid(input, e))?;
        let mode = entry
            .unix_mode()
            .map(|m| m & 0o777)
            .filter(|m| *m != 0)
            .unwrap_or(0o644);
        if entry.is_dir() {
            un.dirs.insert(path.trim_end_matches('/').to_string(), mode);
            continue;
        }
        if un.files.contains_key(&path) {
            return Err(Error::invalid(input, format!("entry {path} appears twice")));
        }
        // Kept entries are only hashed: the host wheel copies their
        // compressed bytes straight from the input.
        let dest = match un.route(&path) {
            Route::Split(scheme, rel) => Some(dir.join(scheme).join(&rel)),
            Route::Keep => None,
        };
        if let Some(parent) = dest.as_ref().and_then(|d| d.parent()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, "cannot create", e))?;
        }
        let mut out = match &dest {
            Some(d) => Some(File::create(d).map_err(|e| Error::io(d, "cannot create", e))?),
            None => None,
        };
        let mut hasher = sha2::Sha256::new();
        let mut size = 0u64;
        loop {
            let n = entry.read(&mut buf).map_err(|e| {
                Error::invalid(input, format!("entry {path}: cannot decompress")).with_source(e)
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            if let (Some(out), Some(d)) = (&mut out, &dest) {
                out.write_all(&buf[..n])
                    .map_err(|e| Error::io(d, "cannot write", e))?;
            }
            size += n as u64;
        }
        drop(out);
        if let Some(d) = &dest {
            set_mode(d, mode | 0o600)?;
        }
        let digest: [u8; 32] = hasher.finalize().into();
        match expected.get(&path) {
            _ if unhashed(&path) => {}
            None => {
                return Err(Error::invalid(
                    input,
                    format!("entry {path} is not listed in RECORD"),
                ));
            }
            Some((hash, want_size)) => {
                let ok = hash_matches(hash, &digest, |algo| rehash(input, &path, algo))
                    .map_err(|e| Error::invalid(input, format!("RECORD entry {path}: {e}")))?;
                if !ok {
                    return Err(Error::invalid(
                        input,
                        format!(
                            "entry {path} does not match its RECORD hash {hash} (got {})",
                            format_sha256(&digest)
                        ),
                    ));
                }
                if want_size.is_some_and(|s| s != size) {
                    return Err(Error::invalid(
                        input,
                        format!(
                            "entry {path} is {size} bytes, RECORD says {}",
                            want_size.unwrap_or(0)
                        ),
                    ));
                }
            }
        }
        un.files.insert(
            path,
            FileMeta {
                mode,
                index: i,
                size,
                hash: format_sha256(&digest),
            },
        );
    }
    for p in expected.keys() {
        if !un.files.contains_key(p) {
            un.warnings
                .push(format!("RECORD lists {p}, which is not in the wheel"));
        }
    }
    if !un.files.contains_key(&record_name) {
        return Err(Error::invalid(input, format!("no {record_name}")));
    }
    Ok(un)
}

/// The sha384 / sha512 digest of entry `name` (RECORDs may use them; rare
/// enough to read the entry a second time).
fn rehash(input: &Path, name: &str, algo: &str) -> Option<Vec<u8>> {
    let mut zip = zip::ZipArchive::new(File::open(input).ok()?).ok()?;
    let mut bytes = Vec::new();
    zip.by_name(name).ok()?.read_to_end(&mut bytes).ok()?;
    match algo {
        "sha384" => Some(sha2::Sha384::digest(&bytes).to_vec()),
        "sha512" => Some(sha2::Sha512::digest(&bytes).to_vec()),
        _ => None,
    }
}

#[cfg(unix)]
pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(path, "cannot set permissions", e))
}

#[cfg(not(unix))]
pub(crate) fn set_mode(_path: &Path, _mode: u32) -> Result<()> {
    Ok(())
}

/// Every regular file under `root`, as sorted `/`-separated relative paths.
pub(crate) fn list_files(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    if !root.exists() {
        return Ok(out);
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, "cannot list", e))? {
            let e = e.map_err(|e| Error::io(&d, "cannot list", e))?;
            let p = e.path();
            let ft = e.file_type().map_err(|e| Error::io(&p, "cannot stat", e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(root).unwrap_or(&p);
                let rel = rel
                    .to_str()
                    .ok_or_else(|| Error::invalid(&p, "path is not UTF-8"))?
                    .replace(std::path::MAIN_SEPARATOR, "/");
                out.push((rel, p));
            } else {
                return Err(Error::invalid(&p, "a wheel can hold only regular files"));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unsafe_paths() {
        for bad in ["../x", "/abs", "a/../b", "a//b", "a\\b", "./a", ""] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path("pkg/lib/x.so").is_ok());
        assert!(check_path("pkg/lib/").is_ok());
    }
}
