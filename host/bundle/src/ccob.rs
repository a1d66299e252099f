//! Compressed offload bundles (`CCOB`, versions 1, 2 and 3): a header and
//! one zlib or zstd stream that inflates to an uncompressed bundle.

use std::io::Read;

use crate::error::{Error, ErrorKind};
use crate::source::{ReadAt, read_vec};

/// The 4-byte magic of a compressed bundle.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";

/// Largest bundle we inflate (the field is 64-bit in v3; 16 GiB is far
/// beyond any real library and keeps a hostile header from exhausting memory).
const MAX_UNCOMPRESSED: u64 = 16 << 30;
/// Largest inflation ratio accepted (decompression-bomb guard).
const MAX_RATIO: u64 = 1024;
/// Below this inflated size the ratio is not checked.
const MIN_BOMB_LIMIT: u64 = 64 << 20;

/// Compression method (LLVM's `compression::Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Method 0: a zlib (RFC 1950) stream.
    Zlib,
    /// Method 1: one zstd frame.
    Zstd,
}

impl Method {
    fn from_u16(v: u16, at: u64) -> Result<Method, Error> {
        match v {
            0 => Ok(Method::Zlib),
            1 => Ok(Method::Zstd),
            other => Err(Error::at(
                ErrorKind::UnknownMethod,
                at,
                format!("unknown CCOB compression method {other}"),
            )),
        }
    }

    fn to_u16(self) -> u16 {
        match self {
            Method::Zlib => 0,
            Method::Zstd => 1,
        }
    }
}

/// A decoded CCOB header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CcobHeader {
    /// Format version: 1, 2 or 3.
    pub version: u16,
    /// Compression method.
    pub method: Method,
    /// Length of the whole compressed bundle, header included (v2, v3).
    pub total_size: Option<u64>,
    /// Length of the inflated bundle.
    pub uncompressed_size: u64,
    /// First 8 bytes of the MD5 of the inflated bundle, as stored.
    pub hash: u64,
}

impl CcobHeader {
    /// Header length for this version.
    pub fn header_len(&self) -> u64 {
        header_len(self.version)
    }

    /// Encode the header.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.extend_from_slice(CCOB_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.method.to_u16().to_le_bytes());
        let total = self.total_size.unwrap_or(0);
        match self.version {
            1 => out.extend_from_slice(&(self.uncompressed_size as u32).to_le_bytes()),
            2 => {
                out.extend_from_slice(&(total as u32).to_le_bytes());
                out.extend_from_slice(&(self.uncompressed_size as u32).to_le_bytes());
            }
            _ => {
                out.extend_from_slice(&total.to_le_bytes());
                out.extend_from_slice(&self.uncompressed_size.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.hash.to_le_bytes());
        out
    }
}

fn header_len(version: u16) -> u64 {
    match version {
        1 => 20,
        2 => 24,
        _ => 32,
    }
}

/// Parse the CCOB header at `start`.
pub fn parse_header(src: &dyn ReadAt, start: u64, limit: u64) -> Result<CcobHeader, Error> {
    let avail = limit.saturating_sub(start);
    let head = read_vec(src, start, 8.min(avail))?;
    if head.len() < 8 || &head[..4] != CCOB_MAGIC {
        return Err(Error::at(
            ErrorKind::BadHeader,
            start,
            "not a compressed offload bundle",
        ));
    }
    let version = u16::from_le_bytes([head[4], head[5]]);
    if !(1..=3).contains(&version) {
        return Err(Error::at(
            ErrorKind::BadHeader,
            start + 4,
            format!("unsupported CCOB version {version}"),
        ));
    }
    let method = Method::from_u16(u16::from_le_bytes([head[6], head[7]]), start + 6)?;
    let hlen = header_len(version);
    if avail < hlen {
        return Err(Error::at(
            ErrorKind::Truncated,
            start,
            format!("CCOB v{version} header needs {hlen} bytes, {avail} left"),
        ));
    }
    let h = read_vec(src, start, hlen)?;
    let u32_at = |k: usize| {
        u64::from(u32::from_le_bytes(
            h[k..k + 4].try_into().unwrap_or_default(),
        ))
    };
    let u64_at = |k: usize| u64::from_le_bytes(h[k..k + 8].try_into().unwrap_or_default());
    let (total_size, uncompressed_size, hash) = match version {
        1 => (None, u32_at(8), u64_at(12)),
        2 => (Some(u32_at(8)), u32_at(12), u64_at(16)),
        _ => (Some(u64_at(8)), u64_at(16), u64_at(24)),
    };
    if let Some(total) = total_size
        && (total <= hlen || total > avail)
    {
        return Err(Error::at(
            ErrorKind::BadRange,
            start + 8,
            format!(
                "CCOB total size {total:#x} is impossible ({avail:#x} bytes left in the section)"
            ),
        ));
    }
    if uncompressed_size > MAX_UNCOMPRESSED {
        return Err(Error::at(
            ErrorKind::BadRange,
            start,
            format!("CCOB uncompressed size {uncompressed_size} is absurd"),
        ));
    }
    Ok(CcobHeader {
        version,
        method,
        total_size,
        uncompressed_size,
        hash,
    })
}

/// Refuse a header that promises a decompression bomb (real bundles
/// inflate 2-20x).
pub(crate) fn check_ratio(header: &CcobHeader, payload_len: u64, start: u64) -> Result<(), Error> {
    if header.uncompressed_size > MAX_RATIO.saturating_mul(payload_len).max(MIN_BOMB_LIMIT) {
        return Err(Error::at(
            ErrorKind::BadRange,
            start,
            format!(
                "CCOB claims {} bytes inflated from {payload_len} compressed (more than {MAX_RATIO}x)",
                header.uncompressed_size
            ),
        ));
    }
    Ok(())
}

/// What inflating a CCOB gave.
pub struct Inflated {
    /// The header.
    pub header: CcobHeader,
    /// The inflated bytes (one or more uncompressed bundles).
    pub data: Vec<u8>,
    /// Length of the compressed bundle in the input, header included.
    pub len: u64,
}

/// Inflate the CCOB at `start` whole (the reference the streaming reader,
/// [`crate::Item::stream_entries`], is tested against). For v1, which has no size field, the end is
/// where the compressed stream ends (both formats are self-delimiting).
pub fn inflate(
    src: &dyn ReadAt,
    start: u64,
    limit: u64,
    verify_hash: bool,
) -> Result<Inflated, Error> {
    let header = parse_header(src, start, limit)?;
    let hlen = header.header_len();
    let payload_len = match header.total_size {
        Some(total) => total - hlen,
        None => limit - start - hlen,
    };
    let payload = read_vec(src, start + hlen, payload_len)?;
    let at = start + hlen;
    check_ratio(&header, payload_len, start)?;
    let (data, used) = match header.method {
        Method::Zstd => inflate_zstd(&payload, header.uncompressed_size, at)?,
        Method::Zlib => inflate_zlib(&payload, header.uncompressed_size, at)?,
    };
    if data.len() as u64 != header.uncompressed_size {
        return Err(Error::at(
            ErrorKind::Decompress,
            start,
            format!(
                "CCOB inflated to {} bytes, header says {}",
                data.len(),
                header.uncompressed_size
            ),
        ));
    }
    if verify_hash {
        let got = md5_low(&data);
        if got != header.hash {
            return Err(Error::at(
                ErrorKind::HashMismatch,
                start,
                format!(
                    "CCOB MD5 mismatch: header {:016x}, payload {got:016x}",
                    header.hash
                ),
            ));
        }
    }
    let len = match header.total_size {
        Some(total) => total,
        None => hlen + used,
    };
    Ok(Inflated { header, data, len })
}

fn inflate_zstd(payload: &[u8], expect: u64, at: u64) -> Result<(Vec<u8>, u64), Error> {
    let bad = |m: String| Error::at(ErrorKind::Decompress, at, m);
    let frame_len = zstd::zstd_safe::find_frame_compressed_size(payload).map_err(|code| {
        bad(format!(
            "zstd frame is invalid: {}",
            zstd::zstd_safe::get_error_name(code)
        ))
    })?;
    let frame = &payload[..frame_len.min(payload.len())];
    let mut dec = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(|e| bad("zstd".into()).with_source(e))?;
    // LLVM enables long-distance matching, which may need a window past the
    // decoder's default limit; allow the largest window.
    dec.window_log_max(31)
        .map_err(|e| bad("zstd".into()).with_source(e))?;
    let mut out = Vec::with_capacity(expect.min(64 << 20) as usize);
    // Read one byte past the expected size so an oversized stream is caught.
    dec.take(expect + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad("zstd stream is corrupt".into()).with_source(e))?;
    Ok((out, frame_len as u64))
}

fn inflate_zlib(payload: &[u8], expect: u64, at: u64) -> Result<(Vec<u8>, u64), Error> {
    let mut dec = flate2::read::ZlibDecoder::new(payload);
    let mut out = Vec::with_capacity(expect.min(64 << 20) as usize);
    (&mut dec)
        .take(expect + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            Error::at(ErrorKind::Decompress, at, "zlib stream is corrupt").with_source(e)
        })?;
    Ok((out, dec.total_in()))
}

/// The CCOB hash of `data`: the first 8 MD5 bytes as a little-endian u64.
pub fn md5_low(data: &[u8]) -> u64 {
    digest_low(fast_md5::digest(data))
}

/// The CCOB hash of an MD5 `digest`: its first 8 bytes, little-endian.
pub(crate) fn digest_low(digest: [u8; 16]) -> u64 {
    u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
}

/// Compress an uncompressed bundle into a CCOB of the given version.
pub fn deflate(bundle: &[u8], version: u16, method: Method, level: i32) -> Result<Vec<u8>, Error> {
    if !(1..=3).contains(&version) {
        return Err(Error::new(
            ErrorKind::BadHeader,
            format!("cannot write CCOB version {version}"),
        ));
    }
    let payload = match method {
        Method::Zstd => {
            let mut c = zstd::bulk::Compressor::new(level).map_err(|e| Error::io(0, e))?;
            c.include_contentsize(true).map_err(|e| Error::io(0, e))?;
            c.compress(bundle).map_err(|e| Error::io(0, e))?
        }
        Method::Zlib => {
            use std::io::Write;
            let lvl = flate2::Compression::new(level.clamp(0, 9) as u32);
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), lvl);
            enc.write_all(bundle).map_err(|e| Error::io(0, e))?;
            enc.finish().map_err(|e| Error::io(0, e))?
        }
    };
    let hlen = header_len(version);
    let header = CcobHeader {
        version,
        method,
        total_size: (version >= 2).then_some(hlen + payload.len() as u64),
        uncompressed_size: bundle.len() as u64,
        hash: md5_low(bundle),
    };
    let mut out = header.to_bytes();
    out.extend_from_slice(&payload);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::write_bundle;

    fn sample() -> Vec<u8> {
        write_bundle(
            &[
                ("host-x86_64-unknown-linux", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", &[7u8; 5000]),
            ],
            4096,
        )
    }

    #[test]
    fn writes_headers_as_the_spec_lays_them_out() {
        let b = sample();
        let md5 = fast_md5::digest(&b);
        for (version, method, hlen) in [
            (1u16, Method::Zlib, 20usize),
            (1, Method::Zstd, 20),
            (2, Method::Zlib, 24),
            (2, Method::Zstd, 24),
            (3, Method::Zlib, 32),
            (3, Method::Zstd, 32),
        ] {
            let c = deflate(&b, version, method, 3).unwrap();
            assert_eq!(&c[0..4], b"CCOB");
            assert_eq!(c[4..6], version.to_le_bytes());
            assert_eq!(c[6..8], [if method == Method::Zstd { 1 } else { 0 }, 0]);
            let total = c.len() as u64;
            match version {
                1 => assert_eq!(c[8..12], (b.len() as u32).to_le_bytes()),
                2 => {
                    assert_eq!(c[8..12], (total as u32).to_le_bytes());
                    assert_eq!(c[12..16], (b.len() as u32).to_le_bytes());
                }
                _ => {
                    assert_eq!(c[8..16], total.to_le_bytes());
                    assert_eq!(c[16..24], (b.len() as u64).to_le_bytes());
                }
            }
            // The hash field holds exactly the first 8 MD5 bytes.
            assert_eq!(&c[hlen - 8..hlen], &md5[..8]);
            let magic: &[u8] = if method == Method::Zstd {
                &[0x28, 0xb5, 0x2f, 0xfd]
            } else {
                &[0x78]
            };
            assert_eq!(&c[hlen..hlen + magic.len()], magic, "v{version} {method:?}");
            let inf = inflate(&c, 0, total, true).unwrap();
            assert_eq!(inf.data, b);
            assert_eq!(inf.len, total, "v{version} {method:?} end");
        }
    }

    #[test]
    fn header_bytes_match_the_spec_literally() {
        // A 16-byte payload "0123456789abcdef": MD5 = 4032af8d61035123906e58e067140cc5.
        let data = b"0123456789abcdef";
        let md5_low8 = [0x40, 0x32, 0xaf, 0x8d, 0x61, 0x03, 0x51, 0x23];
        let v1 = deflate(data, 1, Method::Zlib, 6).unwrap();
        assert_eq!(&v1[..8], &[0x43, 0x43, 0x4f, 0x42, 0x01, 0x00, 0x00, 0x00]);
        assert_eq!(&v1[8..12], &[16, 0, 0, 0]);
        assert_eq!(&v1[12..20], &md5_low8);
        let v2 = deflate(data, 2, Method::Zstd, 3).unwrap();
        let total = v2.len() as u8;
        assert_eq!(
            &v2[..16],
            &[
                0x43, 0x43, 0x4f, 0x42, 0x02, 0x00, 0x01, 0x00, total, 0, 0, 0, 16, 0, 0, 0
            ]
        );
        assert_eq!(&v2[16..24], &md5_low8);
        let v3 = deflate(data, 3, Method::Zstd, 3).unwrap();
        // The prefix of the real ROCm 7.2.3 dump in offload-formats.md §1.2.
        assert_eq!(&v3[..8], &[0x43, 0x43, 0x4f, 0x42, 0x03, 0x00, 0x01, 0x00]);
        assert_eq!(
            &v3[8..24],
            &[v3.len() as u8, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&v3[24..32], &md5_low8);
        assert_eq!(&v3[32..36], &[0x28, 0xb5, 0x2f, 0xfd]);
    }

    #[test]
    fn finds_the_end_of_a_v1_bundle_followed_by_padding() {
        let b = sample();
        let mut c = deflate(&b, 1, Method::Zstd, 3).unwrap();
        let len = c.len() as u64;
        c.resize(c.len().next_multiple_of(4096), 0);
        let inf = inflate(&c, 0, c.len() as u64, true).unwrap();
        assert_eq!(inf.len, len);
    }

    #[test]
    fn rejects_hash_mismatch_unless_told_not_to_check() {
        let b = sample();
        let mut c = deflate(&b, 3, Method::Zstd, 3).unwrap();
        c[24] ^= 0xff;
        let n = c.len() as u64;
        assert_eq!(
            inflate(&c, 0, n, true).err().unwrap().kind(),
            ErrorKind::HashMismatch
        );
        assert!(inflate(&c, 0, n, false).is_ok());
    }

    #[test]
    fn refuses_a_decompression_bomb() {
        let zeros = vec![0u8; 200 << 20];
        let c = deflate(&zeros, 3, Method::Zstd, 3).unwrap();
        assert!(
            c.len() < (200 << 20) / 1024,
            "zstd should squeeze zeros hard"
        );
        let e = inflate(&c, 0, c.len() as u64, true).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::BadRange);
        assert!(e.message().contains("more than 1024x"), "{e}");
    }

    #[test]
    fn rejects_bad_method_and_sizes() {
        let b = sample();
        let mut c = deflate(&b, 2, Method::Zstd, 3).unwrap();
        let n = c.len() as u64;
        c[6] = 7;
        assert_eq!(
            inflate(&c, 0, n, true).err().unwrap().kind(),
            ErrorKind::UnknownMethod
        );
        c[6] = 1;
        c[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            inflate(&c, 0, n, true).err().unwrap().kind(),
            ErrorKind::BadRange
        );
        c[8..12].copy_from_slice(&(n as u32).to_le_bytes());
        c[12..16].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(
            inflate(&c, 0, n, true).err().unwrap().kind(),
            ErrorKind::Decompress
        );
    }
}
