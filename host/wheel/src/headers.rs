//! The email-header format of `WHEEL` and `METADATA` (the core-metadata
//! spec's "RFC 822-ish" form): `Name: value` lines, continuation lines
//! starting with a space or tab, an empty line, then an optional body.
//!
//! The parser is strict where a lenient one would hide a broken wheel: a
//! line that is neither a header nor a continuation, a continuation before
//! the first header, or a field name outside RFC 5322's printable range is
//! an error naming the line.

/// Parsed headers, in file order (names may repeat: `Tag`, `Requires-Dist`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    fields: Vec<(String, String)>,
    body: Option<String>,
}

/// Why a header block did not parse: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct HeaderError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl Headers {
    /// An empty header block.
    pub fn new() -> Headers {
        Headers::default()
    }

    /// Parse `text`. Lines end in `\n` or `\r\n`. Folded values keep their
    /// continuation lines joined with `\n`, leading whitespace included (the
    /// old `Description` style depends on it).
    pub fn parse(text: &str) -> Result<Headers, HeaderError> {
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut rest = text;
        let mut line_no = 0;
        let mut body = None;
        while !rest.is_empty() {
            line_no += 1;
            let (line, next) = match rest.find('\n') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, ""),
            };
            let line = line.strip_suffix('\r').unwrap_or(line);
            rest = next;
            if line.is_empty() {
                body = Some(rest.to_string());
                break;
            }
            if line.starts_with([' ', '\t']) {
                let Some((_, value)) = fields.last_mut() else {
                    return Err(HeaderError {
                        line: line_no,
                        message: "continuation line before the first field".into(),
                    });
                };
                value.push('\n');
                value.push_str(line);
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(HeaderError {
                    line: line_no,
                    message: format!("not a `Name: value` field: {}", crate::error::quote(line)),
                });
            };
            if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b)) {
                return Err(HeaderError {
                    line: line_no,
                    message: format!("bad field name {}", crate::error::quote(name)),
                });
            }
            fields.push((name.to_string(), value.trim().to_string()));
        }
        let body = body.filter(|b| !b.is_empty());
        Ok(Headers { fields, body })
    }

    /// The first value of field `name` (names compare ASCII-case-insensitively).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of field `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Append a field.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.fields.push((name.into(), value.into()));
    }

    /// Set the body (the text after the empty line).
    pub fn set_body(&mut self, body: impl Into<String>) {
        self.body = Some(body.into());
    }

    /// The body, if any.
    pub fn body(&self) -> Option<&str> {
        self.body.as_deref()
    }

    /// The fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

impl std::fmt::Display for Headers {
    /// `Name: value\n` per field, folded values as parsed, then the body
    /// after an empty line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, v) in &self.fields {
            writeln!(f, "{n}: {v}")?;
        }
        if let Some(b) = &self.body {
            writeln!(f)?;
            f.write_str(b)?;
        }
        Ok(())
    }
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
    fn parses_repeated_fields_folds_and_body() {
        let h = Headers::parse("Wheel-Version: 1.0\r\nTag: cp312-cp312-linux_x86_64\nTag: py3-none-any\nLicense: MIT\n  and more\n\nBody text\nline 2\n")
            .unwrap();
        assert_eq!(h.get("wheel-version"), Some("1.0"));
        assert_eq!(
            h.get_all("Tag").collect::<Vec<_>>(),
            ["cp312-cp312-linux_x86_64", "py3-none-any"]
        );
        assert_eq!(h.get("License"), Some("MIT\n  and more"));
        assert_eq!(h.body(), Some("Body text\nline 2\n"));
        assert_eq!(h.get("Missing"), None);
    }

    #[test]
    fn rejects_lines_that_are_not_fields() {
        assert_eq!(
            Headers::parse("Name: a\nno colon here\n").unwrap_err().line,
            2
        );
        assert_eq!(Headers::parse(" leading\n").unwrap_err().line, 1);
        assert!(Headers::parse("Bad Name: x\n").is_err());
        assert!(Headers::parse(": x\n").is_err());
    }

    #[test]
    fn round_trips_through_display() {
        let text = "Metadata-Version: 2.1\nName: fatpkg\nRequires-Dist: numpy\n\nbody\n";
        let h = Headers::parse(text).unwrap();
        assert_eq!(h.to_string(), text);
        assert_eq!(Headers::parse(&h.to_string()).unwrap(), h);
    }

    #[test]
    fn quotes_only_a_short_prefix_of_a_bad_line() {
        let line = "x".repeat(100_000);
        let e = Headers::parse(&line).unwrap_err().to_string();
        assert!(
            e.len() < 200,
            "{} bytes: {}",
            e.len(),
            &e[..200.min(e.len())]
        );
        assert!(e.contains("(100000 bytes)"), "{e}");
        let e = Headers::parse(&format!("{} x: y\n", "n".repeat(5000)))
            .unwrap_err()
            .to_string();
        assert!(e.len() < 200, "{} bytes", e.len());
    }
}
