//! zstd-delta keys encoded ahead of `finish`: a worker that holds every
//! target of one kernel key (offload: one bundle holds all targets of its
//! translation unit) chooses the bases and compresses the frames itself
//! ([`DeltaCompressor::compress_key`]), and the writer only spools the
//! frames ([`ArchiveWriter::add_delta_key`]). The archive is the one
//! `finish` would write from the raw kernels: the same per-key function
//! ([`delta::encode_key`]) on the same members in the same (arch) order.

use std::collections::{HashMap, HashSet};
use std::io::{Seek, SeekFrom};

use super::{ArchiveWriter, Compression, EntryOrder, read_spooled};
use crate::delta;
use crate::error::{Error, ErrorKind, Result};

/// Which keys of a zstd-delta writer arrived framed (pending indices) and
/// which raw. A key never stays mixed: a second arrival of a framed key
/// turns it raw again ([`ArchiveWriter::unseal`]) so `finish` encodes all
/// of its targets together, as it would have without workers.
#[derive(Debug, Default)]
pub(super) struct DeltaKeys {
    framed: HashMap<String, Vec<usize>>,
    raw: HashSet<String>,
}

/// Chooses bases and compresses one kernel key's code objects exactly as
/// a `zstd-delta` [`ArchiveWriter`] would at `finish`, for
/// [`ArchiveWriter::add_delta_key`] from worker threads.
#[derive(Debug, Clone, Copy)]
pub struct DeltaCompressor {
    level: i32,
    plan: delta::DeltaPlan,
}

/// One kernel key's entries, compressed by [`DeltaCompressor::compress_key`].
#[derive(Debug)]
pub struct DeltaKey {
    key: String,
    level: i32,
    /// Sorted by arch: the key's TOC order.
    entries: Vec<DeltaEntry>,
}

#[derive(Debug)]
struct DeltaEntry {
    arch: String,
    frame: Vec<u8>,
    original_size: u64,
    sha256: [u8; 32],
    base: Option<usize>,
}

impl DeltaKey {
    /// The (normalised) kernel key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Bytes of every frame together.
    pub fn stored_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.frame.len() as u64).sum()
    }
}

impl DeltaCompressor {
    /// A compressor for `compression`: `None` unless it is
    /// [`Compression::ZstdDelta`]; an invalid level is an error.
    pub fn new(compression: Compression) -> Result<Option<DeltaCompressor>> {
        match compression {
            Compression::ZstdDelta { level } => {
                super::zstd_compressor(level)?;
                Ok(Some(DeltaCompressor {
                    level,
                    plan: delta::DeltaPlan::Estimated,
                }))
            }
            _ => Ok(None),
        }
    }

    /// The same compressor choosing bases as `plan` says (the writer's
    /// [`WriterOptions::delta_plan`](crate::WriterOptions::delta_plan)).
    pub fn with_plan(self, plan: delta::DeltaPlan) -> DeltaCompressor {
        DeltaCompressor { plan, ..self }
    }

    /// Every target `members` (`(arch, code object)`) of kernel `key`:
    /// bases chosen and frames compressed on `threads` plain threads, this
    /// one included (never rayon jobs: callers are rayon workers holding
    /// memory reservations, and a worker waiting on nested jobs may steal
    /// one that waits for those reservations). The bytes do not depend on
    /// `threads`.
    /// A repeated arch is an [`ErrorKind::InvalidArgument`] error.
    pub fn compress_key(
        &self,
        key: &str,
        members: &[(&str, &[u8])],
        threads: usize,
    ) -> Result<DeltaKey> {
        let key = key.replace('\\', "/");
        let mut order: Vec<usize> = (0..members.len()).collect();
        // The writer's TOC order within a key: arch, byte-wise.
        order.sort_by(|&a, &b| members[a].0.cmp(members[b].0));
        if let Some(w) = order
            .windows(2)
            .find(|w| members[w[0]].0 == members[w[1]].0)
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("kernel {key:?} for {:?} already exists", members[w[0]].0),
            ));
        }
        let sorted: Vec<&[u8]> = order.iter().map(|&i| members[i].1).collect();
        let encoded = delta::encode_key(
            self.level,
            &sorted,
            delta::Spread::Threads(threads),
            self.plan,
        )
        .map_err(|e| {
            e.named(&format!("cannot compress kernel {key:?}"), |i| {
                order
                    .get(i)
                    .map_or_else(|| format!("entry {i}"), |&m| members[m].0.to_owned())
            })
        })?;
        let entries = order
            .iter()
            .zip(encoded.frames)
            .zip(encoded.base)
            .map(|((&i, frame), base)| DeltaEntry {
                arch: members[i].0.to_owned(),
                frame,
                original_size: members[i].1.len() as u64,
                sha256: super::sha256(members[i].1),
                base,
            })
            .collect();
        Ok(DeltaKey {
            key,
            level: self.level,
            entries,
        })
    }
}

impl ArchiveWriter {
    /// Add every entry of one kernel key, encoded by a [`DeltaCompressor`]
    /// of this writer's level; the writer must be `zstd-delta` in
    /// [`EntryOrder::Sorted`] (else [`ErrorKind::InvalidArgument`]). The
    /// archive is byte-identical to one built by [`add`](Self::add)ing the
    /// raw code objects. Should the key already have entries (another
    /// bundle, another call), both are decoded back to raw and encoded
    /// together at `finish`, as `add` would have.
    pub fn add_delta_key(&mut self, dk: DeltaKey) -> Result<()> {
        let ok = matches!(self.options.compression,
            Compression::ZstdDelta { level } if level == dk.level)
            && self.options.order == EntryOrder::Sorted;
        if !ok {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "key {:?} was compressed for a sorted zstd-delta archive at level {}",
                    dk.key, dk.level
                ),
            ));
        }
        let seen_before =
            self.delta_keys.framed.contains_key(&dk.key) || self.delta_keys.raw.contains(&dk.key);
        if seen_before {
            let raw = decode(&dk)?;
            for (e, data) in dk.entries.iter().zip(&raw) {
                self.add(&dk.key, &e.arch, data)?;
            }
            return Ok(());
        }
        let mut added = Vec::with_capacity(dk.entries.len());
        for e in &dk.entries {
            match self.check_new(&dk.key, &e.arch) {
                Ok(_) => added.push(e.arch.clone()),
                Err(err) => {
                    for arch in added {
                        self.seen.remove(&(dk.key.clone(), arch));
                    }
                    return Err(err);
                }
            }
        }
        let first = self.pending.len();
        for e in &dk.entries {
            self.store(
                dk.key.clone(),
                &e.arch,
                &e.frame,
                e.original_size,
                Some(e.sha256),
                &[],
            )?;
            let base = e.base.map(|b| dk.entries[b].arch.clone());
            if let Some(p) = self.pending.last_mut() {
                p.framed = Some(base);
            }
        }
        self.delta_keys
            .framed
            .insert(dk.key, (first..self.pending.len()).collect());
        Ok(())
    }

    /// Called before a raw entry of `key` is stored (zstd-delta only): a
    /// key that arrived framed is decoded back to raw first, so `finish`
    /// encodes all of its targets together.
    pub(super) fn raw_key_added(&mut self, key: &str) -> Result<()> {
        if !matches!(self.options.compression, Compression::ZstdDelta { .. }) {
            return Ok(());
        }
        if let Some(indices) = self.delta_keys.framed.remove(key) {
            self.unseal(&indices)?;
        }
        if !self.delta_keys.raw.contains(key) {
            self.delta_keys.raw.insert(key.to_owned());
        }
        Ok(())
    }

    /// Decode the framed entries `indices` (one key) and re-spool them raw.
    fn unseal(&mut self, indices: &[usize]) -> Result<()> {
        let mut frames = Vec::with_capacity(indices.len());
        for &i in indices {
            frames.push(read_spooled(self.spool.file_mut(), &self.pending[i])?);
        }
        let arch_at = |arch: &str| indices.iter().position(|&i| self.pending[i].arch == arch);
        let mut bases = Vec::with_capacity(indices.len());
        for &i in indices {
            let base =
                match self.pending[i].framed.as_ref().and_then(Option::as_deref) {
                    None => None,
                    Some(arch) => Some(arch_at(arch).ok_or_else(|| {
                        Error::new(ErrorKind::Io, format!("base {arch:?} missing"))
                    })?),
                };
            bases.push(base);
        }
        let sizes: Vec<u64> = indices
            .iter()
            .map(|&i| self.pending[i].original_size)
            .collect();
        let raw = decode_frames(&frames, &bases, &sizes)?;
        self.spool
            .file_mut()
            .seek(SeekFrom::Start(self.spool_len))
            .map_err(|e| Error::io("cannot seek spool file", e))?;
        for (&i, data) in indices.iter().zip(&raw) {
            let werr = |e| Error::io("cannot write spool file", e);
            std::io::Write::write_all(self.spool.file_mut(), data).map_err(werr)?;
            let p = &mut self.pending[i];
            p.spool_offset = self.spool_len;
            p.stored_len = data.len() as u64;
            p.framed = None;
            self.spool_len += data.len() as u64;
        }
        Ok(())
    }
}

/// The raw code objects of `dk`, in its entry order.
fn decode(dk: &DeltaKey) -> Result<Vec<Vec<u8>>> {
    let frames: Vec<Vec<u8>> = dk.entries.iter().map(|e| e.frame.clone()).collect();
    let bases: Vec<Option<usize>> = dk.entries.iter().map(|e| e.base).collect();
    let sizes: Vec<u64> = dk.entries.iter().map(|e| e.original_size).collect();
    decode_frames(&frames, &bases, &sizes)
}

/// Decode one key's frames: bases first, then each delta against its base.
fn decode_frames(
    frames: &[Vec<u8>],
    bases: &[Option<usize>],
    sizes: &[u64],
) -> Result<Vec<Vec<u8>>> {
    let what = |i: usize| format!("cannot decode spooled frame {i}");
    let size = |i: usize| {
        usize::try_from(sizes[i])
            .map_err(|_| Error::new(ErrorKind::OutOfMemory, "kernel too large"))
    };
    let mut out: Vec<Option<Vec<u8>>> = vec![None; frames.len()];
    for i in (0..frames.len()).filter(|&i| bases[i].is_none()) {
        let raw = delta::decompress(&frames[i], None, size(i)?)
            .map_err(|e| Error::new(ErrorKind::Io, what(i)).with_source(e))?;
        out[i] = Some(raw);
    }
    for i in 0..frames.len() {
        if let Some(b) = bases[i] {
            let prefix = out[b].as_deref().ok_or_else(|| {
                Error::new(
                    ErrorKind::Io,
                    format!("{}: base {b} is itself a delta", what(i)),
                )
            })?;
            let raw = delta::decompress(&frames[i], Some(prefix), size(i)?).map_err(|e| {
                Error::new(ErrorKind::Io, format!("{} (a delta against {b})", what(i)))
                    .with_source(e)
            })?;
            out[i] = Some(raw);
        }
    }
    Ok(out.into_iter().flatten().collect())
}
