//! msgpack decoding through `rmp-serde`, with what untrusted bytes need on
//! top of it:
//!
//! - the offset of every value an error may have to name ([`At`]) and the
//!   reader's position when decoding stops, both absolute file offsets;
//! - a nesting limit ([`MAX_DEPTH`]);
//! - maps that must be maps ([`MapOf`]: a derived struct would also accept
//!   an array, which AMD's readers refuse);
//! - preallocation bounded by the bytes left ([`Seq`], [`seq_capacity`]):
//!   every element takes at least one byte, so a hostile length cannot
//!   reserve more than the input could hold.
//!
//! Unknown keys are skipped by the derived impls as `IgnoredAny`, which
//! reads past a value without building or allocating anything.
//!
//! The position is kept in a thread-local by the reader: serde gives a
//! `Deserialize` impl no handle on its deserializer's state, and a decode
//! never yields to another one on the same thread.

use std::cell::Cell;
use std::fmt;
use std::io::{self, Read};
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de::value::MapAccessDeserializer};

/// Deepest nesting accepted. The TOC needs 5 levels, the marker 2.
pub(crate) const MAX_DEPTH: usize = 32;

thread_local! {
    /// Absolute offset of the next byte the running decode reads.
    static POS: Cell<u64> = const { Cell::new(0) };
    /// Absolute offset one past the last byte it may read.
    static END: Cell<u64> = const { Cell::new(0) };
    /// Start of the innermost [`At`] value whose decoding failed.
    static FAILED_AT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Absolute offset of the next byte the running decode reads.
pub(crate) fn position() -> u64 {
    POS.with(Cell::get)
}

/// Most elements reserved ahead for one container; a longer one grows as
/// it is filled (the fast reader keeps no position, so its "bytes left"
/// are the whole input's).
const MAX_RESERVE: usize = 4096;

/// How many more elements a container can hold if each takes at least
/// `min_each` bytes (and at most [`MAX_RESERVE`]): the most a visitor
/// should reserve.
pub(crate) fn seq_capacity(hint: Option<usize>, min_each: u64) -> usize {
    let left = END.with(Cell::get).saturating_sub(position()) / min_each.max(1);
    hint.unwrap_or(0)
        .min(usize::try_from(left).unwrap_or(usize::MAX))
        .min(MAX_RESERVE)
}

/// A byte slice read through [`Read`], publishing its position.
struct Tracked<'a> {
    rest: &'a [u8],
    pos: u64,
}

impl Tracked<'_> {
    fn advance(&mut self, n: usize) {
        self.rest = &self.rest[n..];
        self.pos += n as u64;
        POS.with(|p| p.set(self.pos));
    }
}

impl Read for Tracked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.rest.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.advance(n);
        Ok(n)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        // A short read consumes nothing: the position stays where the value
        // that runs past the end starts.
        if buf.len() > self.rest.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&self.rest[..buf.len()]);
        self.advance(buf.len());
        Ok(())
    }
}

/// Why a decode failed.
#[derive(Debug)]
pub(crate) struct Failure {
    /// Absolute offset: where a malformed or truncated value stopped the
    /// reader, or where the value of the wrong shape starts.
    pub(crate) offset: u64,
    /// The bytes are not msgpack (truncated, reserved byte, too deep),
    /// as opposed to msgpack of the wrong shape.
    pub(crate) syntax: bool,
    /// The data ended inside a value: more bytes might decode.
    pub(crate) truncated: bool,
    pub(crate) message: String,
}

/// How a decode reads its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// Strings borrowed straight from the input, no position kept: the
    /// [`At`] offsets are meaningless. For the first try at a whole parse;
    /// a parse that fails is run again [`Tracked`](Reader::Tracked) for
    /// its error (the bytes are the same, so is the failure).
    Fast,
    /// Every read publishes its position: [`At`] offsets are right.
    Tracked,
}

/// Decode the first msgpack object of `bytes` (which start at absolute
/// offset `base`) as a `T`; anything after it is left alone. A failure is
/// always described with the tracked reader's offsets and path.
pub(crate) fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    base: u64,
    reader: Reader,
) -> Result<T, Failure> {
    let end = base.saturating_add(bytes.len() as u64);
    start(base, end);
    if reader == Reader::Fast {
        let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
        de.set_max_depth(MAX_DEPTH);
        if let Ok(v) = T::deserialize(&mut de) {
            return Ok(v);
        }
        start(base, end);
    }
    let mut de = tracked(bytes, base);
    match T::deserialize(&mut de) {
        Ok(v) => Ok(v),
        Err(e) => {
            let at = position();
            let failed_at = FAILED_AT.with(Cell::get);
            // Decode again, this time keeping the path to the failure (the
            // other passes carry no such bookkeeping): same bytes, same error.
            start(base, end);
            let path = match serde_path_to_error::deserialize::<_, T>(&mut tracked(bytes, base)) {
                Err(e) if e.path().iter().next().is_some() => e.path().to_string(),
                _ => String::new(),
            };
            Err(failure(&e, at, failed_at, end, path))
        }
    }
}

/// How many bytes the first msgpack object of `bytes` takes.
pub(crate) fn length(bytes: &[u8], base: u64) -> Result<usize, Failure> {
    decode::<de::IgnoredAny>(bytes, base, Reader::Tracked)?;
    Ok((position() - base) as usize)
}

/// Reset the thread's decode state for a decode of `[base, end)`.
fn start(base: u64, end: u64) {
    POS.with(|p| p.set(base));
    END.with(|e| e.set(end));
    FAILED_AT.with(|f| f.set(None));
}

fn tracked(
    bytes: &[u8],
    base: u64,
) -> rmp_serde::Deserializer<rmp_serde::decode::ReadReader<Tracked<'_>>> {
    let mut de = rmp_serde::Deserializer::new(Tracked {
        rest: bytes,
        pos: base,
    });
    de.set_max_depth(MAX_DEPTH);
    de
}

fn failure(
    e: &rmp_serde::decode::Error,
    at: u64,
    failed_at: Option<u64>,
    end: u64,
    path: String,
) -> Failure {
    use rmp_serde::decode::Error as E;
    let eof = |io: &io::Error| io.kind() == io::ErrorKind::UnexpectedEof;
    let (syntax, truncated) = match e {
        E::InvalidMarkerRead(io) | E::InvalidDataRead(io) => (true, eof(io)),
        E::TypeMismatch(rmp::Marker::Reserved) | E::DepthLimitExceeded => (true, false),
        E::LengthMismatch(_) | E::OutOfRange | E::Uncategorized(_) => (true, false),
        E::TypeMismatch(_) | E::Syntax(_) | E::Utf8Error(_) => (false, false),
    };
    let message = match e {
        E::InvalidMarkerRead(io) | E::InvalidDataRead(io) if eof(io) => {
            "msgpack value runs past the end of the data".to_owned()
        }
        E::TypeMismatch(rmp::Marker::Reserved) => "msgpack byte 0xc1 is never used".to_owned(),
        E::DepthLimitExceeded => format!("msgpack nesting is deeper than {MAX_DEPTH}"),
        E::TypeMismatch(m) => {
            let what = if path.is_empty() { "a value" } else { &path };
            format!(
                "{what} is a msgpack {}, of the wrong type",
                type_name(m.to_u8())
            )
        }
        other if path.is_empty() => other.to_string(),
        other => format!("{path}: {other}"),
    };
    let offset = match (syntax, failed_at) {
        (false, Some(start)) => start,
        _ => at.min(end),
    };
    Failure {
        offset,
        syntax,
        truncated,
        message,
    }
}

/// Whether `b` starts a msgpack map.
pub(crate) fn is_map(b: u8) -> bool {
    matches!(
        rmp::Marker::from_u8(b),
        rmp::Marker::FixMap(_) | rmp::Marker::Map16 | rmp::Marker::Map32
    )
}

/// The msgpack type a value starting with byte `b` has, for messages.
pub(crate) fn type_name(b: u8) -> &'static str {
    use rmp::Marker as M;
    match M::from_u8(b) {
        M::Null => "nil",
        M::True | M::False => "bool",
        M::FixPos(_) | M::FixNeg(_) | M::U8 | M::U16 | M::U32 | M::U64 => "int",
        M::I8 | M::I16 | M::I32 | M::I64 => "int",
        M::F32 | M::F64 => "float",
        M::FixStr(_) | M::Str8 | M::Str16 | M::Str32 => "str",
        M::Bin8 | M::Bin16 | M::Bin32 => "bin",
        M::FixArray(_) | M::Array16 | M::Array32 => "array",
        M::FixMap(_) | M::Map16 | M::Map32 => "map",
        M::FixExt1 | M::FixExt2 | M::FixExt4 | M::FixExt8 | M::FixExt16 => "ext",
        M::Ext8 | M::Ext16 | M::Ext32 => "ext",
        M::Reserved => "reserved byte 0xc1",
    }
}

/// A value and the absolute offset of its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At<T> {
    pub(crate) at: u64,
    pub(crate) v: T,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for At<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let at = position();
        match T::deserialize(d) {
            Ok(v) => Ok(At { at, v }),
            Err(e) => {
                // The innermost value names the place; outer ones keep it.
                FAILED_AT.with(|f| {
                    if f.get().is_none() {
                        f.set(Some(at));
                    }
                });
                Err(e)
            }
        }
    }
}

/// For `#[serde(default, deserialize_with = "present")]` on an optional
/// key: a present key is decoded as the value itself (a nil where a value
/// is expected is an error, not an absent key), and no marker is read
/// ahead, so an [`At`] inside sees its value's first byte.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A struct that must be encoded as a msgpack map.
#[derive(Debug)]
pub(crate) struct MapOf<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MapOf<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = MapOf<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(MapOf)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// An array, reserved no larger than the bytes left allow.
#[derive(Debug)]
pub(crate) struct Seq<T>(pub(crate) Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Seq<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Seq<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq_capacity(seq.size_hint(), 1));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Seq(items))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// A msgpack str checked and dropped (no allocation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Pair {
        a: At<u64>,
        #[serde(default, deserialize_with = "present")]
        b: Option<At<String>>,
    }

    #[test]
    fn values_carry_absolute_offsets_and_the_length_used_is_returned() {
        // {"a": 5, "b": "x"} then a trailing byte.
        let bytes = [0x82, 0xa1, b'a', 0x05, 0xa1, b'b', 0xa1, b'x', 0xff];
        let MapOf(p) = decode::<MapOf<Pair>>(&bytes, 100, Reader::Tracked).unwrap();
        assert_eq!(length(&bytes, 100).unwrap(), 8);
        assert_eq!(p.a, At { at: 103, v: 5 });
        assert_eq!(p.b.map(|b| b.at), Some(106));
    }

    #[test]
    fn a_wrong_type_names_the_path_and_the_value_offset() {
        let bytes = [0x82, 0xa1, b'a', 0x05, 0xa1, b'b', 0x07];
        let e = decode::<MapOf<Pair>>(&bytes, 0x10, Reader::Fast).unwrap_err();
        assert!(!e.syntax && !e.truncated, "{e:?}");
        assert_eq!(e.offset, 0x16, "{e:?}");
        assert!(e.message.starts_with("b: "), "{e:?}");
    }

    #[test]
    fn arrays_are_not_maps() {
        let bytes = [0x92, 0x05, 0xa1, b'x'];
        let e = decode::<MapOf<Pair>>(&bytes, 0, Reader::Fast).unwrap_err();
        assert!(e.message.contains("expected a map"), "{e:?}");
    }

    #[test]
    fn truncation_and_reserved_byte_are_syntax_errors() {
        let e = decode::<MapOf<Pair>>(&[0x82, 0xa1, b'a'], 0, Reader::Fast).unwrap_err();
        assert!(e.syntax && e.truncated, "{e:?}");
        assert_eq!(e.offset, 3, "{e:?}");
        let e = decode::<MapOf<Pair>>(&[0xc1], 0, Reader::Fast).unwrap_err();
        assert!(e.syntax && !e.truncated, "{e:?}");
        assert!(
            decode::<MapOf<Pair>>(&[], 0, Reader::Fast)
                .unwrap_err()
                .truncated
        );
    }

    #[test]
    fn rejects_deep_nesting_under_an_unknown_key() {
        let mut bytes = vec![0x82, 0xa1, b'a', 0x05, 0xa1, b'z'];
        bytes.extend([0x91; 10_000]);
        bytes.push(0xc0);
        let e = decode::<MapOf<Pair>>(&bytes, 0, Reader::Fast).unwrap_err();
        assert!(e.syntax && e.message.contains("nesting"), "{e:?}");
    }

    #[test]
    fn huge_announced_lengths_reserve_only_what_the_bytes_left_can_hold() {
        // An array announcing 2^32-1 elements in a 6-byte input.
        let bytes = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
        let e = decode::<Seq<u64>>(&bytes, 0, Reader::Fast).unwrap_err();
        assert!(e.truncated, "{e:?}");
        POS.with(|p| p.set(10));
        END.with(|e| e.set(16));
        assert_eq!(seq_capacity(Some(usize::MAX), 1), 6);
        assert_eq!(seq_capacity(Some(2), 1), 2);
        assert_eq!(seq_capacity(Some(usize::MAX), 2), 3);
        END.with(|e| e.set(1 << 40));
        assert_eq!(seq_capacity(Some(usize::MAX), 1), MAX_RESERVE);
    }
}
