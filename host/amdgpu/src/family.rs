//! ROCm's Python packaging hierarchy, as AMD's `rocm-bootstrap` 0.3.0
//! (`targets.py`, `naming.py`) defines it: every processor belongs to a
//! **sub-family** (`gfx1151` → `gfx115x`, `gfx942` → `gfx9_4`) and a
//! **family** (`gfx11`); device packages exist at any of the three levels.
//! Bundle keys use `_` (valid Python module names); distribution names
//! replace it with `-` ([`dist_name`]: `gfx12_5` → `gfx12-5`).
//!
//! The table is transcribed from rocm-bootstrap, which derives it from
//! LLVM's `GCNProcessors.td`; a test compares it with a committed extract
//! (`tests/data/rocm-bootstrap-0.3.0.tsv`, written by
//! `scripts/extract-rocm-bootstrap.py` from the wheel). Processors that
//! ROCm no longer packages (`gfx803`, `gfx940`) are in no bundle.

use crate::target::processor_of;

/// A level of the packaging hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// One processor per package (`gfx1151`); `gfx1250-strict` shares
    /// `gfx1250`'s.
    Target,
    /// Major + minor version (`gfx115x`, `gfx12_5`).
    SubFamily,
    /// Major version (`gfx11`).
    Family,
}

impl Level {
    /// The spelling of `--group`: `target`, `sub-family`, `family`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Target => "target",
            Level::SubFamily => "sub-family",
            Level::Family => "family",
        }
    }
}

/// A family: all processors sharing a major version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Bundle key (`gfx11`).
    pub key: &'static str,
    /// LLVM generic target whose code runs on every member, if any.
    pub generic: Option<&'static str>,
}

/// A sub-family: processors sharing major and minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubFamily {
    /// Bundle key (`gfx115x`, `gfx12_5`).
    pub key: &'static str,
    /// The family's key (`gfx11`).
    pub family: &'static str,
    /// LLVM generic target named for this level, if any. rocm-bootstrap
    /// names `gfx9-generic` for `gfx9_0` although it covers neither
    /// `gfx908` nor `gfx90a`; [`crate::covered_by`] has the exact cover.
    pub generic: Option<&'static str>,
    /// Processors, in `GCNProcessors.td` order.
    pub members: &'static [&'static str],
}

/// rocm-bootstrap 0.3.0's families.
pub const FAMILIES: &[Family] = &[
    Family {
        key: "gfx9",
        generic: None,
    },
    Family {
        key: "gfx10",
        generic: None,
    },
    Family {
        key: "gfx11",
        generic: Some("gfx11-generic"),
    },
    Family {
        key: "gfx12",
        generic: None,
    },
];

/// rocm-bootstrap 0.3.0's sub-families, in its order.
pub const SUB_FAMILIES: &[SubFamily] = &[
    SubFamily {
        key: "gfx9_0",
        family: "gfx9",
        generic: Some("gfx9-generic"),
        members: &[
            "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c",
        ],
    },
    SubFamily {
        key: "gfx9_4",
        family: "gfx9",
        generic: Some("gfx9-4-generic"),
        members: &["gfx942"],
    },
    SubFamily {
        key: "gfx9_5",
        family: "gfx9",
        generic: None,
        members: &["gfx950"],
    },
    SubFamily {
        key: "gfx10_1",
        family: "gfx10",
        generic: Some("gfx10-1-generic"),
        members: &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    },
    SubFamily {
        key: "gfx10_3",
        family: "gfx10",
        generic: Some("gfx10-3-generic"),
        members: &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    },
    SubFamily {
        key: "gfx110x",
        family: "gfx11",
        generic: None,
        members: &["gfx1100", "gfx1101", "gfx1102", "gfx1103"],
    },
    SubFamily {
        key: "gfx115x",
        family: "gfx11",
        generic: None,
        members: &["gfx1150", "gfx1151", "gfx1152", "gfx1153"],
    },
    SubFamily {
        key: "gfx12_0",
        family: "gfx12",
        generic: Some("gfx12-generic"),
        members: &["gfx1200", "gfx1201"],
    },
    SubFamily {
        key: "gfx12_5",
        family: "gfx12",
        generic: None,
        members: &["gfx1250", "gfx1250-strict", "gfx1251"],
    },
];

/// Targets packaged with another processor (rocm-bootstrap's
/// `package_metadata`): `gfx1250-strict` code ships in `gfx1250`'s package.
const PACKAGE_OWNERS: &[(&str, &str)] = &[("gfx1250-strict", "gfx1250")];

/// The sub-family of a processor (features ignored), or of the generic
/// target named for a sub-family (`gfx10-3-generic` → `gfx10_3`).
///
/// A generic target rocm-bootstrap names for no level (`gfx12-5-generic`)
/// belongs where all the processors it covers do.
pub fn sub_family(target: &str) -> Option<&'static SubFamily> {
    let p = processor_of(target);
    let own = |p: &str| {
        SUB_FAMILIES
            .iter()
            .find(|s| s.members.contains(&p) || s.generic == Some(p))
    };
    if let Some(s) = own(p) {
        return Some(s);
    }
    let covered = crate::covered_by(p)?;
    let first = own(covered.first()?)?;
    covered
        .iter()
        .all(|c| own(c).is_some_and(|s| s.key == first.key))
        .then_some(first)
}

/// The family of a processor (features ignored) or of a generic target
/// named for it or for one of its sub-families (`gfx11-generic` → `gfx11`).
pub fn family(target: &str) -> Option<&'static Family> {
    let p = processor_of(target);
    let key = match sub_family(p) {
        Some(s) => s.family,
        None => FAMILIES.iter().find(|f| f.generic == Some(p))?.key,
    };
    FAMILIES.iter().find(|f| f.key == key)
}

/// The bundle key a target's code is packaged under at `level`, or `None`
/// for a processor rocm-bootstrap does not know. At [`Level::Target`] this
/// is the package owner (`gfx1250-strict` → `gfx1250`; any other processor
/// is its own, known or not). A generic target goes to the level it is
/// named for, or the next wider one: `gfx11-generic` covers both GFX11
/// sub-families, so at [`Level::SubFamily`] it is `gfx11`.
///
/// ```
/// use kpack_amdgpu::{Level, bundle_key, dist_name};
/// assert_eq!(bundle_key("gfx1151", Level::SubFamily).as_deref(), Some("gfx115x"));
/// assert_eq!(bundle_key("gfx90a:xnack+", Level::Family).as_deref(), Some("gfx9"));
/// assert_eq!(bundle_key("gfx1250-strict", Level::Target).as_deref(), Some("gfx1250"));
/// assert_eq!(dist_name("gfx12_5"), "gfx12-5");
/// // Portable SPIR-V runs on every family: a bundle of its own at each level.
/// assert_eq!(bundle_key("amdgcnspirv", Level::Family).as_deref(), Some("amdgcnspirv"));
/// ```
pub fn bundle_key(target: &str, level: Level) -> Option<String> {
    let p = processor_of(target);
    if crate::is_spirv_target(p) {
        // rocm-bootstrap 0.3.0 has no name for it.
        return Some(crate::SPIRV_TARGET.to_string());
    }
    match level {
        Level::Target => {
            let owner = PACKAGE_OWNERS
                .iter()
                .find(|(t, _)| *t == p)
                .map_or(p, |(_, o)| *o);
            Some(owner.to_string())
        }
        Level::SubFamily => match sub_family(p) {
            Some(s) => Some(s.key.to_string()),
            None => family(p).map(|f| f.key.to_string()),
        },
        Level::Family => family(p).map(|f| f.key.to_string()),
    }
}

/// The archive group a target's code goes into when `.kpack` files are
/// grouped at `level` (`--archive-group`): the processor at
/// [`Level::Target`] (`<name>_<processor>.kpack`, kpack's layout before
/// grouping existed), else the [`dist_name`] of its [`bundle_key`]
/// (`gfx110x`, `gfx9-0`, `gfx11`), so a file name never holds `:` and its
/// last `_` still separates name and group. A processor rocm-bootstrap
/// does not place keeps an archive of its own.
///
/// ```
/// use kpack_amdgpu::{Level, archive_group};
/// assert_eq!(archive_group("gfx1101:xnack+", Level::SubFamily), "gfx110x");
/// assert_eq!(archive_group("gfx90a", Level::SubFamily), "gfx9-0");
/// assert_eq!(archive_group("gfx11-generic", Level::SubFamily), "gfx11");
/// assert_eq!(archive_group("gfx1250-strict", Level::Target), "gfx1250-strict");
/// assert_eq!(archive_group("amdgcnspirv", Level::Family), "amdgcnspirv");
/// ```
pub fn archive_group(target: &str, level: Level) -> String {
    let p = processor_of(target);
    match level {
        Level::Target => p.to_string(),
        _ => bundle_key(p, level).map_or_else(|| p.to_string(), |k| dist_name(&k)),
    }
}

/// The level and bundle key of an archive group name that
/// [`archive_group`] writes for a sub-family or family (`gfx110x`,
/// `gfx9-0`, `gfx11`); `None` for a processor or anything else.
pub fn archive_group_level(name: &str) -> Option<(Level, &'static str)> {
    SUB_FAMILIES
        .iter()
        .find(|s| dist_name(s.key) == name)
        .map(|s| (Level::SubFamily, s.key))
        .or_else(|| {
            FAMILIES
                .iter()
                .find(|f| f.key == name)
                .map(|f| (Level::Family, f.key))
        })
}

/// Whether the archive group `group` (an [`archive_group`] name of any
/// level) holds `target`'s code.
pub fn archive_group_holds(group: &str, target: &str) -> bool {
    [Level::Target, Level::SubFamily, Level::Family]
        .iter()
        .any(|l| archive_group(target, *l) == group)
}

/// The distribution-name spelling of a bundle key: `_` → `-`.
pub fn dist_name(key: &str) -> String {
    key.replace('_', "-")
}

/// The level of a bundle key rocm-bootstrap knows (`gfx11` → family,
/// `gfx12_0` → sub-family, `gfx1100` → target), or `None` for any other
/// name (`gfx803`, a generic target, `amdgcnspirv`). `gfx1250-strict` is
/// no key: its code ships in `gfx1250`'s package.
///
/// ```
/// use kpack_amdgpu::{Level, key_level};
/// assert_eq!(key_level("gfx110x"), Some(Level::SubFamily));
/// assert_eq!(key_level("gfx942"), Some(Level::Target));
/// assert_eq!(key_level("gfx11-generic"), None);
/// ```
pub fn key_level(key: &str) -> Option<Level> {
    if FAMILIES.iter().any(|f| f.key == key) {
        Some(Level::Family)
    } else if SUB_FAMILIES.iter().any(|s| s.key == key) {
        Some(Level::SubFamily)
    } else if SUB_FAMILIES.iter().any(|s| s.members.contains(&key))
        && !PACKAGE_OWNERS.iter().any(|(t, _)| *t == key)
    {
        Some(Level::Target)
    } else {
        None
    }
}

/// rocm-bootstrap 0.3.0's `display_name` of a bundle key (`gfx115x` →
/// `RDNA3.5`; a target's is its own name), or `None` for a name it does
/// not know. AMD's wheel splitter puts it in a device wheel's `Summary`.
pub fn display_name(key: &str) -> Option<&str> {
    const LABELS: &[(&str, &str)] = &[
        ("gfx9", "GFX9"),
        ("gfx10", "GFX10"),
        ("gfx11", "RDNA3"),
        ("gfx12", "RDNA4"),
        ("gfx9_0", "Vega"),
        ("gfx9_4", "MI300"),
        ("gfx9_5", "MI350"),
        ("gfx10_1", "RDNA1"),
        ("gfx10_3", "RDNA2"),
        ("gfx110x", "RDNA3"),
        ("gfx115x", "RDNA3.5"),
        ("gfx12_0", "RDNA4"),
        ("gfx12_5", "GFX12.5"),
    ];
    match key_level(key)? {
        Level::Target => Some(key),
        _ => LABELS.iter().find(|(k, _)| *k == key).map(|(_, l)| *l),
    }
}

/// The bundle key of an AMD family wildcard directory name (AOTriton's
/// `amd-gfx11xx`, `amd-gfx120x`): `gfx<major>xx` is a family, a
/// `gfx<digits>x` wildcard is the sub-family all of whose members it
/// matches (`gfx120x` → `gfx12_0`, `gfx110x` → `gfx110x`), anything else is
/// returned verbatim (`gfx942`).
pub fn wildcard_key(wildcard: &str) -> String {
    if let Some(f) = wildcard
        .strip_suffix("xx")
        .and_then(|k| FAMILIES.iter().find(|f| f.key == k))
    {
        return f.key.to_string();
    }
    if let Some(stem) = wildcard.strip_suffix('x') {
        // Exactly one sub-family, and all of it: `gfx1x` names none.
        let mut hits = SUB_FAMILIES
            .iter()
            .filter(|s| s.members.iter().any(|m| m.starts_with(stem)));
        if let (Some(s), None) = (hits.next(), hits.next())
            && s.members.iter().all(|m| m.starts_with(stem))
        {
            return s.key.to_string();
        }
    }
    wildcard.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXTRACT: &str = include_str!("../tests/data/rocm-bootstrap-0.3.0.tsv");

    #[test]
    fn every_bundle_has_rocm_bootstraps_display_name() {
        for f in FAMILIES {
            assert!(display_name(f.key).is_some(), "{}", f.key);
        }
        for s in SUB_FAMILIES {
            assert!(display_name(s.key).is_some(), "{}", s.key);
            for m in s.members {
                let owned = PACKAGE_OWNERS.iter().any(|(t, _)| t == m);
                assert_eq!(display_name(m), (!owned).then_some(*m));
            }
        }
        assert_eq!(display_name("gfx115x"), Some("RDNA3.5"));
        assert_eq!(display_name("gfx12_5"), Some("GFX12.5"));
        assert_eq!(display_name("gfx803"), None);
    }

    #[test]
    fn matches_rocm_bootstrap_0_3_0() {
        let mut lines = EXTRACT.lines();
        assert!(lines.next().unwrap().starts_with("# rocm-bootstrap 0.3.0 "));
        assert_eq!(
            lines.next().unwrap(),
            "level\tkey\tdist_name\tparent\tllvm_generic\tmembers"
        );
        let (mut families, mut subs, mut targets) = (0, 0, 0);
        for line in lines {
            let c: Vec<&str> = line.split('\t').collect();
            let [level, key, dist, parent, generic, members] = c[..] else {
                panic!("bad row {line:?}");
            };
            let members: Vec<&str> = members.split(',').collect();
            let generic = (!generic.is_empty()).then_some(generic);
            assert_eq!(dist_name(key), dist, "{key}");
            match level {
                "family" => {
                    families += 1;
                    let f = FAMILIES.iter().find(|f| f.key == key).unwrap();
                    assert_eq!(f.generic, generic, "{key}");
                    for m in &members {
                        assert_eq!(family(m), Some(f), "{m}");
                        assert_eq!(bundle_key(m, Level::Family).as_deref(), Some(key));
                    }
                }
                "sub_family" => {
                    subs += 1;
                    let s = SUB_FAMILIES.iter().find(|s| s.key == key).unwrap();
                    assert_eq!(s.family, parent, "{key}");
                    assert_eq!(s.generic, generic, "{key}");
                    assert_eq!(s.members, &members[..], "{key}");
                    for m in &members {
                        assert_eq!(bundle_key(m, Level::SubFamily).as_deref(), Some(key));
                    }
                }
                "target" => {
                    targets += members.len();
                    for m in &members {
                        assert_eq!(bundle_key(m, Level::Target).as_deref(), Some(key));
                        assert_eq!(sub_family(m).map(|s| s.key), Some(parent), "{m}");
                    }
                }
                other => panic!("unknown level {other:?}"),
            }
        }
        // Every entry of our tables was seen in the extract.
        assert_eq!(families, FAMILIES.len());
        assert_eq!(subs, SUB_FAMILIES.len());
        assert_eq!(
            targets,
            SUB_FAMILIES.iter().map(|s| s.members.len()).sum::<usize>()
        );
    }

    #[test]
    fn places_variants_and_generics() {
        assert_eq!(
            bundle_key("gfx90a:sramecc+:xnack-", Level::Target).as_deref(),
            Some("gfx90a")
        );
        assert_eq!(
            bundle_key("gfx10-3-generic", Level::SubFamily).as_deref(),
            Some("gfx10_3")
        );
        assert_eq!(
            bundle_key("gfx11-generic", Level::SubFamily).as_deref(),
            Some("gfx11")
        );
        assert_eq!(
            bundle_key("gfx11-generic", Level::Family).as_deref(),
            Some("gfx11")
        );
        assert_eq!(
            bundle_key("gfx12-5-generic", Level::SubFamily).as_deref(),
            Some("gfx12_5")
        );
        assert_eq!(bundle_key("gfx803", Level::SubFamily), None);
        assert_eq!(
            bundle_key("gfx803", Level::Target).as_deref(),
            Some("gfx803")
        );
    }

    #[test]
    fn names_archive_groups() {
        assert_eq!(archive_group("gfx1100", Level::Family), "gfx11");
        assert_eq!(archive_group("gfx803", Level::Family), "gfx803");
        assert_eq!(archive_group("gfx1250-strict", Level::SubFamily), "gfx12-5");
        assert_eq!(
            archive_group_level("gfx9-0"),
            Some((Level::SubFamily, "gfx9_0"))
        );
        assert_eq!(archive_group_level("gfx11"), Some((Level::Family, "gfx11")));
        assert_eq!(archive_group_level("gfx1100"), None);
        assert!(archive_group_holds("gfx110x", "gfx1103:xnack-"));
        assert!(archive_group_holds("gfx11", "gfx11-generic"));
        assert!(archive_group_holds("gfx90a", "gfx90a:xnack+"));
        assert!(!archive_group_holds("gfx110x", "gfx1151"));
    }

    #[test]
    fn reads_wildcards() {
        assert_eq!(wildcard_key("gfx11xx"), "gfx11");
        assert_eq!(wildcard_key("gfx120x"), "gfx12_0");
        assert_eq!(wildcard_key("gfx110x"), "gfx110x");
        assert_eq!(wildcard_key("gfx115x"), "gfx115x");
        assert_eq!(wildcard_key("gfx942"), "gfx942");
        assert_eq!(wildcard_key("gfx1x"), "gfx1x");
    }
}
