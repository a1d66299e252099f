//! Command-line conventions shared by every command: `-q`/`-v`, progress
//! only on a real terminal, completions and man page, `--version`, the
//! `schema_version` key, errors as JSON under `--json`, `inspect good bad`,
//! and `-o -` meaning stdout (or refused).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_tests::{fixture, sha256_hex, stderr, stdout, workspace_root};

use crate::util::{KPACK, kpack};

/// AMD's no-op KPAK test vector: `lib/libtest.so#0` has two entries
/// (gfx900, gfx906), `bin/testapp#0` one.
fn noop_vector() -> PathBuf {
    workspace_root().join("host/format/tests/vectors/amd_test_noop.kpack")
}

/// Run kpack in `dir`, so a file named `-` would land there.
fn kpack_in(dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(KPACK)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run kpack")
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn quiet_and_verbose_are_on_every_command() {
    let commands: &[&[&str]] = &[
        &["inspect"],
        &["extract"],
        &["offload"],
        &["verify-elf"],
        &["archive", "list"],
        &["archive", "extract"],
        &["archive", "pack"],
        &["archive", "verify"],
        &["plugins", "list"],
        &["split"],
        &["recombine"],
        &["verify"],
        &["wheel", "split"],
        &["completions"],
        &["man"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = kpack(&args);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", stderr(&out));
        let help = stdout(&out);
        assert!(
            help.contains("-q, --quiet") && help.contains("-v, --verbose"),
            "{cmd:?} --help lacks -q/-v:\n{help}"
        );
    }
    // Before or after the subcommand, and -q with -v is a usage error.
    let bad = kpack(["-q", "-v", "inspect", "x"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn quiet_silences_chatter_but_not_data() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let out = kpack([
        os("archive"),
        os("extract"),
        noop_vector().as_os_str(),
        os("-o"),
        tree.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A real pack lists what it packs on stderr; -q drops that, not the
    // result line on stdout.
    let pack = |quiet: bool, name: &str| {
        let dest = dir.path().join(name);
        let mut args = vec![os("archive"), os("pack"), tree.as_os_str()];
        args.extend([
            os("-o"),
            dest.as_os_str(),
            os("--gfx-arch-family"),
            os("gfx9"),
        ]);
        if quiet {
            args.push(os("-q"));
        }
        let out = kpack(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        out
    };
    let normal = pack(false, "a.kpack");
    assert!(stderr(&normal).contains("<- "), "{}", stderr(&normal));
    let quiet = pack(true, "b.kpack");
    assert_eq!(stderr(&quiet), "");
    assert!(stdout(&quiet).contains("3 entries"), "{}", stdout(&quiet));
    assert_eq!(
        std::fs::read(dir.path().join("a.kpack")).unwrap(),
        std::fs::read(dir.path().join("b.kpack")).unwrap()
    );
}

#[test]
fn verbose_says_what_offload_does() {
    let dir = tempfile::tempdir().unwrap();
    let out_bin = dir.path().join("host");
    let out = kpack([
        os("offload"),
        os("-v"),
        fixture("corpus/exe_axpy_gfx1030").as_os_str(),
        os("-o"),
        out_bin.as_os_str(),
        os("--archives"),
        dir.path().join("ar").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("info: "), "{}", stderr(&out));
}

/// Run `kpack ARGS` under a pseudo-terminal (util-linux `script`) with
/// `TERM` set; returns everything the terminal received.
fn under_pty(term: &str, args: &str) -> String {
    let out = Command::new("script")
        .args(["-qec", &format!("{KPACK} {args}"), "/dev/null"])
        .env("TERM", term)
        .output()
        .expect("run script (util-linux)");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_is_not_drawn_for_term_dumb_or_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("corpus/libaxpy_wide.so");
    let run = |sub: &str| {
        format!(
            "extract --all {} -o {}",
            input.display(),
            dir.path().join(sub).display()
        )
    };
    // On a terminal, the bar draws and clears itself with escape codes...
    let tty = under_pty("xterm", &run("a"));
    assert!(tty.contains("\x1b["), "no progress drawn on a tty: {tty:?}");
    // ...but not where TERM says the terminal cannot move the cursor.
    let dumb = under_pty("dumb", &run("b"));
    assert!(!dumb.contains('\x1b'), "{dumb:?}");
    // Nor when stderr is a pipe (as in this test's own run).
    let out = kpack([
        os("extract"),
        os("--all"),
        input.as_os_str(),
        os("-o"),
        dir.path().join("c").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains('\x1b'), "{}", stderr(&out));
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = kpack(["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(
            script.contains("kpack") && script.contains("offload") && script.contains("archives"),
            "{shell}: {script}"
        );
    }
    assert_eq!(kpack(["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn man_page_on_stdout_and_per_subcommand_into_a_directory() {
    let out = kpack(["man"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = stdout(&out);
    assert!(page.contains(".TH kpack 1"), "{page}");
    assert!(page.contains("offload"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let out = kpack([os("man"), os("-o"), dir.path().as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for page in ["kpack.1", "kpack-offload.1", "kpack-archive-extract.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
}

#[test]
fn version_names_the_git_commit_and_date() {
    let out = kpack(["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let v = stdout(&out);
    assert!(
        v.starts_with(&format!("kpack {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // This crate's own directory: the checkout the binary was built from.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let inside = Command::new("git")
        .current_dir(here)
        .args(["ls-files", "--error-unmatch", "build.rs"])
        .output();
    if !inside.is_ok_and(|o| o.status.success()) {
        // Not a checkout (an unpacked sdist): the crate version alone.
        assert_eq!(v.trim(), format!("kpack {}", env!("CARGO_PKG_VERSION")));
        return;
    }
    // "kpack 0.1.0 (<12 hex> <YYYY-MM-DD>)": a commit of this repository,
    // with its own commit date (HEAD may have moved since the build).
    let inner = v
        .trim()
        .split_once(" (")
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v}: no (commit date)"));
    let (commit, date) = inner.split_once(' ').unwrap();
    assert_eq!(commit.len(), 12, "{v}");
    let git = Command::new("git")
        .current_dir(here)
        .args(["log", "-1", "--format=%cs", commit])
        .output()
        .unwrap();
    assert!(git.status.success(), "{v}: {commit} is not a commit here");
    assert_eq!(String::from_utf8_lossy(&git.stdout).trim(), date, "{v}");
    // Subcommands report the same version.
    assert_eq!(
        stdout(&kpack(["inspect", "--version"])),
        v.replacen("kpack", "kpack-inspect", 1)
    );
}

#[test]
fn plugins_json_uses_schema_version() {
    let out = kpack(["plugins", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert!(doc.get("schema").is_none(), "{doc}");
}

#[test]
fn inspect_reports_the_good_file_and_fails_on_the_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.so");
    std::fs::write(&bad, b"\x7fELF not really").unwrap();
    let good = fixture("corpus/exe_axpy_gfx1030");
    // The bad one first: the good one after it is still inspected.
    let out = kpack([os("inspect"), bad.as_os_str(), good.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("exe_axpy_gfx1030"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("gfx1030"), "{}", stdout(&out));
    assert!(stderr(&out).contains("error: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad.so"), "{}", stderr(&out));

    let out = kpack([
        os("inspect"),
        os("--json"),
        bad.as_os_str(),
        good.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["files"].as_array().unwrap().len(), 1);
    let errors = doc["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert!(errors[0]["path"].as_str().unwrap().ends_with("bad.so"));
    assert!(!errors[0]["message"].as_str().unwrap().is_empty());

    // All good: no `errors` key, so earlier documents are unchanged.
    let out = kpack([os("inspect"), os("--json"), good.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(doc.get("errors").is_none());
}

#[test]
fn failures_under_json_print_an_error_object_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.so");
    let out = kpack([
        os("offload"),
        os("--json"),
        missing.as_os_str(),
        os("-o"),
        dir.path().join("out").as_os_str(),
        os("--archives"),
        dir.path().join("ar").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["schema_version"], 1);
    let msg = doc["error"]["message"].as_str().unwrap();
    assert!(msg.contains("missing.so"), "{doc}");
    assert!(stderr(&out).contains(msg), "{}", stderr(&out));
    assert!(doc["error"]["causes"].is_array(), "{doc}");
    assert_eq!(doc["error"]["exit_code"], 2);
    // Without --json, stdout stays empty.
    let out = kpack([os("archive"), os("list"), missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    let out = kpack([os("archive"), os("list"), os("--json"), missing.as_os_str()]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["error"]["exit_code"], 2);
}

#[test]
fn dash_output_is_stdout_for_one_code_object() {
    let dir = tempfile::tempdir().unwrap();
    let oracle: Vec<_> = kpack_tests::oracle()
        .iter()
        .filter(|e| e.file == "exe_axpy_gfx1030")
        .collect();
    let [entry] = oracle.as_slice() else {
        panic!("expected one code object in exe_axpy_gfx1030: {oracle:?}");
    };
    let input = fixture("corpus/exe_axpy_gfx1030");
    let out = kpack_in(
        dir.path(),
        &[
            os("extract"),
            input.as_os_str(),
            os("--target"),
            os(&entry.target),
            os("-o"),
            os("-"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout.len() as u64, entry.size);
    assert_eq!(sha256_hex(&out.stdout), entry.sha256);
    assert!(!dir.path().join("-").exists());

    // archive extract of one entry: the same bytes as extracting to a directory.
    let v = noop_vector();
    let args = [
        os("--key"),
        os("lib/libtest.so#0"),
        os("--arch"),
        os("gfx906"),
    ];
    let mut a = vec![
        os("archive"),
        os("extract"),
        v.as_os_str(),
        os("-o"),
        os("-"),
    ];
    a.extend(args);
    let out = kpack_in(dir.path(), &a);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let tree = dir.path().join("tree");
    let mut a = vec![
        os("archive"),
        os("extract"),
        v.as_os_str(),
        os("-o"),
        tree.as_os_str(),
    ];
    a.extend(args);
    assert_eq!(kpack(&a).status.code(), Some(0));
    let file = std::fs::read(tree.join("gfx906/lib/libtest.so#0.hsaco")).unwrap();
    assert_eq!(out.stdout, file);
}

#[test]
fn dash_output_is_refused_where_more_than_one_stream_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let exe = fixture("corpus/exe_axpy_2arch");
    let v = noop_vector();
    let ar = dir.path().join("ar");
    let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec![
            os("extract"),
            os("--all"),
            exe.as_os_str(),
            os("-o"),
            os("-"),
        ],
        vec![
            os("archive"),
            os("extract"),
            v.as_os_str(),
            os("-o"),
            os("-"),
        ],
        vec![
            os("archive"),
            os("extract"),
            v.as_os_str(),
            os("--key"),
            os("lib/libtest.so#0"),
            os("-o"),
            os("-"),
        ],
        vec![
            os("offload"),
            exe.as_os_str(),
            os("-o"),
            os("-"),
            os("--archives"),
            ar.as_os_str(),
        ],
        vec![
            os("archive"),
            os("pack"),
            dir.path().as_os_str(),
            os("-o"),
            os("-"),
        ],
    ];
    for args in cases {
        let out = kpack_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("-o -"), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            !dir.path().join("-").exists(),
            "{args:?} wrote a file named -"
        );
    }
}

#[test]
fn verbose_split_names_each_file_and_quiet_says_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let art = tmp.path().join("axpy_lib");
    crate::util::artifact_with_library(&art, fixture("corpus/libaxpy_2arch.so"), "libaxpy.so");
    std::fs::write(art.join("stage/lib/notes.txt"), "x").unwrap();
    let split = |flag: &str, out: &str| {
        let out = tmp.path().join(out);
        let o = kpack([
            os("split"),
            os(flag),
            art.as_os_str(),
            os("-o"),
            out.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    let verbose = stderr(&split("-v", "v"));
    for file in ["lib/libaxpy.so", "lib/notes.txt"] {
        assert!(
            verbose.contains(&format!("info: done {file} (")),
            "{verbose}"
        );
    }
    assert!(verbose.contains("info: stage: 2 files"), "{verbose}");
    let quiet = split("-q", "q");
    assert_eq!(stderr(&quiet), "");
    assert_eq!(
        stdout(&quiet),
        stdout(&split("-v", "v2")).replace("/v2", "/q")
    );
}
