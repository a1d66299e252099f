//! Where each target's code goes: one archive per processor (or archive
//! group), and the marker search paths that reach them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_amdgpu::{Level, TargetId, archive_group, archive_group_level};
use kpack_bundle::MemoryBudget;
use kpack_format::{ArchiveWriter, GFXARCH, WriterOptions, Written};

use kpack_fsafe::relative_path;

use crate::Error;

type DirFor = Box<dyn Fn(&str) -> PathBuf + Send + Sync>;

/// One archive per processor, written on [`ArchiveSet::finish`].
pub struct ArchiveSet {
    dir: PathBuf,
    dir_for: Option<DirFor>,
    name: String,
    pub(crate) options: WriterOptions,
    pub(crate) writers: BTreeMap<String, ArchiveWriter>,
    no_clobber: bool,
    /// Files no archive may land on: the inputs and the other outputs.
    protected: Vec<PathBuf>,
    group: Level,
    /// Where the archives are written until the caller commits them (an
    /// [`kpack_fsafe::Outputs`] staging tree); `None`: where they go.
    stage: Option<PathBuf>,
    /// The directories this set created, removed again (when empty)
    /// unless [`finish`](Self::finish) succeeds.
    created: Vec<kpack_fsafe::CreatedDir>,
    /// The ceiling on inflated bytes held while bundles are read into
    /// these archives.
    pub(crate) budget: MemoryBudget,
}

impl ArchiveSet {
    /// Archives `<dir>/<name>_<processor>.kpack`; `options.group_name`
    /// defaults to `name`, `gfx_arch_family` to the processor. Bundles
    /// read into them inflate under `budget` (the job's, `--max-memory`):
    /// archive sets filled in parallel by one job share it.
    pub fn new(
        dir: PathBuf,
        name: String,
        options: WriterOptions,
        budget: MemoryBudget,
    ) -> ArchiveSet {
        ArchiveSet {
            dir,
            dir_for: None,
            name,
            options,
            writers: BTreeMap::new(),
            no_clobber: false,
            protected: Vec::new(),
            group: Level::Target,
            stage: None,
            created: Vec::new(),
            budget,
        }
    }

    /// Like [`new`](Self::new), but each processor's archive goes into its
    /// own directory `dir_for(processor)` (per-arch output trees).
    pub fn per_processor(
        name: String,
        options: WriterOptions,
        budget: MemoryBudget,
        dir_for: impl Fn(&str) -> PathBuf + Send + Sync + 'static,
    ) -> ArchiveSet {
        ArchiveSet {
            dir_for: Some(Box::new(dir_for)),
            ..ArchiveSet::new(PathBuf::new(), name, options, budget)
        }
    }

    /// Write the archives into `dir` (a staging tree the caller commits)
    /// instead of where they go; search paths and checks still name their
    /// final place.
    pub fn set_stage(&mut self, dir: PathBuf) {
        self.stage = Some(dir);
    }

    /// Refuse (instead of replacing) an archive that already exists.
    pub fn set_no_clobber(&mut self, yes: bool) {
        self.no_clobber = yes;
    }

    /// Refuse to write an archive onto `path` (an input, or another
    /// output of the same command), whatever `--force` says.
    pub fn protect(&mut self, path: &Path) {
        self.protected.push(path.to_path_buf());
    }

    /// [`Error::OutputClash`] when `path` is (or names) a protected file.
    fn check_clash(&self, path: &Path) -> Result<(), Error> {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        for other in &self.protected {
            if abs(other) == abs(path) || same_file::is_same_file(other, path).unwrap_or(false) {
                return Err(Error::OutputClash {
                    path: path.to_path_buf(),
                    other: other.clone(),
                });
            }
        }
        Ok(())
    }

    /// Group archives by `level` of ROCm's packaging hierarchy: one
    /// archive per [`kpack_amdgpu::archive_group`] instead of per
    /// processor. [`Level::Target`] (the default) is per processor.
    pub fn set_group(&mut self, level: Level) {
        self.group = level;
    }

    /// The archive (group) name that holds `target`'s code: its processor,
    /// or its sub-family or family under [`set_group`](Self::set_group).
    pub fn group_of(&self, target: &TargetId) -> String {
        archive_group(target.processor(), self.group)
    }

    /// The marker search paths for a binary whose kept targets are
    /// `targets`: `search_paths` unchanged when archives are per processor;
    /// else each path holding `@GFXARCH@` followed by one copy per group
    /// archive the binary has (placeholder replaced by the group name,
    /// groups sorted). `@GFXARCH@` expands to targets only, so this is how
    /// a `gfx1101` device reaches `<name>_gfx110x.kpack`; a path without
    /// the placeholder is opened as is by AMD's loader too (spec §10.5
    /// step 5), and the `@GFXARCH@` path stays first so per-target
    /// archives (overlays, or family archives converted back) still win.
    pub fn marker_search_paths<'t>(
        &self,
        search_paths: &[String],
        targets: impl IntoIterator<Item = &'t str>,
    ) -> Vec<String> {
        if self.group == Level::Target {
            return search_paths.to_vec();
        }
        let groups: std::collections::BTreeSet<String> = targets
            .into_iter()
            .filter(|t| archive_group_level(&archive_group(t, self.group)).is_some())
            .map(|t| archive_group(t, self.group))
            .collect();
        let mut out = Vec::new();
        for sp in search_paths {
            out.push(sp.clone());
            if sp.contains(GFXARCH) {
                out.extend(groups.iter().map(|g| sp.replacen(GFXARCH, g, 1)));
            }
        }
        out
    }

    /// [`marker_search_paths`](Self::marker_search_paths) for the device
    /// code of `bundles` that `keep` keeps.
    pub fn marker_search_paths_for(
        &self,
        search_paths: &[String],
        bundles: &[kpack_bundle::Item],
        keep: &dyn Fn(&str) -> bool,
    ) -> Vec<String> {
        let targets: Vec<String> = bundles
            .iter()
            .flat_map(|b| &b.entries)
            .filter(|e| !e.id.is_host())
            .filter_map(|e| e.id.target())
            .map(|t| t.to_string())
            .filter(|t| keep(t))
            .collect();
        self.marker_search_paths(search_paths, targets.iter().map(String::as_str))
    }

    /// The archive directory for a processor.
    fn dir(&self, processor: &str) -> PathBuf {
        match &self.dir_for {
            Some(f) => f(processor),
            None => self.dir.clone(),
        }
    }

    /// The archive path for a processor.
    pub fn path_for(&self, processor: &str) -> PathBuf {
        self.dir(processor)
            .join(format!("{}_{processor}.kpack", self.name))
    }

    /// The marker search path pattern for binaries in `from_dir` when the
    /// archives are installed in `archive_dir`.
    pub fn search_path(&self, from_dir: &Path, archive_dir: &Path) -> String {
        let rel = relative_path(from_dir, archive_dir);
        let file = format!("{}_{GFXARCH}.kpack", self.name);
        if rel.as_os_str().is_empty() {
            file
        } else {
            format!("{}/{file}", rel.to_string_lossy().replace('\\', "/"))
        }
    }

    /// The marker search path pattern for binaries in `from_dir`, for
    /// archives installed where this set writes them (see [`new`](Self::new)).
    pub fn search_path_from(&self, from_dir: &Path) -> String {
        self.search_path(from_dir, &self.dir)
    }

    /// Add one code object.
    pub fn add(&mut self, key: &str, target: &TargetId, data: &[u8]) -> Result<(), Error> {
        let group = self.group_of(target);
        self.writer(&group)?.add(key, &target.to_string(), data)?;
        Ok(())
    }

    /// The writer for `processor`, created on first use.
    pub(crate) fn writer(&mut self, processor: &str) -> Result<&mut ArchiveWriter, Error> {
        if !self.writers.contains_key(processor) {
            let dir = self.stage.clone().unwrap_or_else(|| self.dir(processor));
            self.created.push(kpack_fsafe::CreatedDir::create(&dir)?);
            let mut options = self.options.clone();
            if options.group_name.is_empty() {
                options.group_name = self.name.clone();
            }
            if options.gfx_arch_family.is_empty() {
                options.gfx_arch_family = processor.to_string();
            }
            let path = self.path_for(processor);
            self.check_clash(&path)?;
            if self.no_clobber && std::fs::symlink_metadata(&path).is_ok() {
                return Err(Error::io(
                    path,
                    "already exists; pass --force to overwrite",
                    std::io::ErrorKind::AlreadyExists.into(),
                ));
            }
            let write_to = match (&self.stage, path.file_name()) {
                (Some(stage), Some(name)) => stage.join(name),
                _ => path,
            };
            let w = ArchiveWriter::create(write_to, options)?;
            self.writers.insert(processor.to_string(), w);
        }
        self.writers.get_mut(processor).ok_or_else(|| {
            Error::io(
                &self.dir,
                "internal error",
                std::io::Error::other("archive writer vanished"),
            )
        })
    }

    /// `true` when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.writers.is_empty()
    }

    /// Write every archive (each to a temp file, then renamed); returns
    /// (processor, what was written), sorted by processor.
    pub fn finish(self) -> Result<Vec<(String, Written)>, Error> {
        let mut out = Vec::new();
        for (processor, w) in self.writers {
            out.push((processor, w.finish()?));
        }
        self.created
            .into_iter()
            .for_each(kpack_fsafe::CreatedDir::keep);
        Ok(out)
    }
}
