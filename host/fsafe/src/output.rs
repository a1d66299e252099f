//! One way to write: every output of a kpack command is planned, staged,
//! checked and committed through [`Outputs`].
//!
//! - **Create** ([`Outputs::create`], [`Outputs::builder`]): the lock on the
//!   root is taken when asked ([`OutputsBuilder::lock`]), stale temps of
//!   dead runs are removed and listed for the command to name
//!   ([`Outputs::removed_stale`]).
//! - **Plan.** Each output path is named before its first byte is written
//!   ([`Outputs::plan`]), relative to the output root and checked by one
//!   rule ([`crate::is_plain_relative`]); names that come from an input go
//!   through [`crate::input_name`] first, whose error names the field and
//!   the file it came from. An output that is one of the command's inputs
//!   ([`OutputsBuilder::inputs`]) is refused here.
//! - **Stage.** Outputs are written into a staging tree on the output's own
//!   file system (`.kpack-tmp-<pid>-<what>-<random>/out`), laid out as
//!   under the root.
//! - **Check.** The command verifies the staged files (verify-elf, archive
//!   verify, RECORD) before it commits.
//! - **Commit** ([`Outputs::commit`], [`commit_all`]): all or nothing. A new
//!   output root is one rename of the staging tree. Outputs merged into an
//!   existing root are moved in the order planned ([`Order::First`] before
//!   [`Order::Last`]: archives before the host binary that needs them,
//!   device wheels before the host wheel), through directory handles that
//!   never follow a symlink inside the root; when a move fails, every move
//!   already made is undone. A journal in the staging directory lets the next
//!   run that writes into the root finish a commit that a kill interrupted
//!   ([`crate::remove_stale_temps`]).
//! - **Existing outputs** follow one rule ([`Existing`]): refused, kept
//!   when identical to the staged output (shards writing one location),
//!   or replaced with `--force`; never merged into. The rule is applied
//!   again at the move itself (a rename that never replaces), so a
//!   parallel run committing the same output first is seen.
//! - **Modes.** Staged files are created `0666 & !umask` and directories
//!   `0777 & !umask` ([`crate::temp_file_in`]); executables keep the bits
//!   their writer gives them.

use std::path::{Component, Path, PathBuf};

use crate::dir::Dir;
use crate::{CreatedDir, Error, Result};

/// The name of the commit journal inside a staging directory: the planned
/// paths in commit order, one per line, written before the first move.
pub(crate) const JOURNAL: &str = "commit";
/// The staging tree inside a staging directory.
pub(crate) const TREE: &str = "out";
/// Where replaced outputs wait until a commit is done.
const REPLACED: &str = "replaced";
/// Scratch space of the command, never committed.
const SCRATCH: &str = "work";

/// What an output that exists already means: one rule for every command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Refused: the command writes nothing and says to pass `--force`.
    Refuse,
    /// Replaced whole (`--force`): the old file or directory is moved aside
    /// and removed once the commit is done; restored if it fails.
    Replace,
    /// Left alone when it has the same contents as the staged output (a
    /// parallel shard wrote it), refused naming the first difference
    /// otherwise.
    KeepIdentical,
}

impl Existing {
    /// The rule `--force` asks for.
    pub fn from_force(force: bool) -> Existing {
        if force {
            Existing::Replace
        } else {
            Existing::Refuse
        }
    }

    /// The rule of commands whose outputs parallel runs write alike
    /// (`split` and `recombine` shards): `--force` replaces, else an
    /// identical output is kept and a differing one refused.
    pub fn keeping_identical(force: bool) -> Existing {
        if force {
            Existing::Replace
        } else {
            Existing::KeepIdentical
        }
    }
}

/// When a planned output moves into place relative to the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Order {
    /// With the first: what other outputs depend on (archives, device wheels).
    First,
    /// After every [`Order::First`] output: what depends on them (the host
    /// binary, the host wheel, an index).
    Last,
}

/// One planned output.
#[derive(Clone, Debug)]
struct Planned {
    /// Relative to the root.
    rel: PathBuf,
    order: Order,
    /// The command's own record of the root (an index, a RECORD): replaced
    /// whatever the rule for existing outputs, since the command merged
    /// the old one into it.
    update: bool,
}

/// What a commit did with the planned outputs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Outputs moved into place, in commit order.
    pub written: Vec<PathBuf>,
    /// Outputs left as they were: identical to the staged ones
    /// ([`Existing::KeepIdentical`]).
    pub identical: Vec<PathBuf>,
    /// Every planned output's final path, in commit order.
    all: Vec<PathBuf>,
}

impl Committed {
    fn of(all: Vec<PathBuf>, identical: Vec<PathBuf>) -> Committed {
        let written = all
            .iter()
            .filter(|p| !identical.contains(p))
            .cloned()
            .collect();
        Committed {
            written,
            identical,
            all,
        }
    }
}

/// The outputs of one command under one root: planned, staged, committed.
#[must_use = "nothing is written until `commit`"]
pub struct Outputs {
    root: PathBuf,
    /// The root did not exist: the staging tree becomes the root in one rename.
    fresh: bool,
    /// `.kpack-tmp-<pid>-<what>-<random>`, in the root or (fresh) beside it.
    holder: tempfile::TempDir,
    planned: Vec<Planned>,
    existing: Existing,
    /// The root's parents this run created (fresh roots), or the root
    /// and its parents (a locked root, made to be locked).
    created: Option<CreatedDir>,
    /// The command's inputs: no planned output may be one of them.
    inputs: Vec<PathBuf>,
    /// Stale temps of dead runs removed before staging.
    removed_stale: Vec<PathBuf>,
    /// The staging directory goes on SIGINT/SIGTERM too (the CLI's handler).
    _interrupt: crate::Registered,
    /// The advisory lock on the root ([`OutputsBuilder::lock`]); declared
    /// last, so it is released after the staging directory is gone.
    _lock: Option<std::fs::File>,
}

/// [`Outputs`] with what a command asks beyond the rule for existing
/// outputs: the inputs no output may be, and a lock on the root.
#[must_use = "nothing is staged until `create`"]
pub struct OutputsBuilder<'a> {
    root: &'a Path,
    what: &'a str,
    existing: Existing,
    inputs: Vec<PathBuf>,
    on_wait: Option<Box<dyn FnOnce() + 'a>>,
}

impl<'a> OutputsBuilder<'a> {
    /// The command's inputs: [`Outputs::plan`] refuses an output that is
    /// one of them, through any path or hard link ([`crate::not_same_file`]).
    pub fn inputs<P: AsRef<Path>>(mut self, inputs: &[P]) -> Self {
        self.inputs
            .extend(inputs.iter().map(|p| p.as_ref().to_path_buf()));
        self
    }

    /// Hold the advisory lock on the root ([`crate::lock_dir`]) for the
    /// life of the [`Outputs`], so runs writing into one root take turns;
    /// `on_wait` is called first when another process holds it. A missing
    /// root is created to be locked, and removed again when the run
    /// commits nothing into it or fails.
    pub fn lock(mut self, on_wait: impl FnOnce() + 'a) -> Self {
        self.on_wait = Some(Box::new(on_wait));
        self
    }

    /// Lock the root when asked, remove stale temps, and make the staging
    /// directory ([`Outputs::create`]).
    pub fn create(self) -> Result<Outputs> {
        let root = if self.root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            self.root
        };
        let (lock, made) = match self.on_wait {
            Some(on_wait) => {
                let made = CreatedDir::create(root)?;
                (Some(crate::lock_dir(root, on_wait)?), Some(made))
            }
            None => (None, None),
        };
        let mut o = Outputs::stage(root, self.what, self.existing)?;
        o.inputs = self.inputs;
        o._lock = lock;
        if made.is_some() {
            o.created = made;
        }
        Ok(o)
    }
}

impl Outputs {
    /// Outputs under `root` (a directory, created at commit when missing),
    /// staged in `.kpack-tmp-<pid>-<what>-<random>` (in the root, or beside
    /// a root that does not exist yet). Stale temps of dead runs there are
    /// removed first (finishing any commit they had begun) and listed
    /// ([`Outputs::removed_stale`]).
    pub fn create(root: &Path, what: &str, existing: Existing) -> Result<Outputs> {
        Outputs::builder(root, what, existing).create()
    }

    /// [`Outputs::create`] with the command's inputs and a lock on the
    /// root ([`OutputsBuilder`]).
    pub fn builder<'a>(root: &'a Path, what: &'a str, existing: Existing) -> OutputsBuilder<'a> {
        OutputsBuilder {
            root,
            what,
            existing,
            inputs: Vec::new(),
            on_wait: None,
        }
    }

    /// The staging directory under or beside `root` (not empty).
    fn stage(root: &Path, what: &str, existing: Existing) -> Result<Outputs> {
        let fresh = std::fs::symlink_metadata(root).is_err();
        let (holder_in, created, removed_stale) = if fresh {
            let parent = parent_of(root);
            let created = CreatedDir::create(parent)?;
            let removed = crate::remove_stale_temps(parent);
            (parent.to_path_buf(), Some(created), removed)
        } else {
            if !std::fs::metadata(root).is_ok_and(|m| m.is_dir()) {
                return Err(Error::NotDir {
                    path: root.to_path_buf(),
                });
            }
            let removed = crate::remove_stale_temps(root);
            (root.to_path_buf(), None, removed)
        };
        let holder = crate::temp_dir_in(&holder_in, what).map_err(|source| Error::CreateDir {
            path: holder_in.clone(),
            source,
        })?;
        let tree = holder.path().join(TREE);
        std::fs::create_dir(&tree).map_err(|source| Error::CreateDir {
            path: tree.clone(),
            source,
        })?;
        let _interrupt = crate::remove_on_interrupt(holder.path());
        Ok(Outputs {
            root: root.to_path_buf(),
            fresh,
            _interrupt,
            holder,
            planned: Vec::new(),
            existing,
            created,
            inputs: Vec::new(),
            removed_stale,
            _lock: None,
        })
    }

    /// The stale temps of dead runs removed when these outputs were
    /// created, for the command to name.
    pub fn removed_stale(&self) -> &[PathBuf] {
        &self.removed_stale
    }

    /// The output root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The staging tree: `rel` is staged at `tree().join(rel)`.
    pub fn tree(&self) -> PathBuf {
        self.holder.path().join(TREE)
    }

    /// A scratch directory on the output's file system for the command's
    /// intermediate files; never committed, removed with the staging
    /// directory.
    pub fn scratch(&self) -> Result<PathBuf> {
        let p = self.holder.path().join(SCRATCH);
        std::fs::create_dir_all(&p).map_err(|source| Error::CreateDir {
            path: p.clone(),
            source,
        })?;
        Ok(p)
    }

    /// Plan the output `rel` (a file or a directory, relative to the root)
    /// and return where to stage it; its parent directories are created in
    /// the staging tree. `rel` must be a plain relative path, planned once,
    /// and neither inside nor around another planned output.
    pub fn plan(&mut self, rel: &str, order: Order) -> Result<PathBuf> {
        self.plan_output(rel, order, false)
    }

    /// [`Outputs::plan`] for a file the command keeps up to date in the
    /// root (an index, a record of what it wrote), which it has merged the
    /// old one into: it replaces an existing one whatever the rule.
    pub fn plan_update(&mut self, rel: &str, order: Order) -> Result<PathBuf> {
        self.plan_output(rel, order, true)
    }

    fn plan_output(&mut self, rel: &str, order: Order, update: bool) -> Result<PathBuf> {
        if !crate::is_plain_relative(rel) {
            return Err(Error::NotInsideRoot {
                flag: "output".into(),
                value: rel.to_owned(),
            });
        }
        let rel = PathBuf::from(rel);
        for input in &self.inputs {
            crate::not_same_file(input, &self.root.join(&rel))?;
        }
        if let Some(other) = self
            .planned
            .iter()
            .find(|p| p.rel.starts_with(&rel) || rel.starts_with(&p.rel))
        {
            return Err(Error::PlannedTwice {
                path: self.root.join(&rel),
                other: self.root.join(&other.rel),
            });
        }
        let staged = self.tree().join(&rel);
        let parent = parent_of(&staged);
        std::fs::create_dir_all(parent).map_err(|source| Error::CreateDir {
            path: parent.to_path_buf(),
            source,
        })?;
        self.planned.push(Planned { rel, order, update });
        Ok(staged)
    }

    /// The run's rule applied early to an output staged at `rel` before it
    /// is planned (an artifact written whole first): `Ok(true)` when the
    /// destination holds the same contents (left alone whatever the rule:
    /// a parallel shard wrote it), `Ok(false)` when the output is to be
    /// planned and moved, [`Error::ExistsDiffering`] naming the first
    /// difference when it differs and the rule does not replace. The
    /// commit applies the rule again, so an output that appears meanwhile
    /// is not lost.
    pub fn compare_staged(&self, rel: &str) -> Result<bool> {
        let dest = self.root.join(rel);
        if std::fs::symlink_metadata(&dest).is_err() {
            return Ok(false);
        }
        match crate::first_difference(&self.tree().join(rel), &dest) {
            None => Ok(true),
            Some(_) if self.existing == Existing::Replace => Ok(false),
            Some(first) => Err(Error::ExistsDiffering { path: dest, first }),
        }
    }

    /// Where `rel` lands once committed.
    pub fn dest(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The planned outputs that exist already under the root.
    pub fn existing_outputs(&self) -> Vec<PathBuf> {
        if self.fresh {
            return Vec::new();
        }
        self.planned
            .iter()
            .filter(|p| !p.update)
            .map(|p| self.root.join(&p.rel))
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect()
    }

    /// Refuse now, before the work, when an output exists and the rule is
    /// [`Existing::Refuse`]; [`Outputs::commit`] checks again.
    pub fn check_existing(&self) -> Result<()> {
        if self.existing == Existing::Refuse
            && let Some(path) = self.existing_outputs().into_iter().next()
        {
            return Err(Error::Exists { path });
        }
        Ok(())
    }

    /// Move every planned output into place (all or nothing) and return
    /// their final paths, in commit order.
    pub fn commit(self) -> Result<Vec<PathBuf>> {
        commit_all(vec![self]).map(|mut v| v.pop().unwrap_or_default())
    }

    /// [`Outputs::commit`], saying which outputs were written and which
    /// were left alone as identical.
    pub fn commit_report(self) -> Result<Committed> {
        commit_reports(vec![self]).map(|mut v| v.pop().unwrap_or_default())
    }

    /// The planned outputs in commit order.
    fn order(&self) -> Vec<Planned> {
        let mut planned = self.planned.clone();
        planned.sort_by_key(|p| p.order);
        planned
    }

    /// Check what commit needs before anything moves: every output staged,
    /// none existing unless replaced, none where a directory must be.
    fn precheck(&self) -> Result<()> {
        for p in &self.planned {
            if std::fs::symlink_metadata(self.tree().join(&p.rel)).is_err() {
                return Err(Error::NotStaged {
                    path: self.root.join(&p.rel),
                });
            }
        }
        if self.fresh {
            return Ok(());
        }
        self.check_existing()?;
        for p in &self.planned {
            let dest = self.root.join(&p.rel);
            let new = std::fs::metadata(self.tree().join(&p.rel));
            let old = std::fs::symlink_metadata(&dest);
            if let (Ok(old), Ok(new)) = (old, new)
                && old.is_dir() != new.is_dir()
            {
                return Err(Error::OutputIsDir { path: dest });
            }
        }
        Ok(())
    }
}

/// The directory `p` lives in (`.` for a bare name).
fn parent_of(p: &Path) -> &Path {
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Commit several [`Outputs`] as one: each in turn, in the order given (the
/// archives' outputs before the host binary's); when any move fails, every
/// move of every one is undone. Returns each one's final paths.
pub fn commit_all(outputs: Vec<Outputs>) -> Result<Vec<Vec<PathBuf>>> {
    let reports = commit_reports(outputs)?;
    Ok(reports.into_iter().map(|c| c.all).collect())
}

/// [`commit_all`], saying for each root which outputs were written and
/// which were left alone as identical.
fn commit_reports(outputs: Vec<Outputs>) -> Result<Vec<Committed>> {
    for o in &outputs {
        o.precheck()?;
    }
    let mut done: Vec<Undo> = Vec::new();
    let mut reports = Vec::new();
    for o in &outputs {
        match commit_one(o) {
            Ok((undo, c)) => {
                done.push(undo);
                reports.push(c);
            }
            Err(e) => {
                for u in done.into_iter().rev() {
                    u.undo();
                }
                return Err(e);
            }
        }
    }
    for (o, u) in outputs.into_iter().zip(done) {
        u.forget();
        // A root made only to be locked stays when an output went in.
        let keep = o.fresh || !o.planned.is_empty();
        let Outputs {
            holder, created, ..
        } = o;
        let path = holder.path().to_path_buf();
        if let Err(error) = holder.close() {
            left_behind().push(LeftBehind { path, error });
        }
        if let Some(c) = created.filter(|_| keep) {
            c.keep();
        }
    }
    Ok(reports)
}

/// A staging directory a commit could not remove: every output is in
/// place, but `.kpack-tmp-…` stays until a later run into the same root
/// removes it. The command reports it ([`take_left_behind`]).
#[derive(Debug)]
pub struct LeftBehind {
    /// The staging directory.
    pub path: PathBuf,
    /// Why it could not be removed.
    pub error: std::io::Error,
}

/// The staging directories left behind by this process's commits.
fn left_behind() -> std::sync::MutexGuard<'static, Vec<LeftBehind>> {
    static LEFT: std::sync::Mutex<Vec<LeftBehind>> = std::sync::Mutex::new(Vec::new());
    LEFT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The staging directories that commits of this process could not remove
/// since the last call: for the command to warn, naming each, and exit 1.
pub fn take_left_behind() -> Vec<LeftBehind> {
    std::mem::take(&mut *left_behind())
}

/// What one commit did, to undo it.
enum Undo {
    /// The staging tree became the root.
    Fresh { root: PathBuf, tree: PathBuf },
    /// Outputs moved into an existing root.
    Merged(Merge),
}

impl Undo {
    fn undo(self) {
        match self {
            Undo::Fresh { root, tree } => {
                let _ = std::fs::rename(root, tree);
            }
            Undo::Merged(m) => m.rollback(),
        }
    }

    fn forget(self) {
        if let Undo::Merged(m) = self {
            m.finish();
        }
    }
}

/// One output root's commit.
fn commit_one(o: &Outputs) -> Result<(Undo, Committed)> {
    let order = o.order();
    let finals: Vec<PathBuf> = order.iter().map(|p| o.root.join(&p.rel)).collect();
    if o.fresh && std::fs::symlink_metadata(&o.root).is_err() {
        std::fs::rename(o.tree(), &o.root).map_err(|source| Error::Commit {
            path: o.root.clone(),
            source,
        })?;
        let undo = Undo::Fresh {
            root: o.root.clone(),
            tree: o.tree(),
        };
        return Ok((undo, Committed::of(finals, Vec::new())));
    }
    let mut m = Merge::begin(o, &order)?;
    for p in &order {
        if let Err(e) = m.move_in(&p.rel, p.update) {
            m.rollback();
            return Err(e);
        }
    }
    let kept = m.kept.iter().map(|r| o.root.join(r)).collect();
    Ok((Undo::Merged(m), Committed::of(finals, kept)))
}

/// Outputs being moved into an existing root through directory handles.
struct Merge {
    root: PathBuf,
    root_dir: Dir,
    tree_dir: Dir,
    replaced_dir: Dir,
    holder: PathBuf,
    existing: Existing,
    /// Moves made: (relative path, whether an old output was set aside).
    moved: Vec<(PathBuf, bool)>,
    /// Outputs left as they were, identical to the staged ones.
    kept: Vec<PathBuf>,
    /// Directories created under the root, in creation order.
    made: Vec<PathBuf>,
}

impl Merge {
    /// Open the handles and write the journal.
    fn begin(o: &Outputs, order: &[Planned]) -> Result<Merge> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Commit { path, source }
        };
        let holder = o.holder.path().to_path_buf();
        let root_dir = Dir::open(&o.root).map_err(io(&o.root))?;
        let tree_dir = Dir::open(&o.tree()).map_err(io(&o.tree()))?;
        let replaced = holder.join(REPLACED);
        std::fs::create_dir_all(&replaced).map_err(io(&replaced))?;
        let replaced_dir = Dir::open(&replaced).map_err(io(&replaced))?;
        write_journal(&holder, order).map_err(io(&holder.join(JOURNAL)))?;
        Ok(Merge {
            root: o.root.clone(),
            root_dir,
            tree_dir,
            replaced_dir,
            holder,
            existing: o.existing,
            moved: Vec::new(),
            kept: Vec::new(),
            made: Vec::new(),
        })
    }

    /// Move the staged `rel` into place (the old one set aside first when
    /// replacing).
    fn move_in(&mut self, rel: &Path, update: bool) -> Result<()> {
        let dest = self.root.join(rel);
        let err = |source| Error::Commit {
            path: dest.clone(),
            source,
        };
        let (dir, name) = self
            .root_dir
            .walk_to_parent(rel, &mut self.made)
            .map_err(err)?;
        let (src_dir, src_name) = self
            .tree_dir
            .walk_to_parent(rel, &mut Vec::new())
            .map_err(err)?;
        let mut set_aside = false;
        let keep = self.existing == Existing::KeepIdentical && !update;
        if keep {
            return self.move_unless_identical(rel, (&src_dir, &src_name), (&dir, &name));
        }
        if dir.exists(&name) {
            if self.existing == Existing::Refuse && !update {
                return Err(Error::Exists { path: dest });
            }
            let (old_dir, old_name) = self
                .replaced_dir
                .walk_to_parent(rel, &mut Vec::new())
                .map_err(err)?;
            Dir::rename(&dir, &name, &old_dir, &old_name).map_err(err)?;
            set_aside = true;
        }
        if let Err(e) = Dir::rename(&src_dir, &src_name, &dir, &name) {
            if set_aside
                && let Ok((old_dir, old_name)) =
                    self.replaced_dir.walk_to_parent(rel, &mut Vec::new())
            {
                let _ = Dir::rename(&old_dir, &old_name, &dir, &name);
            }
            return Err(err(e));
        }
        self.moved.push((rel.to_path_buf(), set_aside));
        Ok(())
    }

    /// Move the staged `rel` into place unless an output is there: one
    /// with the same contents is left alone (the staged copy stays in the
    /// staging tree), one with other contents is an error. The rename never
    /// replaces, so an output a parallel run commits meanwhile is compared
    /// too.
    fn move_unless_identical(
        &mut self,
        rel: &Path,
        (src_dir, src_name): (&Dir, &std::ffi::OsStr),
        (dir, name): (&Dir, &std::ffi::OsStr),
    ) -> Result<()> {
        let dest = self.root.join(rel);
        match Dir::rename_noreplace(src_dir, src_name, dir, name) {
            Ok(()) => {
                self.moved.push((rel.to_path_buf(), false));
                return Ok(());
            }
            Err(e) if !dir.exists(name) => {
                return Err(Error::Commit {
                    path: dest,
                    source: e,
                });
            }
            Err(_) => {}
        }
        let staged = self.holder.join(TREE).join(rel);
        match crate::first_difference(&staged, &dest) {
            None => {
                self.kept.push(rel.to_path_buf());
                Ok(())
            }
            Some(first) => Err(Error::ExistsDiffering { path: dest, first }),
        }
    }

    /// Undo every move, newest first, restore what was replaced and remove
    /// the directories made. Best effort: what cannot be moved back stays
    /// in the staging directory for the next run.
    fn rollback(mut self) {
        for (rel, set_aside) in std::mem::take(&mut self.moved).into_iter().rev() {
            let back = (
                self.root_dir.walk_to_parent(&rel, &mut Vec::new()),
                self.tree_dir.walk_to_parent(&rel, &mut Vec::new()),
            );
            if let (Ok((dir, name)), Ok((src_dir, src_name))) = back {
                let _ = Dir::rename(&dir, &name, &src_dir, &src_name);
                if set_aside
                    && let Ok((old_dir, old_name)) =
                        self.replaced_dir.walk_to_parent(&rel, &mut Vec::new())
                {
                    let _ = Dir::rename(&old_dir, &old_name, &dir, &name);
                }
            }
        }
        for d in self.made.iter().rev() {
            let _ = std::fs::remove_dir(self.root.join(d));
        }
        let _ = std::fs::remove_file(self.holder.join(JOURNAL));
    }

    /// The commit is done: the journal goes (what was replaced goes with
    /// the staging directory).
    fn finish(self) {
        let _ = std::fs::remove_file(self.holder.join(JOURNAL));
    }
}

/// Write the journal: the planned paths in commit order, then synced, so a
/// run that finds it after a kill can finish the commit.
fn write_journal(holder: &Path, order: &[Planned]) -> std::io::Result<()> {
    use std::io::Write;
    let mut text = String::new();
    for p in order {
        if let Some(s) = p.rel.to_str() {
            text.push_str(s);
            text.push('\n');
        }
    }
    let path = holder.join(JOURNAL);
    let mut f = std::fs::File::create(&path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Remove the stale kpack temp files and directories directly in `dir`;
/// returns what was removed. Removal is best effort: what cannot be removed
/// is left for the next run.
///
/// A stale staging directory that holds a commit journal belongs to a run
/// killed while it moved its outputs into `dir`: its commit is finished
/// first ([`crate::Outputs`]), so `dir` ends with the complete new outputs,
/// never a part of them.
pub fn remove_stale_temps(dir: &Path) -> Vec<PathBuf> {
    crate::temp::stale_temps(dir)
        .into_iter()
        .filter(|p| {
            let is_dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
            if is_dir && p.join(JOURNAL).is_file() {
                finish_interrupted(dir, p);
            }
            if is_dir {
                std::fs::remove_dir_all(p).is_ok()
            } else {
                std::fs::remove_file(p).is_ok()
            }
        })
        .collect()
}

/// Finish the commit a dead run began in `root` from its staging directory
/// `holder` (which holds a journal): every output the journal lists that is
/// still staged is moved into place, replacing what is there, in the
/// journal's order. Returns whether everything was moved.
pub(crate) fn finish_interrupted(root: &Path, holder: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(holder.join(JOURNAL)) else {
        return false;
    };
    let replaced = holder.join(REPLACED);
    let _ = std::fs::create_dir_all(&replaced);
    let dirs = (
        Dir::open(root),
        Dir::open(&holder.join(TREE)),
        Dir::open(&replaced),
    );
    let (Ok(root_dir), Ok(tree_dir), Ok(replaced_dir)) = dirs else {
        return false;
    };
    let mut ok = true;
    for line in text.lines() {
        let rel = Path::new(line);
        if !crate::is_plain_relative(line) || rel.components().any(|c| c == Component::CurDir) {
            ok = false;
            continue;
        }
        let Ok((src_dir, src_name)) = tree_dir.walk_to_parent(rel, &mut Vec::new()) else {
            ok = false;
            continue;
        };
        if !src_dir.exists(&src_name) {
            continue;
        }
        let moved = root_dir
            .walk_to_parent(rel, &mut Vec::new())
            .and_then(|(dir, name)| {
                if dir.exists(&name) {
                    let (old_dir, old_name) = replaced_dir.walk_to_parent(rel, &mut Vec::new())?;
                    Dir::rename(&dir, &name, &old_dir, &old_name)?;
                }
                Dir::rename(&src_dir, &src_name, &dir, &name)
            });
        ok &= moved.is_ok();
    }
    ok
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
