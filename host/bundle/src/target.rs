//! Bundle-entry ids (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`), per LLVM's
//! grammar; the target-id part is [`kpack_amdgpu::TargetId`].

use std::fmt;

use kpack_amdgpu::TargetId;

use crate::error::{Error, ErrorKind};

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
                Some(TargetId::parse(t).map_err(|e| bad(&e.to_string()))?)
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
