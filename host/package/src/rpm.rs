//! `.rpm` packages: read with the `rpm` crate's streaming reader (headers
//! first, then the payload file by file, never held whole), written with
//! its `PackageBuilder` (per-file digests, header and payload digests
//! computed there), reproducibly: `SOURCE_DATE_EPOCH` as build time and
//! file mtimes, members sorted, owned by root, no signature.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_fsafe::{Order, Tree};
use kpack_job::Job;
use rpm::{
    CompressionType, CompressionWithLevel, Dependency, FileFlags, FileOptions, FileOptionsBuilder,
    FileType, PackageBuilder, Scriptlet,
};

use crate::deb::{empty_report, merge};
use crate::error::{Error, Result};
use crate::split::{TreeSplit, archive_dir, device_name, split_tree};
use crate::tree::{self, Kind, Member, OutMember, Payload};
use crate::{DevicePackage, PackageFile, PackageOptions, PackageReport};

/// Most bytes a payload may unpack to.
const PAYLOAD_LIMIT: u64 = 256 << 30;

/// An `.rpm` read: its header, the payload tree and what the header says
/// of each file beyond kind and mode.
struct Rpm {
    meta: rpm::PackageMetadata,
    payload: Payload,
    flags: BTreeMap<String, FileFlags>,
    ghosts: Vec<String>,
}

fn bad(input: &Path, why: impl Into<String>) -> Error {
    Error::invalid(input, "rpm", why)
}

/// Read `input` (its payload into `dst`).
fn read_rpm(input: &Path, dst: &Path) -> Result<Rpm> {
    let tree = tree::create_tree(dst)?;
    let mut reader = rpm::PackageReader::open(input).map_err(|e| bad(input, e.to_string()))?;
    if reader.metadata.is_source_package() {
        return Err(bad(input, "a source package has no binaries to split"));
    }
    for (what, v) in [
        ("Name", reader.metadata.get_name().map(str::is_empty)),
        ("Version", reader.metadata.get_version().map(str::is_empty)),
        ("Arch", reader.metadata.get_arch().map(str::is_empty)),
    ] {
        if !matches!(v, Ok(false)) {
            return Err(bad(input, format!("the header has no {what}")));
        }
    }
    let (mut payload, mut flags, mut ghosts) = (Payload::default(), BTreeMap::new(), Vec::new());
    let mut total = 0u64;
    while let Some(mut f) = reader
        .next_file()
        .map_err(|e| bad(input, format!("payload: {e}")))?
    {
        let raw = f.metadata.path().to_string_lossy().into_owned();
        let Some(path) = tree::plain_name(&raw).map_err(|w| bad(input, w))? else {
            continue;
        };
        check_new(&payload, &path).map_err(|w| bad(input, w.to_string()))?;
        let mode = u32::from(f.metadata.permissions()) & 0o7777;
        flags.insert(path.clone(), f.metadata.flags());
        let Some(kind) = unpack_one(input, &tree, &mut f, &path, mode, &mut total)? else {
            ghosts.push(path);
            continue;
        };
        payload.members.insert(path, Member { kind, mode });
    }
    tree::symlinks(&tree, &payload)?;
    Ok(Rpm {
        meta: reader.metadata,
        payload,
        flags,
        ghosts,
    })
}

/// Unpack one payload file into `tree`: its kind, `None` for a ghost.
fn unpack_one(
    input: &Path,
    dst: &Tree,
    f: &mut rpm::StreamingRpmFile<'_>,
    path: &str,
    mode: u32,
    total: &mut u64,
) -> Result<Option<Kind>> {
    Ok(Some(match f.metadata.file_type() {
        FileType::Regular if f.metadata.flags().contains(FileFlags::GHOST) => return Ok(None),
        FileType::Dir => {
            tree::make_dir(dst, path)?;
            Kind::Dir
        }
        FileType::Regular => {
            if !f.has_payload() && f.metadata.size() > 0 {
                return Err(bad(
                    input,
                    format!(
                        "{path}: hard-linked file without its contents in the payload, which kpack does not split"
                    ),
                ));
            }
            *total = total.saturating_add(f.metadata.size() as u64);
            if *total > PAYLOAD_LIMIT {
                return Err(bad(
                    input,
                    format!("payload inflates past {PAYLOAD_LIMIT} bytes"),
                ));
            }
            tree::write_file(f, dst, path, mode)?;
            Kind::File
        }
        FileType::SymbolicLink => Kind::Symlink(
            f.metadata
                .linkto()
                .filter(|t| !t.is_empty())
                .ok_or_else(|| bad(input, format!("symlink {path} has no target")))?
                .to_string(),
        ),
        other => {
            return Err(bad(
                input,
                format!("{path} is a {other:?}, which kpack does not split"),
            ));
        }
    }))
}

/// A path may be added: not there yet, under no member that is not a
/// directory.
fn check_new(payload: &Payload, path: &str) -> std::result::Result<(), tree::Clash> {
    if payload.members.contains_key(path) {
        return Err(tree::Clash::Twice {
            what: "file",
            path: path.into(),
        });
    }
    let not_dir = |a: &&str| payload.members.get(*a).is_some_and(|m| m.kind != Kind::Dir);
    match tree::ancestors(path).find(not_dir) {
        Some(anc) => Err(tree::Clash::Under {
            what: "file",
            path: path.into(),
            ancestor: anc.into(),
        }),
        None => Ok(()),
    }
}

/// Name, `[epoch:]version-release` and architecture of the header.
struct Nevra {
    name: String,
    version: String,
    release: String,
    epoch: Option<u32>,
    arch: String,
}

impl Nevra {
    fn of(meta: &rpm::PackageMetadata) -> Nevra {
        Nevra {
            name: meta.get_name().unwrap_or_default().to_string(),
            version: meta.get_version().unwrap_or_default().to_string(),
            release: meta.get_release().unwrap_or_default().to_string(),
            epoch: meta.get_epoch().ok(),
            arch: meta.get_arch().unwrap_or_default().to_string(),
        }
    }

    /// `[epoch:]version-release`, as `Requires: name = EVR` compares it.
    fn evr(&self) -> String {
        let e = self.epoch.map(|e| format!("{e}:")).unwrap_or_default();
        format!("{e}{}-{}", self.version, self.release)
    }

    /// `name-version-release.arch.rpm` for package `name`.
    fn file(&self, name: &str) -> String {
        format!("{name}-{}-{}.{}.rpm", self.version, self.release, self.arch)
    }
}

/// Split `input` into `out_dir`: the host `.rpm`, one device `.rpm` per
/// group and `<name>-gfx-all`. Nothing is written when the package holds
/// no device code (the report says `split: false`). Under the job's memory
/// budget, with its rule for packages that exist already.
pub fn split_rpm(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &PackageOptions<'_>,
) -> Result<PackageReport> {
    crate::refuse_input_dir(input, out_dir)?;
    let mut outputs = job.outputs(out_dir, "rpm")?;
    let scratch = outputs.scratch()?;
    let src = scratch.join("src");
    let pkg = read_rpm(input, &src)?;
    let n = Nevra::of(&pkg.meta);
    let mut report = empty_report("rpm", input, &n.name, &n.evr(), &n.arch, opts)?;
    let Some(split) = split_tree(job, input, &src, &scratch.join("work"), &n.name, opts)? else {
        return Ok(report);
    };
    let cfg = build_config(&pkg, opts.mtime, input)?;
    let plans = plan(&pkg, &n, &split, opts)?;
    for (i, p) in plans.into_iter().enumerate() {
        let file = n.file(&p.name);
        let order = if i == 0 { Order::Last } else { Order::First };
        let dest = outputs.plan(&file, order)?;
        let package = p.name.clone();
        let built = build(&pkg, &n, p, cfg, opts).map_err(|e| Error::Split {
            path: input.to_path_buf(),
            why: format!("cannot build {file}: {e}"),
        })?;
        built.write_file(&dest).map_err(|e| Error::Split {
            path: dest.clone(),
            why: format!("cannot write: {e}"),
        })?;
        let bytes = std::fs::metadata(&dest)
            .map_err(|e| Error::io(&dest, "cannot stat", e))?
            .len();
        let pf = PackageFile {
            package,
            path: out_dir.join(&file),
            file,
            bytes,
        };
        record(&mut report, &split, i, pf);
    }
    outputs.commit()?;
    report.split = true;
    report.binaries = split.binaries;
    report.databases = split.databases;
    report.warnings = split.warnings;
    report.sum_per_gpu();
    Ok(report)
}

/// Put output `i` (host, devices in group order, metapackage) in the report.
fn record(report: &mut PackageReport, split: &TreeSplit, i: usize, pf: PackageFile) {
    match (i, split.groups.iter().nth(i.wrapping_sub(1))) {
        (0, _) => report.host = Some(pf),
        (_, Some((key, (targets, _)))) => report.devices.push(DevicePackage {
            package: pf,
            key: key.clone(),
            targets: targets.clone(),
        }),
        (_, None) => report.all = Some(pf),
    }
}

/// The input's payload compressor again (xz at rpmbuild's level 6, zstd at
/// Fedora's 19; zstd for any other), the build time `mtime`.
fn build_config(pkg: &Rpm, mtime: u64, input: &Path) -> Result<rpm::BuildConfig> {
    let compression = match pkg.meta.get_payload_compressor() {
        Ok(CompressionType::Xz) => CompressionWithLevel::Xz(6),
        _ => CompressionWithLevel::Zstd(19),
    };
    let t = u32::try_from(mtime).map_err(|_| Error::Split {
        path: input.to_path_buf(),
        why: format!("SOURCE_DATE_EPOCH {mtime} does not fit an rpm timestamp"),
    })?;
    Ok(rpm::BuildConfig::v4()
        .compression(compression)
        .source_date(rpm::Timestamp::from(t)))
}

/// One output package to build.
struct Planned {
    name: String,
    summary: String,
    description: String,
    requires: Vec<Dependency>,
    members: Vec<OutMember>,
    /// The host package: the input's header fields, dependencies,
    /// scriptlets, file flags, directories and ghosts.
    host: bool,
}

/// The host package, the device packages in group order, the metapackage.
fn plan(
    pkg: &Rpm,
    n: &Nevra,
    split: &TreeSplit,
    opts: &PackageOptions<'_>,
) -> Result<Vec<Planned>> {
    let summary = pkg.meta.get_summary().unwrap_or_default().to_string();
    let mut requires = Vec::new();
    if !opts.databases_only {
        requires.push(Dependency::any(&opts.loader_package));
    }
    let mut plans = vec![Planned {
        name: n.name.clone(),
        summary,
        description: pkg.meta.get_description().unwrap_or_default().to_string(),
        requires,
        members: tree::members_of(&split.host, &pkg.payload.members, &Default::default())?,
        host: true,
    }];
    let mut devices = Vec::new();
    for (key, (targets, dirs)) in &split.groups {
        let dev = device_name(&n.name, key);
        let mut members = Vec::new();
        for d in dirs {
            members.extend(tree::members_of(
                d,
                &pkg.payload.members,
                &Default::default(),
            )?);
        }
        let label = targets.join(", ");
        plans.push(Planned {
            summary: format!("device code of {} for {label}", n.name),
            description: format!(
                "The GPU code objects and kernel database files of {} for {label}, split out of the fat package by kpack. Install it beside {} on a machine with such a GPU.",
                n.name, n.name
            ),
            requires: vec![Dependency::eq(&n.name, n.evr())],
            members: merge(members),
            host: false,
            name: dev.clone(),
        });
        devices.push(dev);
    }
    plans.push(Planned {
        name: format!("{}-gfx-all", n.name),
        summary: format!("device code of {} for every GPU", n.name),
        description: format!(
            "Requires every device package of {}: the fat package's contents, split.",
            n.name
        ),
        requires: devices.iter().map(|d| Dependency::eq(d, n.evr())).collect(),
        members: Vec::new(),
        host: false,
    });
    Ok(plans)
}

/// Build one planned package.
fn build(
    pkg: &Rpm,
    n: &Nevra,
    p: Planned,
    cfg: rpm::BuildConfig,
    opts: &PackageOptions<'_>,
) -> std::result::Result<rpm::Package, rpm::Error> {
    let m = &pkg.meta;
    let license = m.get_license().unwrap_or_default();
    let mut b = PackageBuilder::new(&p.name, &n.version, license, &n.arch, &p.summary);
    b.using_config(cfg)
        .release(&n.release)
        .description(&p.description)
        .build_host("kpack");
    if let Some(e) = n.epoch {
        b.epoch(e);
    }
    for (v, set) in [
        (
            m.get_url(),
            PackageBuilder::url as fn(&mut PackageBuilder, String) -> &mut PackageBuilder,
        ),
        (m.get_vendor(), PackageBuilder::vendor),
        (m.get_packager(), PackageBuilder::packager),
        (m.get_group(), PackageBuilder::group),
    ] {
        if let Ok(v) = v.map(str::to_string).map_err(drop).and_then(nonempty) {
            set(&mut b, v);
        }
    }
    if p.host {
        host_header(&mut b, pkg, n)?;
    }
    for r in p.requires {
        b.requires(r);
    }
    let archives = archive_dir(&n.name, opts);
    for mem in &p.members {
        add_member(&mut b, mem, pkg, p.host, &archives)?;
    }
    if p.host {
        for g in &pkg.ghosts {
            b.with_ghost(FileOptions::ghost(format!("/{g}")))?;
        }
    }
    b.build()
}

fn nonempty(s: String) -> std::result::Result<String, ()> {
    if s.is_empty() { Err(()) } else { Ok(s) }
}

/// The input's dependencies (less those the builder writes itself: rpmlib
/// features, scriptlet interpreters, the package's own name) and
/// scriptlets.
fn host_header(
    b: &mut PackageBuilder,
    pkg: &Rpm,
    n: &Nevra,
) -> std::result::Result<(), rpm::Error> {
    let m = &pkg.meta;
    let own = |d: &Dependency| {
        d.name.starts_with("rpmlib(")
            || d.flags.contains(rpm::DependencyFlags::INTERP)
            || d.name == n.name
            || d.name.starts_with(&format!("{}(", n.name))
            || d.name == format!("config({})", n.name)
    };
    let keep = |deps: std::result::Result<Vec<Dependency>, rpm::Error>| {
        deps.unwrap_or_default().into_iter().filter(|d| !own(d))
    };
    keep(m.get_requires()).for_each(|d| {
        b.requires(d);
    });
    keep(m.get_provides()).for_each(|d| {
        b.provides(d);
    });
    keep(m.get_conflicts()).for_each(|d| {
        b.conflicts(d);
    });
    keep(m.get_obsoletes()).for_each(|d| {
        b.obsoletes(d);
    });
    keep(m.get_recommends()).for_each(|d| {
        b.recommends(d);
    });
    keep(m.get_suggests()).for_each(|d| {
        b.suggests(d);
    });
    type Set = fn(&mut PackageBuilder, Scriptlet) -> &mut PackageBuilder;
    let scripts: [(std::result::Result<Scriptlet, rpm::Error>, Set); 7] = [
        (m.get_pre_install_script(), |b, s| b.pre_install_script(s)),
        (m.get_post_install_script(), |b, s| b.post_install_script(s)),
        (m.get_pre_uninstall_script(), |b, s| {
            b.pre_uninstall_script(s)
        }),
        (m.get_post_uninstall_script(), |b, s| {
            b.post_uninstall_script(s)
        }),
        (m.get_pre_trans_script(), |b, s| b.pre_trans_script(s)),
        (m.get_post_trans_script(), |b, s| b.post_trans_script(s)),
        (m.get_verify_script(), |b, s| b.verify_script(s)),
    ];
    for (s, set) in scripts {
        if let Ok(s) = s {
            set(b, s);
        }
    }
    Ok(())
}

/// One member: a directory only when the host package had it or it is
/// under the archive directory (rpm packages own the directories they
/// list), files with the input's flags (`%config`, `%doc`, …) in the host.
fn add_member(
    b: &mut PackageBuilder,
    m: &OutMember,
    pkg: &Rpm,
    host: bool,
    archives: &str,
) -> std::result::Result<(), rpm::Error> {
    let dest = format!("/{}", m.path);
    let mode = (m.mode & 0o7777) as u16;
    match &m.kind {
        Kind::Dir => {
            let input_dir = host && pkg.payload.members.contains_key(&m.path);
            let ours = m.path == archives || m.path.starts_with(&format!("{archives}/"));
            if input_dir || ours {
                b.with_dir_entry(FileOptions::dir(dest).permissions(mode))?;
            }
        }
        Kind::Symlink(t) => {
            b.with_symlink(FileOptions::symlink(dest, t))?;
        }
        Kind::File => {
            let mut o = FileOptions::new(dest).permissions(mode);
            let f = pkg.flags.get(&m.path).copied().filter(|_| host);
            let f = f.unwrap_or(FileFlags::empty());
            for (flag, set) in [
                (
                    FileFlags::CONFIG,
                    FileOptionsBuilder::config as fn(FileOptionsBuilder) -> FileOptionsBuilder,
                ),
                (FileFlags::NOREPLACE, FileOptionsBuilder::noreplace),
                (FileFlags::MISSINGOK, FileOptionsBuilder::missingok),
                (FileFlags::DOC, FileOptionsBuilder::doc),
                (FileFlags::LICENSE, FileOptionsBuilder::license),
            ] {
                if f.contains(flag) {
                    o = set(o);
                }
            }
            let src: PathBuf = m
                .source
                .clone()
                .unwrap_or_else(|| PathBuf::from("/dev/null"));
            b.with_file(src, o)?;
        }
    }
    Ok(())
}
