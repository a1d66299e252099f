//! Inflate a CCOB as a stream: a cursor over the inflated bytes that never
//! holds more than the caller asks for, hashing every byte as it passes.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use fast_md5::Md5;

use crate::bundle::{BundleHeader, parse_bundle};
use crate::ccob::{CcobHeader, Method};
use crate::error::{Error, ErrorKind};
use crate::source::ReadAt;

/// Largest inner bundle header we look ahead for (real ones are a few KiB:
/// one descriptor of about 60 bytes per entry).
const MAX_HEADER: usize = 64 << 20;
/// Chunk for skipping bytes nobody asked for.
const SKIP_CHUNK: usize = 256 << 10;

/// `io::Read` over `[pos, end)` of a [`ReadAt`], by positioned reads.
pub(crate) struct RangeReader<'a> {
    src: &'a dyn ReadAt,
    pos: u64,
    end: u64,
}

impl<'a> RangeReader<'a> {
    pub(crate) fn new(src: &'a dyn ReadAt, pos: u64, len: u64) -> RangeReader<'a> {
        RangeReader {
            src,
            pos,
            end: pos.saturating_add(len),
        }
    }
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.end - self.pos).min(buf.len() as u64) as usize;
        self.src.read_exact_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// A cursor over the inflated bytes of one CCOB.
pub(crate) struct Inflater<'a> {
    dec: Box<dyn Read + Send + 'a>,
    md5: Option<Md5>,
    /// The MD5 of the whole stream, from a [`Pipe`]'s hashing stage (the
    /// alternative to `md5`, which hashes on the reading thread).
    piped_md5: Option<mpsc::Receiver<[u8; 16]>>,
    /// Bytes taken from the decoder so far.
    produced: u64,
    /// Inflated bytes looked at but not consumed yet: `pending[head..]`.
    pending: Vec<u8>,
    head: usize,
    header: CcobHeader,
    /// Offset of the CCOB in the source (where errors point).
    start: u64,
    /// Offset of the compressed payload (where decoder errors point).
    payload: u64,
}

impl<'a> Inflater<'a> {
    /// Start inflating the payload `[payload, payload+len)` of the CCOB at
    /// `start`; `hash` computes the MD5 on the way.
    pub(crate) fn new(
        src: &'a dyn ReadAt,
        start: u64,
        header: CcobHeader,
        payload: u64,
        len: u64,
        hash: bool,
    ) -> Result<Inflater<'a>, Error> {
        let dec = decoder(src, &header, payload, len, None)?;
        Ok(Inflater::over(dec, start, header, payload, hash))
    }

    /// A cursor over inflated bytes coming from `dec` (a decoder from
    /// [`decoder`], possibly running on another thread: [`Pipe`]).
    pub(crate) fn over(
        dec: Box<dyn Read + Send + 'a>,
        start: u64,
        header: CcobHeader,
        payload: u64,
        hash: bool,
    ) -> Inflater<'a> {
        Inflater {
            dec,
            md5: hash.then(Md5::new),
            piped_md5: None,
            produced: 0,
            pending: Vec::new(),
            head: 0,
            header,
            start,
            payload,
        }
    }

    /// A cursor over the output of `pipe`; when the pipe hashes (see
    /// [`Pipe::spawn`]), [`finish`](Self::finish) checks its MD5.
    pub(crate) fn over_hashed_pipe(
        mut pipe: Pipe,
        start: u64,
        header: CcobHeader,
        payload: u64,
    ) -> Inflater<'a> {
        let digest = pipe.digest.take();
        let mut inf = Inflater::over(Box::new(pipe), start, header, payload, false);
        inf.piped_md5 = digest;
        inf
    }

    /// Inflated offset of the next unconsumed byte.
    pub(crate) fn pos(&self) -> u64 {
        self.produced - (self.pending.len() - self.head) as u64
    }

    fn expect(&self) -> u64 {
        self.header.uncompressed_size
    }

    /// Read from the decoder into `buf`, hashing; 0 at the end.
    fn pull(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = loop {
            match self.dec.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let what = match self.header.method {
                        Method::Zstd => "zstd",
                        Method::Zlib => "zlib",
                    };
                    return Err(Error::at(
                        ErrorKind::Decompress,
                        self.payload,
                        format!("{what} stream is corrupt"),
                    )
                    .with_source(e));
                }
            }
        };
        if let Some(h) = &mut self.md5 {
            h.update(&buf[..n]);
        }
        self.produced += n as u64;
        if self.produced > self.expect() {
            return Err(self.size_error());
        }
        Ok(n)
    }

    fn size_error(&self) -> Error {
        let got = if self.produced > self.expect() {
            "more than that".to_string()
        } else {
            format!("{} bytes", self.produced)
        };
        Error::at(
            ErrorKind::Decompress,
            self.start,
            format!(
                "CCOB inflated to {got}, header says {}",
                self.header.uncompressed_size
            ),
        )
    }

    /// Look ahead until at least `n` unconsumed bytes are buffered (fewer
    /// at the end of the stream); returns them.
    fn fill(&mut self, n: usize) -> Result<&[u8], Error> {
        if self.head > 0 && self.head >= self.pending.len() / 2 {
            self.pending.drain(..self.head);
            self.head = 0;
        }
        while self.pending.len() - self.head < n {
            let old = self.pending.len();
            let want = (n - (old - self.head)).max(4096);
            self.pending.resize(old + want, 0);
            let mut tmp = std::mem::take(&mut self.pending);
            let r = self.pull(&mut tmp[old..]);
            self.pending = tmp;
            let got = match r {
                Ok(got) => got,
                Err(e) => {
                    self.pending.truncate(old);
                    return Err(e);
                }
            };
            self.pending.truncate(old + got);
            if got == 0 {
                break;
            }
        }
        Ok(&self.pending[self.head..])
    }

    fn consume(&mut self, n: usize) {
        self.head = (self.head + n).min(self.pending.len());
    }

    /// Discard bytes up to inflated offset `to`.
    pub(crate) fn skip_to(&mut self, to: u64) -> Result<(), Error> {
        let buffered = (self.pending.len() - self.head) as u64;
        let skip = to.saturating_sub(self.pos());
        let from_buffer = skip.min(buffered) as usize;
        self.consume(from_buffer);
        let mut left = skip - from_buffer as u64;
        if left == 0 {
            return Ok(());
        }
        let mut scratch = vec![0u8; SKIP_CHUNK.min(left as usize)];
        while left > 0 {
            let n = (left as usize).min(scratch.len());
            let got = self.pull(&mut scratch[..n])?;
            if got == 0 {
                return Err(self.size_error());
            }
            left -= got as u64;
        }
        Ok(())
    }

    /// Fill `buf` with the next inflated bytes.
    pub(crate) fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        let buffered = (self.pending.len() - self.head).min(buf.len());
        buf[..buffered].copy_from_slice(&self.pending[self.head..self.head + buffered]);
        self.consume(buffered);
        let mut done = buffered;
        while done < buf.len() {
            let got = self.pull(&mut buf[done..])?;
            if got == 0 {
                return Err(self.size_error());
            }
            done += got;
        }
        Ok(())
    }

    /// Skip zero padding; `false` at the end of the stream.
    fn skip_zeros(&mut self) -> Result<bool, Error> {
        loop {
            let avail = self.fill(4096)?;
            if avail.is_empty() {
                return Ok(false);
            }
            match avail.iter().position(|&b| b != 0) {
                Some(i) => {
                    self.consume(i);
                    return Ok(true);
                }
                None => {
                    let n = avail.len();
                    self.consume(n);
                }
            }
        }
    }

    /// Parse the plain bundle header at the cursor without consuming it.
    /// Offsets in the result are relative to the cursor.
    fn parse_bundle_here(&mut self) -> Result<BundleHeader, Error> {
        let claimed = self.expect().saturating_sub(self.pos());
        let mut want = 4096usize;
        loop {
            let avail = self.fill(want)?;
            let view = Prefix {
                data: avail,
                claimed,
                short: AtomicBool::new(false),
            };
            match parse_bundle(&view, 0, claimed) {
                Ok(h) => return Ok(h),
                Err(e) => {
                    let more = view.short.load(Ordering::Relaxed)
                        && (avail.len() as u64) < claimed
                        && avail.len() >= want;
                    if !more {
                        return Err(e);
                    }
                    if want >= MAX_HEADER {
                        return Err(Error::new(
                            ErrorKind::BadRange,
                            format!("bundle header is larger than {MAX_HEADER} bytes"),
                        ));
                    }
                    want *= 2;
                }
            }
        }
    }

    /// Read every inner bundle header: the first one by looking ahead only
    /// as far as its header, the rest (rare: clang writes one bundle per
    /// CCOB) by one streaming pass to the end. Entry offsets are from the
    /// start of the inflated data.
    pub(crate) fn inner_entries(&mut self) -> Result<Vec<crate::Entry>, Error> {
        let mut entries = Vec::new();
        while self.skip_zeros()? {
            let p = self.pos();
            let h = self.parse_bundle_here()?;
            entries.extend(h.entries.into_iter().map(|mut e| {
                e.offset += p;
                e
            }));
            let end = p + h.len;
            if end >= self.expect() {
                break;
            }
            self.skip_to(end)?;
        }
        if entries.is_empty() {
            return Err(Error::new(
                ErrorKind::BadRange,
                "compressed bundle holds no bundle",
            ));
        }
        Ok(entries)
    }

    /// Inflate the rest, check the size and (when hashing) the MD5.
    pub(crate) fn finish(mut self) -> Result<(), Error> {
        let end = self.expect();
        self.skip_to(end)?;
        let mut probe = [0u8; 1];
        if self.pull(&mut probe)? != 0 || self.produced != end {
            return Err(self.size_error());
        }
        let digest: Option<[u8; 16]> = match (self.md5.take(), self.piped_md5.take()) {
            (Some(h), _) => Some(h.finalize()),
            // The hashing stage sends the digest before the last chunk, so
            // having read to the end, it is there.
            (None, Some(rx)) => Some(rx.recv().map_err(|_| {
                Error::at(
                    ErrorKind::Decompress,
                    self.payload,
                    "the stream ended before its MD5 was computed",
                )
            })?),
            (None, None) => None,
        };
        match digest {
            Some(digest) => check_md5(digest, self.header.hash, self.start),
            None => Ok(()),
        }
    }
}

/// The decoder of a CCOB payload, limited to one byte past the declared
/// size (so an oversized stream is caught).
///
/// A zstd payload is decoded with `dctx` when given (a decoder kept from
/// an earlier bundle: see [`crate::MemoryBudget::acquire_kit`]), else
/// with a fresh one.
pub(crate) fn decoder<'a>(
    src: &'a dyn ReadAt,
    header: &CcobHeader,
    payload: u64,
    len: u64,
    dctx: Option<&'a mut crate::budget::ZstdDecoder>,
) -> Result<Box<dyn Read + Send + 'a>, Error> {
    let reader = RangeReader::new(src, payload, len);
    let bad = |m: String| Error::at(ErrorKind::Decompress, payload, m);
    let limit = header.uncompressed_size + 1;
    Ok(match header.method {
        Method::Zstd => {
            let mut d = match dctx {
                Some(dctx) => zstd::stream::read::Decoder::with_context(
                    io::BufReader::with_capacity(zstd::zstd_safe::DCtx::in_size(), reader),
                    dctx,
                ),
                None => zstd::stream::read::Decoder::new(reader)
                    .map_err(|e| bad("zstd".into()).with_source(e))?,
            }
            .single_frame();
            // LLVM enables long-distance matching, which may need a
            // window past the decoder's default limit.
            d.window_log_max(31)
                .map_err(|e| bad("zstd".into()).with_source(e))?;
            Box::new(d.take(limit))
        }
        Method::Zlib => Box::new(flate2::read::ZlibDecoder::new(reader).take(limit)),
    })
}

/// Inflated bytes per chunk handed from the decoder thread to the reader.
const PIPE_CHUNK: usize = 512 << 10;
/// Chunks in flight between two stages (the decoder runs this far ahead).
const PIPE_DEPTH: usize = 2;
/// Memory a [`Pipe`] holds at most: the chunks in its two channels, the
/// one being filled, the one being hashed and the one being read.
pub(crate) const PIPE_BYTES: u64 = ((2 * PIPE_DEPTH + 3) * PIPE_CHUNK) as u64;
/// A zstd decoder's fixed buffers besides its window: input buffer, two
/// blocks of slack, the `BufReader` in front of it, the context.
const ZSTD_FIXED: u64 = 640 << 10;

/// How a CCOB payload is inflated, and the memory it takes: see
/// [`decoder_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inflation {
    /// As a stream through a [`Pipe`], holding this many bytes.
    Stream(u64),
    /// In one call into a buffer of the whole inflated bundle
    /// ([`inflate_whole`]), holding this many bytes: a zstd frame whose
    /// window covers the whole bundle (LLVM writes single-segment frames,
    /// whose window is their content), which a streaming decoder would
    /// hold whole anyway, so the buffer replaces its window, and entries
    /// are handed on as slices of it, with no pipe and no copies. The
    /// figure also covers streaming it (the pipe instead of the payload),
    /// which `Item::stream_entries` does when two such bundles do not fit
    /// in the budget: then decoding and hashing overlap within the bundle
    /// instead of across bundles.
    Whole(u64),
}

impl Inflation {
    /// The bytes it holds.
    pub(crate) fn bytes(self) -> u64 {
        match self {
            Inflation::Stream(b) | Inflation::Whole(b) => b,
        }
    }
}

/// How this CCOB is inflated, and what that holds: in one call, the
/// inflated bundle, the compressed payload read beside it and the
/// decoder's context; as a stream, for zstd the window its frame header
/// declares, for zlib 32 KiB, plus the fixed buffers and a [`Pipe`]. A
/// header that cannot be read counts the whole inflated size as a stream
/// (the decoder then reports what is wrong with it).
pub(crate) fn decoder_bytes(
    src: &dyn ReadAt,
    header: &CcobHeader,
    payload: u64,
    len: u64,
) -> Result<Inflation, Error> {
    let window = match header.method {
        Method::Zlib => 32 << 10,
        Method::Zstd => {
            let mut fh = [0u8; 18];
            let n = len.min(fh.len() as u64) as usize;
            src.read_exact_at(payload, &mut fh[..n])
                .map_err(|e| Error::io(payload, e))?;
            let declared = zstd_window(&fh[..n]);
            if declared.is_some_and(|w| w >= header.uncompressed_size) {
                // Streamed instead (see `Item::stream_entries`), the pipe
                // takes the payload's place.
                return Ok(Inflation::Whole(
                    header.uncompressed_size + ZSTD_FIXED + len.max(PIPE_BYTES),
                ));
            }
            declared
                .unwrap_or(header.uncompressed_size)
                .min(header.uncompressed_size)
                + ZSTD_FIXED
        }
    };
    Ok(Inflation::Stream(window + PIPE_BYTES))
}

/// Inflate the zstd CCOB payload at `payload` (`len` bytes; its first
/// frame, as the streaming decoder reads) in one call with `dctx` into
/// `out[..uncompressed_size]`. `out` keeps its length from call to call,
/// so a buffer already large enough is not cleared again. Errors name the
/// payload's offset (corrupt stream) or the bundle's `start` (wrong size),
/// as the streaming reader's do.
pub(crate) fn inflate_whole(
    src: &dyn ReadAt,
    header: &CcobHeader,
    (payload, len): (u64, u64),
    start: u64,
    dctx: &mut crate::budget::ZstdDecoder,
    out: &mut Vec<u8>,
) -> Result<usize, Error> {
    let size = header.uncompressed_size;
    let corrupt = |code: usize| {
        Error::at(
            ErrorKind::Decompress,
            payload,
            format!(
                "zstd stream is corrupt: {}",
                zstd::zstd_safe::get_error_name(code)
            ),
        )
    };
    let wrong_size = |got: String| {
        Error::at(
            ErrorKind::Decompress,
            start,
            format!("CCOB inflated to {got}, header says {size}"),
        )
    };
    let n = usize::try_from(size).map_err(|_| wrong_size("more than fits in memory".into()))?;
    let comp = crate::source::read_vec(src, payload, len)?;
    let frame = zstd::zstd_safe::find_frame_compressed_size(&comp).map_err(corrupt)?;
    if out.len() < n {
        out.try_reserve_exact(n - out.len())
            .map_err(|_| wrong_size("more than fits in memory".into()))?;
        out.resize(n, 0);
    }
    match dctx.decompress(&mut out[..n], &comp[..frame]) {
        Ok(got) if got == n => Ok(n),
        Ok(got) => Err(wrong_size(format!("{got} bytes"))),
        Err(code) if zstd::zstd_safe::get_error_name(code).contains("too small") => {
            Err(wrong_size("more than that".into()))
        }
        Err(code) => Err(corrupt(code)),
    }
}

/// The MD5 check of a whole inflated bundle: the error the streaming
/// reader reports when the first 8 bytes of `digest` are not `expected`.
pub(crate) fn check_md5(digest: [u8; 16], expected: u64, start: u64) -> Result<(), Error> {
    let got = crate::ccob::digest_low(digest);
    if got != expected {
        return Err(Error::at(
            ErrorKind::HashMismatch,
            start,
            format!("CCOB MD5 mismatch: header {expected:016x}, payload {got:016x}"),
        ));
    }
    Ok(())
}

/// The decoder window a zstd frame header declares (RFC 8878 3.1.1.1):
/// the window descriptor, or for a single-segment frame its content size.
fn zstd_window(h: &[u8]) -> Option<u64> {
    if h.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let fhd = *h.get(4)?;
    if fhd & 0x20 == 0 {
        let wd = *h.get(5)?;
        let base = 1u64 << (10 + (wd >> 3));
        return Some(base + base / 8 * u64::from(wd & 7));
    }
    let dict_len = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_len = [1, 2, 4, 8][usize::from(fhd >> 6)];
    let at = 5 + dict_len;
    let bytes = h.get(at..at + fcs_len)?;
    let mut size = bytes
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    if fcs_len == 2 {
        size += 256;
    }
    Some(size)
}

/// The reading end of a decoder running on another thread: decoding and
/// what the reader does with the bytes (MD5, note parsing, compression)
/// overlap, as in `zstd -dc | md5sum`. Chunks are recycled, so the pipe
/// holds at most [`PIPE_BYTES`].
pub(crate) struct Pipe {
    rx: mpsc::Receiver<Chunk>,
    free: mpsc::Sender<Vec<u8>>,
    cur: Vec<u8>,
    len: usize,
    pos: usize,
    /// The MD5 of everything the decoder produced, from the hashing stage.
    digest: Option<mpsc::Receiver<[u8; 16]>>,
}

/// A buffer of inflated bytes and how many of it are filled (fewer than
/// its length only in the last chunk), or the decoder's error.
type Chunk = io::Result<(Vec<u8>, usize)>;

impl Pipe {
    /// Run `dec` on a thread of `scope`; read its output from the pipe.
    /// With `hash`, a second thread between the two computes the MD5 of
    /// the output ([`Inflater::over_hashed_pipe`] checks it): MD5 costs
    /// several times what zstd's decoding does, so on the reading thread
    /// it would be the bottleneck of everything that reads there (note
    /// parsing, compressing entries); as a stage of its own it runs beside
    /// them, as `md5sum` does in `zstd -dc | md5sum`. Dropping the pipe
    /// stops the threads at their next chunk.
    pub(crate) fn spawn<'scope, 'env: 'scope>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        mut dec: Box<dyn Read + Send + 'env>,
        hash: bool,
    ) -> Pipe {
        let (tx, decoded) = mpsc::sync_channel::<Chunk>(PIPE_DEPTH);
        let (free, free_rx) = mpsc::channel::<Vec<u8>>();
        scope.spawn(move || {
            loop {
                let mut buf = free_rx.try_recv().unwrap_or_else(|_| vec![0u8; PIPE_CHUNK]);
                let mut n = 0;
                while n < buf.len() {
                    match dec.read(&mut buf[n..]) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    }
                }
                let last = n < buf.len();
                // A closed pipe means the reader stopped early: stop too.
                if tx.send(Ok((buf, n))).is_err() || last {
                    return;
                }
            }
        });
        let (rx, digest) = if hash {
            let (htx, hashed) = mpsc::sync_channel::<Chunk>(PIPE_DEPTH);
            let (dtx, digest) = mpsc::channel();
            scope.spawn(move || {
                let mut md5 = Md5::new();
                for chunk in decoded {
                    let last = match &chunk {
                        Ok((buf, n)) => {
                            md5.update(&buf[..*n]);
                            *n < buf.len()
                        }
                        Err(_) => true,
                    };
                    if last && chunk.is_ok() {
                        let _ = dtx.send(std::mem::replace(&mut md5, Md5::new()).finalize());
                    }
                    if htx.send(chunk).is_err() || last {
                        return;
                    }
                }
            });
            (hashed, Some(digest))
        } else {
            (decoded, None)
        };
        Pipe {
            rx,
            free,
            cur: Vec::new(),
            len: 0,
            pos: 0,
            digest,
        }
    }
}

impl Read for Pipe {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.len {
            let used = std::mem::take(&mut self.cur);
            if !used.is_empty() {
                // The decoder may have finished; then the chunk is dropped.
                let _ = self.free.send(used);
            }
            match self.rx.recv() {
                Ok(Ok((buf, n))) => {
                    self.cur = buf;
                    self.len = n;
                    self.pos = 0;
                    if n == 0 {
                        return Ok(0);
                    }
                }
                Ok(Err(e)) => return Err(e),
                // The decoder thread ended after its last chunk.
                Err(_) => return Ok(0),
            }
        }
        let n = (self.len - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The looked-ahead prefix of an inflated stream, claiming the stream's
/// full length so that bounds checks against it stay right; a read past the
/// prefix fails and sets `short` (look further ahead and retry).
struct Prefix<'a> {
    data: &'a [u8],
    claimed: u64,
    short: AtomicBool,
}

impl ReadAt for Prefix<'_> {
    fn size(&self) -> u64 {
        self.claimed
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = self.data.read_exact_at(offset, buf);
        if r.is_err() {
            self.short.store(true, Ordering::Relaxed);
        }
        r
    }
}

/// The compressed length of a v1 CCOB's payload (v1 has no size field):
/// where its self-delimiting stream ends, at most `avail` bytes.
pub(crate) fn v1_payload_len(
    src: &dyn ReadAt,
    header: &CcobHeader,
    payload: u64,
    avail: u64,
) -> Result<u64, Error> {
    let bad = |m: String| Error::at(ErrorKind::Decompress, payload, m);
    match header.method {
        Method::Zstd => {
            // The frame's block headers give its length; v1 comes from old
            // ROCm releases with small sections, so reading the rest of the
            // section (compressed) is cheap.
            let rest = crate::source::read_vec(src, payload, avail)?;
            let n = zstd::zstd_safe::find_frame_compressed_size(&rest).map_err(|code| {
                bad(format!(
                    "zstd frame is invalid: {}",
                    zstd::zstd_safe::get_error_name(code)
                ))
            })?;
            Ok((n as u64).min(avail))
        }
        Method::Zlib => {
            // Only inflating finds a deflate stream's end; the output is
            // discarded.
            let mut dec = flate2::read::ZlibDecoder::new(RangeReader::new(src, payload, avail));
            io::copy(
                &mut (&mut dec).take(header.uncompressed_size + 1),
                &mut io::sink(),
            )
            .map_err(|e| bad("zlib stream is corrupt".into()).with_source(e))?;
            Ok(dec.total_in())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a hashing pipe passes on, and the digest it computed.
    fn through_hashing_pipe(data: &[u8]) -> (Vec<u8>, [u8; 16]) {
        std::thread::scope(|scope| {
            let mut pipe = Pipe::spawn(scope, Box::new(data), true);
            let digest = pipe.digest.take().unwrap();
            let mut out = Vec::new();
            pipe.read_to_end(&mut out).unwrap();
            (out, digest.recv().unwrap())
        })
    }

    #[test]
    fn the_hashing_stage_passes_every_byte_on_and_hashes_them_all() {
        // Sizes around the chunk size: the end arrives as a short chunk or,
        // after whole chunks, as an empty one.
        for len in [
            0,
            1,
            PIPE_CHUNK - 1,
            PIPE_CHUNK,
            3 * PIPE_CHUNK,
            3 * PIPE_CHUNK + 7,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let (out, digest) = through_hashing_pipe(&data);
            assert!(out == data, "{len} bytes came out changed");
            assert_eq!(digest, fast_md5::digest(&data), "{len} bytes");
        }
    }

    #[test]
    fn reads_the_window_of_streamed_and_single_segment_frames() {
        let data = vec![7u8; 300_000];
        // A stream of unknown size declares a window descriptor (level 3:
        // 2 MiB).
        let streamed = zstd::stream::encode_all(&data[..], 3).unwrap();
        assert_eq!(streamed[4] & 0x20, 0);
        assert_eq!(zstd_window(&streamed), Some(2 << 20));
        // A one-shot frame of known size is single-segment: its window is
        // its content.
        let one_shot = zstd::bulk::compress(&data, 3).unwrap();
        assert_ne!(one_shot[4] & 0x20, 0);
        assert_eq!(zstd_window(&one_shot), Some(300_000));
        assert_eq!(zstd_window(b"not zstd"), None);
        assert_eq!(zstd_window(&one_shot[..5]), None);
    }
}
