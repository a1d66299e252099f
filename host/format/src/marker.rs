//! The `.rocm_kpack_ref` marker (spec §3.1): a msgpack map telling the
//! runtime which archives to search and which TOC key prefix to use.

use crate::error::{Error, ErrorKind, Result};
use crate::msgpack::{self, Data};

/// Most bytes of a marker the runtime will look at (AMD's lookahead).
pub const MARKER_MAX_LEN: usize = 64 * 1024;

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
        let invalid = |offset: u64, msg: String| Error::at(ErrorKind::InvalidArgument, offset, msg);
        let (root, _) = msgpack::decode(bytes, 0).map_err(|e| {
            let mut err = invalid(e.offset, format!("marker is not valid msgpack: {e}"));
            if e.offset as usize >= bytes.len()
                || e.reason.contains("past the end")
                || e.reason.contains("longer than")
            {
                err.truncated = true;
            }
            err
        })?;
        let Data::Map(items) = root.data else {
            return Err(invalid(
                0,
                format!("marker root is a {}, not a map", root.data.type_name()),
            ));
        };
        let field = |name: &str| {
            items
                .iter()
                .find(|(k, _)| k.data == Data::Str(name.as_bytes()))
                .map(|(_, v)| v)
        };
        let kernel_name = match field("kernel_name").map(|v| (&v.data, v.offset)) {
            Some((Data::Str(s), off)) => std::str::from_utf8(s)
                .map_err(|_| invalid(off, "marker kernel_name is not UTF-8".into()))?
                .to_owned(),
            Some((d, off)) => {
                return Err(invalid(
                    off,
                    format!("marker kernel_name is a {}, not a str", d.type_name()),
                ));
            }
            None => return Err(invalid(0, "marker has no kernel_name".into())),
        };
        if kernel_name.is_empty() {
            return Err(invalid(0, "marker kernel_name is empty".into()));
        }
        let search_paths: Vec<String> =
            match field("kpack_search_paths").map(|v| (&v.data, v.offset)) {
                Some((Data::Array(a), _)) => a
                    .iter()
                    .filter_map(|v| match v.data {
                        Data::Str(s) => std::str::from_utf8(s).ok().map(str::to_owned),
                        _ => None,
                    })
                    .collect(),
                Some((d, off)) => {
                    return Err(invalid(
                        off,
                        format!(
                            "marker kpack_search_paths is a {}, not an array",
                            d.type_name()
                        ),
                    ));
                }
                None => return Err(invalid(0, "marker has no kpack_search_paths".into())),
            };
        if search_paths.is_empty() {
            return Err(invalid(
                0,
                "marker kpack_search_paths has no string entry".into(),
            ));
        }
        Ok(Marker {
            kernel_name,
            search_paths,
        })
    }

    /// Encode as AMD's split tool does: `{kpack_search_paths, kernel_name}`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail; lengths beyond u32 cannot occur for
        // a marker (paths and names are far shorter).
        let _ = rmp::encode::write_map_len(&mut out, 2);
        let _ = rmp::encode::write_str(&mut out, "kpack_search_paths");
        let _ = rmp::encode::write_array_len(&mut out, self.search_paths.len() as u32);
        for p in &self.search_paths {
            let _ = rmp::encode::write_str(&mut out, p);
        }
        let _ = rmp::encode::write_str(&mut out, "kernel_name");
        let _ = rmp::encode::write_str(&mut out, &self.kernel_name);
        out
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

#[cfg(test)]
mod tests {
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
