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
//! Symlinks are recreated as they are, permission bits kept, and hard
//! links stay hard links: a link to a file of the same batch is linked in
//! the spool (and split as the directory walk would see it: a file of its
//! own), a link to a file of an earlier batch is linked to that file's
//! output when it was copied unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;

use kpack_binary::{FileKind, HEAD_LEN};

use crate::artifact::{ArtifactInput, ArtifactReport};
use crate::codec::{Codec, artifact_archive_stem};
use crate::error::{Error, ErrorKind, Result, error_chain};
use crate::manifest::{MANIFEST, parse_manifest};
use crate::prefix::{Input, Node, PrefixLayout, PrefixReport, SplitOptions, split_nodes};
use crate::remover::Remover;
use crate::store::{Store, StoreWriter, Stored, write_file};

/// Spooled bytes after which a batch is handed to the splitter.
const BATCH_BYTES: u64 = 512 << 20;
/// Spooled files after which a batch is handed to the splitter.
const BATCH_FILES: usize = 4096;
/// The largest `artifact_manifest.txt` read.
const MANIFEST_LIMIT: u64 = 1 << 20;

/// The entries of one prefix gathered so far, spooled under
/// `dir/<prefix>`.
struct Batch {
    prefix: String,
    /// This batch's own spool directory: the next batch is read into
    /// another while this one is split.
    dir: PathBuf,
    nodes: Vec<Node>,
    bytes: u64,
}

/// A hard link to a file of an earlier batch, made once every batch is done.
struct LateLink {
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
    generic_root: &'a Path,
    prefixes: Vec<String>,
    batch: Option<Batch>,
    batches: usize,
    /// The prefixes that held entries.
    seen: BTreeSet<String>,
    late_links: Vec<LateLink>,
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
    stored: HashMap<String, Stored>,
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
    let (read, split) = std::thread::scope(|s| {
        let reader =
            s.spawn(|| spool_archive(archive, spool.path(), &generic_root, store, handover));
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
    Ok(splitter.finish(&read))
}

/// The reading side: every member of `archive` after its manifest, spooled
/// in batches handed over through `handover`.
fn spool_archive(
    archive: &Path,
    spool: &Path,
    generic_root: &Path,
    store: &Store,
    handover: SyncSender<Batch>,
) -> Result<Spooled> {
    let store = store
        .writer()
        .map_err(|e| Error::io(spool, "cannot write the store", e))?;
    let mut tar = open_artifact(archive)?;
    let mut entries = tar
        .entries()
        .map_err(|e| Error::io(archive, "cannot read the archive", e))?;
    let prefixes = read_manifest_member(archive, entries.next())?;
    let mut spooler = Spooler {
        archive,
        spool,
        generic_root,
        prefixes,
        batch: None,
        batches: 0,
        seen: BTreeSet::new(),
        late_links: Vec::new(),
        handover,
        store,
        stored: HashMap::new(),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(archive, "cannot read the archive", e))?;
        spooler.entry(entry)?;
    }
    spooler.hand_over()?;
    Ok(Spooled {
        prefixes: spooler.prefixes,
        seen: spooler.seen,
        late_links: spooler.late_links,
        stored: spooler.stored,
    })
}

/// The first member: the artifact's manifest, parsed.
fn read_manifest_member<R: Read>(
    archive: &Path,
    first: Option<std::io::Result<tar::Entry<'_, R>>>,
) -> Result<Vec<String>> {
    let missing = || {
        Error::invalid(
            archive,
            format!("an artifact archive must have {MANIFEST} as its first member"),
        )
    };
    let entry = first
        .ok_or_else(missing)?
        .map_err(|e| Error::io(archive, "cannot read the archive", e))?;
    let name = member_path(archive, &entry)?;
    if name != MANIFEST || !entry.header().entry_type().is_file() {
        return Err(missing());
    }
    let mut text = String::new();
    entry
        .take(MANIFEST_LIMIT)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(archive.join(MANIFEST), "cannot read", e))?;
    parse_manifest(&archive.join(MANIFEST), &text)
}

/// A member's path as a plain relative `/`-separated path (`./` and a
/// trailing `/` dropped); absolute paths and `..` are refused.
fn member_path<R: Read>(archive: &Path, entry: &tar::Entry<'_, R>) -> Result<String> {
    let raw = entry.path_bytes().into_owned();
    let text = String::from_utf8(raw).map_err(|_| {
        Error::invalid(
            archive,
            format!(
                "member at offset {:#x}: path is not UTF-8",
                entry.raw_header_position()
            ),
        )
    })?;
    let mut p = text.as_str();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() || p == "." {
        return Ok(String::new());
    }
    if !kpack_fsafe::is_plain_relative(p) {
        return Err(Error::invalid(
            archive,
            format!(
                "member {text:?} at offset {:#x}: not a plain relative path",
                entry.raw_header_position()
            ),
        ));
    }
    Ok(p.to_string())
}

/// The manifest prefix `path` lies in (the longest) and its path inside
/// it (empty for the prefix itself).
fn prefix_of<'p>(prefixes: &'p [String], path: &str) -> Option<(&'p str, String)> {
    prefixes
        .iter()
        .filter_map(|p| {
            if path == p {
                Some((p.as_str(), String::new()))
            } else {
                path.strip_prefix(p.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                    .map(|r| (p.as_str(), r.to_string()))
            }
        })
        .max_by_key(|(p, _)| p.len())
}

impl Spooler<'_> {
    /// Take one member.
    fn entry<R: Read>(&mut self, mut entry: tar::Entry<'_, R>) -> Result<()> {
        use tar::EntryType as T;
        let kind = entry.header().entry_type();
        if matches!(kind, T::XGlobalHeader) {
            return Ok(());
        }
        let path = member_path(self.archive, &entry)?;
        let at = entry.raw_header_position();
        if path.is_empty() && kind.is_dir() {
            // `./`, the archive's root.
            return Ok(());
        }
        let Some((prefix, rel)) = prefix_of(&self.prefixes, &path) else {
            // Directories above a prefix carry nothing; anything else
            // outside the manifest is not part of the artifact.
            if kind.is_dir()
                && self
                    .prefixes
                    .iter()
                    .any(|p| p.starts_with(&format!("{path}/")))
            {
                return Ok(());
            }
            return Err(bad(
                self.archive,
                at,
                &path,
                "not inside any prefix of the artifact manifest",
            ));
        };
        let prefix = prefix.to_string();
        if self.batch.as_ref().is_some_and(|b| b.prefix != prefix) {
            self.hand_over()?;
        }
        self.seen.insert(prefix.clone());
        if rel.is_empty() {
            return self.prefix_root(&prefix, &path, kind, &entry, at);
        }
        let batch = self.batch.get_or_insert_with(|| {
            self.batches += 1;
            Batch {
                prefix: prefix.clone(),
                dir: self.spool.join(self.batches.to_string()),
                nodes: Vec::new(),
                bytes: 0,
            }
        });
        let spooled = batch.dir.join(&prefix).join(&rel);
        match kind {
            T::Directory => batch.nodes.push(Node::Dir(rel)),
            T::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| Error::io(self.archive, "cannot read the archive", e))?
                    .ok_or_else(|| bad(self.archive, at, &path, "symlink without a target"))?;
                batch.nodes.push(Node::Link(rel, target.into_owned()));
            }
            T::Regular | T::Continuous => {
                let mode = entry.header().mode().unwrap_or(0o644);
                let shown = || self.archive.join(&path);
                let mut head = Vec::with_capacity(HEAD_LEN);
                (&mut entry)
                    .take(HEAD_LEN as u64)
                    .read_to_end(&mut head)
                    .map_err(|e| Error::io(shown(), "cannot read", e))?;
                if is_plain(&head) {
                    let s = self
                        .store
                        .append(&head, &mut entry, mode)
                        .map_err(|e| Error::io(shown(), "cannot store", e))?;
                    self.stored.insert(path.clone(), s);
                    batch.nodes.push(Node::Stored(rel, s));
                } else {
                    let size = write_file(&head, &mut entry, &spooled, mode)
                        .map_err(|e| Error::io(shown(), "cannot spool", e))?;
                    batch.bytes += size;
                    batch.nodes.push(Node::File(rel, size));
                }
            }
            T::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|b| {
                        String::from_utf8_lossy(&b)
                            .trim_start_matches("./")
                            .to_string()
                    })
                    .ok_or_else(|| bad(self.archive, at, &path, "hard link without a target"))?;
                let (tp, trel) = prefix_of(&self.prefixes, &target).ok_or_else(|| {
                    bad(
                        self.archive,
                        at,
                        &path,
                        "hard link to a member outside the manifest",
                    )
                })?;
                // Only a file of this batch is still in its spool.
                let from = batch.dir.join(tp).join(&trel);
                if let Some(s) = self.stored.get(&target) {
                    batch.nodes.push(Node::Stored(rel, *s));
                } else if from.is_file() {
                    if let Some(d) = spooled.parent() {
                        std::fs::create_dir_all(d).map_err(|e| Error::io(d, "cannot create", e))?;
                    }
                    std::fs::hard_link(&from, &spooled)
                        .map_err(|e| Error::io(&spooled, "cannot create a hard link", e))?;
                    let size = from.metadata().map(|m| m.len()).unwrap_or(0);
                    batch.nodes.push(Node::File(rel, size));
                } else {
                    self.late_links.push(LateLink { path, target });
                }
            }
            _ => {
                return Err(bad(
                    self.archive,
                    at,
                    &path,
                    "not a regular file, directory, symlink or hard link",
                ));
            }
        }
        if batch.bytes >= BATCH_BYTES || batch.nodes.len() >= BATCH_FILES {
            self.hand_over()?;
        }
        Ok(())
    }

    /// The member that is a prefix itself: a directory, or a symlink kept
    /// as a link (nothing behind it is part of the archive).
    fn prefix_root<R: Read>(
        &mut self,
        prefix: &str,
        path: &str,
        kind: tar::EntryType,
        entry: &tar::Entry<'_, R>,
        at: u64,
    ) -> Result<()> {
        let out = self.generic_root.join(prefix);
        if kind.is_dir() {
            return std::fs::create_dir_all(&out).map_err(|e| Error::io(&out, "cannot create", e));
        }
        if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| Error::io(self.archive, "cannot read the archive", e))?
                .ok_or_else(|| bad(self.archive, at, path, "symlink without a target"))?;
            if let Some(d) = out.parent() {
                std::fs::create_dir_all(d).map_err(|e| Error::io(d, "cannot create", e))?;
            }
            return crate::link::symlink(&target, &out)
                .map_err(|e| Error::io(&out, "cannot create symlink", e));
        }
        Err(bad(
            self.archive,
            at,
            path,
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
        std::fs::create_dir_all(&source).map_err(|e| Error::io(&source, "cannot create", e))?;
        crate::prefix::refuse_archives(&source, &batch.nodes)?;
        let (stage, c, p) = (self.stage, self.component, batch.prefix.as_str());
        let arch = |a: &str| stage.join(format!("{c}_{a}")).join(p);
        let generic = self.generic_root.join(p);
        let layout = PrefixLayout {
            source: &source,
            prefix: p,
            generic: &generic,
            arch: &arch,
        };
        let shown = self.archive.join(p);
        let input = Input {
            owned: true,
            shown: &shown,
            store: Some(self.store),
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
            } else if offloaded || !from.is_file() {
                return Err(Error::invalid(
                    self.archive,
                    format!(
                        "member {:?}: hard link to {:?} in another batch, which was offloaded or moved to an arch artifact; store it as a file",
                        l.path, l.target
                    ),
                ));
            } else {
                if let Some(d) = to.parent() {
                    std::fs::create_dir_all(d).map_err(|e| Error::io(d, "cannot create", e))?;
                }
                std::fs::hard_link(&from, &to)
                    .map_err(|e| Error::io(&to, "cannot create a hard link", e))?;
            }
            let (p, _) = prefix_of(&read.prefixes, &l.path).ok_or_else(|| {
                Error::invalid(self.archive, "internal: a link outside the manifest")
            })?;
            if let Some(r) = self.reports.get_mut(p) {
                r.files += 1;
            }
        }
        Ok(())
    }

    /// The processed prefixes in manifest order, their reports, and a
    /// warning per manifest prefix the archive does not hold.
    fn finish(mut self, read: &Spooled) -> Read3 {
        let mut processed = Vec::new();
        let mut reports = Vec::new();
        let mut warnings = Vec::new();
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
    Error::new(
        ErrorKind::Invalid,
        Some(archive.to_path_buf()),
        format!("member {path:?} at offset {at:#x}: {what}"),
    )
}

/// Whether a member whose first bytes are `head` is a plain file: one the
/// split only places (no binary, bundle, static archive or kpack archive),
/// which can be stored rather than spooled.
fn is_plain(head: &[u8]) -> bool {
    !head.starts_with(b"MZ") && matches!(FileKind::detect(head), FileKind::Other | FileKind::Zip)
}

/// Open the artifact archive at `path` (its codec sniffed) as a tar stream
/// and read its manifest, the first member.
fn open_artifact(path: &Path) -> Result<tar::Archive<Box<dyn Read>>> {
    let codec = Codec::sniff(path).ok_or_else(|| {
        Error::invalid(
            path,
            "not an artifact archive (.tar.zst, .tar.xz or .tar.gz)",
        )
    })?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let decoder = codec
        .decoder(file)
        .map_err(|e| Error::io(path, "cannot start decompressing", e))?;
    Ok(tar::Archive::new(decoder))
}

/// Unpack the artifact archive `archive` into the directory `dst`, merging
/// with what is there (recombine's merge of arch artifacts): directories
/// merge, a file or symlink already there must be the same, modes and
/// hard links are kept. The archive's manifest is not written. Returns the
/// manifest's prefixes that held entries, in manifest order.
pub(crate) fn unpack_artifact(archive: &Path, dst: &Path) -> Result<Vec<String>> {
    let mut tar = open_artifact(archive)?;
    let mut entries = tar
        .entries()
        .map_err(|e| Error::io(archive, "cannot read the archive", e))?;
    let prefixes = read_manifest_member(archive, entries.next())?;
    let mut seen = std::collections::BTreeSet::new();
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::io(archive, "cannot read the archive", e))?;
        let kind = entry.header().entry_type();
        if matches!(kind, tar::EntryType::XGlobalHeader) {
            continue;
        }
        let path = member_path(archive, &entry)?;
        let at = entry.raw_header_position();
        let bad = |what: &str| {
            Error::invalid(
                archive,
                format!("member {path:?} at offset {at:#x}: {what}"),
            )
        };
        let Some((prefix, _)) = prefix_of(&prefixes, &path) else {
            if kind.is_dir() {
                continue;
            }
            return Err(bad("not inside any prefix of the artifact manifest"));
        };
        seen.insert(prefix.to_string());
        let to = dst.join(&path);
        if let Some(d) = to.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, "cannot create", e))?;
        }
        match kind {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&to).map_err(|e| Error::io(&to, "cannot create", e))?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| Error::io(archive, "cannot read the archive", e))?
                    .ok_or_else(|| bad("symlink without a target"))?
                    .into_owned();
                match std::fs::read_link(&to) {
                    Ok(t) if t == target => {}
                    Ok(t) => {
                        return Err(Error::invalid(
                            &to,
                            format!(
                                "two artifacts disagree: symlink to {} and to {}",
                                t.display(),
                                target.display()
                            ),
                        ));
                    }
                    Err(_) => crate::link::symlink(&target, &to)
                        .map_err(|e| Error::io(&to, "cannot create symlink", e))?,
                }
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|b| {
                        String::from_utf8_lossy(&b)
                            .trim_start_matches("./")
                            .to_string()
                    })
                    .filter(|t| kpack_fsafe::is_plain_relative(t))
                    .ok_or_else(|| bad("hard link without a plain relative target"))?;
                if to.symlink_metadata().is_err() {
                    std::fs::hard_link(dst.join(&target), &to)
                        .map_err(|e| Error::io(&to, "cannot create a hard link", e))?;
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mode = entry.header().mode().unwrap_or(0o644);
                if to.symlink_metadata().is_ok() {
                    if !same_contents(&mut entry, &to)
                        .map_err(|e| Error::io(&to, "cannot compare", e))?
                    {
                        return Err(Error::invalid(
                            &to,
                            format!(
                                "two artifacts provide different files here (second: {})",
                                archive.join(&path).display()
                            ),
                        ));
                    }
                } else {
                    write_file(&[], &mut entry, &to, mode)
                        .map_err(|e| Error::io(&to, "cannot write", e))?;
                }
            }
            _ => return Err(bad("not a regular file, directory, symlink or hard link")),
        }
    }
    Ok(prefixes.into_iter().filter(|p| seen.contains(p)).collect())
}

/// Whether the rest of `entry` equals the file at `path`, read side by side.
fn same_contents(entry: &mut impl Read, path: &Path) -> std::io::Result<bool> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path)?);
    let (mut a, mut b) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(entry, &mut a)?;
        let m = read_full(&mut f, &mut b[..n.max(1)])?;
        if n != m || a[..n] != b[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The equivalence manifest of the artifact archive at `path`, computed
/// from the stream (regular files and hard links, not symlinks), as
/// TheRock's script computes it from the unpacked directory.
pub fn archive_manifest(path: &Path) -> Result<crate::EquivalenceManifest> {
    use sha2::Digest;
    let mut tar = open_artifact(path)?;
    let mut files: Vec<crate::EquivalenceFile> = Vec::new();
    let entries = tar
        .entries()
        .map_err(|e| Error::io(path, "cannot read the archive", e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::io(path, "cannot read the archive", e))?;
        let rel = member_path(path, &entry)?;
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut h = sha2::Sha256::new();
                let n = std::io::copy(&mut entry, &mut h)
                    .map_err(|e| Error::io(path.join(&rel), "cannot read", e))?;
                files.push(crate::EquivalenceFile {
                    path: rel,
                    sha256: hex::encode(h.finalize()),
                    size_bytes: n,
                });
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|b| {
                        String::from_utf8_lossy(&b)
                            .trim_start_matches("./")
                            .to_string()
                    })
                    .unwrap_or_default();
                if let Some(f) = files.iter().find(|f| f.path == target).cloned() {
                    files.push(crate::EquivalenceFile { path: rel, ..f });
                }
            }
            _ => {}
        }
    }
    files.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    Ok(crate::EquivalenceManifest {
        files,
        schema: crate::EQUIVALENCE_SCHEMA.into(),
    })
}

/// The equivalence manifest of an artifact: a directory or an archive.
pub fn artifact_manifest(path: &Path) -> Result<crate::EquivalenceManifest> {
    if Codec::sniff(path).is_some() {
        archive_manifest(path)
    } else {
        crate::directory_manifest(path)
    }
}

/// Unpack every artifact archive of `dir` (or `dir` itself when it is
/// one) into `into/<name without suffix>`; returns (unpacked directory,
/// archive) pairs, sorted.
pub fn unpack_archives(dir: &Path, into: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    let archives: Vec<PathBuf> = if Codec::sniff(dir).is_some() {
        vec![dir.to_path_buf()]
    } else {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, "cannot list", e))? {
            let e = e.map_err(|e| Error::io(dir, "cannot list", e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if artifact_archive_stem(&name).is_some() && Codec::sniff(&e.path()).is_some() {
                v.push(e.path());
            }
        }
        v.sort();
        v
    };
    let mut out = Vec::new();
    for a in archives {
        let name = a
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = artifact_archive_stem(&name).unwrap_or(&name);
        let d = into.join(stem);
        let prefixes = unpack_artifact(&a, &d)?;
        crate::manifest::write_manifest(&d, &prefixes)?;
        out.push((d, a));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_drop_the_archive_suffix() {
        assert_eq!(
            artifact_archive_stem("blas_lib_gfx1100.tar.zst"),
            Some("blas_lib_gfx1100")
        );
        assert_eq!(artifact_archive_stem("a_b_c.tar.xz"), Some("a_b_c"));
        assert_eq!(artifact_archive_stem("a_b.tgz"), Some("a_b"));
        assert_eq!(artifact_archive_stem("blas_lib_gfx1100"), None);
    }

    #[test]
    fn members_belong_to_the_longest_prefix() {
        let p = vec!["a".to_string(), "a/b".to_string(), "c".to_string()];
        assert_eq!(prefix_of(&p, "a/b/x"), Some(("a/b", "x".into())));
        assert_eq!(prefix_of(&p, "a/bx"), Some(("a", "bx".into())));
        assert_eq!(prefix_of(&p, "c"), Some(("c", String::new())));
        assert_eq!(prefix_of(&p, "d/x"), None);
    }
}
