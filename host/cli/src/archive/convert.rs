//! `kpack archive convert IN... -o OUTDIR --compression S`: re-encode
//! archives without losing a byte of any code object, done by
//! [`kpack_format::convert`]; this module calls it and prints.

use std::path::{Path, PathBuf};

use kpack_format::Compression;
use kpack_format::convert::ConvertOptions;
use kpack_fsafe::Existing;

use crate::exit::CliResult;

/// Run `kpack archive convert`.
pub fn convert(files: &[PathBuf], out: &Path, compression: Compression, force: bool) -> CliResult {
    crate::safety::not_stdout(out, "archive convert")?;
    let options = ConvertOptions {
        output_dir: out.to_path_buf(),
        compression,
        existing: Existing::from_force(force),
    };
    for w in kpack_format::convert::convert(files, &options)? {
        super::print_written(&w);
    }
    Ok(())
}
