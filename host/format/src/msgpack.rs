//! A small, bounded msgpack decoder for untrusted bytes.
//!
//! Why not `rmpv`: we need the byte offset of every value for error messages,
//! a depth limit, and no pre-allocation from attacker-chosen lengths. Each
//! element takes at least one byte, so container lengths are checked against
//! the bytes left before anything is allocated.

use std::fmt;

use crate::error::{Error, Result};

/// Deepest nesting accepted. The TOC needs 4 levels, the marker 2.
pub(crate) const MAX_DEPTH: usize = 32;

/// A decoded msgpack value, with the offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Value<'a> {
    /// Offset of the value's first byte, relative to the decoder's base.
    pub offset: u64,
    /// The value itself.
    pub data: Data<'a>,
}

/// The payload of a [`Value`]. Strings and binaries borrow from the input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data<'a> {
    Nil,
    Bool(bool),
    /// Non-negative integer, whatever its encoding width or signedness.
    UInt(u64),
    /// Negative integer.
    NegInt(i64),
    Float(f64),
    /// A `str` family value (bytes, not yet checked for UTF-8).
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(Vec<Value<'a>>),
    Map(Vec<(Value<'a>, Value<'a>)>),
    Ext(i8, &'a [u8]),
}

impl Data<'_> {
    /// Name of the msgpack type, for error messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Data::Nil => "nil",
            Data::Bool(_) => "bool",
            Data::UInt(_) | Data::NegInt(_) => "int",
            Data::Float(_) => "float",
            Data::Str(_) => "str",
            Data::Bin(_) => "bin",
            Data::Array(_) => "array",
            Data::Map(_) => "map",
            Data::Ext(..) => "ext",
        }
    }
}

/// Why decoding stopped, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    /// Offset (relative to the decoder's base) of the offending byte.
    pub offset: u64,
    pub reason: &'static str,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason)
    }
}

/// Decode the first msgpack object in `bytes`; returns it and the number of
/// bytes it used (anything after it is left alone). `base` is added to every
/// reported offset so that values carry absolute file offsets.
pub(crate) fn decode(bytes: &[u8], base: u64) -> Result<(Value<'_>, usize), DecodeError> {
    let mut d = Decoder {
        bytes,
        pos: 0,
        base,
    };
    let v = d.value(0)?;
    Ok((v, d.pos))
}

struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Decoder<'a> {
    fn err(&self, at: usize, reason: &'static str) -> DecodeError {
        DecodeError {
            offset: self.base.saturating_add(at as u64),
            reason,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(self.pos, "msgpack value runs past the end of the data")),
        }
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn len(&mut self, n: usize) -> Result<usize, DecodeError> {
        let v = self.be(n)?;
        usize::try_from(v).map_err(|_| self.err(self.pos, "msgpack length does not fit in memory"))
    }

    /// A container announcing `count` elements of at least `min_each` bytes
    /// must fit in what is left, so a hostile length cannot force a huge
    /// allocation.
    fn check_count(&self, count: usize, min_each: usize, at: usize) -> Result<(), DecodeError> {
        let left = self.bytes.len() - self.pos;
        match count.checked_mul(min_each) {
            Some(need) if need <= left => Ok(()),
            _ => Err(self.err(at, "msgpack container is longer than the data left")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, DecodeError> {
        let start = self.pos;
        let offset = self.base.saturating_add(start as u64);
        if depth > MAX_DEPTH {
            return Err(self.err(start, "msgpack nesting is too deep"));
        }
        let tag = self.take(1)?[0];
        let data = match tag {
            0x00..=0x7f => Data::UInt(u64::from(tag)),
            0x80..=0x8f => self.map(usize::from(tag & 0x0f), depth, start)?,
            0x90..=0x9f => self.array(usize::from(tag & 0x0f), depth, start)?,
            0xa0..=0xbf => Data::Str(self.take(usize::from(tag & 0x1f))?),
            0xc0 => Data::Nil,
            0xc1 => return Err(self.err(start, "msgpack byte 0xc1 is never used")),
            0xc2 => Data::Bool(false),
            0xc3 => Data::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len(1 << (tag - 0xc4))?;
                Data::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.len(1 << (tag - 0xc7))?;
                let ty = self.take(1)?[0] as i8;
                Data::Ext(ty, self.take(n)?)
            }
            0xca => Data::Float(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => Data::Float(f64::from_bits(self.be(8)?)),
            0xcc..=0xcf => Data::UInt(self.be(1 << (tag - 0xcc))?),
            0xd0..=0xd3 => {
                let width = 1usize << (tag - 0xd0);
                let raw = self.be(width)?;
                let shift = 64 - 8 * width as u32;
                // Sign-extend the big-endian two's complement value.
                let v = ((raw << shift) as i64) >> shift;
                if v >= 0 {
                    Data::UInt(v as u64)
                } else {
                    Data::NegInt(v)
                }
            }
            0xd4..=0xd8 => {
                let ty = self.take(1)?[0] as i8;
                Data::Ext(ty, self.take(1 << (tag - 0xd4))?)
            }
            0xd9..=0xdb => {
                let n = self.len(1 << (tag - 0xd9))?;
                Data::Str(self.take(n)?)
            }
            0xdc | 0xdd => {
                let n = self.len(if tag == 0xdc { 2 } else { 4 })?;
                self.array(n, depth, start)?
            }
            0xde | 0xdf => {
                let n = self.len(if tag == 0xde { 2 } else { 4 })?;
                self.map(n, depth, start)?
            }
            0xe0..=0xff => Data::NegInt(i64::from(tag as i8)),
        };
        Ok(Value { offset, data })
    }

    fn array(&mut self, n: usize, depth: usize, start: usize) -> Result<Data<'a>, DecodeError> {
        self.check_count(n, 1, start)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Data::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize, start: usize) -> Result<Data<'a>, DecodeError> {
        self.check_count(n, 2, start)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            items.push((k, v));
        }
        Ok(Data::Map(items))
    }
}

// Typed accessors over decoded values for the TOC reader: each failure is a
// format error naming the value's offset and what was expected there.

/// A msgpack map with string keys, checked for duplicates.
///
/// A view over the decoded pairs, not a copy: the TOC has one small map
/// per entry, and an allocation per map was a measurable part of a cold
/// `Archive::open` (every key is checked once here, then compared as bytes).
pub(crate) struct Fields<'v, 'a, 'w> {
    raw: &'v [(Value<'a>, Value<'a>)],
    offset: u64,
    what: &'w str,
}

impl<'v, 'a, 'w> Fields<'v, 'a, 'w> {
    pub(crate) fn new(
        items: &'v [(Value<'a>, Value<'a>)],
        offset: u64,
        what: &'w str,
    ) -> Result<Self> {
        for (i, (k, _)) in items.iter().enumerate() {
            let key = match k.data {
                Data::Str(_) => as_str(k, "map key")?,
                _ => as_str(k, &format!("key in {what}"))?,
            };
            if items.len() < 64 && items[..i].iter().any(|(seen, _)| str_is(seen, key)) {
                return Err(Error::format(
                    k.offset,
                    format!("duplicate key {key:?} in {what}"),
                ));
            }
        }
        if items.len() >= 64 {
            // Large maps (the TOC's binaries): check duplicates by sorting.
            let mut keys: Vec<(&[u8], u64)> = items
                .iter()
                .map(|(k, _)| match k.data {
                    Data::Str(s) => (s, k.offset),
                    _ => (&[][..], k.offset),
                })
                .collect();
            keys.sort_unstable();
            if let Some(w) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Error::format(
                    w[1].1,
                    format!(
                        "duplicate key {:?} in {what}",
                        String::from_utf8_lossy(w[1].0)
                    ),
                ));
            }
        }
        Ok(Fields {
            raw: items,
            offset,
            what,
        })
    }

    /// Number of pairs.
    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }

    /// The pairs in file order (keys were checked to be UTF-8 strings).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'a str, &'v Value<'a>)> + '_ {
        self.raw
            .iter()
            .filter_map(|(k, v)| Some((as_str(k, "map key").ok()?, v)))
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'v Value<'a>> {
        self.raw
            .iter()
            .find(|(k, _)| str_is(k, key))
            .map(|(_, v)| v)
    }

    pub(crate) fn require(&self, key: &str) -> Result<&'v Value<'a>> {
        self.get(key)
            .ok_or_else(|| Error::format(self.offset, format!("{} has no {key:?} key", self.what)))
    }
}

/// `v` is the msgpack string `key`.
fn str_is(v: &Value<'_>, key: &str) -> bool {
    matches!(v.data, Data::Str(s) if s == key.as_bytes())
}

fn wrong_type(v: &Value<'_>, what: &str, want: &str) -> Error {
    Error::format(
        v.offset,
        format!(
            "{what} is a msgpack {}, expected {want}",
            v.data.type_name()
        ),
    )
}

pub(crate) fn as_str<'a>(v: &Value<'a>, what: &str) -> Result<&'a str> {
    match v.data {
        Data::Str(s) => std::str::from_utf8(s)
            .map_err(|_| Error::format(v.offset, format!("{what} is not valid UTF-8"))),
        _ => Err(wrong_type(v, what, "str")),
    }
}

pub(crate) fn as_uint(v: &Value<'_>, what: &str) -> Result<u64> {
    match v.data {
        Data::UInt(n) => Ok(n),
        _ => Err(wrong_type(v, what, "a non-negative int")),
    }
}

pub(crate) fn as_array<'v, 'a>(v: &'v Value<'a>, what: &str) -> Result<&'v [Value<'a>]> {
    match &v.data {
        Data::Array(items) => Ok(items),
        _ => Err(wrong_type(v, what, "array")),
    }
}

pub(crate) fn as_map<'v, 'a>(v: &'v Value<'a>, what: &str) -> Result<&'v [(Value<'a>, Value<'a>)]> {
    match &v.data {
        Data::Map(items) => Ok(items),
        _ => Err(wrong_type(v, what, "map")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Data<'_> {
        decode(bytes, 0).unwrap().0.data
    }

    #[test]
    fn decodes_every_integer_width_as_the_same_value() {
        for bytes in [
            &[0x05][..],
            &[0xcc, 5],
            &[0xcd, 0, 5],
            &[0xce, 0, 0, 0, 5],
            &[0xd0, 5],
            &[0xd1, 0, 5],
        ] {
            assert_eq!(one(bytes), Data::UInt(5), "{bytes:x?}");
        }
        assert_eq!(one(&[0xd0, 0xff]), Data::NegInt(-1));
        assert_eq!(one(&[0xff]), Data::NegInt(-1));
        assert_eq!(
            one(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Data::UInt(u64::MAX)
        );
    }

    #[test]
    fn reports_offsets_relative_to_base() {
        let (v, used) = decode(&[0x92, 0x01, 0xa1, b'x', 0xff], 100).unwrap();
        assert_eq!(used, 4);
        let Data::Array(items) = v.data else { panic!() };
        assert_eq!(items[1].offset, 102);
        assert_eq!(items[1].data, Data::Str(b"x"));
    }

    #[test]
    fn rejects_huge_container_lengths_without_allocating() {
        let e = decode(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01], 0).unwrap_err();
        assert_eq!(e.offset, 0);
        let e = decode(&[0xdf, 0x80, 0, 0, 0], 0).unwrap_err();
        assert!(e.reason.contains("longer"));
    }

    #[test]
    fn rejects_deep_nesting() {
        let bytes = vec![0x91; 10_000];
        assert!(decode(&bytes, 0).unwrap_err().reason.contains("deep"));
    }

    #[test]
    fn rejects_truncation_and_reserved_byte() {
        assert!(decode(&[0xd9, 5, b'a'], 0).is_err());
        assert!(decode(&[0xc1], 0).is_err());
        assert!(decode(&[], 0).is_err());
    }
}
