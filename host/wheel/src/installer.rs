//! The installer command `kpack install` runs for a [`Resolved`] package:
//! pip or uv, pointed at the index or folder the package is in, asked
//! for the package with the extras of this machine's GPUs.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::Resolved;

/// `path` as a `file://` URL (absolute, percent-encoded), if it resolves.
fn file_url(path: &Path) -> Option<String> {
    let abs = std::path::absolute(path).ok()?;
    url::Url::from_file_path(abs).ok().map(String::from)
}

/// The installer to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installer {
    /// `PYTHON -m pip install`, with the interpreter the caller chose.
    Pip {
        /// The Python interpreter.
        python: OsString,
    },
    /// `uv pip install`.
    Uv,
}

impl Resolved {
    /// The command installing `package` (a name looked up in `index`, a
    /// host wheel file, or a folder of split output) with the chosen
    /// extras; `index` is a simple-index URL or a folder of wheels. A host
    /// wheel read from a file is asked for by a direct reference to that
    /// file (`name[extras] @ file:///…`), so an index holding a fat wheel
    /// of the same version (PyPI) is never chosen instead; its device
    /// wheels come from the folder beside it.
    pub fn install_command(
        &self,
        package: &str,
        index: Option<&str>,
        installer: &Installer,
    ) -> Command {
        let path = Path::new(package);
        let name = if path.exists() {
            &self.host.name
        } else {
            package
        };
        let mut cmd = match installer {
            Installer::Pip { python } => {
                let mut c = Command::new(python);
                c.args(["-m", "pip", "install"]);
                c
            }
            Installer::Uv => {
                let mut c = Command::new("uv");
                c.args(["pip", "install"]);
                c
            }
        };
        match index {
            Some(i) if i.contains("://") => cmd.args(["--index-url", i]),
            Some(i) => cmd.args(["--find-links", i]),
            None if path.is_dir() => cmd.arg("--find-links").arg(path),
            None if path.is_file() => {
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
                cmd.arg("--find-links").arg(dir.unwrap_or(Path::new(".")))
            }
            None => &mut cmd,
        };
        // No GPU served: the plain package (the host alone).
        let requirement = self.requirement(name);
        match self.host.file.as_deref().and_then(file_url) {
            Some(url) => cmd.arg(format!("{requirement} @ {url}")),
            None => cmd.arg(requirement),
        };
        cmd
    }
}
