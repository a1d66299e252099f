//! Per-entry digests: each entry of an archive kpack writes in sorted
//! order carries the sha256 of its code object in its TOC map under
//! [`SHA256_KEY`], as 64 lower-case hex digits. AMD's readers look TOC keys
//! up by name and skip the ones they do not know, so a v1 archive with
//! digests stays readable by AMD's runtime and tools.

/// The per-entry TOC key holding the code object's sha256.
pub const SHA256_KEY: &str = "sha256";

/// Lower-case hex of `d`.
pub fn to_hex(d: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in d {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

/// The digest written as 64 hex digits (either case), or `None`.
pub fn from_hex(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| char::from(c).to_digit(16).map(|v| v as u8);
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nibble(b[2 * i])? << 4 | nibble(b[2 * i + 1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_text() {
        let d = crate::write::sha256(b"code");
        assert_eq!(from_hex(&to_hex(&d)), Some(d));
        assert_eq!(from_hex(&to_hex(&d).to_uppercase()), Some(d));
        assert_eq!(from_hex("00"), None);
        assert_eq!(from_hex(&"g".repeat(64)), None);
    }
}
