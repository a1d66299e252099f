//! The dynamic section facts a deploy needs, read with `object`.

use std::path::{Path, PathBuf};

use object::elf::{DT_NEEDED, DT_RPATH, DT_RUNPATH, PT_INTERP};
use object::read::elf::{Dyn, FileHeader, ProgramHeader};

use crate::error::{Error, Result};

/// An ELF file's dynamic linking facts.
#[derive(Debug, Clone, Default)]
pub(crate) struct DynInfo {
    /// It has a program interpreter: an executable (PIE or not).
    pub executable: bool,
    /// DT_NEEDED names, in order.
    pub needed: Vec<String>,
    /// DT_RUNPATH entries, as written.
    pub runpath: Vec<String>,
    /// DT_RPATH entries, as written.
    pub rpath: Vec<String>,
}

/// `Some` for an ELF file, `None` for anything else.
pub(crate) fn read(path: &Path) -> Result<Option<DynInfo>> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, "cannot read", e))?;
    let parsed = match object::FileKind::parse(&*data) {
        Ok(object::FileKind::Elf64) => info::<object::elf::FileHeader64<object::Endianness>>(&data),
        Ok(object::FileKind::Elf32) => info::<object::elf::FileHeader32<object::Endianness>>(&data),
        _ => return Ok(None),
    };
    parsed.map(Some).map_err(|e| Error::Elf {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn info<E: FileHeader<Endian = object::Endianness>>(data: &[u8]) -> object::Result<DynInfo> {
    let header = E::parse(data)?;
    let endian = header.endian()?;
    let mut out = DynInfo {
        executable: header
            .program_headers(endian, data)?
            .iter()
            .any(|p| p.p_type(endian) == PT_INTERP),
        ..DynInfo::default()
    };
    let sections = header.sections(endian, data)?;
    let Some((dyns, link)) = sections.dynamic(endian, data)? else {
        return Ok(out);
    };
    let strings = sections.strings(endian, data, link)?;
    for d in dyns {
        let tag: i64 = d.d_tag(endian).into();
        if ![DT_NEEDED, DT_RUNPATH, DT_RPATH].contains(&tag) {
            continue;
        }
        let s = String::from_utf8_lossy(d.string(endian, strings)?).into_owned();
        match tag {
            DT_NEEDED => out.needed.push(s),
            DT_RUNPATH => out.runpath.extend(split_path(&s)),
            _ => out.rpath.extend(split_path(&s)),
        }
    }
    Ok(out)
}

/// A `:`-separated RUNPATH/RPATH value's entries (the loader's list
/// syntax is the one of `PATH`).
fn split_path(s: &str) -> impl Iterator<Item = String> + '_ {
    std::env::split_paths(s)
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|e| !e.is_empty())
}

/// A RUNPATH/RPATH entry with `$ORIGIN` (`${ORIGIN}`) replaced by `origin`.
pub(crate) fn expand_origin(entry: &str, origin: &Path) -> PathBuf {
    let o = origin.display().to_string();
    PathBuf::from(entry.replace("${ORIGIN}", &o).replace("$ORIGIN", &o))
}

/// Whether a RUNPATH/RPATH entry is relative to the object itself.
pub(crate) fn is_origin_relative(entry: &str) -> bool {
    entry.starts_with("$ORIGIN") || entry.starts_with("${ORIGIN}")
}

/// Set the DT_RUNPATH of the copy at `path` to `runpath` (replacing any
/// DT_RPATH/DT_RUNPATH) with `patchelf`.
///
/// `object`'s ELF builder can rewrite dynamic entries, but a longer string
/// table means moving `.dynstr` into a new load segment, which patchelf
/// already does on every layout the linkers write.
pub(crate) fn set_runpath(path: &Path, runpath: &str) -> Result<()> {
    let out = std::process::Command::new("patchelf")
        .arg("--set-rpath")
        .arg(runpath)
        .arg(path)
        .output()
        .map_err(|e| Error::Patchelf {
            path: path.to_path_buf(),
            message: format!("cannot run patchelf (install it: apt-get install patchelf): {e}"),
        })?;
    if !out.status.success() {
        return Err(Error::Patchelf {
            path: path.to_path_buf(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}
