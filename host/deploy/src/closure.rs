//! The libraries an application needs, resolved as the dynamic loader
//! resolves them, minus the system's.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::elf::{self, DynInfo};
use crate::error::{Error, Result};

/// Libraries every Linux system has and an application must take from it,
/// never from its own directory (after linuxdeploy's excludelist): the C
/// library and its parts, the C++ and GCC runtimes, the graphics stack.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "ld-linux*.so*",
    "ld64.so*",
    "libc.so*",
    "libm.so*",
    "libmvec.so*",
    "libdl.so*",
    "libpthread.so*",
    "librt.so*",
    "libresolv.so*",
    "libutil.so*",
    "libanl.so*",
    "libnsl.so*",
    "libBrokenLocale.so*",
    "libthread_db.so*",
    "libstdc++.so*",
    "libgcc_s.so*",
    "libGL.so*",
    "libEGL.so*",
    "libGLX.so*",
    "libGLdispatch.so*",
    "libOpenGL.so*",
    "libdrm.so*",
    "libX11.so*",
    "libxcb.so*",
];

/// Where the loader looks when nothing else names the library.
const SYSTEM_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The `--exclude` globs and the default list, matched against names.
#[derive(Debug)]
pub(crate) struct Excludes {
    user: Vec<(String, glob::Pattern)>,
    default: Vec<glob::Pattern>,
    windows: Vec<glob::Pattern>,
}

impl Excludes {
    pub(crate) fn new(user: &[String]) -> Result<Excludes> {
        let user = user
            .iter()
            .map(|g| {
                glob::Pattern::new(g)
                    .map(|p| (g.clone(), p))
                    .map_err(|e| Error::Glob {
                        glob: g.clone(),
                        message: e.to_string(),
                    })
            })
            .collect::<Result<_>>()?;
        let default = DEFAULT_EXCLUDES
            .iter()
            .filter_map(|g| glob::Pattern::new(g).ok())
            .collect();
        let windows = crate::pe::DEFAULT_EXCLUDES
            .iter()
            .filter_map(|g| glob::Pattern::new(g).ok())
            .collect();
        Ok(Excludes {
            user,
            default,
            windows,
        })
    }

    /// Why `name` stays out, if it does.
    pub(crate) fn reason(&self, name: &str) -> Option<String> {
        if let Some((g, _)) = self.user.iter().find(|(_, p)| p.matches(name)) {
            return Some(format!("--exclude {g}"));
        }
        let windows = glob::MatchOptions {
            case_sensitive: false,
            ..Default::default()
        };
        let dll = name.to_ascii_lowercase().ends_with(".dll");
        if dll {
            if let Some((g, _)) = self
                .user
                .iter()
                .find(|(_, p)| p.matches_with(name, windows))
            {
                return Some(format!("--exclude {g}"));
            }
            return self
                .windows
                .iter()
                .any(|p| p.matches_with(name, windows))
                .then(|| "a Windows system DLL (default exclude list)".to_owned());
        }
        self.default
            .iter()
            .any(|p| p.matches(name))
            .then(|| "a system library (default exclude list)".to_owned())
    }
}

/// One library of the closure.
#[derive(Debug, Clone)]
pub(crate) struct Library {
    /// Where it was found (as the loader would name it).
    pub path: PathBuf,
    /// Who needs it (`--also`, `the kpack runtime`, or a file name).
    pub needed_by: Vec<String>,
}

/// One library left out.
#[derive(Debug, Clone)]
pub(crate) struct LeftOut {
    pub needed_by: Vec<String>,
    pub reason: String,
}

/// The closure: libraries by name (DT_NEEDED name), in name order.
#[derive(Debug, Default)]
pub(crate) struct Closure {
    pub libraries: BTreeMap<String, Library>,
    pub left_out: BTreeMap<String, LeftOut>,
}

/// Where to look beside each object's own RUNPATH/RPATH.
#[derive(Debug, Clone)]
pub(crate) struct SearchDirs {
    /// `--library-path`, then `--rocm-path`'s `lib`, `lib64` and multiarch directories.
    pub extra: Vec<PathBuf>,
    /// The system's directories last.
    pub system: bool,
}

impl SearchDirs {
    /// The directories searched for a name needed by an object with `info`
    /// at `origin` (its directory), in the loader's order.
    pub(crate) fn for_object(&self, info: Option<&DynInfo>, origin: &Path) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(info) = info {
            let own = if info.runpath.is_empty() {
                &info.rpath
            } else {
                &info.runpath
            };
            dirs.extend(own.iter().map(|e| elf::expand_origin(e, origin)));
        }
        dirs.extend(self.extra.iter().cloned());
        if self.system {
            dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
        }
        dirs
    }
}

/// Find `name` in `dirs`.
pub(crate) fn find(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The closure of `roots` (objects with their display names) and the
/// `also` names.
pub(crate) fn resolve(
    roots: &[(String, PathBuf)],
    also: &[String],
    search: &SearchDirs,
    excludes: &Excludes,
) -> Result<Closure> {
    let mut closure = Closure::default();
    // (name needed, who needs it, where to look)
    let mut queue: VecDeque<(String, String, Vec<PathBuf>)> = VecDeque::new();
    let push_needs = |queue: &mut VecDeque<_>, who: &str, path: &Path| -> Result<()> {
        let (needed, dirs) = needs(path, search)?;
        for n in needed {
            queue.push_back((n, who.to_owned(), dirs.clone()));
        }
        Ok(())
    };
    for (name, path) in roots {
        push_needs(&mut queue, name, path)?;
    }
    let base = search.for_object(None, Path::new("."));
    for a in also {
        queue.push_back((a.clone(), "--also".to_owned(), base.clone()));
    }
    while let Some((name, who, dirs)) = queue.pop_front() {
        if roots.iter().any(|(n, _)| same_name(n, &name)) {
            continue;
        }
        // A DLL imported under another case is the one already found.
        let name = closure
            .libraries
            .keys()
            .find(|k| same_name(k, &name))
            .cloned()
            .unwrap_or(name);
        if let Some(l) = closure.libraries.get_mut(&name) {
            if !l.needed_by.contains(&who) {
                l.needed_by.push(who);
            }
            continue;
        }
        if let Some(reason) = excludes.reason(&name) {
            let l = closure.left_out.entry(name).or_insert(LeftOut {
                needed_by: Vec::new(),
                reason,
            });
            if !l.needed_by.contains(&who) {
                l.needed_by.push(who);
            }
            continue;
        }
        let found = if is_dll(&name) {
            crate::pe::find(&name, &dirs)
        } else {
            find(&name, &dirs)
        };
        let Some(path) = found else {
            return Err(Error::NotFound {
                name,
                needed_by: who,
                searched: join_dirs(&dirs),
            });
        };
        push_needs(&mut queue, &name, &path)?;
        closure.libraries.insert(
            name,
            Library {
                path,
                needed_by: vec![who],
            },
        );
    }
    Ok(closure)
}

/// What the object at `path` needs and where its loader looks: an ELF
/// file's DT_NEEDED through its RUNPATH/RPATH, the extra directories and
/// the system's; a PE image's imports in its own directory, then the
/// extra directories (the Windows loader's order for an application
/// directory; system DLLs are left out by name).
fn needs(path: &Path, search: &SearchDirs) -> Result<(Vec<String>, Vec<PathBuf>)> {
    let origin = path.parent().unwrap_or(Path::new("."));
    if let Some(info) = elf::read(path)? {
        let dirs = search.for_object(Some(&info), origin);
        return Ok((info.needed, dirs));
    }
    let Some(info) = crate::pe::read(path)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut dirs = vec![origin.to_path_buf()];
    dirs.extend(search.extra.iter().cloned());
    Ok((info.imports, dirs))
}

/// Whether two needed names name the same library: exactly, or for DLLs
/// without regard to case (as the Windows loader compares them).
fn same_name(a: &str, b: &str) -> bool {
    a == b || (is_dll(a) && a.eq_ignore_ascii_case(b))
}

/// A DLL name (as the Windows loader names them, any case).
pub(crate) fn is_dll(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".dll")
}

pub(crate) fn join_dirs(dirs: &[PathBuf]) -> String {
    let v: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    v.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dll_needed_under_two_cases_is_one_library_of_the_closure() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pe");
        let dll = dir.path().join("dll_1tu.dll");
        std::fs::copy(fixture.join("dll_1tu.dll"), &dll).unwrap();
        std::fs::write(dir.path().join("AmdHip64.dll"), b"stand-in").unwrap();
        let search = SearchDirs {
            extra: vec![dir.path().to_path_buf()],
            system: false,
        };
        let roots = [("dll_1tu.dll".to_owned(), dll)];
        let also = ["AMDHIP64.DLL".to_owned(), "DLL_1TU.dll".to_owned()];
        let closure = resolve(&roots, &also, &search, &Excludes::new(&[]).unwrap()).unwrap();
        let names: Vec<&String> = closure.libraries.keys().collect();
        assert_eq!(names, ["amdhip64.dll"]);
        let lib = &closure.libraries["amdhip64.dll"];
        assert_eq!(lib.path.file_name().unwrap(), "AmdHip64.dll");
        assert_eq!(lib.needed_by, ["dll_1tu.dll", "--also"]);
    }

    #[test]
    fn windows_system_dlls_are_left_out_whatever_their_case() {
        let ex = Excludes::new(&["AMDHIP64.dll".to_owned()]).unwrap();
        for n in [
            "KERNEL32.dll",
            "api-ms-win-crt-runtime-l1-1-0.dll",
            "VCRUNTIME140.dll",
        ] {
            assert!(ex.reason(n).unwrap().contains("Windows system DLL"), "{n}");
        }
        assert_eq!(
            ex.reason("amdhip64.dll").as_deref(),
            Some("--exclude AMDHIP64.dll")
        );
        assert_eq!(ex.reason("rocm_kpack.dll"), None);
        // ELF names keep their case-sensitive list.
        assert!(ex.reason("libc.so.6").is_some());
        assert_eq!(ex.reason("LIBC.so.6"), None);
    }
}
