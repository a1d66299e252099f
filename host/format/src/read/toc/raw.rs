//! The TOC as msgpack has it, decoded through serde: every key optional
//! (a missing one is reported by the checks in [`super`], naming the key),
//! every value that a check may name carrying its offset ([`At`]), unknown
//! keys skipped without allocating.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::decode::{AnyStr, At, MapOf, Seq, present, seq_capacity};

/// The TOC's root map.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RawToc {
    #[serde(deserialize_with = "present")]
    pub(super) format_version: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) group_name: Option<String>,
    #[serde(deserialize_with = "present")]
    pub(super) gfx_arch_family: Option<String>,
    #[serde(deserialize_with = "present")]
    pub(super) gfx_arches: Option<Seq<String>>,
    #[serde(deserialize_with = "present")]
    pub(super) compression_scheme: Option<At<String>>,
    #[serde(deserialize_with = "present")]
    pub(super) blobs: Option<Seq<At<MapOf<RawBlob>>>>,
    #[serde(deserialize_with = "present")]
    pub(super) zstd_offset: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) zstd_size: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) zstd_frame_offsets: Option<At<Seq<At<u64>>>>,
    #[serde(deserialize_with = "present")]
    pub(super) toc: Option<At<RawBinaries>>,
}

/// One element of a `none` archive's `blobs`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RawBlob {
    #[serde(deserialize_with = "present")]
    pub(super) offset: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) size: Option<u64>,
}

/// One `toc[key][arch]` map.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RawEntry {
    #[serde(rename = "type", deserialize_with = "present")]
    pub(super) kind: Option<AnyStr>,
    #[serde(deserialize_with = "present")]
    pub(super) ordinal: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) original_size: Option<u64>,
    /// `zstd-delta`: the entry's frame.
    #[serde(deserialize_with = "present")]
    pub(super) offset: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) size: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub(super) base: Option<At<u64>>,
    #[serde(deserialize_with = "present")]
    pub(super) metadata: Option<Metadata>,
    /// The code object's sha256 (hex), where kpack wrote one.
    #[serde(deserialize_with = "present")]
    pub(super) sha256: Option<At<String>>,
}

/// A `metadata` map of strings, in file order.
#[derive(Debug, Default)]
pub(super) struct Metadata(pub(super) Vec<(String, String)>);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Metadata;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
                let mut items = Vec::with_capacity(seq_capacity(map.size_hint(), 2));
                while let Some(pair) = map.next_entry()? {
                    items.push(pair);
                }
                Ok(Metadata(items))
            }
        }
        d.deserialize_map(V)
    }
}

/// One arch of a binary key and its entry.
pub(super) type RawArch = (At<Arc<str>>, At<MapOf<RawEntry>>);

/// One binary key of the `toc` map and its arches, in file order.
#[derive(Debug)]
pub(super) struct RawBinary {
    pub(super) key: At<Arc<str>>,
    pub(super) entries: Vec<RawArch>,
}

/// The `toc` map, in file order. Arch names are shared: an archive has a
/// few distinct arches and many entries, so each name is allocated once.
#[derive(Debug)]
pub(super) struct RawBinaries(pub(super) Vec<RawBinary>);

impl<'de> Deserialize<'de> for RawBinaries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBinaries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of binary keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawBinaries, A::Error> {
                let mut arches = Vec::new();
                let mut binaries = Vec::with_capacity(seq_capacity(map.size_hint(), 2));
                while let Some(key) = map.next_key::<At<Shared>>()? {
                    let entries = map.next_value_seed(Arches(&mut arches))?;
                    binaries.push(RawBinary {
                        key: At {
                            at: key.at,
                            v: key.v.0,
                        },
                        entries,
                    });
                }
                Ok(RawBinaries(binaries))
            }
        }
        d.deserialize_map(V)
    }
}

/// A string decoded straight into an `Arc<str>`.
struct Shared(Arc<str>);

impl<'de> Deserialize<'de> for Shared {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Interned(&mut Vec::new()).deserialize(d).map(Shared)
    }
}

/// A string decoded into one of `0`'s names (added when new).
struct Interned<'n>(&'n mut Vec<Arc<str>>);

impl<'de> DeserializeSeed<'de> for Interned<'_> {
    type Value = Arc<str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Arc<str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Interned<'_> {
    type Value = Arc<str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Arc<str>, E> {
        if let Some(known) = self.0.iter().find(|n| ***n == *s) {
            return Ok(Arc::clone(known));
        }
        let name: Arc<str> = s.into();
        self.0.push(Arc::clone(&name));
        Ok(name)
    }
}

/// The arch map of one binary key.
struct Arches<'n>(&'n mut Vec<Arc<str>>);

impl<'de> DeserializeSeed<'de> for Arches<'_> {
    type Value = Vec<RawArch>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Arches<'_> {
    type Value = Vec<RawArch>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of arches")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(seq_capacity(map.size_hint(), 2));
        loop {
            let at = crate::decode::position();
            let Some(arch) = map.next_key_seed(Interned(self.0))? else {
                break;
            };
            entries.push((At { at, v: arch }, map.next_value()?));
        }
        Ok(entries)
    }
}
