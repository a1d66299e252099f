//! `.dist-info/RECORD`: one CSV row per file, `path,algorithm=digest,size`,
//! digest in URL-safe base64 without padding (PEP 376 / PEP 427). Fields
//! are quoted as Python's `csv` module does (only when they contain `,`,
//! `"`, CR or LF; `"` doubled inside quotes).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::Digest;

use crate::error::quote;

/// One RECORD row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry {
    /// Path inside the wheel, `/`-separated.
    pub path: String,
    /// `algorithm=digest`, empty for RECORD itself and its signatures.
    pub hash: String,
    /// Size in bytes, `None` where the row leaves it empty.
    pub size: Option<u64>,
}

/// Why a RECORD did not parse: the 1-based row and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RECORD row {row}: {message}")]
pub struct RecordError {
    /// 1-based row number.
    pub row: usize,
    /// What is wrong with it.
    pub message: String,
}

/// The RECORD hash of `bytes`: `sha256=<urlsafe-b64, no padding>`.
pub fn record_hash(bytes: &[u8]) -> String {
    format_sha256(&sha2::Sha256::digest(bytes).into())
}

/// Format a SHA-256 digest as a RECORD hash.
pub fn format_sha256(digest: &[u8; 32]) -> String {
    format!("sha256={}", URL_SAFE_NO_PAD.encode(digest))
}

/// Check `hash` (a RECORD hash field) against `bytes`' digests. Only the
/// algorithms the wheel spec allows (sha256 and stronger) are accepted.
pub(crate) fn hash_matches(
    hash: &str,
    sha256: &[u8; 32],
    bytes: impl FnOnce(&str) -> Option<Vec<u8>>,
) -> Result<bool, HashError> {
    let Some((algo, digest)) = hash.split_once('=') else {
        return Err(HashError::Form { hash: hash.into() });
    };
    let want = URL_SAFE_NO_PAD
        .decode(digest.trim_end_matches('='))
        .map_err(|source| HashError::Base64 {
            hash: hash.into(),
            source,
        })?;
    match algo {
        "sha256" => Ok(want.as_slice() == sha256.as_slice()),
        "sha384" | "sha512" => Ok(bytes(algo).is_some_and(|got| got == want)),
        _ => Err(HashError::Algorithm { algo: algo.into() }),
    }
}

/// Why a RECORD hash field cannot be checked.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HashError {
    /// Not `algorithm=digest`.
    #[error("hash {} is not `algorithm=digest`", quote(hash))]
    Form {
        /// The field.
        hash: String,
    },
    /// The digest does not decode.
    #[error("hash {} is not URL-safe base64", quote(hash))]
    Base64 {
        /// The field.
        hash: String,
        /// The decoder's complaint.
        #[source]
        source: base64::DecodeError,
    },
    /// An algorithm a wheel may not use.
    #[error(
        "hash algorithm {} is not allowed in a wheel (sha256 or stronger)",
        quote(algo)
    )]
    Algorithm {
        /// The algorithm named.
        algo: String,
    },
}

/// The warning for a stale RECORD row: what the row says (`hash`, empty
/// for none; `size`) against what the file is. pip installs such a wheel
/// without a word; kpack accepts it too, says so, and writes a correct
/// RECORD.
pub(crate) fn stale_row(
    path: &str,
    hash: &str,
    size: Option<u64>,
    got_hash: &str,
    got_size: u64,
) -> String {
    let says = if hash.is_empty() { "no hash" } else { hash };
    let says_size = size.map_or_else(String::new, |s| format!(", {s} bytes"));
    format!(
        "stale RECORD row {path}: it says {says}{says_size}, the file is {got_hash}, {got_size} bytes; accepted, as pip installs it (the RECORD written is regenerated)"
    )
}

/// Parse RECORD text into rows. Every row has exactly three fields.
pub fn parse_record(text: &str) -> Result<Vec<RecordEntry>, RecordError> {
    let mut rows = Vec::new();
    let mut chars = text.chars().peekable();
    let mut row = 0;
    while chars.peek().is_some() {
        row += 1;
        let fields = csv_row(&mut chars, row)?;
        if fields.len() == 1 && fields[0].is_empty() {
            continue; // blank line
        }
        rows.push(record_entry(fields, row)?);
    }
    Ok(rows)
}

/// The fields of one CSV row (Python's `csv` dialect), up to and
/// including its line end.
fn csv_row(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    row: usize,
) -> Result<Vec<String>, RecordError> {
    let err = |message: &str| RecordError {
        row,
        message: message.into(),
    };
    let mut fields: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut at_start = true;
    loop {
        let c = chars.next();
        if quoted {
            match c {
                Some('"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                Some('"') => {
                    quoted = false;
                    if !matches!(chars.peek(), None | Some(',' | '\r' | '\n')) {
                        return Err(err("text after a closing quote"));
                    }
                }
                Some(c) => field.push(c),
                None => return Err(err("unterminated quoted field")),
            }
            continue;
        }
        match c {
            Some('"') if at_start => {
                quoted = true;
                at_start = false;
            }
            Some(',') => {
                fields.push(std::mem::take(&mut field));
                at_start = true;
            }
            Some('\r') if chars.peek() == Some(&'\n') => {}
            Some('\n') | None => {
                fields.push(std::mem::take(&mut field));
                return Ok(fields);
            }
            Some(c) => {
                field.push(c);
                at_start = false;
            }
        }
    }
}

/// A row's three fields as a [`RecordEntry`].
fn record_entry(fields: Vec<String>, row: usize) -> Result<RecordEntry, RecordError> {
    let [path, hash, size]: [String; 3] =
        fields.try_into().map_err(|f: Vec<String>| RecordError {
            row,
            message: format!("{} fields, want 3 (path,hash,size)", f.len()),
        })?;
    if path.is_empty() {
        return Err(RecordError {
            row,
            message: "empty path".into(),
        });
    }
    let size = if size.is_empty() {
        None
    } else {
        Some(size.parse::<u64>().map_err(|_| RecordError {
            row,
            message: format!("size {} is not a number", quote(&size)),
        })?)
    };
    Ok(RecordEntry { path, hash, size })
}

fn csv_field(out: &mut String, f: &str) {
    if f.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&f.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(f);
    }
}

/// Write rows as RECORD text (`\n` line ends, as `wheel` and pip write it).
pub fn write_record(rows: &[RecordEntry]) -> String {
    let mut out = String::new();
    for r in rows {
        csv_field(&mut out, &r.path);
        out.push(',');
        csv_field(&mut out, &r.hash);
        out.push(',');
        if let Some(s) = r.size {
            out.push_str(&s.to_string());
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;

    #[test]
    fn hashes_like_pip() {
        // python3 -c 'import hashlib,base64;print(base64.urlsafe_b64encode(hashlib.sha256(b"hello").digest()).rstrip(b"="))'
        assert_eq!(
            record_hash(b"hello"),
            "sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ"
        );
    }

    #[test]
    fn round_trips_quoted_paths() {
        let rows = vec![
            RecordEntry {
                path: "pkg/a,b \"c\".py".into(),
                hash: record_hash(b"x"),
                size: Some(1),
            },
            RecordEntry {
                path: "pkg-1.0.dist-info/RECORD".into(),
                hash: String::new(),
                size: None,
            },
        ];
        let text = write_record(&rows);
        assert!(text.starts_with("\"pkg/a,b \"\"c\"\".py\","));
        assert_eq!(parse_record(&text).unwrap(), rows);
        assert_eq!(parse_record(&text.replace('\n', "\r\n")).unwrap(), rows);
    }

    #[test]
    fn rejects_malformed_rows() {
        assert_eq!(parse_record("a,b\n").unwrap_err().row, 1);
        assert!(parse_record("a,b,c\n").is_err());
        assert!(parse_record("\"a,b,1\n").is_err());
        assert!(parse_record("\"a\"x,b,1\n").is_err());
        assert!(parse_record(",sha256=x,1\n").is_err());
        assert_eq!(parse_record("a,,\n\n").unwrap().len(), 1);
    }

    #[test]
    fn checks_hashes_and_refuses_weak_algorithms() {
        let d: [u8; 32] = sha2::Sha256::digest(b"hello").into();
        assert_eq!(hash_matches(&record_hash(b"hello"), &d, |_| None), Ok(true));
        assert_eq!(
            hash_matches(&record_hash(b"other"), &d, |_| None),
            Ok(false)
        );
        assert!(hash_matches("md5=XUFAKrxLKna5cZ2REBfFkg", &d, |_| None).is_err());
        assert!(hash_matches("nohash", &d, |_| None).is_err());
    }

    #[test]
    fn undecodable_hash_keeps_the_decoder_error_as_its_source() {
        use std::error::Error as _;
        let d = sha2::Sha256::digest(b"hello").into();
        let e = hash_matches("sha256=not*base64", &d, |_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hash \"sha256=not*base64\" is not URL-safe base64"
        );
        let cause = e.source().expect("the base64 error is the source");
        assert!(
            cause.downcast_ref::<base64::DecodeError>().is_some(),
            "{cause}"
        );
    }
}
