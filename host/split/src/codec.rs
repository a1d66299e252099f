//! Artifact archives' compressions: which one a file is (by its first
//! bytes), its streaming decoder, and the names archives carry.

use std::io::Read;
use std::path::Path;

/// The compression of an artifact archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// `.tar.zst` (TheRock's default).
    Zstd,
    /// `.tar.xz`.
    Xz,
    /// `.tar.gz`.
    Gzip,
}

/// The file-name suffixes of artifact archives, longest first.
const SUFFIXES: [&str; 4] = [".tar.zst", ".tar.xz", ".tar.gz", ".tgz"];

/// An artifact archive's name without its suffix (`blas_lib_gfx1100` of
/// `blas_lib_gfx1100.tar.zst`), or `None` when it has none of them.
pub fn artifact_archive_stem(name: &str) -> Option<&str> {
    SUFFIXES.iter().find_map(|s| name.strip_suffix(s))
}

impl Codec {
    /// The codec of the regular file at `path`, from its first bytes, or
    /// `None` for anything else (a directory, a plain file).
    pub fn sniff(path: &Path) -> Option<Codec> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let mut head = [0u8; 6];
        let mut f = std::fs::File::open(path).ok()?;
        f.read_exact(&mut head).ok()?;
        if head[..4] == [0x28, 0xb5, 0x2f, 0xfd] {
            Some(Codec::Zstd)
        } else if head == [0xfd, b'7', b'z', b'X', b'Z', 0] {
            Some(Codec::Xz)
        } else if head[..2] == [0x1f, 0x8b] {
            Some(Codec::Gzip)
        } else {
            None
        }
    }

    /// A streaming decoder of `file`.
    pub(crate) fn decoder(self, file: std::fs::File) -> std::io::Result<Box<dyn Read>> {
        let file = std::io::BufReader::with_capacity(1 << 20, file);
        Ok(match self {
            Codec::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(file)?;
                // TheRock's level-19 archives may use long windows.
                d.window_log_max(31)?;
                Box::new(d)
            }
            Codec::Xz => Box::new(liblzma::read::XzDecoder::new(file)),
            Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(file)),
        })
    }
}
