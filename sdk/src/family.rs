//! AMD's family bundle keys. The hierarchy itself (target → sub-family →
//! family) is `kpack_amdgpu`'s; the SDK re-exports it.

/// The bundle key for a family wildcard directory name, following AMD's
/// `rocm-bootstrap` hierarchy as its AOTriton handler does: `gfx11xx` →
/// `gfx11` (whole family), `gfx120x` → `gfx12_0` (the sub-family it names),
/// everything else verbatim (`gfx110x`, `gfx942`, `gfx90a`). One fact, one
/// home: this is [`kpack_amdgpu::wildcard_key`].
///
/// ```
/// use kpack_sdk::family_key;
/// assert_eq!(family_key("gfx11xx"), "gfx11");
/// assert_eq!(family_key("gfx120x"), "gfx12_0");
/// assert_eq!(family_key("gfx110x"), "gfx110x");
/// assert_eq!(family_key("gfx942"), "gfx942");
/// ```
pub fn family_key(wildcard: &str) -> String {
    kpack_amdgpu::wildcard_key(wildcard)
}
