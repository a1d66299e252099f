//! AMD's family bundle keys. Target ids and their spellings in file names
//! are `kpack_amdgpu`'s; the SDK re-exports them.

/// The bundle key for a family wildcard directory name, following AMD's
/// `rocm-bootstrap` hierarchy as its AOTriton handler does: `gfx11xx` →
/// `gfx11` (whole family), `gfx120x` → `gfx12_0` (gfx12 splits into
/// sub-families by minor version), everything else verbatim (`gfx110x`,
/// `gfx942`, `gfx90a`).
///
/// ```
/// use kpack_sdk::family_key;
/// assert_eq!(family_key("gfx11xx"), "gfx11");
/// assert_eq!(family_key("gfx120x"), "gfx12_0");
/// assert_eq!(family_key("gfx110x"), "gfx110x");
/// assert_eq!(family_key("gfx942"), "gfx942");
/// ```
pub fn family_key(wildcard: &str) -> String {
    if let Some(family) = wildcard.strip_suffix("xx") {
        return family.to_string();
    }
    if let Some(minor) = wildcard
        .strip_prefix("gfx12")
        .and_then(|r| r.strip_suffix('x'))
        && minor.len() == 1
        && minor.bytes().all(|c| c.is_ascii_digit())
    {
        return format!("gfx12_{minor}");
    }
    wildcard.to_string()
}
