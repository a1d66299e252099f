//! The `.rocm_kpack_ref` marker (spec §3.1): a msgpack map telling the
//! runtime which archives to search and which TOC key prefix to use.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::decode::{self, At, Reader, Seq};
use crate::error::{Error, ErrorKind, Result};

/// Most bytes of a marker the runtime will look at (AMD's lookahead).
pub const MARKER_MAX_LEN: usize = 64 * 1024;

/// The placeholder for a target id in a marker's search paths (spec §3.1):
/// the runtime replaces it with each target the device can run
/// (`torch_@GFXARCH@.kpack` → `torch_gfx942:xnack-.kpack`, …); AMD's wheel
/// layout also uses it in `--device-requires-dist`. Its one home.
pub const GFXARCH: &str = "@GFXARCH@";

/// The file name of a library's archive for one target (spec §3.1):
/// `<stem>_<target>.kpack` (`torch_gfx942.kpack`), or, with [`GFXARCH`]
/// as the target, the search-path template the runtime fills in. Its one
/// home: writers, markers and the runtime's lookups agree on it.
pub fn archive_file_name(stem: &str, target: &str) -> String {
    format!("{stem}_{target}.kpack")
}

/// The target of an archive file name made by [`archive_file_name`]
/// (`torch_gfx942.kpack` → `gfx942`): the part after the last `_` (targets
/// hold none); `None` for a name without the `_` or the `.kpack`.
pub fn archive_file_target(file_name: &str) -> Option<&str> {
    Some(file_name.strip_suffix(".kpack")?.rsplit_once('_')?.1)
}

/// The decoded marker of an offloaded binary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Marker {
    /// TOC key prefix; the runtime appends `#<co_index>`.
    pub kernel_name: String,
    /// Archive paths, relative to the binary's directory (or absolute);
    /// may contain `@GFXARCH@`.
    pub search_paths: Vec<String>,
}

/// Why a marker could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerProblem {
    /// The bytes end before the msgpack object does: a caller reading from
    /// memory of unknown length may retry with more bytes.
    Truncated,
    /// The marker is malformed.
    Invalid,
}

impl Marker {
    /// Parse the first msgpack object of `bytes` with AMD's runtime rules:
    /// root map; `kernel_name` a non-empty str; `kpack_search_paths` an
    /// array whose str elements are kept (others ignored) and of which at
    /// least one remains; extra keys ignored; first occurrence of a key wins.
    /// Bytes after the object are ignored. Errors have kind
    /// [`ErrorKind::InvalidArgument`] with [`Marker::problem`] telling
    /// truncation from malformation.
    pub fn parse(bytes: &[u8]) -> Result<Marker> {
        let bytes = &bytes[..bytes.len().min(MARKER_MAX_LEN)];
        // Offsets for errors cost a tracked reader: only a failed parse
        // is run again with one.
        Marker::parse_with(bytes, Reader::Fast)
            .or_else(|_| Marker::parse_with(bytes, Reader::Tracked))
    }

    fn parse_with(bytes: &[u8], reader: Reader) -> Result<Marker> {
        let invalid = |offset: u64, msg: String| Error::at(ErrorKind::InvalidArgument, offset, msg);
        if let Some(&first) = bytes.first()
            && !decode::is_map(first)
        {
            return Err(invalid(
                0,
                format!("marker root is a {}, not a map", decode::type_name(first)),
            ));
        }
        let raw = decode::decode::<RawMarker>(bytes, 0, reader).map_err(|f| {
            let mut err = if f.syntax {
                invalid(
                    f.offset,
                    format!("marker is not valid msgpack: {}", f.message),
                )
            } else {
                invalid(f.offset, format!("malformed marker: {}", f.message))
            };
            err.truncated = f.truncated;
            err
        })?;
        let Some(kernel_name) = raw.kernel_name else {
            return Err(invalid(0, "marker has no kernel_name".into()));
        };
        if kernel_name.v.is_empty() {
            return Err(invalid(
                kernel_name.at,
                "marker kernel_name is empty".into(),
            ));
        }
        let Some(paths) = raw.search_paths else {
            return Err(invalid(0, "marker has no kpack_search_paths".into()));
        };
        let search_paths: Vec<String> = paths.v.0.into_iter().filter_map(|p| p.0).collect();
        if search_paths.is_empty() {
            return Err(invalid(
                paths.at,
                "marker kpack_search_paths has no string entry".into(),
            ));
        }
        Ok(Marker {
            kernel_name: kernel_name.v,
            search_paths,
        })
    }

    /// Encode as AMD's split tool does: `{kpack_search_paths, kernel_name}`.
    pub fn to_bytes(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Out<'a> {
            kpack_search_paths: &'a [String],
            kernel_name: &'a str,
        }
        let out = Out {
            kpack_search_paths: &self.search_paths,
            kernel_name: &self.kernel_name,
        };
        // Writing to a Vec cannot fail, and the lengths of a marker's
        // strings and list are far below msgpack's 2^32 limits.
        rmp_serde::to_vec_named(&out).unwrap_or_default()
    }

    /// For an error from [`Marker::parse`]: whether more bytes might help.
    pub fn problem(error: &Error) -> MarkerProblem {
        if error.truncated {
            MarkerProblem::Truncated
        } else {
            MarkerProblem::Invalid
        }
    }
}

/// The marker's keys as AMD's runtime reads them: the first occurrence of
/// each wins, every other key (of any type) is skipped.
#[derive(Debug, Default)]
struct RawMarker {
    kernel_name: Option<At<String>>,
    search_paths: Option<At<Seq<PathItem>>>,
}

impl<'de> Deserialize<'de> for RawMarker {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawMarker;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<RawMarker, A::Error> {
                let mut raw = RawMarker::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::KernelName if raw.kernel_name.is_none() => {
                            raw.kernel_name = Some(map.next_value()?);
                        }
                        Key::SearchPaths if raw.search_paths.is_none() => {
                            raw.search_paths = Some(map.next_value()?);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(raw)
            }
        }
        d.deserialize_map(V)
    }
}

/// A marker key: one of the two the runtime reads, or anything else.
enum Key {
    KernelName,
    SearchPaths,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(Skip(|s: &str| match s {
            "kernel_name" => Key::KernelName,
            "kpack_search_paths" => Key::SearchPaths,
            _ => Key::Other,
        }))
        .map(|k| k.unwrap_or(Key::Other))
    }
}

/// A `kpack_search_paths` element: a string is kept, anything else skipped.
#[derive(Debug)]
struct PathItem(Option<String>);

impl<'de> Deserialize<'de> for PathItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(Skip(str::to_owned)).map(PathItem)
    }
}

/// A visitor mapping a UTF-8 string through `0` and skipping any other
/// value (invalid UTF-8 included) as `None`.
struct Skip<F>(F);

macro_rules! skip_scalar {
    ($($method:ident($ty:ty)),*) => {$(
        fn $method<E: de::Error>(self, _: $ty) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
    )*};
}

impl<'de, T, F: FnOnce(&str) -> T> Visitor<'de> for Skip<F> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any msgpack value")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Self::Value, E> {
        Ok(Some((self.0)(s)))
    }
    skip_scalar!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_bytes(&[u8])
    );
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
        IgnoredAny.visit_map(map).map(|_| None)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        IgnoredAny::deserialize(d).map(|_| None)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn archive_file_name_joins_stem_and_target() {
        assert_eq!(
            super::archive_file_name("torch", "gfx942"),
            "torch_gfx942.kpack"
        );
        assert_eq!(
            super::archive_file_name("blas", super::GFXARCH),
            "blas_@GFXARCH@.kpack"
        );
        let name = super::archive_file_name("rocm_blas", "gfx942:xnack+");
        assert_eq!(super::archive_file_target(&name), Some("gfx942:xnack+"));
        assert_eq!(super::archive_file_target("blas.kpack"), None);
        assert_eq!(super::archive_file_target("blas_gfx942.tar"), None);
    }

    use super::*;

    /// The 116-byte example marker of spec §3.1.
    const AMD_MARKER_HEX: &str = "82b26b7061636b5f7365617263685f706174687391d9222e2e2f2e6b7061636b2f72616e645f6c69625f4047465841524348402e6b7061636bab6b65726e656c5f6e616d65d92d6d6174682d6c6962732f726f6352414e442f73746167652f6c69622f6c6962726f6372616e642e736f2e312e31";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn parses_and_reencodes_amds_example_marker_byte_identically() {
        let bytes = unhex(AMD_MARKER_HEX);
        assert_eq!(bytes.len(), 116);
        let m = Marker::parse(&bytes).unwrap();
        assert_eq!(
            m.kernel_name,
            "math-libs/rocRAND/stage/lib/librocrand.so.1.1"
        );
        assert_eq!(m.search_paths, ["../.kpack/rand_lib_@GFXARCH@.kpack"]);
        assert_eq!(m.to_bytes(), bytes);
    }

    #[test]
    fn truncation_is_told_apart_from_malformation() {
        let bytes = unhex(AMD_MARKER_HEX);
        for n in 0..bytes.len() {
            let e = Marker::parse(&bytes[..n]).unwrap_err();
            assert_eq!(
                Marker::problem(&e),
                MarkerProblem::Truncated,
                "prefix of {n} bytes: {e}"
            );
        }
        let e = Marker::parse(&[0x91, 0x01]).unwrap_err();
        assert_eq!(Marker::problem(&e), MarkerProblem::Invalid);
    }

    #[test]
    fn skips_values_of_every_msgpack_type_where_amd_does() {
        let mut v = Vec::new();
        rmp::encode::write_map_len(&mut v, 5).unwrap();
        // An ext key with an ext value, a bin key with a map value.
        rmp::encode::write_ext_meta(&mut v, 2, 7).unwrap();
        v.extend([1, 2]);
        rmp::encode::write_ext_meta(&mut v, 1, 3).unwrap();
        v.push(9);
        rmp::encode::write_bin(&mut v, b"kernel_name").unwrap();
        rmp::encode::write_map_len(&mut v, 1).unwrap();
        rmp::encode::write_f64(&mut v, 1.5).unwrap();
        rmp::encode::write_sint(&mut v, -3).unwrap();
        rmp::encode::write_str(&mut v, "kpack_search_paths").unwrap();
        rmp::encode::write_array_len(&mut v, 4).unwrap();
        rmp::encode::write_ext_meta(&mut v, 1, 5).unwrap();
        v.push(0);
        rmp::encode::write_bin(&mut v, b"not a str").unwrap();
        rmp::encode::write_str(&mut v, "a.kpack").unwrap();
        rmp::encode::write_bool(&mut v, true).unwrap();
        rmp::encode::write_str(&mut v, "kernel_name").unwrap();
        rmp::encode::write_str(&mut v, "k").unwrap();
        // A second kernel_name: the first wins.
        rmp::encode::write_str(&mut v, "kernel_name").unwrap();
        rmp::encode::write_str(&mut v, "other").unwrap();
        let m = Marker::parse(&v).unwrap();
        assert_eq!(m.kernel_name, "k");
        assert_eq!(m.search_paths, ["a.kpack"]);
    }

    #[test]
    fn applies_amds_field_rules() {
        let enc = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            f(&mut v);
            v
        };
        // Non-string search path entries are skipped; extra keys ignored.
        let ok = enc(&|v| {
            rmp::encode::write_map_len(v, 3).unwrap();
            rmp::encode::write_str(v, "extra").unwrap();
            rmp::encode::write_nil(v).unwrap();
            rmp::encode::write_str(v, "kpack_search_paths").unwrap();
            rmp::encode::write_array_len(v, 2).unwrap();
            rmp::encode::write_uint(v, 7).unwrap();
            rmp::encode::write_str(v, "a.kpack").unwrap();
            rmp::encode::write_str(v, "kernel_name").unwrap();
            rmp::encode::write_str(v, "k").unwrap();
        });
        assert_eq!(Marker::parse(&ok).unwrap().search_paths, ["a.kpack"]);
        let bad: [Vec<u8>; 4] = [
            enc(&|v| {
                rmp::encode::write_map_len(v, 1).unwrap();
                rmp::encode::write_str(v, "kernel_name").unwrap();
                rmp::encode::write_str(v, "k").unwrap();
            }),
            enc(&|v| {
                rmp::encode::write_map_len(v, 2).unwrap();
                rmp::encode::write_str(v, "kernel_name").unwrap();
                rmp::encode::write_uint(v, 1).unwrap();
                rmp::encode::write_str(v, "kpack_search_paths").unwrap();
                rmp::encode::write_array_len(v, 1).unwrap();
                rmp::encode::write_str(v, "a").unwrap();
            }),
            enc(&|v| {
                rmp::encode::write_map_len(v, 2).unwrap();
                rmp::encode::write_str(v, "kernel_name").unwrap();
                rmp::encode::write_str(v, "k").unwrap();
                rmp::encode::write_str(v, "kpack_search_paths").unwrap();
                rmp::encode::write_array_len(v, 1).unwrap();
                rmp::encode::write_nil(v).unwrap();
            }),
            enc(&|v| {
                rmp::encode::write_array_len(v, 0).unwrap();
            }),
        ];
        for b in bad {
            let e = Marker::parse(&b).unwrap_err();
            assert_eq!(Marker::problem(&e), MarkerProblem::Invalid, "{e}");
        }
    }
}
