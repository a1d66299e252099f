//! [`HandlerSpec`]: how a handler is asked for on the command line, and the
//! rule for handler names (shared with the registry).

use std::fmt;
use std::path::PathBuf;

use semver::VersionReq;

use crate::{Error, ErrorKind, Result};

/// How a handler is asked for: `rocblas`, `rocblas@^1.2`, or a `.wasm` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerSpec {
    /// A handler by name, optionally with a semver requirement.
    Name {
        /// Handler name.
        name: String,
        /// Version requirement (`NAME@REQ`); `None` takes what is found first.
        req: Option<VersionReq>,
    },
    /// A handler component file (`--plugin FILE.wasm`).
    File(PathBuf),
}

impl HandlerSpec {
    /// Parse `NAME`, `NAME@REQ` or a path (anything with `/` or ending `.wasm`).
    ///
    /// ```
    /// use kpack_plugin_host::HandlerSpec;
    /// assert!(matches!(HandlerSpec::parse("rocblas@^1.2").unwrap(), HandlerSpec::Name { .. }));
    /// assert!(matches!(HandlerSpec::parse("./x.wasm").unwrap(), HandlerSpec::File(_)));
    /// assert!(HandlerSpec::parse("Bad Name").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<HandlerSpec> {
        if s.ends_with(".wasm") || s.contains('/') {
            return Ok(HandlerSpec::File(PathBuf::from(s)));
        }
        let (name, req) = match s.split_once('@') {
            Some((n, r)) => {
                let req = VersionReq::parse(r).map_err(|e| {
                    Error::with_source(
                        ErrorKind::Usage,
                        format!("handler spec {s:?}: bad version requirement {r:?}"),
                        e,
                    )
                })?;
                (n, Some(req))
            }
            None => (s, None),
        };
        check_name(name)
            .map_err(|m| Error::new(ErrorKind::Usage, format!("handler spec {s:?}: {m}")))?;
        Ok(HandlerSpec::Name {
            name: name.to_string(),
            req,
        })
    }
}

impl fmt::Display for HandlerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerSpec::Name { name, req: None } => f.write_str(name),
            HandlerSpec::Name { name, req: Some(r) } => write!(f, "{name}@{r}"),
            HandlerSpec::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Whether `name` is a valid handler name (`[a-z0-9_-]{1,64}`); the error
/// says why not.
pub(crate) fn check_name(name: &str) -> std::result::Result<(), NameError> {
    if name.is_empty() || name.len() > 64 {
        return Err(NameError::Length);
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
    {
        return Err(NameError::Characters { name: name.into() });
    }
    Ok(())
}

/// Why a string is not a handler name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    /// Empty, or longer than 64 characters.
    #[error("handler names are 1 to 64 characters")]
    Length,
    /// A character outside `[a-z0-9_-]`.
    #[error("handler name {name:?} may only contain a-z, 0-9, '_' and '-'")]
    Characters {
        /// The name as given.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use semver::Version;

    use super::*;

    #[test]
    fn parses_handler_specs() {
        assert_eq!(
            HandlerSpec::parse("rocblas").unwrap(),
            HandlerSpec::Name {
                name: "rocblas".into(),
                req: None
            }
        );
        let HandlerSpec::Name {
            name,
            req: Some(req),
        } = HandlerSpec::parse("hipblaslt@^1.2").unwrap()
        else {
            panic!("not a name spec")
        };
        assert_eq!(name, "hipblaslt");
        assert!(req.matches(&Version::new(1, 3, 0)) && !req.matches(&Version::new(2, 0, 0)));
        assert_eq!(
            HandlerSpec::parse("x/y").unwrap(),
            HandlerSpec::File("x/y".into())
        );
        assert_eq!(
            HandlerSpec::parse("my.wasm").unwrap(),
            HandlerSpec::File("my.wasm".into())
        );
        assert_eq!(
            HandlerSpec::parse("rocblas@notsemver").unwrap_err().kind(),
            ErrorKind::Usage
        );
        assert_eq!(
            HandlerSpec::parse("RocBLAS").unwrap_err().kind(),
            ErrorKind::Usage
        );
        assert_eq!(HandlerSpec::parse("").unwrap_err().kind(), ErrorKind::Usage);
    }
}
