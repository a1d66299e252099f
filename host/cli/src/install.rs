//! `kpack install PKG`: install a split package with the device wheels of
//! this machine's GPUs, through pip or uv. Detection, then the extras the
//! package's host wheel provides for those GPUs at whatever grouping it was
//! split ([`resolve`], shared with `kpack detect --format extras --for`),
//! then the installer with `PKG[extras]`; the command is printed first.
//!
//! The extras route is the one every installer reads today: pip (any
//! version) and uv select device code through `PKG[device-…]`, while
//! variant wheels are read only by uv's preview, with vendored providers.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use kpack_detect::{Detection, Options, detect};
use kpack_wheel::{HostExtras, WheelName, normalize};

use crate::exit::{CliError, CliResult};

/// The installer `kpack install` runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Installer {
    /// `python -m pip install` (the `python3` on PATH, or `$PYTHON`).
    Pip,
    /// `uv pip install`.
    Uv,
}

/// Arguments of `kpack install`.
#[derive(clap::Args)]
pub struct Args {
    /// The package: a name (looked up in --index), a host wheel file, or a
    /// folder of split output.
    package: String,
    /// Where the package is: a simple-index URL (`https://…/simple`) or a
    /// folder of wheels (pip's --find-links).
    #[arg(long, value_name = "URL|DIR")]
    index: Option<String>,
    /// Which installer to run.
    #[arg(long, value_enum, default_value = "pip")]
    installer: Installer,
    /// The sysfs mount to read (`/sys`; for containers and tests).
    #[arg(long, value_name = "DIR")]
    sysfs_root: Option<PathBuf>,
    /// Print the command without running it.
    #[arg(long)]
    dry_run: bool,
    /// More arguments for the installer (after `--`).
    #[arg(last = true)]
    installer_args: Vec<OsString>,
}

/// What [`resolve`] found for one package on this machine.
pub struct Resolved {
    /// The host wheel's name, version and extras.
    pub host: HostExtras,
    /// The extras to install, as the package spells them, one per GPU
    /// served (duplicates dropped).
    pub extras: Vec<String>,
    /// GPUs (targets) the package has no device code for.
    pub unserved: Vec<String>,
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
/// output, or a name in `index`).
pub fn host_extras(package: &str, index: Option<&str>) -> anyhow::Result<HostExtras> {
    let path = Path::new(package);
    if path.is_file() {
        return Ok(HostExtras::read(path)?);
    }
    match index {
        _ if path.is_dir() => from_folder(path, None),
        Some(i) if i.contains("://") => from_index(i, package),
        Some(i) => from_folder(Path::new(i), Some(package)),
        None => bail!(
            "{package}: no such wheel or folder; to look a package name up, give --index URL|DIR"
        ),
    }
}

/// The newest host wheel (the one providing `device-*` extras) in `dir`,
/// of distribution `name` when given.
fn from_folder(dir: &Path, name: Option<&str>) -> anyhow::Result<HostExtras> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("{}: cannot list", dir.display()))?;
    let mut found: Vec<HostExtras> = Vec::new();
    for e in entries {
        let p = e
            .with_context(|| format!("{}: cannot list", dir.display()))?
            .path();
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

/// The newest of `found`; an error naming `place` when it is empty or
/// holds several distributions.
fn newest(
    mut found: Vec<HostExtras>,
    place: &str,
    name: Option<&str>,
) -> anyhow::Result<HostExtras> {
    let what = name.unwrap_or("a split package");
    let Some(first) = found.first() else {
        bail!("{place}: no host wheel of {what} (a wheel providing device-* extras)");
    };
    let dist = normalize(&first.name);
    if found.iter().any(|h| normalize(&h.name) != dist) {
        let mut names: Vec<&str> = found.iter().map(|h| h.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        bail!(
            "{place}: host wheels of several packages ({}); name one",
            names.join(", ")
        );
    }
    found.sort_by_cached_key(|h| version_key(&h.version));
    found.pop().context("no host wheel")
}

/// A rough PEP 440 order: numeric release parts compared as numbers.
fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split(['.', '+', '-'])
        .map(|p| {
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            (digits.parse().unwrap_or(0), p[digits.len()..].to_string())
        })
        .collect()
}

/// The newest host wheel of `name` on the simple index at `index`: its
/// PEP 658 `.metadata` file when the index serves one, else the wheel.
fn from_index(index: &str, name: &str) -> anyhow::Result<HostExtras> {
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

/// One wheel of an index page: its `.metadata`, else the whole wheel.
fn index_wheel(url: &str) -> anyhow::Result<Option<HostExtras>> {
    if let Ok(text) = get(&format!("{url}.metadata"), kpack_http::MAX_DOCUMENT_BYTES) {
        return Ok(HostExtras::from_metadata(&String::from_utf8_lossy(&text)));
    }
    let dir = tempfile::tempdir().context("temporary directory")?;
    let file = dir.path().join(url.rsplit('/').next().unwrap_or("w.whl"));
    let mut body = kpack_http::get(url, kpack_http::Deadline::Start(kpack_http::Pace::DEFAULT))
        .and_then(kpack_http::Response::ok)
        .with_context(|| format!("GET {url}"))?
        .into_reader(64 << 30);
    let mut out = std::fs::File::create(&file).with_context(|| format!("{}", file.display()))?;
    std::io::copy(&mut body, &mut out).with_context(|| format!("GET {url}"))?;
    Ok(HostExtras::read(&file).ok())
}

/// The body of `url`, at most `limit` bytes.
fn get(url: &str, limit: u64) -> anyhow::Result<Vec<u8>> {
    let mut v = Vec::new();
    kpack_http::get(url, kpack_http::Deadline::Whole)
        .and_then(kpack_http::Response::ok)
        .with_context(|| format!("GET {url}"))?
        .into_reader(limit)
        .read_to_end(&mut v)
        .with_context(|| format!("GET {url}"))?;
    Ok(v)
}

/// Say on stderr which GPUs `r` does not serve; whether there were any.
pub fn report_unserved(r: &Resolved) -> bool {
    for t in &r.unserved {
        eprintln!(
            "warning: {} {} was not built for {t}: it provides {}",
            r.host.name,
            r.host.version,
            if r.host.extras.is_empty() {
                "no device extras".to_string()
            } else {
                r.host.extras.join(", ")
            }
        );
    }
    !r.unserved.is_empty()
}

/// Run `kpack install`.
pub fn run(args: Args) -> CliResult {
    let det = detect(&Options::from_env(args.sysfs_root.clone()))?;
    if det.gpus.is_empty() {
        eprintln!("note: {}", det.source.describe());
    }
    let host = host_extras(&args.package, args.index.as_deref())?;
    let r = choose(host, &det);
    report_unserved(&r);
    let spec = if Path::new(&args.package).exists() {
        r.host.name.clone()
    } else {
        args.package.clone()
    };
    // No GPU served: the plain package (the host alone).
    let spec = if r.extras.is_empty() {
        spec
    } else {
        format!("{spec}[{}]", r.extras.join(","))
    };
    let mut cmd = match args.installer {
        Installer::Pip => {
            let mut c =
                Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()));
            c.args(["-m", "pip", "install"]);
            c
        }
        Installer::Uv => {
            let mut c = Command::new("uv");
            c.args(["pip", "install"]);
            c
        }
    };
    match args.index.as_deref() {
        Some(i) if i.contains("://") => cmd.args(["--index-url", i]),
        Some(i) => cmd.args(["--find-links", i]),
        None if Path::new(&args.package).is_dir() => cmd.arg("--find-links").arg(&args.package),
        None if Path::new(&args.package).is_file() => {
            let dir = Path::new(&args.package).parent().unwrap_or(Path::new("."));
            cmd.arg("--find-links").arg(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
        }
        None => &mut cmd,
    };
    cmd.arg(&spec).args(&args.installer_args);
    let shown: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("+ {}", shown.join(" "));
    if args.dry_run {
        return Ok(());
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", shown[0]))?;
    if status.success() {
        Ok(())
    } else {
        eprintln!("error: {} exited with {status}", shown[0]);
        Err(CliError::Reported)
    }
}
