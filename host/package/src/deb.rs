//! `.deb` packages: read with the `ar` crate (the container) and `tar`
//! with the gzip, xz and zstd decoders (its `control.tar.*` and
//! `data.tar.*`); written as `dpkg-deb --build` writes them (`debian-binary`,
//! `control.tar.xz`, `data.tar.xz`), reproducibly.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;

use kpack_fsafe::Order;
use kpack_job::Job;

use crate::control::{Control, is_valid_package_name};
use crate::error::{Error, Result};
use crate::split::{TreeSplit, device_name, split_tree};
use crate::tree::{self, Kind, OutMember, Payload};
use crate::{DevicePackage, PackageFile, PackageOptions, PackageReport};

/// Ends a version's epoch (`1:2.0-1`), which file names leave out.
const EPOCH_SEP: char = ':';

/// Most bytes a payload may unpack to.
const PAYLOAD_LIMIT: u64 = 256 << 30;

/// A `.deb` read: its control paragraph, its other control files (maintainer
/// scripts, conffiles, shlibs, … as they were) and its payload tree.
struct Deb {
    control: Control,
    control_files: Vec<(String, u32, Vec<u8>)>,
    payload: Payload,
}

fn bad(input: &Path, why: impl Into<String>) -> Error {
    Error::invalid(input, "deb", why)
}

/// A member's decompressor by its name's suffix.
fn decoder<'a>(input: &Path, name: &str, r: impl Read + 'a) -> Result<Box<dyn Read + 'a>> {
    let ext = name.rsplit_once(".tar").map_or("?", |(_, e)| e);
    Ok(match ext {
        "" => Box::new(r),
        ".gz" => Box::new(flate2::read::GzDecoder::new(r)),
        ".xz" => Box::new(liblzma::read::XzDecoder::new(r)),
        ".zst" => Box::new(zstd::Decoder::new(r).map_err(|e| bad(input, format!("{name}: {e}")))?),
        _ => {
            return Err(bad(
                input,
                format!("member {name:?} has an unknown compression"),
            ));
        }
    })
}

/// Read `input` (its payload into `dst`).
fn read_deb(input: &Path, dst: &Path) -> Result<Deb> {
    let file = std::fs::File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    let mut ar = ar::Archive::new(std::io::BufReader::new(file));
    let mut seen = Vec::new();
    let mut control_files = None;
    let mut payload = None;
    while let Some(entry) = ar.next_entry() {
        let mut entry = entry.map_err(|e| bad(input, format!("not an ar archive: {e}")))?;
        let name = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        match (seen.len(), name.as_str()) {
            (0, "debian-binary") => {
                let mut v = String::new();
                entry
                    .read_to_string(&mut v)
                    .map_err(|e| bad(input, format!("debian-binary: {e}")))?;
                if !v.starts_with("2.") {
                    return Err(bad(
                        input,
                        format!("format version {:?}, not 2.x", v.trim()),
                    ));
                }
            }
            (0, _) => {
                return Err(bad(
                    input,
                    format!("first member is {name:?}, not debian-binary"),
                ));
            }
            (_, n) if n.starts_with("control.tar") => {
                control_files = Some(read_control(input, n, decoder(input, n, &mut entry)?)?);
            }
            (_, n) if n.starts_with("data.tar") => {
                let r = decoder(input, n, &mut entry)?;
                payload = Some(tree::unpack(r, dst, input, "deb", PAYLOAD_LIMIT)?);
            }
            (_, n) if n.starts_with('_') => {}
            (_, n) => return Err(bad(input, format!("unexpected member {n:?}"))),
        }
        seen.push(name);
    }
    let control_files = control_files.ok_or_else(|| bad(input, "no control.tar member"))?;
    let payload = payload.ok_or_else(|| bad(input, "no data.tar member"))?;
    let text = control_files
        .iter()
        .find(|(n, _, _)| n == "control")
        .map(|(_, _, b)| String::from_utf8_lossy(b).into_owned())
        .ok_or_else(|| bad(input, "control.tar has no control file"))?;
    let control = Control::parse(&text).map_err(|e| bad(input, format!("control: {e}")))?;
    for field in ["Package", "Version", "Architecture"] {
        if control.get(field).is_none_or(str::is_empty) {
            return Err(bad(input, format!("control has no {field} field")));
        }
    }
    Ok(Deb {
        control,
        control_files,
        payload,
    })
}

/// The files of a control archive.
fn read_control(input: &Path, name: &str, r: impl Read) -> Result<Vec<(String, u32, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut a = tar::Archive::new(r);
    let entries = a
        .entries()
        .map_err(|e| bad(input, format!("{name}: {e}")))?;
    for e in entries {
        let mut e = e.map_err(|e| bad(input, format!("{name}: {e}")))?;
        let raw = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let Some(path) = tree::plain_name(&raw).map_err(|w| bad(input, format!("{name}: {w}")))?
        else {
            continue;
        };
        if e.header().entry_type() != tar::EntryType::Regular || path.contains('/') {
            return Err(bad(
                input,
                format!("{name}: {path} is not a plain control file"),
            ));
        }
        let mode = e.header().mode().unwrap_or(0o644) & 0o7777;
        let mut bytes = Vec::new();
        (&mut e)
            .take(64 << 20)
            .read_to_end(&mut bytes)
            .map_err(|er| bad(input, format!("{name}: {path}: {er}")))?;
        out.push((path, mode, bytes));
    }
    Ok(out)
}

/// One output package to write.
struct Planned {
    control: Control,
    /// Control files besides `control` and `md5sums`.
    extra: Vec<(String, u32, Vec<u8>)>,
    members: Vec<OutMember>,
}

/// Split `input` into `out_dir`: the host `.deb`, one device `.deb` per
/// group and `<name>-gfx-all`. Nothing is written when the package holds
/// no device code (the report says `split: false`). Under the job's memory
/// budget, with its rule for packages that exist already.
pub fn split_deb(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &PackageOptions<'_>,
) -> Result<PackageReport> {
    crate::refuse_input_dir(input, out_dir)?;
    let mut outputs = job.outputs(out_dir, "deb")?;
    let scratch = outputs.scratch()?;
    let src = scratch.join("src");
    let deb = read_deb(input, &src)?;
    let field = |f: &str| deb.control.get(f).unwrap_or_default().to_string();
    let (name, version, arch) = (field("Package"), field("Version"), field("Architecture"));
    let mut report = empty_report("deb", input, &name, &version, &arch, opts)?;
    let Some(split) = split_tree(job, input, &src, &scratch.join("work"), &name, opts)? else {
        return Ok(report);
    };
    let plans = plan(&deb, &src, &split, opts)?;
    let data_tmp = scratch.join("data.tar.xz");
    for (i, p) in plans.iter().enumerate() {
        let pkg = p.control.get("Package").unwrap_or_default().to_string();
        let file = format!(
            "{pkg}_{}_{arch}.deb",
            version
                .split_once(EPOCH_SEP)
                .map_or(version.as_str(), |(_, v)| v)
        );
        let order = if i == 0 { Order::Last } else { Order::First };
        let dest = outputs.plan(&file, order)?;
        write_deb(&dest, p, opts.mtime, &data_tmp)?;
        let bytes = std::fs::metadata(&dest)
            .map_err(|e| Error::io(&dest, "cannot stat", e))?
            .len();
        let pf = PackageFile {
            package: pkg,
            path: out_dir.join(&file),
            file,
            bytes,
        };
        match i {
            0 => report.host = Some(pf),
            _ if i == plans.len() - 1 => report.all = Some(pf),
            _ => {
                let (key, (targets, _)) =
                    split.groups.iter().nth(i - 1).ok_or_else(|| Error::Split {
                        path: input.to_path_buf(),
                        why: "device package without its group".into(),
                    })?;
                report.devices.push(DevicePackage {
                    package: pf,
                    key: key.clone(),
                    targets: targets.clone(),
                });
            }
        }
    }
    outputs.commit()?;
    report.split = true;
    report.binaries = split.binaries;
    report.databases = split.databases;
    report.warnings = split.warnings;
    report.sum_per_gpu();
    Ok(report)
}

/// The report of a split that wrote nothing yet.
pub(crate) fn empty_report(
    format: &'static str,
    input: &Path,
    name: &str,
    version: &str,
    arch: &str,
    opts: &PackageOptions<'_>,
) -> Result<PackageReport> {
    let input_bytes = std::fs::metadata(input)
        .map_err(|e| Error::io(input, "cannot stat", e))?
        .len();
    Ok(PackageReport {
        input: PackageFile {
            package: name.to_string(),
            file: file_name(input),
            path: input.to_path_buf(),
            bytes: input_bytes,
        },
        format,
        version: version.to_string(),
        architecture: arch.to_string(),
        split: false,
        databases_only: opts.databases_only,
        host: None,
        devices: Vec::new(),
        all: None,
        per_gpu: Vec::new(),
        binaries: Vec::new(),
        databases: BTreeMap::new(),
        warnings: Vec::new(),
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The host package, the device packages in group order, the metapackage.
fn plan(
    deb: &Deb,
    src: &Path,
    split: &TreeSplit,
    opts: &PackageOptions<'_>,
) -> Result<Vec<Planned>> {
    let name = deb.control.get("Package").unwrap_or_default();
    let version = deb.control.get("Version").unwrap_or_default();
    let input_dirs: BTreeSet<String> = deb
        .payload
        .members
        .iter()
        .filter(|(_, m)| m.kind == Kind::Dir)
        .map(|(p, _)| p.clone())
        .collect();
    let mut host = deb.control.clone();
    if !opts.databases_only {
        host.add_relation("Depends", &opts.loader_package);
    }
    let extra = deb
        .control_files
        .iter()
        .filter(|(n, _, _)| n != "control" && n != "md5sums")
        .cloned()
        .collect();
    let members = tree::members_of(&split.host, &deb.payload.members, &input_dirs)?;
    let mut plans = vec![Planned {
        control: host,
        extra,
        members,
    }];
    let mut devices = Vec::new();
    for (key, (targets, dirs)) in &split.groups {
        let dev = device_name(name, key);
        if !is_valid_package_name(&dev) {
            return Err(Error::Split {
                path: src.to_path_buf(),
                why: format!("device package name {dev:?} is not a valid Debian package name"),
            });
        }
        let control_and_members = device_plan(deb, src, name, version, &dev, targets, dirs)?;
        devices.push(dev);
        plans.push(control_and_members);
    }
    let all = format!("{name}-gfx-all");
    let deps: Vec<String> = devices
        .iter()
        .map(|d| format!("{d} (= {version})"))
        .collect();
    let control = device_control(
        &deb.control,
        &all,
        &deps.join(", "),
        &format!("device code of {name} for every GPU"),
        &format!(
            " Depends on every device package of {name}: the fat package's\n contents, split."
        ),
    );
    let members = merge(doc_files(src, name, &all, &deb.payload)?);
    plans.push(Planned {
        control,
        extra: Vec::new(),
        members,
    });
    Ok(plans)
}

/// The device package `dev` of `targets`: their arch trees and the docs.
fn device_plan(
    deb: &Deb,
    src: &Path,
    name: &str,
    version: &str,
    dev: &str,
    targets: &[String],
    dirs: &[std::path::PathBuf],
) -> Result<Planned> {
    let mut members = Vec::new();
    for d in dirs {
        members.extend(tree::members_of(d, &deb.payload.members, &BTreeSet::new())?);
    }
    members.extend(doc_files(src, name, dev, &deb.payload)?);
    let label = targets.join(", ");
    let control = device_control(
        &deb.control,
        dev,
        &format!("{name} (= {version})"),
        &format!("device code of {name} for {label}"),
        &format!(
            " The GPU code objects and kernel database files of {name} for\n {label}, split out of the fat package by kpack. Install it beside\n {name} on a machine with such a GPU."
        ),
    );
    Ok(Planned {
        control,
        extra: Vec::new(),
        members: merge(members),
    })
}

/// Members sorted, each path once.
pub(crate) fn merge(mut members: Vec<OutMember>) -> Vec<OutMember> {
    members.sort_by(|a, b| a.path.cmp(&b.path));
    members.dedup_by(|a, b| a.path == b.path);
    members
}

/// `usr/share/doc/<name>/*` (copyright, changelog) again under
/// `usr/share/doc/<package>/`: every Debian package carries its copyright.
fn doc_files(src: &Path, name: &str, package: &str, payload: &Payload) -> Result<Vec<OutMember>> {
    let from = format!("usr/share/doc/{name}/");
    let mut out = Vec::new();
    for (path, m) in &payload.members {
        let Some(rest) = path.strip_prefix(&from) else {
            continue;
        };
        if m.kind != Kind::File || rest.contains('/') {
            continue;
        }
        out.push(OutMember {
            path: format!("usr/share/doc/{package}/{rest}"),
            kind: Kind::File,
            mode: m.mode,
            source: Some(src.join(path)),
        });
    }
    for d in ["usr", "usr/share", "usr/share/doc"] {
        out.push(OutMember {
            path: d.into(),
            kind: Kind::Dir,
            mode: 0o755,
            source: None,
        });
    }
    out.push(OutMember {
        path: format!("usr/share/doc/{package}"),
        kind: Kind::Dir,
        mode: 0o755,
        source: None,
    });
    Ok(out)
}

/// A device package's control paragraph: the input's maintainer, section,
/// priority and homepage, its own name, dependencies and description.
fn device_control(
    input: &Control,
    package: &str,
    depends: &str,
    short: &str,
    long: &str,
) -> Control {
    let mut c = Control::default();
    c.set("Package", package);
    let source = input
        .get("Source")
        .or(input.get("Package"))
        .unwrap_or_default();
    c.set("Source", source);
    for f in ["Version", "Architecture", "Maintainer"] {
        c.set(f, input.get(f).unwrap_or_default());
    }
    c.set("Depends", depends);
    for f in ["Section", "Priority", "Homepage"] {
        if let Some(v) = input.get(f) {
            c.set(f, v);
        }
    }
    c.set("Description", format!("{short}\n{long}"));
    c
}

/// Write one `.deb` to `dest`; `data_tmp` is scratch for its payload.
fn write_deb(dest: &Path, p: &Planned, mtime: u64, data_tmp: &Path) -> Result<()> {
    let mut control = p.control.clone();
    control.set("Installed-Size", installed_size(&p.members)?.to_string());
    let mut files = p.extra.clone();
    files.push(("control".into(), 0o644, control.to_text().into_bytes()));
    let md5sums = md5sums(&p.members)?;
    if !md5sums.is_empty() {
        files.push(("md5sums".into(), 0o644, md5sums.into_bytes()));
    }
    let control_tar =
        tree::write_tar_files(&files, mtime).map_err(|e| Error::io(dest, "cannot write", e))?;
    let control_xz = xz(&control_tar).map_err(|e| Error::io(dest, "cannot compress", e))?;
    {
        let f =
            std::fs::File::create(data_tmp).map_err(|e| Error::io(data_tmp, "cannot create", e))?;
        let stream = xz_stream().map_err(|e| Error::io(data_tmp, "cannot compress", e))?;
        let mut enc = liblzma::write::XzEncoder::new_stream(std::io::BufWriter::new(f), stream);
        tree::write_tar(&mut enc, &p.members, mtime)
            .map_err(|e| Error::io(data_tmp, "cannot write", e))?;
        enc.finish()
            .and_then(|mut w| w.flush())
            .map_err(|e| Error::io(data_tmp, "cannot write", e))?;
    }
    let out = std::fs::File::create(dest).map_err(|e| Error::io(dest, "cannot create", e))?;
    let mut ar = ar::Builder::new(std::io::BufWriter::new(out));
    let header = |name: &str, size: u64| {
        let mut h = ar::Header::new(name.as_bytes().to_vec(), size);
        h.set_mode(0o100644);
        h.set_mtime(mtime);
        h
    };
    let data = std::fs::File::open(data_tmp).map_err(|e| Error::io(data_tmp, "cannot open", e))?;
    let data_len = data
        .metadata()
        .map_err(|e| Error::io(data_tmp, "cannot stat", e))?
        .len();
    let w = |e| Error::io(dest, "cannot write", e);
    ar.append(&header("debian-binary", 4), &b"2.0\n"[..])
        .map_err(w)?;
    ar.append(
        &header("control.tar.xz", control_xz.len() as u64),
        control_xz.as_slice(),
    )
    .map_err(w)?;
    ar.append(&header("data.tar.xz", data_len), data)
        .map_err(w)?;
    ar.into_inner().and_then(|mut b| b.flush()).map_err(w)?;
    std::fs::remove_file(data_tmp).map_err(|e| Error::io(data_tmp, "cannot remove", e))
}

/// Block size of the payload's xz stream: fixed, so the bytes are the
/// same at any thread count (xz -6's own block size, 3 × its 8 MiB
/// dictionary).
const XZ_BLOCK: u64 = 24 << 20;

/// An xz encoder at dpkg-deb's level 6 on up to four threads, in
/// `XZ_BLOCK` blocks.
fn xz_stream() -> std::io::Result<liblzma::stream::Stream> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    liblzma::stream::MtStreamBuilder::new()
        .preset(6)
        .threads(threads as u32)
        .block_size(XZ_BLOCK)
        .check(liblzma::stream::Check::Crc64)
        .encoder()
        .map_err(std::io::Error::other)
}

fn xz(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
    enc.write_all(bytes)?;
    enc.finish()
}

/// dpkg's `Installed-Size`: KiB per file rounded up, one per directory
/// and symlink.
fn installed_size(members: &[OutMember]) -> Result<u64> {
    let mut kib = 0;
    for m in members {
        kib += match &m.source {
            Some(s) => std::fs::metadata(s)
                .map_err(|e| Error::io(s, "cannot stat", e))?
                .len()
                .div_ceil(1024),
            None => 1,
        };
    }
    Ok(kib)
}

/// `md5sums`: one line per regular file, in path order.
fn md5sums(members: &[OutMember]) -> Result<String> {
    let mut s = String::new();
    for m in members {
        let Some(src) = &m.source else { continue };
        let bytes = std::fs::read(src).map_err(|e| Error::io(src, "cannot read", e))?;
        let d = fast_md5::digest(&bytes);
        let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&format!("{hex}  {}\n", m.path));
    }
    Ok(s)
}
