//! TheRock artifact archives (`.tar.zst`, `.tar.xz`, `.tar.gz`) as split
//! input, read in one streaming pass: no unpacked copy of the artifact is
//! made. The archive's first member must be `artifact_manifest.txt` (as
//! TheRock's own reader requires); every other entry belongs to one of its
//! prefixes. Entries are gathered in bounded batches per prefix: a batch's
//! regular files are spooled into the staging directory (a fat binary
//! needs random access to be offloaded), then the prefix splitter
//! ([`split_nodes`]) processes them and *moves* each kept file into its
//! output, so a copied file is written once. Disk beside the outputs and
//! memory stay bounded by a few batches whatever the archive's size.
//!
//! Members come through [`kpack_artifact::walk`], which checks every name
//! and link once. Symlinks are recreated as they are, after every file of
//! the artifact is in place (nothing is written while a symlink member
//! exists in the output), permission bits kept, and hard links stay hard
//! links: a link to a file of the same batch is linked in the spool (and
//! split as the directory walk would see it: a file of its own), a link to
//! a file of an earlier batch is linked to that file's output when it was
//! copied unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;

use kpack_artifact::{
    Event, Limits, Member, MemberKind, Remover, Store, StoreWriter, Stored, walk, write_file,
};
use kpack_binary::{FileKind, HEAD_LEN};
use kpack_fsafe::{Entry, Tree};

use crate::artifact::{ArtifactInput, ArtifactReport};
use crate::error::{Error, Result, error_chain};
use crate::prefix::{Input, Node, PrefixLayout, PrefixReport, SplitOptions, split_nodes};

/// Spooled bytes after which a batch is handed to the splitter.
const BATCH_BYTES: u64 = 512 << 20;
/// Spooled files after which a batch is handed to the splitter.
const BATCH_FILES: usize = 4096;

/// The entries of one prefix gathered so far, spooled under
/// `dir/<prefix>`.
struct Batch {
    prefix: String,
    /// This batch's own spool directory: the next batch is read into
    /// another while this one is split.
    dir: PathBuf,
    /// `dir` relative to the spool.
    rel: PathBuf,
    nodes: Vec<Node>,
    bytes: u64,
}

/// A symlink member, made once every file is in place.
struct LateSymlink {
    prefix: String,
    /// Its path in the artifact.
    path: String,
    target: PathBuf,
}

/// A hard link to a file of an earlier batch, made once every batch is done.
struct LateLink {
    /// The manifest prefix it lies in.
    prefix: String,
    /// The link's member path.
    path: String,
    /// The member it links to.
    target: String,
}

/// The reading side of an archive's split (its own thread): decompresses
/// the archive, spools each batch of entries and hands it over.
struct Spooler<'a> {
    archive: &'a Path,
    spool: &'a Path,
    /// The spool, written never through a symlink.
    spool_tree: Tree,
    generic_root: &'a Path,
    batch: Option<Batch>,
    batches: usize,
    /// The prefixes that held entries.
    seen: BTreeSet<String>,
    late_links: Vec<LateLink>,
    symlinks: Vec<LateSymlink>,
    handover: SyncSender<Batch>,
    store: StoreWriter,
    /// Every stored member, by path (a hard link to one is stored too).
    stored: HashMap<String, Stored>,
}

/// What the reading side found besides its batches.
struct Spooled {
    prefixes: Vec<String>,
    seen: BTreeSet<String>,
    late_links: Vec<LateLink>,
    symlinks: Vec<LateSymlink>,
    stored: HashMap<String, Stored>,
    warnings: Vec<String>,
}

/// The splitting side: splits each batch handed over, in archive order.
struct Splitter<'a> {
    archive: &'a Path,
    store: &'a Store,
    stage: &'a Path,
    generic_root: &'a Path,
    component: &'a str,
    reports: BTreeMap<String, PrefixReport>,
}

/// Split the artifact archive `input.dir` into `stage`
/// (`<component>_generic`, `<component>_<arch>`), into `rep`. Returns the
/// prefixes processed.
pub(crate) fn split_archive(
    input: &ArtifactInput,
    stage: &Path,
    opts: &SplitOptions<'_>,
    store: &Store,
    remover: &Remover,
    rep: &mut ArtifactReport,
) -> Vec<String> {
    match read_archive(input, stage, opts, store, remover) {
        Ok((processed, reports, warnings)) => {
            rep.warnings.extend(warnings);
            for r in reports {
                rep.absorb(r);
            }
            processed
        }
        Err(e) => {
            rep.errors.push(error_chain(&e));
            Vec::new()
        }
    }
}

type Read3 = (Vec<String>, Vec<PrefixReport>, Vec<String>);

/// Read the archive on one thread while the batches it spools are split on
/// this one (and the rayon pool): decompressing the next batch overlaps
/// splitting the last. At most two batches are spooled at once; plain
/// files go to `store` instead.
fn read_archive(
    input: &ArtifactInput,
    stage: &Path,
    opts: &SplitOptions<'_>,
    store: &Store,
    remover: &Remover,
) -> Result<Read3> {
    let archive = input.dir.as_path();
    let spool = kpack_fsafe::temp_dir_in(stage, "spool")
        .map_err(|e| Error::io(stage, "cannot create a spool directory", e))?;
    let generic_root = stage.join(format!("{}_generic", input.component));
    let mut splitter = Splitter {
        archive,
        store,
        stage,
        generic_root: &generic_root,
        component: &input.component,
        reports: BTreeMap::new(),
    };
    let (handover, batches) = std::sync::mpsc::sync_channel(0);
    let limits = &opts.archive_limits;
    let (read, split) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            spool_archive(
                archive,
                spool.path(),
                &generic_root,
                store,
                limits,
                handover,
            )
        });
        let split = batches
            .iter()
            .try_for_each(|b| splitter.split(b, opts, remover));
        // Splitting failed: the reader stops at its next handover.
        drop(batches);
        (reader.join(), split)
    });
    remover.remove(spool.keep());
    let read =
        read.map_err(|_| Error::invalid(archive, "internal: the archive reader panicked"))?;
    // A splitting error first: it is what stopped the reader.
    split?;
    let read = read?;
    splitter.make_late_links(&read)?;
    splitter.make_symlinks(&read)?;
    Ok(splitter.finish(&read))
}

/// The reading side: every member of `archive` after its manifest, spooled
/// in batches handed over through `handover`.
fn spool_archive(
    archive: &Path,
    spool: &Path,
    generic_root: &Path,
    store: &Store,
    limits: &Limits,
    handover: SyncSender<Batch>,
) -> Result<Spooled> {
    let store = store
        .writer()
        .map_err(|e| Error::io(spool, "cannot write the store", e))?;
    let spool_tree = Tree::open(spool).map_err(|e| Error::io(spool, "cannot open", e))?;
    let mut spooler = Spooler {
        archive,
        spool,
        spool_tree,
        generic_root,
        batch: None,
        batches: 0,
        seen: BTreeSet::new(),
        late_links: Vec::new(),
        symlinks: Vec::new(),
        handover,
        store,
        stored: HashMap::new(),
    };
    let walked = walk(archive, limits, |event| match event {
        Event::Manifest(_) => Ok(()),
        Event::Member(m) => spooler.member(m),
    })?;
    spooler.hand_over()?;
    Ok(Spooled {
        prefixes: walked.prefixes,
        seen: spooler.seen,
        late_links: spooler.late_links,
        symlinks: spooler.symlinks,
        stored: spooler.stored,
        warnings: walked.warnings,
    })
}

impl Spooler<'_> {
    /// Take one member (checked by the walk).
    fn member(&mut self, mut m: Member<'_>) -> Result<()> {
        let prefix = m.prefix.to_string();
        if self.batch.as_ref().is_some_and(|b| b.prefix != prefix) {
            self.hand_over()?;
        }
        self.seen.insert(prefix.clone());
        if let MemberKind::Symlink(target) = &m.kind {
            self.symlinks.push(LateSymlink {
                prefix,
                path: m.path.as_str().to_string(),
                target: target.clone(),
            });
            return Ok(());
        }
        if m.rel.is_empty() {
            return self.prefix_root(&prefix, &m);
        }
        let rel = m.rel.to_string();
        let (batch_rel, batch_dir) = self.open_batch(&prefix);
        let in_spool = batch_rel.join(&prefix).join(&rel);
        let spooled = batch_dir.join(&prefix).join(&rel);
        match m.kind.clone() {
            MemberKind::Dir => self.push(Node::Dir(rel), 0),
            MemberKind::File { mode, .. } => self.file(&mut m, rel, &in_spool, mode)?,
            MemberKind::HardLink(target) => {
                let target = target.as_str();
                // Only a file of this batch is still in its spool.
                let from = batch_rel.join(target);
                if let Some(s) = self.stored.get(target) {
                    self.push(Node::Stored(rel, *s), 0);
                } else if self.spool_tree.entry(&from) == Some(Entry::File) {
                    self.spool_tree
                        .hard_link(&from, &in_spool)
                        .map_err(|e| Error::io(&spooled, "cannot create a hard link", e))?;
                    let size = std::fs::symlink_metadata(&spooled).map_or(0, |m| m.len());
                    self.push(Node::File(rel, size), 0);
                } else {
                    self.late_links.push(LateLink {
                        prefix: prefix.clone(),
                        path: m.path.as_str().to_string(),
                        target: target.to_string(),
                    });
                }
            }
            MemberKind::Symlink(_) => {}
        }
        if self
            .batch
            .as_ref()
            .is_some_and(|b| b.bytes >= BATCH_BYTES || b.nodes.len() >= BATCH_FILES)
        {
            self.hand_over()?;
        }
        Ok(())
    }

    /// The batch members of `prefix` go into (opened when none is): its
    /// path inside the spool and on disk.
    fn open_batch(&mut self, prefix: &str) -> (PathBuf, PathBuf) {
        let batch = self.batch.get_or_insert_with(|| {
            self.batches += 1;
            let rel = PathBuf::from(self.batches.to_string());
            Batch {
                prefix: prefix.to_string(),
                dir: self.spool.join(&rel),
                rel,
                nodes: Vec::new(),
                bytes: 0,
            }
        });
        (batch.rel.clone(), batch.dir.clone())
    }

    /// Add `node` (of `bytes` spooled bytes) to the open batch.
    fn push(&mut self, node: Node, bytes: u64) {
        if let Some(b) = self.batch.as_mut() {
            b.bytes += bytes;
            b.nodes.push(node);
        }
    }

    /// A file member: into the store when plain, else spooled at
    /// `in_spool`.
    fn file(&mut self, m: &mut Member<'_>, rel: String, in_spool: &Path, mode: u32) -> Result<()> {
        let shown = self.archive.join(m.path.as_path());
        let mut head = Vec::with_capacity(HEAD_LEN);
        m.data()
            .take(HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(&shown, "cannot read", e))?;
        if is_plain(&head) {
            let s = self
                .store
                .append(&head, &mut m.data(), mode)
                .map_err(|e| Error::io(&shown, "cannot store", e))?;
            self.stored.insert(m.path.as_str().to_string(), s);
            self.push(Node::Stored(rel, s), 0);
        } else {
            let size = write_file(&head, &mut m.data(), &self.spool_tree, in_spool, mode)
                .map_err(|e| Error::io(&shown, "cannot spool", e))?;
            self.push(Node::File(rel, size), size);
        }
        Ok(())
    }

    /// The member that is a prefix itself: a directory (a symlink is made
    /// last, with the others).
    fn prefix_root(&mut self, prefix: &str, m: &Member<'_>) -> Result<()> {
        if m.kind == MemberKind::Dir {
            let out = self.generic_root.join(prefix);
            return Tree::create(self.generic_root)
                .and_then(|t| t.create_dir_all(Path::new(prefix)))
                .map_err(|e| Error::io(&out, "cannot create", e));
        }
        Err(bad(
            self.archive,
            m.offset,
            m.path.as_str(),
            "a prefix of the manifest that is not a directory",
        ))
    }

    /// Hand the spooled batch to the splitting side (waiting until it
    /// takes it).
    fn hand_over(&mut self) -> Result<()> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        // What the batch stored must be readable by the splitting side.
        self.store
            .flush()
            .map_err(|e| Error::io(self.archive, "cannot write the store", e))?;
        self.handover
            .send(batch)
            .map_err(|_| Error::invalid(self.archive, "splitting stopped"))
    }
}

impl Splitter<'_> {
    /// Split one spooled batch, then have its spool removed.
    fn split(&mut self, batch: Batch, opts: &SplitOptions<'_>, remover: &Remover) -> Result<()> {
        let source = batch.dir.join(&batch.prefix);
        Tree::create(&batch.dir)
            .and_then(|t| t.create_dir_all(Path::new(&batch.prefix)))
            .map_err(|e| Error::io(&source, "cannot create", e))?;
        let shown = self.archive.join(&batch.prefix);
        crate::prefix::refuse_archives(&source, &shown, &batch.nodes)?;
        let (stage, c, p) = (self.stage, self.component, batch.prefix.as_str());
        let arch = |a: &str| stage.join(format!("{c}_{a}")).join(p);
        let generic = self.generic_root.join(p);
        let layout = PrefixLayout {
            source: &source,
            prefix: p,
            generic: &generic,
            arch: &arch,
        };
        let input = Input {
            owned: true,
            shown: &shown,
            store: Some(self.store),
            trees: crate::prefix::Trees::default(),
        };
        let report = self
            .reports
            .entry(p.to_string())
            .or_insert_with(|| PrefixReport::new(p));
        split_nodes(&layout, opts, &batch.nodes, &input, report)?;
        remover.remove(batch.dir);
        Ok(())
    }

    /// Hard links to files of earlier batches: linked to the target's
    /// output where it was copied unchanged (one output tree holds it).
    fn make_late_links(&mut self, read: &Spooled) -> Result<()> {
        if read.late_links.is_empty() {
            return Ok(());
        }
        let tree = Tree::create(self.generic_root)
            .map_err(|e| Error::io(self.generic_root, "cannot create", e))?;
        for l in &read.late_links {
            let offloaded = self
                .reports
                .values()
                .flat_map(|r| &r.binaries)
                .any(|b| b.kernel_name == l.target);
            let from = self.generic_root.join(&l.target);
            let to = self.generic_root.join(&l.path);
            let stored = read.stored.get(&l.target);
            if let Some(s) = stored.filter(|s| self.store.is_placed(s, &from)) {
                // Placed again: a second link to the same stored bytes.
                self.store
                    .place(s, &to)
                    .map_err(|e| Error::io(&to, "cannot create a hard link", e))?;
            } else if offloaded || tree.entry(Path::new(&l.target)) != Some(Entry::File) {
                return Err(Error::invalid(
                    self.archive,
                    format!(
                        "member {:?}: hard link to {:?} in another batch, which was offloaded or moved to an arch artifact; store it as a file",
                        l.path, l.target
                    ),
                ));
            } else {
                tree.hard_link(Path::new(&l.target), Path::new(&l.path))
                    .map_err(|e| Error::io(&to, "cannot create a hard link", e))?;
            }
            if let Some(r) = self.reports.get_mut(&l.prefix) {
                r.files += 1;
            }
        }
        Ok(())
    }

    /// The artifact's symlinks, made in the generic output once every file
    /// is in place, never followed: no later write can go through one.
    fn make_symlinks(&mut self, read: &Spooled) -> Result<()> {
        if read.symlinks.is_empty() {
            return Ok(());
        }
        let tree = Tree::create(self.generic_root)
            .map_err(|e| Error::io(self.generic_root, "cannot create", e))?;
        for l in &read.symlinks {
            tree.symlink(&l.target, Path::new(&l.path)).map_err(|e| {
                Error::io(self.generic_root.join(&l.path), "cannot create symlink", e)
            })?;
            let report = self
                .reports
                .entry(l.prefix.clone())
                .or_insert_with(|| PrefixReport::new(&l.prefix));
            report.symlinks += 1;
        }
        Ok(())
    }

    /// The processed prefixes in manifest order, their reports, and a
    /// warning per manifest prefix the archive does not hold.
    fn finish(mut self, read: &Spooled) -> Read3 {
        let mut processed = Vec::new();
        let mut reports = Vec::new();
        let mut warnings = read.warnings.clone();
        for p in &read.prefixes {
            if read.seen.contains(p) {
                let r = self.reports.remove(p);
                processed.push(p.clone());
                reports.push(r.unwrap_or_else(|| PrefixReport::new(p)).finish());
            } else {
                warnings.push(format!(
                    "{}: prefix listed in the manifest does not exist; skipped",
                    self.archive.join(p).display()
                ));
            }
        }
        (processed, reports, warnings)
    }
}

/// A problem with the member `path` of `archive` at offset `at`.
fn bad(archive: &Path, at: u64, path: &str, what: &str) -> Error {
    Error::invalid(
        archive,
        format!("member {path:?} at offset {at:#x}: {what}"),
    )
}

/// Whether a member whose first bytes are `head` is a plain file: one the
/// split only places (no binary, bundle, static archive or kpack archive),
/// which can be stored rather than spooled.
fn is_plain(head: &[u8]) -> bool {
    !FileKind::may_be_pe(head) && matches!(FileKind::detect(head), FileKind::Other | FileKind::Zip)
}
