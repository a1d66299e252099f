//! The import facts of a Windows PE image a deploy needs, read with
//! `object`'s PE reader, and the Windows loader's search for an
//! application directory.

use std::path::Path;

use object::LittleEndian as LE;
use object::pe::IMAGE_FILE_DLL;
use object::read::pe::{ImageNtHeaders, PeFile32, PeFile64};

use crate::error::{Error, Result};

/// DLLs every Windows system has and an application takes from it, never
/// from its own directory: the kernel and user-mode API sets, the C and
/// C++ runtimes Windows ships or redistributes system-wide, the graphics
/// and networking stacks. Matched without regard to case, as the loader
/// matches names.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "api-ms-win-*.dll",
    "ext-ms-*.dll",
    "ntdll.dll",
    "kernel32.dll",
    "kernelbase.dll",
    "user32.dll",
    "gdi32.dll",
    "advapi32.dll",
    "shell32.dll",
    "ole32.dll",
    "oleaut32.dll",
    "comdlg32.dll",
    "comctl32.dll",
    "shlwapi.dll",
    "ws2_32.dll",
    "wsock32.dll",
    "iphlpapi.dll",
    "bcrypt.dll",
    "bcryptprimitives.dll",
    "crypt32.dll",
    "secur32.dll",
    "rpcrt4.dll",
    "setupapi.dll",
    "cfgmgr32.dll",
    "version.dll",
    "winmm.dll",
    "dbghelp.dll",
    "psapi.dll",
    "userenv.dll",
    "ucrtbase.dll",
    "ucrtbased.dll",
    "msvcrt.dll",
    "msvcp*.dll",
    "vcruntime*.dll",
    "concrt*.dll",
    "vcomp*.dll",
    "opengl32.dll",
    "d3d*.dll",
    "dxgi.dll",
    "dxcore.dll",
    "synchronization.dll",
];

/// A PE image's loading facts.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeInfo {
    /// Not a DLL: an executable.
    pub executable: bool,
    /// The import table's DLL names, in order.
    pub imports: Vec<String>,
}

/// `Some` for a PE image, `None` for anything else.
pub(crate) fn read(path: &Path) -> Result<Option<PeInfo>> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, "cannot read", e))?;
    let parsed = match object::FileKind::parse(&*data) {
        Ok(object::FileKind::Pe64) => info(&PeFile64::parse(&*data)),
        Ok(object::FileKind::Pe32) => info(&PeFile32::parse(&*data)),
        _ => return Ok(None),
    };
    parsed.map(Some).map_err(|e| Error::Pe {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn info<H: ImageNtHeaders>(
    file: &object::Result<object::read::pe::PeFile<'_, H>>,
) -> object::Result<PeInfo> {
    let file = file.as_ref().map_err(|e| *e)?;
    let characteristics = file.nt_headers().file_header().characteristics.get(LE);
    let mut out = PeInfo {
        executable: characteristics & IMAGE_FILE_DLL == 0,
        imports: Vec::new(),
    };
    if let Some(table) = file.import_table()? {
        let mut descriptors = table.descriptors()?;
        while let Some(d) = descriptors.next()? {
            let name = table.name(d.name.get(LE))?;
            out.imports.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(out)
}

/// Whether `path` is a PE image (by content).
pub(crate) fn is_pe(path: &Path) -> bool {
    matches!(read(path), Ok(Some(_)))
}

/// Find the DLL `name` in `dirs` as the Windows loader does: the name
/// compared without regard to case.
pub(crate) fn find(name: &str, dirs: &[std::path::PathBuf]) -> Option<std::path::PathBuf> {
    let want = name.to_ascii_lowercase();
    dirs.iter().find_map(|d| {
        let exact = d.join(name);
        if exact.is_file() {
            return Some(exact);
        }
        std::fs::read_dir(d)
            .ok()?
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().to_ascii_lowercase() == want)
            .map(|e| e.path())
            .filter(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/pe")
            .join(name)
    }

    #[test]
    fn reads_the_import_table_of_a_dll_and_an_exe() {
        let dll = read(&fixture("dll_1tu.dll")).unwrap().unwrap();
        assert!(!dll.executable);
        assert_eq!(dll.imports, vec!["amdhip64.dll".to_owned()]);
        let exe = read(&fixture("exe_1tu.exe")).unwrap().unwrap();
        assert!(exe.executable);
        assert!(exe.imports.contains(&"amdhip64.dll".to_owned()));
    }

    #[test]
    fn an_elf_file_is_not_a_pe_image() {
        let me = std::env::current_exe().unwrap();
        assert!(read(&me).unwrap().is_none());
    }

    #[test]
    fn finds_a_dll_whatever_the_case_of_its_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Foo.DLL"), b"x").unwrap();
        let found = find("foo.dll", &[dir.path().to_path_buf()]).unwrap();
        assert_eq!(found.file_name().unwrap(), "Foo.DLL");
        assert!(find("bar.dll", &[dir.path().to_path_buf()]).is_none());
    }
}
