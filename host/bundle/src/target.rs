//! Target ids (`gfx90a:sramecc+:xnack-`) and bundle-entry ids
//! (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`), per LLVM's grammar.

use std::fmt;

use crate::error::{Error, ErrorKind};

/// One target feature with its requested state, e.g. `xnack+`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Feature {
    /// Feature name, such as `xnack` or `sramecc`.
    pub name: String,
    /// `true` for `+`, `false` for `-`.
    pub on: bool,
}

/// A GPU target id: a processor and optional features, kept in canonical
/// (alphabetical) feature order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetId {
    processor: String,
    features: Vec<Feature>,
}

impl TargetId {
    /// Parse `processor(:feature(+|-))*`. Features are stored in canonical
    /// order; a feature given twice is an error.
    pub fn parse(text: &str) -> Result<TargetId, Error> {
        let bad =
            |why: &str| Error::new(ErrorKind::BadTargetId, format!("target id {text:?}: {why}"));
        let mut parts = text.split(':');
        let processor = parts.next().unwrap_or_default();
        if processor.is_empty()
            || !processor
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad("bad processor name"));
        }
        let mut features = Vec::new();
        for part in parts {
            let (name, on) = match part.as_bytes().last() {
                Some(b'+') => (&part[..part.len() - 1], true),
                Some(b'-') => (&part[..part.len() - 1], false),
                _ => return Err(bad("a feature must end in + or -")),
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(bad("bad feature name"));
            }
            if features.iter().any(|f: &Feature| f.name == name) {
                return Err(bad("feature given twice"));
            }
            features.push(Feature {
                name: name.to_string(),
                on,
            });
        }
        features.sort();
        Ok(TargetId {
            processor: processor.to_string(),
            features,
        })
    }

    /// Build a target id from parts (features are put in canonical order).
    pub fn new(processor: impl Into<String>, mut features: Vec<Feature>) -> TargetId {
        features.sort();
        TargetId {
            processor: processor.into(),
            features,
        }
    }

    /// The processor, e.g. `gfx90a` or `gfx9-4-generic`.
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// The features in canonical order.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// State of one feature: `Some(true)` for `+`, `Some(false)` for `-`,
    /// `None` when the target does not state it ("any").
    pub fn feature(&self, name: &str) -> Option<bool> {
        self.features.iter().find(|f| f.name == name).map(|f| f.on)
    }

    /// A spelling safe in file and directory names on every platform:
    /// `:` becomes `_`, `+` and `-` stay (`gfx90a_xnack+`).
    pub fn file_name(&self) -> String {
        self.to_string().replace(':', "_")
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for feat in &self.features {
            write!(f, ":{}{}", feat.name, if feat.on { '+' } else { '-' })?;
        }
        Ok(())
    }
}

impl serde::Serialize for TargetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The offload kind at the start of a bundle-entry id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OffloadKind {
    /// The host placeholder entry, whatever its triple.
    Host,
    /// HIP device code (`hip` and `hipv4` are the same kind).
    Hip,
    /// OpenMP offload code.
    Openmp,
    /// Anything else (kept verbatim).
    Other(String),
}

/// A parsed bundle-entry id: `kind-arch-vendor-os-env[-target-id]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryId {
    raw: String,
    kind: OffloadKind,
    triple: String,
    target: Option<TargetId>,
}

impl EntryId {
    /// Parse an entry id. Splits on `-` at most five times, so generic
    /// processors such as `gfx9-4-generic` keep their dashes.
    pub fn parse(raw: &str) -> Result<EntryId, Error> {
        let bad = |why: &str| {
            Error::new(
                ErrorKind::BadEntryId,
                format!("bundle entry id {raw:?}: {why}"),
            )
        };
        if raw.is_empty() || !raw.is_ascii() {
            return Err(bad("empty or not ASCII"));
        }
        let parts: Vec<&str> = raw.splitn(6, '-').collect();
        let kind = match parts[0] {
            "host" => OffloadKind::Host,
            "hip" | "hipv4" => OffloadKind::Hip,
            "openmp" => OffloadKind::Openmp,
            other => OffloadKind::Other(other.to_string()),
        };
        if parts.len() < 4 && kind != OffloadKind::Host {
            return Err(bad("expected kind-arch-vendor-os"));
        }
        let triple_parts = &parts[1..parts.len().min(5)];
        let triple = triple_parts.join("-").trim_end_matches('-').to_string();
        let target = match (kind == OffloadKind::Host, parts.get(5)) {
            (false, Some(t)) if !t.is_empty() => {
                Some(TargetId::parse(t).map_err(|e| bad(e.message()))?)
            }
            _ => None,
        };
        Ok(EntryId {
            raw: raw.to_string(),
            kind,
            triple,
            target,
        })
    }

    /// The id exactly as stored in the bundle.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The offload kind.
    pub fn kind(&self) -> &OffloadKind {
        &self.kind
    }

    /// `true` for the host placeholder entry.
    pub fn is_host(&self) -> bool {
        self.kind == OffloadKind::Host
    }

    /// The target triple, e.g. `amdgcn-amd-amdhsa`.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The GPU target id, if the entry names one.
    pub fn target(&self) -> Option<&TargetId> {
        self.target.as_ref()
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl serde::Serialize for EntryId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalizes_feature_order() {
        let t = TargetId::parse("gfx908:xnack-:sramecc+").unwrap();
        assert_eq!(t.to_string(), "gfx908:sramecc+:xnack-");
        assert_eq!(t.feature("xnack"), Some(false));
        assert_eq!(t.feature("sramecc"), Some(true));
        assert_eq!(t.file_name(), "gfx908_sramecc+_xnack-");
    }

    #[test]
    fn rejects_bad_target_ids() {
        for bad in [
            "",
            "gfx90a:xnack",
            "gfx90a:xnack+:xnack-",
            "gfx 90a",
            "gfx90a::xnack+",
        ] {
            assert!(TargetId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn parses_hip_and_hipv4_as_one_kind() {
        let a = EntryId::parse("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+").unwrap();
        let b = EntryId::parse("hip-amdgcn-amd-amdhsa--gfx90a:xnack+").unwrap();
        assert_eq!(a.kind(), b.kind());
        assert_eq!(a.triple(), "amdgcn-amd-amdhsa");
        assert_eq!(a.target().unwrap().to_string(), "gfx90a:xnack+");
    }

    #[test]
    fn keeps_dashes_of_generic_processors() {
        let e = EntryId::parse("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic:xnack+").unwrap();
        assert_eq!(e.target().unwrap().processor(), "gfx9-4-generic");
    }

    #[test]
    fn host_entry_whatever_its_spelling() {
        for raw in [
            "host-x86_64-unknown-linux",
            "host-x86_64-unknown-linux-gnu-",
            "host-x86_64-pc-windows-msvc",
        ] {
            let e = EntryId::parse(raw).unwrap();
            assert!(e.is_host(), "{raw}");
            assert!(e.target().is_none());
        }
    }

    #[test]
    fn rejects_malformed_entry_ids() {
        for bad in [
            "",
            "hipv4",
            "hipv4-amdgcn",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:bogus",
        ] {
            assert!(EntryId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
