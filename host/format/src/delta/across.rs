//! Bases across kernel keys: after every key is encoded on its own, the
//! entries that are bases no delta uses ("lonely": every entry of a
//! per-target archive, and a family's members that resemble no sibling)
//! are planned again together, so a kernel can be stored as a delta
//! against another kernel of the archive (the kernels of one library
//! share device-library code, metadata and strings). Still at most two
//! frame decodes per kernel: a lonely entry becomes a delta only against
//! an entry that stays a base, and nothing depended on it.

use super::{Error, Spread, decompress, map_all, plan_priced};

/// At most this many lonely entries are planned together (in ordinal
/// order: sorted keys, so neighbours come from one library), which bounds
/// the sketch comparisons (n² per group) and the choice (n³ per group).
const GROUP: usize = 64;

/// ... and at most this many raw bytes, all decoded at once.
const GROUP_BYTES: u64 = 256 << 20;

/// One archive's frames in ordinal order, re-planned across keys in place.
pub(crate) struct Archive<'a> {
    /// Every entry's frame.
    pub(crate) frames: &'a mut [Vec<u8>],
    /// Every entry's base (an ordinal), `None` for a base.
    pub(crate) base: &'a mut [Option<usize>],
    /// Every entry's decoded size.
    pub(crate) sizes: &'a [u64],
}

/// Store each lonely base of `archive` as a delta against another lonely
/// base where the plan ([`plan_priced`], each entry priced at its frame)
/// says so and the delta frame at `level` comes out smaller than the
/// entry's frame alone. Deterministic: groups, plans and frames depend
/// only on the entries, in ordinal order. A failure names its entry by
/// ordinal ([`Error::on`]).
pub(crate) fn rebase(level: i32, archive: Archive<'_>) -> Result<(), Error> {
    let n = archive.frames.len();
    let mut used = vec![false; n];
    for b in archive.base.iter().flatten() {
        if let Some(u) = used.get_mut(*b) {
            *u = true;
        }
    }
    let lonely: Vec<usize> = (0..n)
        .filter(|&i| archive.base[i].is_none() && !used[i])
        .collect();
    let mut start = 0;
    while start < lonely.len() {
        let mut end = start;
        let mut bytes = 0u64;
        while end < lonely.len() && end - start < GROUP {
            bytes = bytes.saturating_add(archive.sizes[lonely[end]]);
            if end > start && bytes > GROUP_BYTES {
                break;
            }
            end += 1;
        }
        rebase_group(
            level,
            &lonely[start..end],
            archive.frames,
            archive.base,
            archive.sizes,
        )?;
        start = end;
    }
    Ok(())
}

/// [`rebase`] for one group of lonely entries (ordinals).
fn rebase_group(
    level: i32,
    group: &[usize],
    frames: &mut [Vec<u8>],
    base: &mut [Option<usize>],
    sizes: &[u64],
) -> Result<(), Error> {
    if group.len() < 2 {
        return Ok(());
    }
    let raw: Vec<Vec<u8>> = map_all(Spread::Rayon, group.len(), |_, i| {
        let o = group[i];
        usize::try_from(sizes[o])
            .map_err(|_| Error::TooLarge(sizes[o]))
            .and_then(|size| decompress(&frames[o], None, size))
            .map_err(|e| e.on(o, None))
    })?;
    let members: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
    let alone: Vec<u64> = group.iter().map(|&o| frames[o].len() as u64).collect();
    let plan = plan_priced(&members, &alone, Spread::Rayon)?;
    // (member, its base), for every member the plan makes a delta.
    let deltas: Vec<(usize, usize)> = (0..group.len())
        .filter_map(|t| plan.base[t].map(|b| (t, b)))
        .collect();
    let encoded = map_all(Spread::Rayon, deltas.len(), |f, i| {
        let (t, b) = deltas[i];
        f.compress(level, members[t], Some(members[b]))
            .map_err(|e| e.on(group[t], Some(group[b])))
    })?;
    for (&(t, b), frame) in deltas.iter().zip(encoded) {
        let o = group[t];
        if frame.len() < frames[o].len() {
            frames[o] = frame;
            base[o] = Some(group[b]);
        }
    }
    Ok(())
}
