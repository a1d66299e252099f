//! The `zstd-delta` scheme's two primitives and its base choice:
//! zstd frames compressed against a base entry's raw bytes as a
//! raw-content "ref prefix" (what `zstd --patch-from` does), and the greedy
//! rule that picks which targets of a kernel key are bases.
//!
//! C zstd (through `zstd-safe`) is required: ruzstd cannot decode frames
//! that reference a prefix.

use rayon::prelude::*;
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx};

/// zstd's decoder refuses windows above 2^27 unless told otherwise; frames
/// stay within it so any stock decoder (and our reader, which never raises
/// the limit for untrusted frames) accepts them.
pub(crate) const MAX_WINDOW_LOG: u32 = 27;

/// The window log that lets a frame of `src_len` bytes reach back over the
/// whole of a `prefix_len`-byte prefix (capped at [`MAX_WINDOW_LOG`]).
fn window_log(prefix_len: usize, src_len: usize) -> u32 {
    let total = (prefix_len as u64)
        .saturating_add(src_len as u64)
        .max(1 << 10);
    let log = 64 - (total - 1).leading_zeros();
    log.clamp(10, MAX_WINDOW_LOG)
}

/// Compress `src` as one zstd frame at `level`, against `prefix` when given.
/// Deterministic: fixed parameters, single-threaded context.
pub(crate) fn compress(level: i32, src: &[u8], prefix: Option<&[u8]>) -> Result<Vec<u8>, String> {
    let mut cctx = CCtx::create();
    let err = |c: usize| zstd_safe::get_error_name(c).to_owned();
    cctx.set_parameter(CParameter::CompressionLevel(level))
        .map_err(err)?;
    cctx.set_parameter(CParameter::ContentSizeFlag(true))
        .map_err(err)?;
    cctx.set_parameter(CParameter::ChecksumFlag(false))
        .map_err(err)?;
    if let Some(prefix) = prefix {
        // Without a window covering the prefix, matches further back than
        // the level's default window (2 MiB at level 3) are never found.
        cctx.set_parameter(CParameter::WindowLog(window_log(prefix.len(), src.len())))
            .map_err(err)?;
        cctx.ref_prefix(prefix).map_err(err)?;
    }
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(src.len()));
    cctx.compress2(&mut out, src).map_err(err)?;
    Ok(out)
}

/// Decode the single frame `frame` into exactly `size` bytes, against
/// `prefix` when given. Errors are zstd's own names.
pub(crate) fn decompress_with_prefix(
    frame: &[u8],
    prefix: &[u8],
    out: &mut Vec<u8>,
) -> Result<usize, String> {
    let mut dctx = DCtx::create();
    let err = |c: usize| zstd_safe::get_error_name(c).to_owned();
    dctx.ref_prefix(prefix).map_err(err)?;
    dctx.decompress(out, frame).map_err(err)
}

/// Which entry of one kernel key is stored how: `base[i] == None` for a
/// base, `Some(j)` for a delta against member `j` (itself a base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) base: Vec<Option<usize>>,
}

/// Choose bases among `members` (one key's code objects, in TOC order):
///
/// 1. Measure every member alone (`alone[t]`) and against every other
///    member as prefix (`delta[t][b]`), at `level`.
/// 2. The first base is the member `b` that minimises the total when every
///    other member is a delta against `b` (ties: the earlier member).
/// 3. Then repeatedly add as a further base the member whose promotion
///    lowers the total most (a member is cheaper alone than against every
///    chosen base, or it serves others better); stop when nothing lowers it.
/// 4. Every non-base is a delta against its cheapest base (ties: earlier).
///
/// The total for a base set `B` is `Σ_{b∈B} alone[b] + Σ_{t∉B} min_{b∈B}
/// delta[t][b]`. Sizes are deterministic, so the plan is too, at any thread
/// count (the matrix is measured in parallel).
pub(crate) fn plan(level: i32, members: &[&[u8]]) -> Result<Plan, String> {
    let n = members.len();
    if n <= 1 {
        return Ok(Plan {
            base: vec![None; n],
        });
    }
    let alone: Vec<u64> = members
        .par_iter()
        .map(|m| compress(level, m, None).map(|f| f.len() as u64))
        .collect::<Result<_, _>>()?;
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|t| (0..n).filter(move |&b| b != t).map(move |b| (t, b)))
        .collect();
    let sizes: Vec<u64> = pairs
        .par_iter()
        .map(|&(t, b)| compress(level, members[t], Some(members[b])).map(|f| f.len() as u64))
        .collect::<Result<_, _>>()?;
    let mut delta = vec![vec![u64::MAX; n]; n];
    for (&(t, b), &s) in pairs.iter().zip(&sizes) {
        delta[t][b] = s;
    }
    let total = |bases: &[bool]| -> u64 {
        (0..n)
            .map(|t| {
                if bases[t] {
                    alone[t]
                } else {
                    (0..n)
                        .filter(|&b| bases[b])
                        .map(|b| delta[t][b])
                        .min()
                        .unwrap_or(u64::MAX)
                }
            })
            .fold(0u64, u64::saturating_add)
    };
    let mut bases = vec![false; n];
    let mut best = u64::MAX;
    let mut first = 0;
    for b in 0..n {
        let mut set = vec![false; n];
        set[b] = true;
        let t = total(&set);
        if t < best {
            best = t;
            first = b;
        }
    }
    bases[first] = true;
    loop {
        let mut pick = None;
        for c in 0..n {
            if bases[c] {
                continue;
            }
            bases[c] = true;
            let t = total(&bases);
            bases[c] = false;
            if t < best {
                best = t;
                pick = Some(c);
            }
        }
        match pick {
            Some(c) => bases[c] = true,
            None => break,
        }
    }
    let base = (0..n)
        .map(|t| {
            if bases[t] {
                None
            } else {
                (0..n)
                    .filter(|&b| bases[b])
                    .min_by_key(|&b| (delta[t][b], b))
            }
        })
        .collect();
    Ok(Plan { base })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(seed: u8, len: usize) -> Vec<u8> {
        let mut x = u32::from(seed).wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn a_delta_decodes_only_with_its_prefix() {
        let base = object(1, 50_000);
        let mut sibling = base.clone();
        sibling[100..140].copy_from_slice(&[7; 40]);
        let frame = compress(3, &sibling, Some(&base)).unwrap();
        assert!(frame.len() < 1000, "{}", frame.len());
        let mut out = Vec::with_capacity(sibling.len());
        decompress_with_prefix(&frame, &base, &mut out).unwrap();
        assert_eq!(out, sibling);
        let mut out = Vec::with_capacity(sibling.len());
        let wrong = object(2, 50_000);
        let decoded = decompress_with_prefix(&frame, &wrong, &mut out);
        assert!(decoded.is_err() || out != sibling);
    }

    #[test]
    fn siblings_share_one_base_and_a_stranger_is_its_own() {
        let a = object(1, 40_000);
        let mut b = a.clone();
        b[10..20].copy_from_slice(&[1; 10]);
        let mut c = a.clone();
        c[30_000..30_010].copy_from_slice(&[2; 10]);
        let stranger = object(9, 40_000);
        let members: Vec<&[u8]> = vec![&a, &b, &c, &stranger];
        let p = plan(3, &members).unwrap();
        // The three siblings: one base, two deltas against it.
        let sibling_bases: Vec<usize> = (0..3).filter(|&i| p.base[i].is_none()).collect();
        assert_eq!(sibling_bases.len(), 1, "{p:?}");
        for i in (0..3).filter(|i| !sibling_bases.contains(i)) {
            assert_eq!(p.base[i], Some(sibling_bases[0]), "{p:?}");
        }
        for b in p.base.iter().flatten() {
            assert_eq!(p.base[*b], None, "a base is a delta: {p:?}");
        }
    }
}
