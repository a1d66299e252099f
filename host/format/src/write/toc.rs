//! The TOC as the writer lays it out, serialized through `rmp-serde`:
//! keys in AMD's order, every integer and string in its smallest msgpack
//! form (as AMD's msgpack writers do), optional keys left out.

use serde::ser::{Serialize, Serializer};

use super::{Pending, Placed};
use crate::error::{Error, ErrorKind, Result};

/// The root map. v1 `none`: `blobs`; v1 `zstd-per-kernel`: `zstd_offset`,
/// `zstd_size` and (sorted archives) `zstd_frame_offsets`; v2: neither.
#[derive(serde::Serialize)]
pub(super) struct TocOut<'a> {
    pub(super) format_version: u64,
    pub(super) group_name: &'a str,
    pub(super) gfx_arch_family: &'a str,
    pub(super) gfx_arches: &'a [&'a str],
    pub(super) toc: Groups<'a>,
    pub(super) compression_scheme: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) zstd_offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) zstd_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) zstd_frame_offsets: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) blobs: Option<Vec<BlobOut>>,
}

impl TocOut<'_> {
    pub(super) fn to_bytes(&self) -> Result<Vec<u8>> {
        rmp_serde::to_vec_named(self).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("msgpack encoding of the TOC failed: {e}"),
            )
        })
    }
}

/// One element of `blobs`.
#[derive(serde::Serialize)]
pub(super) struct BlobOut {
    pub(super) offset: u64,
    pub(super) size: u64,
}

/// The `toc` map: per key (in `groups` order), per arch (in ordinal
/// order), the entry; v2 adds each entry's frame from `placed`.
pub(super) struct Groups<'a> {
    pub(super) pending: &'a [Pending],
    pub(super) groups: &'a [(&'a str, Vec<usize>)],
    pub(super) placed: Option<&'a [Placed]>,
}

impl Serialize for Groups<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.groups.iter().map(|(key, ordinals)| {
            let arches = Arches {
                groups: self,
                ordinals,
            };
            (key, arches)
        }))
    }
}

struct Arches<'g, 'a> {
    groups: &'g Groups<'a>,
    ordinals: &'g [usize],
}

impl Serialize for Arches<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let g = self.groups;
        s.collect_map(self.ordinals.iter().map(|&ordinal| {
            let p = &g.pending[ordinal];
            let frame = g.placed.map(|placed| &placed[ordinal]);
            let entry = EntryOut {
                kind: "hsaco",
                ordinal: ordinal as u64,
                original_size: p.original_size,
                offset: frame.map(|f| f.offset),
                size: frame.map(|f| f.size),
                base: frame.and_then(|f| f.base),
                metadata: (!p.metadata.is_empty()).then_some(Metadata(&p.metadata)),
                sha256: p.sha256.map(|d| crate::digest::to_hex(&d)),
            };
            (&p.arch, entry)
        }))
    }
}

/// One `toc[key][arch]` map.
#[derive(serde::Serialize)]
struct EntryOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    ordinal: u64,
    original_size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    /// The code object's sha256, lower-case hex: a key AMD's readers skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
}

/// An entry's `metadata`, a map of strings in insertion order.
struct Metadata<'a>(&'a [(String, String)]);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}
