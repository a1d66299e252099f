//! cargo-style external subcommands: `kpack foo ARGS` runs `kpack-foo ARGS`
//! from `PATH` and exits with its status; `kpack --list` shows built-in and
//! external commands. Built-in names always win (clap matches them first),
//! so an external `kpack-inspect` can never shadow `kpack inspect`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::ExitCode;

/// Run `kpack-<args[0]>` with the rest of `args`; its exit status is ours.
/// A name that is neither built in nor on `PATH` gets the closest of
/// `command`'s subcommands as a suggestion.
pub fn run(args: Vec<OsString>, command: &clap::Command) -> ExitCode {
    let Some((name, rest)) = args.split_first() else {
        eprintln!("error: no subcommand given");
        return ExitCode::from(2);
    };
    let name = name.to_string_lossy();
    let exe = format!("kpack-{name}");
    let Some(path) = find_on_path(&exe) else {
        let hint = closest(&name, command.get_subcommands().map(|c| c.get_name()))
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_default();
        eprintln!(
            "error: no such command: `{name}` (no `{exe}` on PATH; see `kpack --list`){hint}"
        );
        return ExitCode::from(2);
    };
    match std::process::Command::new(&path).args(rest).status() {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(2)),
            // Killed by a signal: report like a shell would (128 + signal).
            None => ExitCode::from(signal_code(&status)),
        },
        Err(e) => {
            eprintln!("error: running {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

/// The name among `names` nearest to `typed` (edit distance at most a
/// third of its length, at least 1), for "did you mean".
fn closest<'a>(typed: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (typed.chars().count() / 3).max(1);
    names
        .map(|n| (strsim::levenshtein(typed, n), n))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, n)| n)
}

#[cfg(unix)]
fn signal_code(status: &std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    status
        .signal()
        .map_or(2, |s| 128u8.saturating_add(u8::try_from(s).unwrap_or(0)))
}

#[cfg(not(unix))]
fn signal_code(_: &std::process::ExitStatus) -> u8 {
    2
}

fn find_on_path(exe: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(exe))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &std::path::Path) -> bool {
    p.is_file()
}

/// `kpack --list`: built-in commands (from clap), then `kpack-*` on PATH
/// that do not collide with a built-in.
pub fn list(command: &clap::Command) -> anyhow::Result<()> {
    println!("Installed commands:");
    let builtin: BTreeSet<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        println!("    {:<16} {about}", sub.get_name());
    }
    let mut external = BTreeSet::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let file = e.file_name().to_string_lossy().into_owned();
                if let Some(name) = file.strip_prefix("kpack-")
                    && !name.is_empty()
                    && !builtin.contains(name)
                    && is_executable(&e.path())
                {
                    external.insert((name.to_string(), e.path()));
                }
            }
        }
    }
    let mut shown = BTreeSet::new();
    for (name, path) in external {
        // First on PATH wins, like the lookup in `run`.
        if shown.insert(name.clone()) {
            let path = find_on_path(&format!("kpack-{name}")).unwrap_or(path);
            println!("    {name:<16} (external: {})", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_command() {
        let names = ["inspect", "extract", "verify", "verify-elf", "prune"];
        assert_eq!(closest("inspec", names.into_iter()), Some("inspect"));
        assert_eq!(closest("verfy", names.into_iter()), Some("verify"));
        assert_eq!(closest("prun", names.into_iter()), Some("prune"));
        assert_eq!(closest("frobnicate", names.into_iter()), None);
    }
}
