//! Recombine (spec §8): shards of split artifacts → one generic artifact
//! per component (from the primary shard) and one artifact per
//! (component, architecture group), with AMD's config schema and every
//! validation flag enforced.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_fsafe::{Existing, Order, Outputs, Tree};
use serde::Serialize;
use serde_json::Value;

use kpack_artifact::{Limits, artifact_manifest, sorted_walk, unpack_artifact};

/// The limits recombine reads artifact archives under: its inputs are
/// split outputs, read with the defaults.
fn limits() -> Limits {
    Limits::default()
}
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{artifact_dirs, keep_link, prefix_link, read_manifest, write_manifest};
use kpack_artifact::{Codec, artifact_archive_stem};

/// One architecture group of the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchGroup {
    /// Group name (output artifacts are `<component>_<name>`).
    pub name: String,
    /// Informational name (defaults to `name`).
    pub display_name: String,
    /// Arches, matched against arch artifact names (`:` compared as `_`).
    pub architectures: Vec<String>,
}

/// The `validation` flags, AMD's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Validation {
    /// One arch of a component in two shards is an error (else: warning, first shard wins).
    pub error_on_duplicate_device_code: bool,
    /// Generic artifacts of every shard must be byte-identical to the primary's.
    pub verify_generic_artifacts_match: bool,
    /// A group arch that no shard provides for a component with device code
    /// is an error (else: warning).
    pub error_on_missing_architecture: bool,
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            error_on_duplicate_device_code: true,
            verify_generic_artifacts_match: false,
            error_on_missing_architecture: false,
        }
    }
}

/// AMD's packaging config (`primary_shard`, `architecture_groups`, `validation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecombineConfig {
    /// Shard whose generic artifacts are used.
    pub primary_shard: String,
    /// Groups, sorted by name.
    pub groups: Vec<ArchGroup>,
    /// Validation flags.
    pub validation: Validation,
}

impl RecombineConfig {
    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<RecombineConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(path, "cannot read the config", e))?;
        RecombineConfig::parse(&text).map_err(|e| e.at(path))
    }

    /// Parse with AMD's rules: `primary_shard` a non-empty string;
    /// `architecture_groups` a non-empty object of groups with a non-empty
    /// `architectures` list of strings starting with `gfx`; optional
    /// `display_name` string; optional `validation` booleans. Extra keys are
    /// ignored, as AMD does.
    pub fn parse(text: &str) -> std::result::Result<RecombineConfig, DocumentError> {
        if text.trim().is_empty() {
            return Err("the config is empty".into());
        }
        let v: Value = serde_json::from_str(text).map_err(|source| DocumentError::Json {
            what: "invalid JSON",
            source,
        })?;
        let obj = v.as_object().ok_or("the config must be a JSON object")?;
        let primary = match obj.get("primary_shard") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) => return Err("primary_shard is empty".into()),
            Some(_) => return Err("primary_shard must be a string".into()),
            None => return Err("primary_shard is missing".into()),
        };
        let groups_v = obj
            .get("architecture_groups")
            .ok_or("architecture_groups is missing")?;
        let groups_o = groups_v
            .as_object()
            .ok_or("architecture_groups must be an object")?;
        if groups_o.is_empty() {
            return Err("architecture_groups is empty".into());
        }
        let groups = groups_o
            .iter()
            .map(|(name, g)| parse_group(name, g))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let validation = match obj.get("validation") {
            Some(val) => parse_validation(val)?,
            None => Validation::default(),
        };
        Ok(RecombineConfig {
            primary_shard: primary,
            groups,
            validation,
        })
    }
}

/// One entry of `architecture_groups`.
fn parse_group(name: &str, g: &Value) -> std::result::Result<ArchGroup, DocumentError> {
    // The name becomes the output artifact `<component>_<name>`.
    if !kpack_fsafe::is_plain_name(name) || name == "generic" {
        return Err(format!(
            "group {name:?}: cannot name an output artifact (a plain name: no '/', '\\' or NUL, not '.', '..' or 'generic')"
        )
        .into());
    }
    let go = g
        .as_object()
        .ok_or_else(|| format!("group {name:?} must be an object"))?;
    let archs = go
        .get("architectures")
        .ok_or_else(|| format!("group {name:?}: architectures is missing"))?
        .as_array()
        .ok_or_else(|| format!("group {name:?}: architectures must be a list"))?;
    if archs.is_empty() {
        return Err(format!("group {name:?}: architectures is empty").into());
    }
    let mut architectures = Vec::new();
    for a in archs {
        let a = a
            .as_str()
            .ok_or_else(|| format!("group {name:?}: architectures must be strings"))?;
        if !kpack_amdgpu::is_device_arch_name(a) {
            return Err(
                format!("group {name:?}: architecture {a:?} does not start with gfx").into(),
            );
        }
        architectures.push(a.to_string());
    }
    let display_name = match go.get("display_name") {
        None => name.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(format!("group {name:?}: display_name must be a string").into()),
    };
    Ok(ArchGroup {
        name: name.to_string(),
        display_name,
        architectures,
    })
}

/// The `validation` object: AMD's defaults, overridden by the booleans given.
fn parse_validation(val: &Value) -> std::result::Result<Validation, DocumentError> {
    let mut validation = Validation::default();
    let vo = val.as_object().ok_or("validation must be an object")?;
    for (key, slot) in [
        (
            "error_on_duplicate_device_code",
            &mut validation.error_on_duplicate_device_code,
        ),
        (
            "verify_generic_artifacts_match",
            &mut validation.verify_generic_artifacts_match,
        ),
        (
            "error_on_missing_architecture",
            &mut validation.error_on_missing_architecture,
        ),
    ] {
        match vo.get(key) {
            None => {}
            Some(Value::Bool(b)) => *slot = *b,
            Some(_) => return Err(format!("validation.{key} must be a boolean").into()),
        }
    }
    Ok(validation)
}

/// Why a JSON document split reads (a recombine config, the record of
/// recombined artifacts) is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// The text is not JSON.
    #[error("{what}")]
    Json {
        /// What is said of it (`invalid JSON`, `not JSON`).
        what: &'static str,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// JSON, but not the document's shape.
    #[error("{0}")]
    Invalid(String),
}

impl From<&str> for DocumentError {
    fn from(m: &str) -> Self {
        DocumentError::Invalid(m.to_string())
    }
}

impl From<String> for DocumentError {
    fn from(m: String) -> Self {
        DocumentError::Invalid(m)
    }
}

impl DocumentError {
    /// The crate error for the document at `path`.
    fn at(self, path: &Path) -> Error {
        match self {
            DocumentError::Json { what, source } => Error::invalid(path, what).with_source(source),
            DocumentError::Invalid(m) => Error::invalid(path, m),
        }
    }
}

/// What [`recombine`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecombineReport {
    /// Shards found, sorted.
    pub shards: Vec<String>,
    /// Output artifacts written, sorted (empty when `errors` is not).
    pub outputs: Vec<String>,
    /// Components that only have a generic artifact.
    pub generic_only: Vec<String>,
    /// Validation problems demoted to warnings by the config.
    pub warnings: Vec<String>,
    /// Validation failures; nothing was written.
    pub errors: Vec<String>,
    /// Output artifacts that existed already with the same contents and
    /// were left alone (a parallel shard wrote them).
    pub identical: Vec<String>,
}

/// An artifact directory name: `(component, None)` for `<c>_generic`,
/// `(component, Some(arch))` for `<c>_<gfx…>` and `<c>_amdgcnspirv`.
pub fn parse_artifact_name(name: &str) -> Option<(String, Option<String>)> {
    if let Some(c) = name.strip_suffix("_generic") {
        return (!c.is_empty()).then(|| (c.to_string(), None));
    }
    let (c, arch) = name.rsplit_once('_')?;
    (kpack_amdgpu::is_device_arch_name(arch) && !c.is_empty())
        .then(|| (c.to_string(), Some(arch.to_string())))
}

/// File beside recombined artifacts recording what each artifact is
/// (component and group), so `verify` knows groups of any name
/// (`blas_lib_rdna3`), not only names that look like an arch.
pub const RECORD: &str = "kpack_recombine.json";

/// The `schema_version` [`RECORD`] is written with (its one home; keys
/// are only added within a version).
pub const RECORD_SCHEMA_VERSION: u32 = 1;

/// Options of [`recombine_with`] beyond AMD's config.
#[derive(Debug, Clone, Default)]
pub struct RecombineOptions {
    /// Recombine only this component (AMD's `--component`); the others in
    /// the shards are neither validated nor written.
    pub component: Option<String>,
    /// An output artifact that exists with other contents is replaced
    /// (`--force`); one with the same contents is always left alone.
    pub force: bool,
    /// Output artifacts as directories (the default) or as `.tar.zst`
    /// artifact archives with equivalence manifests, as `split` writes them.
    pub output_format: crate::OutputFormat,
    /// The mtime of every member of an output archive
    /// (`SOURCE_DATE_EPOCH`, else 0).
    pub mtime: u64,
}

/// Recombine the shards below `shards` into `out` per `config`. Validation
/// failures are returned in the report (nothing written); I/O failures and
/// an unusable layout are errors. Outputs are staged and renamed at the end;
/// existing output directories are an error.
pub fn recombine(shards: &Path, config: &RecombineConfig, out: &Path) -> Result<RecombineReport> {
    recombine_with(shards, config, out, &RecombineOptions::default())
}

/// [`recombine`] with [`RecombineOptions`]. Besides the artifacts it
/// writes (or extends) [`RECORD`] in `out`.
pub fn recombine_with(
    shards: &Path,
    config: &RecombineConfig,
    out: &Path,
    opts: &RecombineOptions,
) -> Result<RecombineReport> {
    let shard_names = list_shards(shards, config)?;
    let found = Found::collect(shards, &shard_names, config, opts)?;
    let mut rep = RecombineReport {
        shards: shard_names,
        ..RecombineReport::default()
    };
    found.validate(config, &mut rep)?;
    if !rep.errors.is_empty() {
        return Ok(rep);
    }
    let mut staged = Outputs::create(out, "recombine", Existing::keeping_identical(opts.force))?;
    let (outputs, made) = found.stage(config, &staged.tree())?;
    let names = crate::artifact::output_names(&outputs, opts.output_format);
    if opts.output_format == crate::OutputFormat::TarZst {
        crate::artifact::pack_outputs(&staged.tree(), &outputs, opts.mtime, None, None)?;
    }
    for o in &names {
        match crate::artifact::existing_output(&staged, o) {
            Ok(true) => rep.identical.push(o.clone()),
            Ok(false) => {
                staged.plan(o, Order::First)?;
            }
            Err(e) => rep.errors.push(crate::error::error_chain(&e)),
        }
    }
    if !rep.errors.is_empty() {
        return Ok(rep);
    }
    write_record(out, &made, &staged.plan_update(RECORD, Order::Last)?)?;
    staged.commit()?;
    rep.outputs = names;
    Ok(rep)
}

/// What each output artifact is: name → (component, group or `None` for
/// the generic artifact, arches).
type Made = BTreeMap<String, (String, Option<String>, Vec<String>)>;

/// Artifacts found in the shards, each as `(shard, dir)`.
struct Found {
    /// Component → its generic artifacts.
    generics: BTreeMap<String, Vec<(String, PathBuf)>>,
    /// (Component, arch) → its arch artifacts.
    arches: BTreeMap<(String, String), Vec<(String, PathBuf)>>,
    /// Every component, sorted.
    components: Vec<String>,
    /// The primary shard's name.
    primary: String,
}

/// The shard directories below `shards`, sorted; the primary must be one.
fn list_shards(shards: &Path, config: &RecombineConfig) -> Result<Vec<String>> {
    let mut shard_names = Vec::new();
    for e in std::fs::read_dir(shards)
        .map_err(|e| Error::io(shards, "cannot list the shards directory", e))?
    {
        let e = e.map_err(|e| Error::io(shards, "cannot list", e))?;
        if e.path().is_dir() {
            shard_names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    shard_names.sort();
    if shard_names.is_empty() {
        return Err(Error::invalid(shards, "no shard directories"));
    }
    if !shard_names.contains(&config.primary_shard) {
        return Err(Error::invalid(
            shards,
            format!(
                "primary shard {:?} not found (shards: {})",
                config.primary_shard,
                shard_names.join(", ")
            ),
        ));
    }
    Ok(shard_names)
}

impl Found {
    /// Read every shard's artifacts (only `opts.component`'s when set); the
    /// wanted component must be in some shard and the primary shard must
    /// have a generic artifact.
    fn collect(
        shards: &Path,
        shard_names: &[String],
        config: &RecombineConfig,
        opts: &RecombineOptions,
    ) -> Result<Found> {
        let mut generics: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
        let mut arches: BTreeMap<(String, String), Vec<(String, PathBuf)>> = BTreeMap::new();
        for s in shard_names {
            let sdir = shards.join(s);
            for n in artifact_dirs(&sdir)? {
                // An artifact archive counts by its name without suffix.
                let parsed = parse_artifact_name(artifact_archive_stem(&n).unwrap_or(&n));
                if let (Some(want), Some((c, _))) = (&opts.component, &parsed)
                    && c != want
                {
                    continue;
                }
                match parsed {
                    Some((c, None)) => generics
                        .entry(c)
                        .or_default()
                        .push((s.clone(), sdir.join(&n))),
                    Some((c, Some(a))) => arches
                        .entry((c, a))
                        .or_default()
                        .push((s.clone(), sdir.join(&n))),
                    None => {}
                }
            }
        }
        if let Some(c) = &opts.component
            && !generics.contains_key(c)
            && !arches.keys().any(|(ac, _)| ac == c)
        {
            return Err(Error::invalid(
                shards,
                format!("component {c:?} is in no shard"),
            ));
        }
        if !generics
            .values()
            .flatten()
            .any(|(s, _)| *s == config.primary_shard)
        {
            return Err(Error::invalid(
                shards.join(&config.primary_shard),
                "the primary shard has no generic artifact",
            ));
        }
        let mut components: Vec<String> = generics.keys().cloned().collect();
        components.extend(arches.keys().map(|(c, _)| c.clone()));
        components.sort();
        components.dedup();
        Ok(Found {
            generics,
            arches,
            components,
            primary: config.primary_shard.clone(),
        })
    }

    /// The primary shard's generic artifact of component `c`.
    fn primary_generic(&self, c: &str) -> Option<PathBuf> {
        self.generics
            .get(c)
            .and_then(|v| v.iter().find(|(s, _)| *s == self.primary))
            .map(|x| x.1.clone())
    }

    /// The first shard's artifact of component `c` for arch `a` (`:` as `_`).
    fn arch_dir(&self, c: &str, a: &str) -> Option<&(String, PathBuf)> {
        self.arches
            .get(&(c.to_string(), a.replace(':', "_")))
            .and_then(|v| v.first())
    }

    /// Check the config's validation rules, into `rep.errors` and `rep.warnings`.
    fn validate(&self, config: &RecombineConfig, rep: &mut RecombineReport) -> Result<()> {
        self.check_duplicates(&config.validation, rep);
        if config.validation.verify_generic_artifacts_match {
            self.check_generics_match(rep)?;
        }
        self.check_components(config, rep);
        Ok(())
    }

    /// One arch of a component in more than one shard.
    fn check_duplicates(&self, validation: &Validation, rep: &mut RecombineReport) {
        for ((c, a), v) in &self.arches {
            if v.len() > 1 {
                let names: Vec<String> = v
                    .iter()
                    .map(|(s, d)| format!("{s} ({})", d.display()))
                    .collect();
                let msg = format!(
                    "{c}: device code for {a} in more than one shard: {}",
                    names.join(" and ")
                );
                if validation.error_on_duplicate_device_code {
                    rep.errors.push(msg);
                } else {
                    rep.warnings.push(format!("{msg}; using the first"));
                }
            }
        }
    }

    /// Every shard's generic artifact the same as the primary's.
    fn check_generics_match(&self, rep: &mut RecombineReport) -> Result<()> {
        for (c, v) in &self.generics {
            let Some(p) = self.primary_generic(c) else {
                continue;
            };
            for (s, d) in v.iter().filter(|(s, _)| *s != self.primary) {
                if Codec::sniff(&p).is_some() || Codec::sniff(d).is_some() {
                    // Archives are compared by their files' sha256.
                    let (a, b) = (
                        artifact_manifest(&p, &limits())?,
                        artifact_manifest(d, &limits())?,
                    );
                    if let Some(first) = a.first_difference(&b) {
                        rep.errors.push(format!(
                            "{c}: generic artifact of shard {s} differs from the primary's: {first}"
                        ));
                    }
                    continue;
                }
                let diffs = tree_diff(&p, d)?;
                if !diffs.is_empty() {
                    rep.errors.push(format!(
                        "{c}: generic artifact of shard {s} differs from the primary's: {}{}",
                        diffs
                            .iter()
                            .take(10)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", "),
                        if diffs.len() > 10 {
                            format!(" and {} more", diffs.len() - 10)
                        } else {
                            String::new()
                        }
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each component has the primary's generic artifact and (when it has
    /// device code) every group arch.
    fn check_components(&self, config: &RecombineConfig, rep: &mut RecombineReport) {
        for c in &self.components {
            if self.primary_generic(c).is_none() {
                rep.errors.push(format!(
                    "{c}: no generic artifact in the primary shard {}",
                    config.primary_shard
                ));
            }
            let has_device = self.arches.keys().any(|(ac, _)| ac == c);
            if !has_device {
                rep.generic_only.push(c.clone());
                continue;
            }
            for g in &config.groups {
                for a in &g.architectures {
                    if self.arch_dir(c, a).is_none() {
                        let msg =
                            format!("{c}: architecture {a} of group {} is in no shard", g.name);
                        if config.validation.error_on_missing_architecture {
                            rep.errors.push(msg);
                        } else {
                            rep.warnings.push(msg);
                        }
                    }
                }
            }
        }
    }

    /// Write every output artifact into `stage`: per component its generic
    /// artifact and one per group with device code. Returns the output
    /// names (sorted) and what each is.
    fn stage(&self, config: &RecombineConfig, stage: &Path) -> Result<(Vec<String>, Made)> {
        let mut outputs = Vec::new();
        let mut made = Made::new();
        for c in &self.components {
            let Some(src) = self.primary_generic(c) else {
                continue;
            };
            let name = format!("{c}_generic");
            made.insert(name.clone(), (c.clone(), None, Vec::new()));
            stage_generic(&src, &stage.join(&name))?;
            outputs.push(name);
            for g in &config.groups {
                let name = format!("{c}_{}", g.name);
                if self.stage_group(c, g, &stage.join(&name))? {
                    outputs.push(name.clone());
                    made.insert(
                        name,
                        (c.clone(), Some(g.name.clone()), g.architectures.clone()),
                    );
                }
            }
        }
        outputs.sort();
        Ok((outputs, made))
    }

    /// Merge the device code of group `g`'s arches of component `c` into
    /// `dst`; false (nothing written) when no shard has any.
    fn stage_group(&self, c: &str, g: &ArchGroup, dst: &Path) -> Result<bool> {
        let mut prefixes: Vec<String> = Vec::new();
        for a in &g.architectures {
            let Some((_, dir)) = self.arch_dir(c, a) else {
                continue;
            };
            if Codec::sniff(dir).is_some() {
                prefixes.extend(unpack_artifact(dir, dst, &limits())?.0);
                continue;
            }
            for p in read_manifest(dir)? {
                if prefix_link(dir, &p).is_none() && dir.join(&p).is_dir() {
                    let tree = Tree::create(dst).map_err(|e| Error::io(dst, "cannot create", e))?;
                    merge_tree(&dir.join(&p), &tree, Path::new(&p))?;
                    prefixes.push(p);
                }
            }
        }
        if prefixes.is_empty() {
            return Ok(false);
        }
        prefixes.sort();
        prefixes.dedup();
        write_manifest(dst, &prefixes)?;
        Ok(true)
    }
}

/// Copy the generic artifact `src` to `dst`; a prefix that is a link is
/// copied as a link, never read through.
fn stage_generic(src: &Path, dst: &Path) -> Result<()> {
    if Codec::sniff(src).is_some() {
        let (kept, _) = unpack_artifact(src, dst, &limits())?;
        return Ok(write_manifest(dst, &kept)?);
    }
    let prefixes = read_manifest(src)?;
    let mut kept = Vec::new();
    for p in &prefixes {
        if let Some(link) = prefix_link(src, p) {
            keep_link(src, dst, &link)?;
            kept.push(p.clone());
        } else if src.join(p).is_dir() {
            let tree = Tree::create(dst).map_err(|e| Error::io(dst, "cannot create", e))?;
            merge_tree(&src.join(p), &tree, Path::new(p))?;
            kept.push(p.clone());
        }
    }
    Ok(write_manifest(dst, &kept)?)
}

/// [`RECORD`] in `out` with `made` added (a second run with another
/// `--component` extends it), staged at `staged`.
fn write_record(out: &Path, made: &Made, staged: &Path) -> Result<()> {
    let path = out.join(RECORD);
    let mut artifacts = serde_json::Map::new();
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(&text)
        && let Some(Value::Object(old)) = doc.remove("artifacts")
    {
        artifacts = old;
    }
    for (name, (component, group, arches)) in made {
        artifacts.insert(
            name.clone(),
            serde_json::json!({ "component": component, "group": group, "architectures": arches }),
        );
    }
    let doc =
        serde_json::json!({ "schema_version": RECORD_SCHEMA_VERSION, "artifacts": artifacts });
    let mut text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::invalid(&path, "cannot encode").with_source(e))?;
    text.push('\n');
    std::fs::write(staged, text).map_err(|e| Error::io(staged, "cannot write", e))
}

/// What [`RECORD`] in `dir` says each artifact is: name → (component,
/// group; `None` for the generic artifact). Empty when there is no record;
/// an unreadable one is an error for the caller to report.
pub(crate) fn read_record(
    dir: &Path,
) -> std::result::Result<BTreeMap<String, (String, Option<String>)>, DocumentError> {
    let path = dir.join(RECORD);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(BTreeMap::new());
    };
    let doc: Value = serde_json::from_str(&text).map_err(|source| DocumentError::Json {
        what: "not JSON",
        source,
    })?;
    let Some(arts) = doc.get("artifacts").and_then(Value::as_object) else {
        return Err("no \"artifacts\" object".into());
    };
    let mut out = BTreeMap::new();
    for (name, a) in arts {
        let Some(component) = a.get("component").and_then(Value::as_str) else {
            return Err(format!("artifact {name:?}: no \"component\" string").into());
        };
        let group = match a.get("group") {
            None | Some(Value::Null) => None,
            Some(Value::String(g)) => Some(g.clone()),
            Some(_) => {
                return Err(format!("artifact {name:?}: \"group\" is not a string").into());
            }
        };
        out.insert(name.clone(), (component.to_string(), group));
    }
    Ok(out)
}

/// Copy `src` into `at` of the tree `dst` (symlinks as symlinks, modes
/// kept; nothing in `dst` followed, so a symlink one shard left there never
/// leads the next one's files out of it). A file that already exists in
/// `dst` must be identical, else it is an error.
pub(crate) fn merge_tree(src: &Path, dst: &Tree, at: &Path) -> Result<()> {
    dst.create_dir_all(at)
        .map_err(|e| Error::io(dst.path().join(at), "cannot create", e))?;
    for e in walkdir::WalkDir::new(src)
        .sort_by_file_name()
        .follow_links(false)
        .min_depth(1)
    {
        let e = e.map_err(|e| {
            Error::new(ErrorKind::Io, Some(src.to_path_buf()), "cannot walk").with_source(e)
        })?;
        let rel = at.join(e.path().strip_prefix(src).unwrap_or(e.path()));
        let to = dst.path().join(&rel);
        let ft = e.file_type();
        if ft.is_dir() {
            dst.create_dir_all(&rel)
                .map_err(|err| Error::io(&to, "cannot create", err))?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(e.path())
                .map_err(|err| Error::io(e.path(), "cannot read symlink", err))?;
            if let Ok(existing) = dst.read_link(&rel) {
                if existing != target {
                    return Err(Error::invalid(
                        &to,
                        format!(
                            "two shards disagree: symlink to {} and to {}",
                            existing.display(),
                            target.display()
                        ),
                    ));
                }
                continue;
            }
            #[cfg(unix)]
            dst.symlink(&target, &rel)
                .map_err(|err| Error::io(&to, "cannot create symlink", err))?;
        } else if dst.entry(&rel).is_some() {
            let same = std::fs::read(e.path()).ok() == read_in(dst, &rel);
            if !same {
                return Err(Error::invalid(
                    &to,
                    format!(
                        "two artifacts provide different files here (second: {})",
                        e.path().display()
                    ),
                ));
            }
        } else {
            copy_into(e.path(), dst, &rel).map_err(|err| Error::io(&to, "cannot copy", err))?;
        }
    }
    Ok(())
}

/// The bytes of the regular file `rel` of `tree` (`None` when it is not
/// one, or a symlink is on the way).
fn read_in(tree: &Tree, rel: &Path) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    tree.open_file(rel).ok()?.read_to_end(&mut v).ok()?;
    Some(v)
}

/// Copy the file `from` to the new file `rel` of `tree`, with its
/// permission bits.
fn copy_into(from: &Path, tree: &Tree, rel: &Path) -> std::io::Result<u64> {
    let mut src = std::fs::File::open(from)?;
    #[cfg(unix)]
    let mode = std::os::unix::fs::PermissionsExt::mode(&src.metadata()?.permissions());
    #[cfg(not(unix))]
    let mode = 0o644;
    let mut out = tree.create_file(rel, mode)?;
    std::io::copy(&mut src, &mut out)
}

/// (kind, content or link target, mode) of one tree entry.
type Entry = (u8, Vec<u8>, u32);

/// Paths (relative) where two trees differ: missing on one side, different
/// kind, content, symlink target or permission bits.
pub(crate) fn tree_diff(a: &Path, b: &Path) -> Result<Vec<String>> {
    let list = |root: &Path| -> Result<BTreeMap<String, Entry>> {
        let mut m = BTreeMap::new();
        for e in sorted_walk(root) {
            let (e, rel) = e?;
            let ft = e.file_type();
            let mode = mode_of(e.path());
            let v = if ft.is_symlink() {
                (
                    1,
                    std::fs::read_link(e.path())
                        .map(|t| t.to_string_lossy().into_owned().into_bytes())
                        .unwrap_or_default(),
                    0,
                )
            } else if ft.is_dir() {
                (2, Vec::new(), 0)
            } else {
                (
                    0,
                    std::fs::read(e.path())
                        .map_err(|err| Error::io(e.path(), "cannot read", err))?,
                    mode,
                )
            };
            m.insert(rel, v);
        }
        Ok(m)
    };
    let (ma, mb) = (list(a)?, list(b)?);
    let mut diffs = Vec::new();
    for (k, v) in &ma {
        if mb.get(k) != Some(v) {
            diffs.push(k.clone());
        }
    }
    diffs.extend(mb.keys().filter(|k| !ma.contains_key(*k)).cloned());
    diffs.sort();
    Ok(diffs)
}

#[cfg(unix)]
fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p)
        .map(|m| m.permissions().mode())
        .unwrap_or(0)
}

#[cfg(not(unix))]
fn mode_of(_: &Path) -> u32 {
    0
}

#[cfg(test)]
#[allow(clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn parses_amds_example_and_defaults() {
        let c = RecombineConfig::parse(
            r#"{"primary_shard":"gfx110X_build","architecture_groups":{"gfx110X":{"display_name":"RDNA3","architectures":["gfx1100","gfx1101"]}}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.primary_shard, "gfx110X_build");
        assert_eq!(c.groups[0].architectures, ["gfx1100", "gfx1101"]);
        assert_eq!(c.validation, Validation::default());
    }

    #[test]
    fn rejects_what_amd_rejects() {
        for bad in [
            "",
            "[]",
            r#"{"architecture_groups":{"g":{"architectures":["gfx1"]}}}"#,
            r#"{"primary_shard":"","architecture_groups":{"g":{"architectures":["gfx1"]}}}"#,
            r#"{"primary_shard":3,"architecture_groups":{"g":{"architectures":["gfx1"]}}}"#,
            r#"{"primary_shard":"p","architecture_groups":{}}"#,
            r#"{"primary_shard":"p","architecture_groups":{"g":{"architectures":[]}}}"#,
            r#"{"primary_shard":"p","architecture_groups":{"g":{"architectures":"gfx1"}}}"#,
            r#"{"primary_shard":"p","architecture_groups":{"g":{"architectures":["sm_80"]}}}"#,
            r#"{"primary_shard":"p","architecture_groups":{"g":{"architectures":["gfx1"]}},"validation":{"error_on_duplicate_device_code":"yes"}}"#,
        ] {
            assert!(RecombineConfig::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn artifact_names() {
        assert_eq!(
            parse_artifact_name("blas_lib_generic"),
            Some(("blas_lib".into(), None))
        );
        assert_eq!(
            parse_artifact_name("blas_lib_gfx90a"),
            Some(("blas_lib".into(), Some("gfx90a".into())))
        );
        assert_eq!(parse_artifact_name("blas_lib_dev"), None);
    }

    #[test]
    #[cfg(unix)]
    fn merged_shards_never_write_through_a_symlink_one_left() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(b.join("lib")).unwrap();
        std::fs::create_dir(&a).unwrap();
        std::os::unix::fs::symlink(&victim, a.join("lib")).unwrap();
        std::os::unix::fs::symlink(victim.join("gone"), a.join("dangling")).unwrap();
        std::fs::write(b.join("lib/passwd"), "owned").unwrap();
        let out = d.path().join("out");
        let tree = Tree::create(&out).unwrap();
        merge_tree(&a, &tree, Path::new("stage")).unwrap();
        assert!(merge_tree(&b, &tree, Path::new("stage")).is_err());
        let c = d.path().join("c");
        std::fs::create_dir(&c).unwrap();
        std::fs::write(c.join("dangling"), "owned").unwrap();
        assert!(merge_tree(&c, &tree, Path::new("stage")).is_err());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        // Identical files merge; different ones are an error.
        std::fs::write(c.join("dangling"), "x").unwrap();
        std::fs::write(b.join("lib/passwd"), "x").unwrap();
        merge_tree(&b, &tree, Path::new("other")).unwrap();
        merge_tree(&b, &tree, Path::new("other")).unwrap();
        std::fs::write(b.join("lib/passwd"), "y").unwrap();
        assert!(merge_tree(&b, &tree, Path::new("other")).is_err());
        assert_eq!(std::fs::read(out.join("other/lib/passwd")).unwrap(), b"x");
    }
}
