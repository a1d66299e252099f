//! Debian control paragraphs (`DEBIAN/control`): fields in order, values
//! with their continuation lines, written back as read.

/// Between a field's name and its value (a control field, not a target id).
const FIELD_SEP: char = ':';

/// Why a control paragraph does not parse, naming the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// An indented line before any field.
    #[error("line {line}: continuation before any field")]
    Continuation {
        /// The line.
        line: usize,
    },
    /// A line with no `:`.
    #[error("line {line}: no `Field: value` ({text:?})")]
    NoField {
        /// The line.
        line: usize,
        /// Its text.
        text: String,
    },
    /// A field name that is empty or holds white space.
    #[error("line {line}: bad field name {name:?}")]
    FieldName {
        /// The line.
        line: usize,
        /// The name.
        name: String,
    },
}

/// One control paragraph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    fields: Vec<(String, String)>,
}

impl Control {
    /// Parse the first paragraph of `text`; `Err` names the bad line.
    pub fn parse(text: &str) -> Result<Control, ControlError> {
        let mut fields: Vec<(String, String)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                if fields.is_empty() {
                    continue;
                }
                break;
            }
            if line.starts_with([' ', '\t']) {
                let Some((_, value)) = fields.last_mut() else {
                    return Err(ControlError::Continuation { line: n + 1 });
                };
                value.push('\n');
                value.push_str(line);
                continue;
            }
            let Some((name, value)) = line.split_once(FIELD_SEP) else {
                return Err(ControlError::NoField {
                    line: n + 1,
                    text: line.into(),
                });
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(ControlError::FieldName {
                    line: n + 1,
                    name: name.into(),
                });
            }
            fields.push((name.to_string(), value.trim().to_string()));
        }
        Ok(Control { fields })
    }

    /// A field's value (case-insensitive name).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Set a field, in place if present, else at the end.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self
            .fields
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some((_, v)) => *v = value,
            None => self.fields.push((name.to_string(), value)),
        }
    }

    /// Add `dep` to the comma-separated relation field `name`.
    pub fn add_relation(&mut self, name: &str, dep: &str) {
        let value = match self.get(name) {
            Some(v) if !v.trim().is_empty() => format!("{v}, {dep}"),
            _ => dep.to_string(),
        };
        self.set(name, value);
    }

    /// The paragraph as dpkg reads it.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (n, v) in &self.fields {
            s.push_str(n);
            s.push_str(": ");
            s.push_str(v);
            s.push('\n');
        }
        s
    }
}

/// Whether `name` is a valid Debian package name: lower-case letters,
/// digits, `+`, `-`, `.`, at least two characters, starting alphanumeric.
pub fn is_valid_package_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+-.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_continuation_lines_and_order() {
        let text =
            "Package: librocblas0\nDepends: libc6\nDescription: BLAS\n long text\n .\n more\n";
        let mut c = Control::parse(text).unwrap();
        assert_eq!(c.to_text(), text);
        c.add_relation("Depends", "librocm-kpack0");
        assert_eq!(c.get("depends"), Some("libc6, librocm-kpack0"));
    }

    #[test]
    fn rejects_line_without_colon() {
        assert!(Control::parse("Package librocblas0\n").is_err());
    }

    #[test]
    fn parse_errors_name_the_line() {
        let why = |t: &str| Control::parse(t).unwrap_err().to_string();
        assert_eq!(why(" x\n"), "line 1: continuation before any field");
        assert_eq!(
            why("A: b\nPackage x\n"),
            "line 2: no `Field: value` (\"Package x\")"
        );
        assert_eq!(why("A b: c\n"), "line 1: bad field name \"A b\"");
    }

    #[test]
    fn package_names_follow_debian_rules() {
        assert!(is_valid_package_name("librocblas0-gfx1100"));
        assert!(!is_valid_package_name("librocblas0-gfx12_5"));
        assert!(!is_valid_package_name("LibRocblas"));
    }
}
