//! [`split_wheel`]: one fat wheel → a host wheel + one device wheel per GPU
//! processor, staged in a temporary directory inside the output directory
//! and renamed into place at the end.

mod text;
pub use text::human_bytes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_format::Compression;
use kpack_fsafe::{Order, Outputs};
use kpack_split::{BinaryReport, Databases, PrefixLayout, SplitOptions, split_prefix};
use serde::Serialize;
use zip::DateTime;

use crate::amd::{self, AmdLayout};
use crate::error::{Error, ErrorKind, Result};
use crate::headers::Headers;
use crate::job::{Entry, Source, WheelFile, WheelJob, entry_order};
use crate::name::{escape, is_valid_name, normalize};
use crate::pipeline::{self, Staged, refuse_device_wheel, refuse_input_dir};
use crate::progress;
use crate::reader::{Limits, Route, SPLIT_SCHEMES, Unpacked, list_files};
use crate::variant::VariantProvider;
use crate::writer::{ZIP_EPOCH, zip_time};
use kpack_job::Job;

/// How to split a wheel. Build it with [`WheelOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct WheelOptions<'a> {
    /// Device wheels are named `<device_prefix>-<processor>` (normalized:
    /// `torch-device-gfx90a`, file `torch_device_gfx90a-…whl`); `None`
    /// means `<host distribution>-device`.
    pub device_prefix: Option<String>,
    /// Where archives go, relative to the root of each install scheme
    /// (site-packages for the wheel's root), `/`-separated; `None` means
    /// `_<host distribution>_kpack`: a directory of its own at the top of
    /// site-packages, so device wheels of different processors overlay it
    /// without conflicts (each holds only `…_<processor>.kpack` files).
    pub archive_dir: Option<String>,
    /// Archive storage (default zstd level 3).
    pub compression: Compression,
    /// Check the MD5 of compressed bundles.
    pub verify_hash: bool,
    /// Database classifier (the `--split-databases` handlers), if any.
    pub databases: Option<&'a dyn Databases>,
    /// Timestamp of every zip entry, seconds since the Unix epoch (clamped
    /// to zip's 1980–2107); default 1980-01-01. The CLI takes it from
    /// `SOURCE_DATE_EPOCH`.
    pub mtime: u64,
    /// Do everything in the staging directory, report, and write nothing
    /// to the output directory.
    pub dry_run: bool,
    /// How much the input may inflate to (zip-bomb guards).
    pub limits: Limits,
    /// Which GPU targets to keep (`--gpu-targets`, `--exclude-arch`).
    pub targets: kpack_amdgpu::TargetFilter,
    /// Group device wheels by a level of ROCm's packaging hierarchy
    /// (`--group`): one wheel `<device_prefix>-<dist name>` per target,
    /// sub-family (`gfx110x`, `gfx12-5`) or family (`gfx11`), and the host
    /// wheel's METADATA gains a `device-<dist name>` extra per device wheel
    /// plus `device-all`. `None`: one wheel per processor and the host
    /// METADATA unchanged (the behaviour before grouping existed).
    pub group: Option<kpack_amdgpu::Level>,
    /// One archive per processor, sub-family or family (`--archive-group`);
    /// a device wheel holds the group archives of its members. Coarser than
    /// [`group`](Self::group) is an error: one archive cannot be split
    /// across device wheels.
    pub archive_group: kpack_amdgpu::Level,
    /// AMD's layout, names and metadata (`--overlay-root`) instead of
    /// kpack's; [`device_prefix`](Self::device_prefix) is then required
    /// and [`group`](Self::group), [`archive_dir`](Self::archive_dir) and
    /// [`archive_group`](Self::archive_group) are left at their defaults.
    pub amd: Option<AmdLayout>,
    /// kpack's layout with [`group`](Self::group): when set, also write
    /// the variant wheels of the PEP 850 layout, one per device wheel
    /// labelled by its key, and `<name>-<version>-variants.json` beside
    /// them ([`crate::label_wheels`]); the label given here is AMD's only.
    pub variant_label: Option<String>,
    /// The provider the variant wheels name (kpack's layout).
    pub variant_provider: VariantProvider,
}

impl std::fmt::Debug for WheelOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WheelOptions")
            .field("device_prefix", &self.device_prefix)
            .field("archive_dir", &self.archive_dir)
            .field("compression", &self.compression)
            .field("verify_hash", &self.verify_hash)
            .field("databases", &self.databases.is_some())
            .field("mtime", &self.mtime)
            .field("dry_run", &self.dry_run)
            .field("limits", &self.limits)
            .field("targets", &self.targets)
            .field("group", &self.group)
            .field("archive_group", &self.archive_group)
            .field("amd", &self.amd)
            .field("variant_label", &self.variant_label)
            .field("variant_provider", &self.variant_provider)
            .finish()
    }
}

impl WheelOptions<'_> {
    /// Defaults: `<name>-device` wheels, archives in `_<name>_kpack`,
    /// zstd, hashes checked, no databases, timestamps 1980-01-01.
    pub fn new() -> WheelOptions<'static> {
        WheelOptions {
            device_prefix: None,
            archive_dir: None,
            compression: Compression::default(),
            verify_hash: true,
            databases: None,
            mtime: ZIP_EPOCH,
            dry_run: false,
            limits: Limits::default(),
            targets: kpack_amdgpu::TargetFilter::default(),
            group: None,
            archive_group: kpack_amdgpu::Level::Target,
            amd: None,
            variant_label: None,
            variant_provider: VariantProvider::Kpack,
        }
    }
}

impl Default for WheelOptions<'_> {
    fn default() -> Self {
        WheelOptions::new()
    }
}

/// One device wheel.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceWheel {
    /// GPU processor (`gfx90a`), or the group's bundle key with
    /// [`WheelOptions::group`] (`gfx110x`, `gfx12_5`).
    pub arch: String,
    /// With [`WheelOptions::group`]: the processors in the wheel.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// With [`WheelOptions::group`]: the host wheel's extra that installs
    /// it (`device-gfx110x`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
    /// The wheel.
    #[serde(flatten)]
    pub wheel: WheelFile,
    /// `.kpack` archives in it, wheel paths.
    pub archives: Vec<String>,
    /// Database and device files in it (everything else), wheel paths.
    pub database_files: Vec<String>,
}

/// What [`split_wheel`] did.
#[derive(Debug, Clone, Serialize)]
pub struct WheelReport {
    /// The input wheel.
    pub input: WheelFile,
    /// Version as in METADATA.
    pub version: String,
    /// Tags from WHEEL.
    pub tags: Vec<String>,
    /// Whether the wheel had device code. Without any, it is copied to the
    /// output directory unchanged and there are no device wheels.
    pub device_code: bool,
    /// The host wheel (the copy, without device code).
    pub host: WheelFile,
    /// Device wheels, by processor.
    pub devices: Vec<DeviceWheel>,
    /// Offloaded binaries (paths are wheel paths).
    pub binaries: Vec<BinaryReport>,
    /// Database files per handler, per verdict (arch or `generic`).
    pub databases: BTreeMap<String, BTreeMap<String, u64>>,
    /// Problems that did not stop the split.
    pub warnings: Vec<String>,
    /// Code objects and database files the target filter dropped, per target.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub excluded: BTreeMap<String, u64>,
    /// The variant wheels (experimental): AMD's one, or one per label.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<WheelFile>,
    /// The `<name>-<version>-variants.json` written beside them, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variants_json: Option<String>,
    /// Wheels (or with `--output-format directory`, directories) that
    /// existed already with the same bytes and were left alone: a rerun.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub identical: Vec<String>,
}

impl WheelReport {
    /// The processors that got a device wheel.
    pub fn archs(&self) -> Vec<&str> {
        self.devices.iter().map(|d| d.arch.as_str()).collect()
    }
}

/// Split `input` into `out_dir` (created if missing; must not be the
/// input's directory, since the host wheel has the input's file name).
///
/// Phases: read (unpack and check), transform (each scheme tree split by
/// [`split_prefix`]), plan (the host wheel and one device wheel per
/// group), write (all wheels, in parallel) and commit (renamed into place).
/// On the job's threads, under its memory budget, with its rule for
/// wheels that exist already; phases reported to its progress sink.
pub fn split_wheel(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &WheelOptions<'_>,
) -> Result<WheelReport> {
    job.install(|| split_on(job, input, out_dir, opts))
}

/// [`split_wheel`], on the job's threads.
fn split_on(
    job: &Job,
    input: &Path,
    out_dir: &Path,
    opts: &WheelOptions<'_>,
) -> Result<WheelReport> {
    check_archive_group(input, opts)?;
    refuse_input_dir(input, out_dir, "the host wheel")?;
    let progress = Some(job.progress());
    // Staged next to the outputs so the final renames stay on one file
    // system; a dry run stages in the system's temp directory instead.
    let outputs = pipeline::outputs(job, out_dir, opts.dry_run)?;
    let staging_in = pipeline::scratch(outputs.as_ref())?;
    let st = pipeline::read(input, &staging_in, &opts.limits, progress)?;
    let names = Names::of(input, &st.un, opts)?;
    refuse_device_wheel(input, &st.un, "split")?;
    let mut warnings = st.un.warnings.clone();
    let tags: Vec<String> = st.un.wheel.get_all("Tag").map(str::to_string).collect();
    progress::phase(progress, "offloading device code", 0);
    let split = split_schemes(job, input, &st, &names, opts, &mut warnings)?;
    let out_stage = pipeline::create_dir_in(st.path(), "out")?;
    let input_report = pipeline::input_report(input, &st.un, &names.host);
    let mut report = WheelReport {
        host: WheelFile {
            path: out_dir.join(&input_report.file),
            ..input_report.clone()
        },
        input: input_report,
        version: names.version.clone(),
        tags,
        device_code: false,
        devices: Vec::new(),
        binaries: split.binaries,
        databases: split.databases,
        warnings: Vec::new(),
        excluded: split.excluded,
        variants: Vec::new(),
        variants_json: None,
        identical: Vec::new(),
    };
    if report.binaries.is_empty() && split.archs.is_empty() {
        // Nothing to split: the wheel is its own host wheel.
        if pipeline::copy_unchanged(input, outputs, &report.host.file)? {
            report.identical.push(report.host.file.clone());
        }
        report.warnings = warnings;
        return Ok(report);
    }
    let rewritten: BTreeSet<&str> = report.binaries.iter().map(|b| b.path.as_str()).collect();
    let level = opts
        .amd
        .as_ref()
        .map_or(opts.group, |_| Some(kpack_amdgpu::Level::Target));
    let jobs = plan_jobs(
        input,
        &st,
        &names,
        &split.archs,
        &rewritten,
        opts,
        &mut warnings,
    )?;
    let time = zip_time(opts.mtime);
    let written = pipeline::write_all(&jobs, input, &out_stage, time, progress)?;
    let amd = opts.amd.is_some();
    record_written(&mut report, &jobs, written, out_dir, level.is_some(), amd);
    write_variants(&jobs, &st, opts, (input, out_dir), time, &mut report)?;
    let files = output_files(&jobs, &out_stage, out_dir, opts, &mut report)?;
    if let Some(outputs) = outputs {
        report.identical = commit_wheels(outputs, &files, &out_stage)?;
    }
    report.binaries.sort_by(|a, b| a.path.cmp(&b.path));
    report.device_code = true;
    report.warnings = warnings;
    Ok(report)
}

/// Write the variant wheels (experimental), if asked for, into the staging
/// output directory next to the others, and the `*-variants.json` if the
/// layout has one; both into `report`.
fn write_variants(
    jobs: &[WheelJob],
    st: &Staged,
    opts: &WheelOptions<'_>,
    (input, out_dir): (&Path, &Path),
    time: DateTime,
    report: &mut WheelReport,
) -> Result<()> {
    let variant = match &opts.amd {
        Some(a) => a.variant_label.as_deref().map(|l| (a.variant_provider, l)),
        None => opts
            .variant_label
            .as_deref()
            .map(|l| (opts.variant_provider, l)),
    };
    let Some(provider) = variant else {
        return Ok(());
    };
    // AMD's extras are per target: its parents get no variant.
    let keys: BTreeSet<String> = jobs
        .iter()
        .filter_map(|j| j.arch.clone())
        .filter(|k| opts.amd.is_none() || !crate::name::is_parent(k))
        .collect();
    let (vjobs, index) =
        crate::variant::variant_jobs(&jobs[0], &st.un, provider, &keys, st.path())?;
    let out_stage = st.path().join("out");
    let written = pipeline::write_all(&vjobs, input, &out_stage, time, None)?;
    report.variants = vjobs
        .into_iter()
        .zip(written)
        .map(|(job, (bytes, files))| WheelFile {
            path: out_dir.join(&job.file),
            file: job.file,
            distribution: job.distribution,
            bytes,
            files,
        })
        .collect();
    if let Some((name, text)) = index {
        let p = out_stage.join(&name);
        kpack_fsafe::write_atomically(&p, "wheel", text.as_bytes(), None)
            .map_err(|e| Error::io(e.path, e.what, e.source))?;
        report.variants_json = Some(name);
    }
    Ok(())
}

/// Plan phase: the host wheel's job and one per device wheel (the
/// processors or groups of `archs`).
fn plan_jobs(
    input: &Path,
    st: &Staged,
    names: &Names,
    archs: &BTreeSet<String>,
    rewritten: &BTreeSet<&str>,
    opts: &WheelOptions<'_>,
    warnings: &mut Vec<String>,
) -> Result<Vec<WheelJob>> {
    let amd = opts.amd.as_ref();
    let mut jobs = vec![host_job(st, names, rewritten, amd, warnings)?];
    let level = amd.map_or(opts.group, |_| Some(kpack_amdgpu::Level::Target));
    let groups = group_archs(archs, level, warnings);
    if level.is_some() {
        extras_metadata(st, names, &groups, amd, &mut jobs[0])?;
    }
    let keys: BTreeSet<String> = groups.keys().cloned().collect();
    for (key, members) in &groups {
        let mut job = device_job(input, st, names, key, members)?;
        if let Some(a) = amd {
            amd_dist_info(&mut job, &st.un, names, key, &keys, a);
        }
        jobs.push(job);
    }
    refuse_alike_names(input, &jobs)?;
    Ok(jobs)
}

/// The names of the staged outputs to commit: the wheels, or with
/// `--output-format directory` the directories they were unpacked into
/// (the report then names those).
fn output_files(
    jobs: &[WheelJob],
    out_stage: &Path,
    out_dir: &Path,
    opts: &WheelOptions<'_>,
    report: &mut WheelReport,
) -> Result<Vec<String>> {
    let mut files: Vec<String> = jobs.iter().map(|j| j.file.clone()).collect();
    files.extend(report.variants.iter().map(|v| v.file.clone()));
    if !opts.amd.as_ref().is_some_and(|a| a.directories) {
        files.extend(report.variants_json.clone());
        return Ok(files);
    }
    let dirs = unpack_outputs(out_stage, &files)?;
    for (w, f) in std::iter::once(&mut report.host)
        .chain(report.devices.iter_mut().map(|d| &mut d.wheel))
        .chain(report.variants.iter_mut())
        .zip(&dirs)
    {
        w.path = out_dir.join(f);
        w.file = f.clone();
    }
    let mut dirs = dirs;
    dirs.extend(report.variants_json.clone());
    Ok(dirs)
}

/// The names a split derives from the input and the options.
struct Names {
    /// The host distribution, as in METADATA.
    host: String,
    /// Its version, as in METADATA.
    version: String,
    /// Device wheels are `<device_prefix>-<dist name>`, normalised.
    device_prefix: String,
    /// Where archives go in each scheme tree (a plain relative path).
    archive_dir: String,
}

impl Names {
    fn of(input: &Path, un: &Unpacked, opts: &WheelOptions<'_>) -> Result<Names> {
        let host = un
            .metadata
            .get("Name")
            .unwrap_or(&un.name.distribution)
            .to_string();
        let version = un
            .metadata
            .get("Version")
            .unwrap_or(&un.name.version)
            .to_string();
        // Normalised (PEP 503): device wheels are projects of their own,
        // `amd-mori-device-gfx942`, never `amd_mori-device-gfx942`.
        let device_prefix = normalize(
            opts.device_prefix
                .as_deref()
                .unwrap_or(&format!("{host}-device")),
        );
        let archive_dir = match (&opts.amd, &opts.archive_dir) {
            // Relative to the overlay root, the only tree split.
            (Some(_), _) => ".kpack".to_string(),
            (None, Some(d)) => d.clone(),
            (None, None) => format!("_{}_kpack", escape(&host)),
        };
        if !kpack_fsafe::is_plain_relative(&archive_dir) {
            return Err(Error::invalid(
                input,
                format!("archive directory {archive_dir:?} is not a plain relative path"),
            ));
        }
        Ok(Names {
            host,
            version,
            device_prefix,
            archive_dir,
        })
    }
}

/// What splitting the scheme trees gave, merged (paths are wheel paths).
struct SchemeSplit {
    binaries: Vec<BinaryReport>,
    databases: BTreeMap<String, BTreeMap<String, u64>>,
    archs: BTreeSet<String>,
    excluded: BTreeMap<String, u64>,
}

impl SchemeSplit {
    /// Take in the report `r` of the scheme tree `scheme`/`sub` (paths made
    /// wheel paths, warnings without the staging directory); the archives
    /// it wrote, as (arch, path).
    fn absorb(
        &mut self,
        st: &Staged,
        (scheme, sub): (&str, &str),
        r: &kpack_split::PrefixReport,
        warnings: &mut Vec<String>,
    ) -> Vec<(String, PathBuf)> {
        let in_tree = |rel: &str| match sub.is_empty() {
            true => rel.to_string(),
            false => format!("{sub}/{rel}"),
        };
        for (t, n) in &r.excluded {
            *self.excluded.entry(t.clone()).or_default() += n;
        }
        for b in &r.binaries {
            let mut b = b.clone();
            b.path = Unpacked::wheel_path(&st.un.data_dir, scheme, &in_tree(&b.path));
            self.binaries.push(b);
        }
        kpack_split::add_verdict_counts(&mut self.databases, &r.databases);
        self.archs.extend(r.bytes_out_arch.keys().cloned());
        let src_root = st.src().join(scheme);
        warnings.extend(
            r.warnings
                .iter()
                .map(|w| w.replace(&format!("{}/", src_root.display()), "")),
        );
        r.archives
            .iter()
            .map(|a| {
                let dir = under(&st.path().join("dev").join(&a.arch).join(scheme), sub);
                (a.arch.clone(), dir.join(&a.path))
            })
            .collect()
    }
}

/// Transform phase: each scheme tree of the staging directory split into
/// `host/<scheme>` and `dev/<arch>/<scheme>`.
/// Commit the wheels `files` (the host wheel first) staged in `out_stage`;
/// the ones left alone as identical. The host wheel moves into place
/// last: until then nothing installs the device wheels it names.
fn commit_wheels(outputs: Outputs, files: &[String], out_stage: &Path) -> Result<Vec<String>> {
    let files: Vec<(&str, Order)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_str(), if i == 0 { Order::Last } else { Order::First }))
        .collect();
    pipeline::commit(outputs, &files, out_stage)
}

fn split_schemes(
    job: &Job,
    input: &Path,
    st: &Staged,
    names: &Names,
    opts: &WheelOptions<'_>,
    warnings: &mut Vec<String>,
) -> Result<SchemeSplit> {
    let mut out = SchemeSplit {
        binaries: Vec::new(),
        databases: BTreeMap::new(),
        archs: BTreeSet::new(),
        excluded: BTreeMap::new(),
    };
    if let Some(a) = &opts.amd {
        check_overlay_root(input, &st.un, a)?;
    }
    // AMD's layout splits the overlay root only; everything else is kept.
    let trees: Vec<(&'static str, &str)> = match &opts.amd {
        None => SPLIT_SCHEMES.iter().map(|s| (*s, "")).collect(),
        Some(a) => vec![("root", a.overlay_root.as_str())],
    };
    let mut reports = Vec::new();
    for (scheme, sub) in trees {
        let source = under(&st.src().join(scheme), sub);
        if source.is_dir() {
            reports.push((
                scheme,
                sub,
                split_scheme(job, input, st, names, opts, scheme, sub)?,
            ));
        }
    }
    let mut parts = Vec::new();
    for (scheme, sub, r) in &reports {
        parts.extend(out.absorb(st, (scheme, sub), r, warnings));
    }
    if let Some(a) = &opts.amd {
        if out.binaries.is_empty() {
            return Err(Error::invalid(
                input,
                format!("no fat binaries under the overlay root {}/", a.overlay_root),
            ));
        }
        let group = amd::group_name(&names.host);
        kpack_split::merge_archives(&parts, &group, opts.compression, &st.path().join("merge"))
            .map_err(|e| Error::split(input, e))?;
    }
    Ok(out)
}

/// `base/sub`, or `base` for an empty `sub`.
fn under(base: &Path, sub: &str) -> PathBuf {
    if sub.is_empty() {
        base.to_path_buf()
    } else {
        base.join(sub)
    }
}

/// One scheme tree split by [`split_prefix`].
fn split_scheme(
    job: &Job,
    input: &Path,
    st: &Staged,
    names: &Names,
    opts: &WheelOptions<'_>,
    scheme: &'static str,
    sub: &str,
) -> Result<kpack_split::PrefixReport> {
    let source = under(&st.src().join(scheme), sub);
    let component = if scheme == "root" {
        escape(&names.host)
    } else {
        format!("{}.{scheme}", escape(&names.host))
    };
    let mut so = SplitOptions::new(component, job);
    so.archive_dir = names.archive_dir.clone();
    so.compression = opts.compression;
    so.verify_hash = opts.verify_hash;
    so.databases = opts.databases;
    so.targets = opts.targets.clone();
    so.archive_group = opts.archive_group;
    if opts.amd.is_some() {
        // One archive per target id for the whole wheel, compressed when
        // the per-binary archives are merged into it.
        so.shared_archive = Some(amd::group_name(&names.host));
        so.compression = Compression::None;
    }
    let dev_root = st.path().join("dev");
    let sub_owned = sub.to_string();
    let arch = move |a: &str| under(&dev_root.join(a).join(scheme), &sub_owned);
    let generic = under(&st.path().join("host").join(scheme), sub);
    let layout = PrefixLayout {
        source: &source,
        prefix: "",
        generic: &generic,
        arch: &arch,
    };
    let report = split_prefix(&layout, &so).map_err(|e| {
        let scheme_root = st.src().join(scheme);
        split_error(input, &st.un, &scheme_root, scheme, e)
    })?;
    if !report.errors.is_empty() {
        return Err(Error::new(
            ErrorKind::Split,
            Some(input.to_path_buf()),
            format!(
                "{} file(s) could not be split:\n  {}",
                report.errors.len(),
                report.errors.join("\n  ")
            ),
        ));
    }
    Ok(report)
}

/// A [`split_prefix`] error; kpack's own outputs are named by their wheel
/// entry, not the staging path they were unpacked to.
fn split_error(
    input: &Path,
    un: &Unpacked,
    source: &Path,
    scheme: &str,
    e: kpack_split::Error,
) -> Error {
    if e.kind() != kpack_split::ErrorKind::AlreadySplit {
        return Error::split(input, e);
    }
    let entry = e
        .path()
        .and_then(|p| p.strip_prefix(source).ok())
        .and_then(|p| p.to_str())
        .map(|rel| Unpacked::wheel_path(&un.data_dir, scheme, rel))
        .unwrap_or_default();
    // The split error names the staging path; this message says all of it
    // with the wheel's own entry name instead.
    let (what, why) = match e.path() {
        Some(p) if p.extension().is_some_and(|x| x == "kpack") => {
            ("a device wheel", "is a kpack archive")
        }
        _ => ("a host wheel", "is already offloaded by kpack"),
    };
    Error::new(
        ErrorKind::AlreadySplit,
        Some(input.to_path_buf()),
        format!(
            "{what} written by kpack wheel split ({entry} {why}): split the original fat wheel instead"
        ),
    )
}

/// Plan phase, host wheel: the split trees, the kept files, the input's
/// directory entries; RECORD regenerated (signatures of the old RECORD
/// dropped).
fn host_job(
    st: &Staged,
    names: &Names,
    rewritten: &BTreeSet<&str>,
    amd: Option<&AmdLayout>,
    warnings: &mut Vec<String>,
) -> Result<WheelJob> {
    let un = &st.un;
    let mut entries = Vec::new();
    for scheme in SPLIT_SCHEMES {
        for (rel, p) in list_files(&st.path().join("host").join(scheme))? {
            let path = Unpacked::wheel_path(&un.data_dir, scheme, &rel);
            let len = std::fs::metadata(&p)
                .map_err(|e| Error::io(&p, "cannot stat", e))?
                .len();
            let (src, mode) = match un.files.get(&path) {
                // Copied by the splitter, not rewritten: reuse the input's bytes.
                Some(f) if !rewritten.contains(path.as_str()) && f.size == len => {
                    (pipeline::raw(f), f.mode)
                }
                Some(f) => (Source::Disk(p), f.mode),
                None => (Source::Disk(p), 0o644),
            };
            entries.push(Entry { path, src, mode });
        }
    }
    // Files of no split tree are the input's: the dist-info, other
    // `.data` schemes, and in AMD's layout all outside the overlay root.
    let split_here = |path: &str| match (un.route(path), amd) {
        (Route::Keep, _) => false,
        (Route::Split(..), None) => true,
        (Route::Split(scheme, rel), Some(a)) => {
            scheme == "root" && rel.starts_with(&format!("{}/", a.overlay_root))
        }
    };
    for (path, meta) in pipeline::files_but_record(un, "the host wheel", warnings) {
        if !split_here(path) {
            entries.push(Entry {
                path: path.clone(),
                src: pipeline::raw(meta),
                mode: meta.mode,
            });
        }
    }
    entries.sort_by_cached_key(|e| entry_order(&un.dist_info, &e.path));
    Ok(WheelJob {
        file: un.name.to_string(),
        distribution: names.host.clone(),
        arch: None,
        members: Vec::new(),
        dirs: un.dirs.iter().map(|(d, m)| (d.clone(), *m)).collect(),
        entries,
        generated: Vec::new(),
        record: format!("{}/RECORD", un.dist_info),
    })
}

/// With grouping, the host wheel's METADATA gains the `device-*` extras
/// (in AMD's layout, AMD's lines inserted into the input's text).
fn extras_metadata(
    st: &Staged,
    names: &Names,
    groups: &BTreeMap<String, Vec<String>>,
    amd: Option<&AmdLayout>,
    host: &mut WheelJob,
) -> Result<()> {
    let path = format!("{}/METADATA", st.un.dist_info);
    let text = match amd {
        Some(_) => {
            let keys: BTreeSet<String> = groups.keys().cloned().collect();
            let (prefix, version) = (&names.device_prefix, &names.version);
            amd::host_metadata(&st.un.metadata_text, prefix, version, &keys)
        }
        None => host_metadata(
            &st.un.metadata,
            groups,
            &names.device_prefix,
            &names.version,
        )
        .to_string(),
    };
    let file = pipeline::write_new(st.path(), "host-METADATA", text.as_bytes())?;
    if let Some(e) = host.entries.iter_mut().find(|e| e.path == path) {
        e.src = Source::Disk(file);
    }
    Ok(())
}

/// Plan phase, the device wheel of group `key`: the device trees of its
/// `members`, at the host's paths under its own `.data` directory.
fn device_job(
    input: &Path,
    st: &Staged,
    names: &Names,
    key: &str,
    members: &[String],
) -> Result<WheelJob> {
    let un = &st.un;
    let dist = format!("{}-{}", names.device_prefix, kpack_amdgpu::dist_name(key));
    if !is_valid_name(&dist) {
        return Err(Error::invalid(
            input,
            format!(
                "device wheel name {dist:?} is not a valid distribution name (check --device-prefix)"
            ),
        ));
    }
    let name = un.name.with_distribution(&dist);
    let data_dir = format!("{}.data", name.dist_stem());
    let dist_info = format!("{}.dist-info", name.dist_stem());
    let mut entries = Vec::new();
    for arch in members {
        for scheme in SPLIT_SCHEMES {
            for (rel, p) in list_files(&st.path().join("dev").join(arch).join(scheme))? {
                let host_path = Unpacked::wheel_path(&un.data_dir, scheme, &rel);
                let mode = un.files.get(&host_path).map_or(0o644, |f| f.mode);
                let entry = Entry {
                    path: Unpacked::wheel_path(&data_dir, scheme, &rel),
                    src: Source::Disk(p),
                    mode,
                };
                entries.push((entry, arch.as_str()));
            }
        }
    }
    // Stable: of equal paths, the members' order stays.
    entries.sort_by_cached_key(|(e, _)| entry_order(&dist_info, &e.path));
    let entries = merge_payloads(input, &dist, entries)?;
    let label = if members != std::slice::from_ref(&key.to_string()) {
        format!("{key} ({})", members.join(", "))
    } else {
        key.to_string()
    };
    let generated = vec![
        (
            format!("{dist_info}/METADATA"),
            device_metadata(&dist, &names.host, &names.version, &label).to_string(),
        ),
        (
            format!("{dist_info}/WHEEL"),
            device_wheel_file(un).to_string(),
        ),
    ];
    Ok(WheelJob {
        file: name.to_string(),
        distribution: dist,
        arch: Some(key.to_string()),
        members: members.to_vec(),
        dirs: Vec::new(),
        entries,
        generated,
        record: format!("{dist_info}/RECORD"),
    })
}

/// The payloads of a device wheel's members (a target, its `-strict`
/// variant, its xnack variants: `entries` sorted by path, each with its
/// member) merged as AMD's splitter and TheRock merge them: one path from
/// two members is kept once when the bytes and mode are equal, and refused
/// naming both members when they differ ("Conflicting device path"); a
/// file where another member has a directory is refused too ("Conflicting
/// device entry types").
fn merge_payloads(input: &Path, dist: &str, entries: Vec<(Entry, &str)>) -> Result<Vec<Entry>> {
    let mut out: Vec<(Entry, &str)> = Vec::with_capacity(entries.len());
    for (e, member) in entries {
        if let Some((prev, first)) = out.last().filter(|(p, _)| p.path == e.path) {
            let same = match (&prev.src, &e.src) {
                (Source::Disk(a), Source::Disk(b)) => {
                    prev.mode == e.mode && kpack_fsafe::first_difference(a, b).is_none()
                }
                _ => false,
            };
            if !same {
                return Err(Error::invalid(
                    input,
                    format!(
                        "Conflicting device path {} in device wheel {dist}: {first} and {member} write different files there",
                        e.path
                    ),
                ));
            }
            continue;
        }
        out.push((e, member));
    }
    let owner: BTreeMap<&str, &str> = out.iter().map(|(e, m)| (e.path.as_str(), *m)).collect();
    for (e, member) in &out {
        let mut dir = e.path.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if let Some(other) = owner.get(parent) {
                return Err(Error::invalid(
                    input,
                    format!(
                        "Conflicting device entry types in device wheel {dist}: {parent} is a file of {other} and a directory of {member} ({})",
                        e.path
                    ),
                ));
            }
            dir = parent;
        }
    }
    Ok(out.into_iter().map(|(e, _)| e).collect())
}

/// A device wheel's dist-info in AMD's layout: AMD's METADATA and WHEEL,
/// and `top_level.txt` naming the overlay root.
fn amd_dist_info(
    job: &mut WheelJob,
    un: &Unpacked,
    names: &Names,
    key: &str,
    keys: &BTreeSet<String>,
    a: &AmdLayout,
) {
    let dist_info = job.record.trim_end_matches("/RECORD").to_string();
    let metadata = amd::device_metadata(
        &names.device_prefix,
        key,
        &names.host,
        &names.version,
        keys,
        &a.device_requires_dist,
    );
    job.generated = vec![
        (format!("{dist_info}/METADATA"), metadata),
        (format!("{dist_info}/WHEEL"), amd::wheel_file(&un.wheel)),
        (
            format!("{dist_info}/top_level.txt"),
            format!("{}\n", a.overlay_root),
        ),
    ];
}

/// AMD's layout puts `.kpack/` into the overlay root: it must be a
/// directory of the wheel's root (where a fat binary can be), refused
/// before anything is split otherwise.
fn check_overlay_root(input: &Path, un: &Unpacked, a: &AmdLayout) -> Result<()> {
    let inside = format!("{}/", a.overlay_root);
    let found = un
        .files
        .keys()
        .any(|p| matches!(un.route(p), Route::Split("root", rel) if rel.starts_with(&inside)));
    if !found {
        return Err(Error::invalid(
            input,
            format!(
                "overlay root '{}' does not exist in wheel (no file under {inside} outside .data and .dist-info)",
                a.overlay_root
            ),
        ));
    }
    Ok(())
}

/// `--output-format directory`: each staged wheel `files` unpacked into
/// a directory named for it without `.whl` (AMD's spelling), the zip
/// removed. Returns the directories' names.
fn unpack_outputs(out_stage: &Path, files: &[String]) -> Result<Vec<String>> {
    let mut dirs = Vec::new();
    for f in files {
        let zip_path = out_stage.join(f);
        let dir = f.trim_end_matches(".whl").to_string();
        let file =
            std::fs::File::open(&zip_path).map_err(|e| Error::io(&zip_path, "cannot open", e))?;
        let mut z =
            zip::ZipArchive::new(file).map_err(|e| Error::zip(&zip_path, "not a zip file", e))?;
        z.extract(out_stage.join(&dir))
            .map_err(|e| Error::zip(&zip_path, "cannot unpack", e))?;
        std::fs::remove_file(&zip_path).map_err(|e| Error::io(&zip_path, "cannot remove", e))?;
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Two wheels whose distribution names normalise alike (targets `gfx1_30`
/// and `gfx1-30`) would be one file and one project to pip: refused before
/// anything is written.
fn refuse_alike_names(input: &Path, jobs: &[WheelJob]) -> Result<()> {
    let mut seen: BTreeMap<String, &WheelJob> = BTreeMap::new();
    for job in jobs {
        if let Some(other) = seen.insert(normalize(&job.distribution), job) {
            let what = |j: &WheelJob| j.arch.clone().unwrap_or_else(|| "the host".into());
            return Err(Error::invalid(
                input,
                format!(
                    "the device wheels of {} and {} would both be {}: their names normalise alike",
                    what(other),
                    what(job),
                    job.file
                ),
            ));
        }
    }
    Ok(())
}

/// The written wheels (size and file count per job) into `report`.
fn record_written(
    report: &mut WheelReport,
    jobs: &[WheelJob],
    written: Vec<(u64, usize)>,
    out_dir: &Path,
    grouped: bool,
    amd: bool,
) {
    for (job, (bytes, files)) in jobs.iter().zip(written) {
        let wf = WheelFile {
            file: job.file.clone(),
            path: out_dir.join(&job.file),
            distribution: job.distribution.clone(),
            bytes,
            files,
        };
        match &job.arch {
            None => report.host = wf,
            Some(arch) => {
                let mut d = device_report(job, arch, wf, grouped);
                if amd {
                    d.extra = amd::extra(arch);
                }
                report.devices.push(d);
            }
        }
    }
}

/// The report of a written device wheel.
fn device_report(job: &WheelJob, arch: &str, wheel: WheelFile, grouped: bool) -> DeviceWheel {
    let (archives, database_files) = job
        .entries
        .iter()
        .map(|e| e.path.clone())
        .partition(|p| p.ends_with(".kpack"));
    DeviceWheel {
        arch: arch.to_string(),
        targets: if grouped {
            job.members.clone()
        } else {
            Vec::new()
        },
        extra: grouped.then(|| extra_name(arch)),
        wheel,
        archives,
        database_files,
    }
}

/// `--archive-group` coarser than `--group` (no `--group`: per target)
/// would put one archive into several device wheels: refused before
/// anything is written.
///
/// With [`WheelOptions::amd`], also [`AmdLayout::check`].
pub fn check_archive_group(input: &Path, opts: &WheelOptions<'_>) -> Result<()> {
    if let Some(a) = &opts.amd {
        a.check(input, opts.device_prefix.as_deref())?;
    }
    let wheels = opts.group.unwrap_or(kpack_amdgpu::Level::Target);
    if opts.archive_group > wheels {
        return Err(Error::invalid(
            input,
            format!(
                "--archive-group {} is coarser than the device wheels' --group {}: one archive would span several wheels",
                opts.archive_group.as_str(),
                wheels.as_str()
            ),
        ));
    }
    Ok(())
}

/// The device-wheel bundle key at `level` of an arch tree named for an
/// archive group (`gfx110x`, `gfx9-0`, `gfx11`), or `None` for a
/// processor. A family archive is its family's wheel at any level (the
/// `gfx11-generic` archive at `--archive-group sub-family` is `gfx11`).
fn archive_group_key(arch: &str, level: kpack_amdgpu::Level) -> Option<String> {
    let (gl, key) = kpack_amdgpu::archive_group_level(arch)?;
    let sub = kpack_amdgpu::SUB_FAMILIES.iter().find(|s| s.key == key);
    Some(match (gl, level, sub) {
        (kpack_amdgpu::Level::SubFamily, kpack_amdgpu::Level::Family, Some(s)) => {
            s.family.to_string()
        }
        _ => key.to_string(),
    })
}

/// Device wheels: bundle key → processors, in key order. Without grouping
/// every processor is its own wheel. A processor rocm-bootstrap does not
/// place (`gfx803`) keeps a wheel of its own, with a warning.
fn group_archs(
    archs: &BTreeSet<String>,
    level: Option<kpack_amdgpu::Level>,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for arch in archs {
        let key = match level {
            None => arch.clone(),
            Some(l) => archive_group_key(arch, l)
                .or_else(|| kpack_amdgpu::bundle_key(arch, l))
                .unwrap_or_else(|| {
                warnings.push(format!(
                    "{arch} is in no {} of ROCm's packaging hierarchy: it gets a device wheel of its own",
                    l.as_str()
                ));
                arch.clone()
            }),
        };
        groups.entry(key).or_default().push(arch.clone());
    }
    groups
}

/// The host extra that installs the device wheel of bundle `key`.
fn extra_name(key: &str) -> String {
    format!("device-{}", kpack_amdgpu::dist_name(key))
}

/// The host wheel's METADATA with one `device-<dist name>` extra per
/// device wheel and `device-all` for every one, each pinned to this
/// release. Extras need core metadata 2.1.
fn host_metadata(
    metadata: &Headers,
    groups: &BTreeMap<String, Vec<String>>,
    device_prefix: &str,
    version: &str,
) -> Headers {
    let mut h = Headers::new();
    for (name, value) in metadata.fields() {
        let old = name.eq_ignore_ascii_case("Metadata-Version") && value.starts_with("1.");
        h.push(name, if old { "2.1" } else { value });
    }
    let dist = |k: &str| format!("{device_prefix}-{}", kpack_amdgpu::dist_name(k));
    // A group's extra also pulls the wheels holding generic code that runs
    // on its processors (`gfx11-generic` for `gfx110x` when grouping by
    // sub-family): the loader falls back to it for kernels built generic only.
    let generics: Vec<(&str, &str)> = groups
        .iter()
        .flat_map(|(k, ms)| ms.iter().map(move |m| (k.as_str(), m.as_str())))
        .filter(|(_, m)| kpack_amdgpu::is_generic(m))
        .collect();
    for (key, members) in groups {
        let extra = extra_name(key);
        let mut needs = BTreeSet::from([key.as_str()]);
        for (gkey, g) in &generics {
            let covered = kpack_amdgpu::covered_by(g).unwrap_or_default();
            if members.iter().any(|m| covered.contains(&m.as_str())) {
                needs.insert(gkey);
            }
        }
        h.push("Provides-Extra", extra.as_str());
        for k in needs {
            h.push(
                "Requires-Dist",
                format!("{} == {version}; extra == \"{extra}\"", dist(k)),
            );
        }
    }
    let dists: Vec<(String, String)> = groups.keys().map(|k| (extra_name(k), dist(k))).collect();
    h.push("Provides-Extra", "device-all");
    for (_, dist) in &dists {
        h.push(
            "Requires-Dist",
            format!("{dist} == {version}; extra == \"device-all\""),
        );
    }
    // The description says which extra to add, for readers of the index
    // page and of `pip show`.
    let how = format!(
        "GPU device code is in separate wheels: install `{name}[device-<target>]` \
         (`kpack detect --format extras --for {name}` names the extras for this \
         machine's GPUs) or `{name}[device-all]`.\n",
        name = metadata.get("Name").unwrap_or("PKG"),
    );
    h.set_body(&match metadata.body() {
        Some(b) => format!("{how}\n{b}"),
        None => how,
    });
    h
}

/// METADATA of a device wheel: its own name, the host's version, and a
/// dependency on exactly that host release.
fn device_metadata(dist: &str, host: &str, version: &str, arch: &str) -> Headers {
    let mut h = Headers::new();
    h.push("Metadata-Version", "2.1");
    h.push("Name", dist);
    h.push("Version", version);
    h.push(
        "Summary",
        format!("{arch} device code for {host} {version} (split out by kpack)"),
    );
    h.push("Requires-Dist", format!("{} == {version}", normalize(host)));
    h
}

/// WHEEL of a device wheel: the host's layout (`Root-Is-Purelib`, so both
/// install into the same directory) and tags.
fn device_wheel_file(un: &Unpacked) -> Headers {
    let mut h = Headers::new();
    h.push("Wheel-Version", "1.0");
    h.push(
        "Generator",
        concat!("kpack-wheel ", env!("CARGO_PKG_VERSION")),
    );
    h.push("Root-Is-Purelib", un.root_is_purelib());
    if let Some(b) = un.wheel.get("Build") {
        h.push("Build", b);
    }
    for t in un.wheel.get_all("Tag") {
        h.push("Tag", t);
    }
    h
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

    /// The payloads of `members` (member → files) as [`device_job`] lists
    /// them, files written under `dir`.
    fn payloads<'m>(dir: &Path, members: &[(&'m str, &[(&str, &str)])]) -> Vec<(Entry, &'m str)> {
        let mut out = Vec::new();
        for (m, files) in members {
            for (path, content) in *files {
                let p = dir.join(m).join(path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, content).unwrap();
                let entry = Entry {
                    path: path.to_string(),
                    src: Source::Disk(p),
                    mode: 0o644,
                };
                out.push((entry, *m));
            }
        }
        out.sort_by_cached_key(|(e, _)| entry_order("d.dist-info", &e.path));
        out
    }

    /// AMD's `test_base_strict_and_combined_population`: gfx1250 and
    /// gfx1250-strict in one wheel, each archive kept, the identical
    /// shared file once.
    #[test]
    fn merges_identical_files_of_a_target_and_its_strict_variant_once() {
        let tmp = tempfile::tempdir().unwrap();
        let entries = payloads(
            tmp.path(),
            &[
                (
                    "gfx1250",
                    &[
                        (".kpack/blas_gfx1250.kpack", "gfx1250"),
                        ("lib/shared.dat", "identical"),
                    ],
                ),
                (
                    "gfx1250-strict",
                    &[
                        (".kpack/blas_gfx1250-strict.kpack", "gfx1250-strict"),
                        ("lib/shared.dat", "identical"),
                    ],
                ),
            ],
        );
        let Ok(merged) = merge_payloads(Path::new("w.whl"), "rocm-sdk-device-gfx1250", entries)
        else {
            panic!("identical files merge");
        };
        let paths: Vec<&str> = merged.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                ".kpack/blas_gfx1250-strict.kpack",
                ".kpack/blas_gfx1250.kpack",
                "lib/shared.dat"
            ]
        );
    }

    /// AMD's `test_collisions_fail_before_population`: one path, two
    /// contents: refused, naming the path and both members.
    #[test]
    fn refuses_a_path_two_members_fill_differently() {
        let tmp = tempfile::tempdir().unwrap();
        let entries = payloads(
            tmp.path(),
            &[
                ("gfx1250", &[("lib/shared.dat", "base")]),
                ("gfx1250-strict", &[("lib/shared.dat", "strict")]),
            ],
        );
        let Err(e) = merge_payloads(Path::new("w.whl"), "rocm-sdk-device-gfx1250", entries) else {
            panic!("a conflict must be refused");
        };
        let e = e.to_string();
        assert!(
            e.contains("Conflicting device path lib/shared.dat")
                && e.contains("gfx1250 and gfx1250-strict"),
            "{e}"
        );
    }

    /// AMD's `test_entry_types_and_symlink_content`: a file of one member
    /// where another has a directory.
    #[test]
    fn refuses_a_file_where_another_member_has_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let entries = payloads(
            tmp.path(),
            &[
                ("gfx90a", &[("lib/data", "base")]),
                ("gfx90a:xnack+", &[("lib/data/x", "base")]),
            ],
        );
        let Err(e) = merge_payloads(Path::new("w.whl"), "p-device-gfx90a", entries) else {
            panic!("a file below a file must be refused");
        };
        let e = e.to_string();
        assert!(e.contains("Conflicting device entry types"), "{e}");
        assert!(e.contains("lib/data is a file of gfx90a"), "{e}");
    }
}
