//! zstd frames as every part of the format uses them: the default level,
//! the window a frame may ask for, one decoder per thread, and zstd's
//! errors. The reader, the writer and the `zstd-delta` coder all build on
//! this module; it depends on none of them.

use std::cell::RefCell;

use zstd::zstd_safe;

/// The default level: AMD's splitter's, fast.
pub const DEFAULT_LEVEL: i32 = 3;

/// zstd's decoder refuses windows above 2^27 unless told otherwise; frames
/// stay within it so any stock decoder (and our reader, which never raises
/// the limit for untrusted frames) accepts them.
pub(crate) const MAX_WINDOW_LOG: u32 = 27;

/// The window log a frame at `level` asks for: above the default level,
/// [`MAX_WINDOW_LOG`], so a kernel larger than the level's own
/// window (8 MiB at level 19) can match anywhere in itself. zstd shrinks
/// the window to the frame's content size, so smaller kernels get the same
/// frames as without it. Every decoder we know accepts it: AMD's loader
/// and ours decode a frame in one call (`ZSTD_decompressDCtx`), where
/// zstd's window limit does not apply, and 2^27 is within any streaming
/// decoder's default limit. `None` at the default level and below, whose
/// frames stay exactly as before.
pub(crate) fn long_window(level: i32) -> Option<u32> {
    (level > DEFAULT_LEVEL).then_some(MAX_WINDOW_LOG)
}

/// What zstd reported: its name for an error code, or that it could not
/// allocate a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ZstdError {
    /// `ZSTD_getErrorName` of the code a call returned.
    #[error("{0}")]
    Code(&'static str),
    /// `ZSTD_createDCtx` returned null.
    #[error("cannot allocate a zstd context")]
    NoContext,
}

impl ZstdError {
    /// The error zstd's call returned `code` for.
    pub(crate) fn code(code: usize) -> Self {
        ZstdError::Code(zstd_safe::get_error_name(code))
    }
}

thread_local! {
    // One decompression context per thread, for plain frames and deltas
    // alike: creating one costs more than decoding a small kernel, and a
    // shared one would need a lock.
    static DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

/// Decode the single zstd frame `frame` into `out` (against `prefix`, a
/// raw-content dictionary, when given) with this thread's context; the
/// number of bytes written.
pub(crate) fn zstd_decode<B: zstd::zstd_safe::WriteBuf + ?Sized>(
    frame: &[u8],
    prefix: Option<&[u8]>,
    out: &mut B,
) -> std::result::Result<usize, ZstdError> {
    let err = ZstdError::code;
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match &mut *slot {
            Some(d) => d,
            None => slot.insert(zstd::zstd_safe::DCtx::try_create().ok_or(ZstdError::NoContext)?),
        };
        match prefix {
            // A dictionary without zstd's magic is raw content: exactly the
            // "ref prefix" the writer compressed against.
            Some(p) => dctx.decompress_using_dict(out, frame, p).map_err(err),
            None => dctx.decompress(out, frame).map_err(err),
        }
    })
}
