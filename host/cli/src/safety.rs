//! What kpack promises about your files, in one place every command that
//! reads or writes uses:
//!
//! - inputs are only read: an output that is the same file as an input
//!   (same device and inode, whatever path reaches it) is refused, and so
//!   are output directories inside an input tree and inputs inside an output;
//! - inputs must be regular files (a FIFO would block, a device never ends);
//! - paths built from flags stay inside their output root (`--name`,
//!   `--archive-dir` are plain names or relative paths without `..`);
//! - existing outputs are refused unless `--force`;
//! - output directories a failed run created are removed again;
//! - stale temp files (`.kpack-tmp-<pid>-…`) of dead processes are removed;
//! - writers into one archive directory take turns (advisory lock).

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};

/// Refuse anything but a regular file as an input (exit 2), before it is
/// opened: opening a FIFO blocks until a writer comes.
pub fn regular_file(path: &Path) -> anyhow::Result<()> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot open", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file ({})",
            path.display(),
            kpack_format::file_kind(&meta)
        );
    }
    Ok(())
}

/// Refuse when `output` is `input` itself, through any path or hard link
/// (device and inode compared). An output that does not exist yet cannot be.
pub fn not_same_file(input: &Path, output: &Path) -> anyhow::Result<()> {
    if same_file::is_same_file(input, output).unwrap_or(false) {
        bail!(
            "{}: is the input {}; kpack never modifies its input, choose another output",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

/// Refuse an existing `path` unless `force`.
pub fn not_existing(path: &Path, force: bool) -> anyhow::Result<()> {
    // --force replaces a file, never a directory: say so instead of suggesting it.
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        bail!("{}: is a directory; name the file to write", path.display());
    }
    if !force && std::fs::symlink_metadata(path).is_ok() {
        bail!(
            "{}: already exists; pass --force to overwrite",
            path.display()
        );
    }
    Ok(())
}

/// `flag`'s value must be a plain file name: no separator, not `.`/`..`.
pub fn plain_name(flag: &str, value: &str) -> anyhow::Result<()> {
    if value.is_empty() || value.contains(['/', '\\', '\0']) || value == "." || value == ".." {
        bail!("{flag} {value:?}: must be a plain name (no '/', not '.' or '..')");
    }
    Ok(())
}

/// `flag`'s value must be a relative path that stays inside its root: only
/// normal components (no `..`, no root, no drive prefix).
pub fn inside_root(flag: &str, value: &str) -> anyhow::Result<()> {
    let p = Path::new(value);
    if value.is_empty()
        || value.contains(['\\', '\0'])
        || !p.components().all(|c| matches!(c, Component::Normal(_)))
        || value.split('/').any(|part| part == "..")
    {
        bail!(
            "{flag} {value:?}: must be a relative path inside the output (no '..', not absolute)"
        );
    }
    Ok(())
}

/// `path` made absolute with every symlink of its existing part resolved
/// (a not-yet-existing tail is appended as written, `..` folded).
pub fn resolved(path: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(path).with_context(|| path.display().to_string())?;
    let mut lexical = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let mut existing = lexical.as_path();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(tail.iter().rev());
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                existing = parent;
            }
            _ => return Ok(lexical),
        }
    }
}

/// Refuse an output directory inside an input tree, or an input inside the
/// output: either way a run would read what it writes.
pub fn not_nested(input: &Path, output: &Path) -> anyhow::Result<()> {
    let (i, o) = (resolved(input)?, resolved(output)?);
    if o.starts_with(&i) {
        bail!(
            "{}: is inside the input {}; choose an output outside it",
            output.display(),
            input.display()
        );
    }
    if i.starts_with(&o) {
        bail!(
            "{}: the input {} is inside it; choose an output outside the input",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

/// Directories this run created, removed again (if empty) unless
/// [`CreatedDir::keep`] is called: a failed run leaves no empty output folders.
#[must_use]
pub struct CreatedDir {
    /// The created directories, deepest first.
    created: Vec<PathBuf>,
}

impl CreatedDir {
    /// Create `dir` and its missing parents, remembering which were missing.
    pub fn create(dir: &Path) -> anyhow::Result<CreatedDir> {
        if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
            bail!("{}: is not a directory", dir.display());
        }
        let mut created = Vec::new();
        let mut p = Some(dir);
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            if std::fs::symlink_metadata(d).is_ok() {
                break;
            }
            created.push(d.to_path_buf());
            p = d.parent();
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(CreatedDir { created })
    }

    /// The run succeeded: keep the directories.
    pub fn keep(mut self) {
        self.created.clear();
    }
}

impl Drop for CreatedDir {
    fn drop(&mut self) {
        // remove_dir, not remove_dir_all: anything someone else put there stays.
        for d in &self.created {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Remove stale temp files of dead kpack processes in `dir`, saying so.
pub fn clean_stale_temps(dir: &Path) {
    for p in kpack_format::remove_stale_temps(dir) {
        crate::ui::note(format_args!(
            "removed {}, left by a kpack run that died",
            p.display()
        ));
    }
}

/// Take the advisory lock on the directory `dir` (waiting, and saying so,
/// while another kpack holds it). Held until the returned file is dropped.
pub fn lock_dir(dir: &Path) -> anyhow::Result<File> {
    let f = File::open(dir).with_context(|| format!("{}: cannot open to lock", dir.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            crate::ui::status(format_args!(
                "waiting for the lock on {} (another kpack is writing there)",
                dir.display()
            ));
            f.lock()
                .with_context(|| format!("{}: cannot lock", dir.display()))?;
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("{}: cannot lock", dir.display()));
        }
    }
    Ok(f)
}

/// `kpack inspect FILE | head -1`: when the reader of stdout goes away,
/// exit quietly, like other Unix tools, instead of panicking in `println!`.
/// Any other failure to print (`> /dev/full`) is an error, exit 2 with a
/// message on stderr (when stderr itself still takes one), not a panic.
pub fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(code) = print_failure_exit(msg) {
            if code != 0 {
                use std::io::Write;
                let cause = msg.split_once(": ").map_or(msg, |(_, c)| c);
                let stream = if msg.starts_with("failed printing to stdout") {
                    "stdout"
                } else {
                    "stderr"
                };
                // Not eprintln!: it would panic again when stderr is the one failing.
                let _ = writeln!(
                    std::io::stderr(),
                    "error: cannot write to {stream}\n  caused by: {cause}"
                );
            }
            std::process::exit(code);
        }
        default(info)
    }));
}

/// The exit status for the panic message of a failed `print!`/`eprint!`:
/// 0 when the reader went away (EPIPE), 2 for any other write error, and
/// `None` for a panic that is not about printing.
fn print_failure_exit(msg: &str) -> Option<i32> {
    if !(msg.starts_with("failed printing to stdout")
        || msg.starts_with("failed printing to stderr"))
    {
        return None;
    }
    let broken_pipe = msg.contains("Broken pipe") || msg.contains("os error 32");
    Some(if broken_pipe { 0 } else { 2 })
}

/// Whether an output path is `-`, which means stdout where one stream is
/// written (and is refused elsewhere, never a file named `-`).
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuse `-o -` for an output that is not a single stream.
pub fn not_stdout(path: &Path, what: &str) -> anyhow::Result<()> {
    if is_stdout(path) {
        anyhow::bail!(
            "-o -: {what} writes more than one stream, so it cannot go to stdout; name a path (./- for a file named -)"
        );
    }
    Ok(())
}

/// Copy `bytes` to stdout as the command's one output stream.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        // The reader went away (`| head -c`): quiet, as for printed output.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.context("cannot write to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_relative_paths_stay_inside() {
        assert!(plain_name("--name", "libfoo").is_ok());
        for bad in ["", ".", "..", "../x", "a/b", "/x"] {
            assert!(plain_name("--name", bad).is_err(), "{bad}");
        }
        assert!(inside_root("--archive-dir", "lib/.kpack").is_ok());
        for bad in ["", "../x", "a/../../x", "/abs", "a/./b/.."] {
            assert!(inside_root("--archive-dir", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nesting_is_seen_through_dot_dot_and_missing_tails() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir(&a).unwrap();
        assert!(not_nested(&a, &a).is_err());
        assert!(not_nested(&a, &a.join("x/y")).is_err());
        assert!(not_nested(&a.join("sub"), &d.path().join("a/../a")).is_err());
        assert!(not_nested(&a, &d.path().join("b")).is_ok());
    }

    #[test]
    fn created_dirs_go_away_unless_kept() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("x/y/z");
        drop(CreatedDir::create(&deep).unwrap());
        assert!(!d.path().join("x").exists());
        CreatedDir::create(&deep).unwrap().keep();
        assert!(deep.is_dir());
    }
}
