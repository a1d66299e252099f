//! The documentation is tested, so it cannot go stale:
//!
//! - every ```` ```console ```` block of `README.md`, `ARCHITECTURE.md` and
//!   `docs/src/**/*.md` runs with `trycmd` against the `kpack` binary cargo
//!   built, in a scratch directory made by `scripts/make-examples.sh` (the
//!   script the guide tells a newcomer to run: a copy of `tests/fixtures/`
//!   plus a TheRock-style artifact and a fat wheel), and its output must be
//!   what the page shows (`[..]` any text in a line, `...` any lines;
//!   `TRYCMD=overwrite` rewrites the pages with the real output);
//! - the fat wheel the script copies (`tests/fixtures/examples/`) is the one
//!   `example_wheel` below builds from `tests/fixtures/` (`KPACK_BLESS=1`
//!   rewrites it);
//! - every other block has a language, and no `sh` block pretends to be a
//!   transcript (`$ ` prompts are for tested `console` blocks);
//! - `docs/src/reference/commands.md` is what `kpack help-markdown` prints
//!   from the clap definition (`KPACK_BLESS=1` rewrites it);
//! - every relative link, and every `#anchor` into a Markdown page, resolves;
//! - `ARCHITECTURE.md` names every workspace crate.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root, from this crate's own manifest directory.
fn workspace_root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap()
}

/// A file under `tests/fixtures/`.
fn fixture(rel: &str) -> PathBuf {
    workspace_root().join("tests/fixtures").join(rel)
}

const KPACK: &str = env!("CARGO_BIN_EXE_kpack");

/// The file name of the wheel the examples split and prune.
const WHEEL: &str = "fatpkg-1.0-py3-none-linux_x86_64.whl";

/// README.md, ARCHITECTURE.md and every page under docs/ (not the built
/// book), sorted.
fn markdown_files() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "book") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// A fenced code block: its info string, first line number and lines.
struct Block {
    info: String,
    line: usize,
    body: Vec<String>,
}

/// The fenced blocks of a Markdown text, and the text outside them (with
/// blank lines in place of the blocks, so line numbers stay).
fn split_blocks(text: &str) -> (Vec<Block>, String) {
    let mut blocks = Vec::new();
    let mut prose = String::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.starts_with("```");
        match open.take() {
            None if fence => {
                open = Some(Block {
                    info: line.trim_start_matches('`').trim().to_string(),
                    line: i + 1,
                    body: Vec::new(),
                });
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
            Some(b) if fence => {
                blocks.push(b);
                prose.push('\n');
            }
            Some(mut b) => {
                b.body.push(line.to_string());
                open = Some(b);
                prose.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a code block is not closed");
    (blocks, prose)
}

/// What a `console` example may run: kpack, and the Debian tools the
/// native-packages page reads kpack's outputs with.
const PROGRAMS: [&str; 3] = ["kpack", "dpkg-deb", "dpkg-scanpackages"];

#[test]
fn every_code_block_is_tested_or_marked_illustrative() {
    let known = [
        "console", "sh", "text", "rust", "python", "toml", "c", "json", "cmake",
    ];
    let mut problems = Vec::new();
    for f in markdown_files() {
        let (blocks, _) = split_blocks(&std::fs::read_to_string(&f).unwrap());
        for b in blocks {
            let lang = b.info.split(',').next().unwrap_or("");
            let at = format!("{}:{}", rel(&f), b.line);
            if !known.contains(&lang) {
                problems.push(format!(
                    "{at}: block language {lang:?} (use `console` for a tested example, `sh` for an illustrative one, `text` for output)"
                ));
            }
            for l in &b.body {
                let runs_a_tool = PROGRAMS.iter().any(|p| l.starts_with(&format!("$ {p} ")));
                if lang == "console" && l.starts_with("$ ") && !runs_a_tool {
                    problems.push(format!(
                        "{at}: a console example runs something else than kpack or {:?}: {l}",
                        &PROGRAMS[1..]
                    ));
                }
                if lang == "sh" && l.starts_with("$ ") {
                    problems.push(format!(
                        "{at}: an illustrative `sh` block holds a transcript line: {l}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A fat wheel holding `fatpkg/lib/libaxpy.so` (gfx942, gfx1100, gfx1201)
/// and a rocBLAS database file per target, with a correct RECORD: the
/// bytes of `tests/fixtures/examples/fatpkg-1.0-py3-none-linux_x86_64.whl`.
fn example_wheel() -> Vec<u8> {
    let di = "fatpkg-1.0.dist-info";
    let lib = std::fs::read(fixture("clang19/libaxpy_plain.so")).unwrap();
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        ("fatpkg/__init__.py".into(), b"".to_vec(), 0o644),
        ("fatpkg/lib/libaxpy.so".into(), lib, 0o755),
    ];
    for t in ["gfx942", "gfx1100", "gfx1201"] {
        files.push((
            format!("fatpkg/lib/rocblas/library/TensileLibrary_{t}.dat"),
            format!("{t} solutions").into_bytes(),
            0o644,
        ));
    }
    files.push((
        format!("{di}/METADATA"),
        b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n".to_vec(),
        0o644,
    ));
    files.push((
        format!("{di}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: kpack-docs\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
            .to_vec(),
        0o644,
    ));
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let when = zip::DateTime::from_date_and_time(2026, 1, 1, 0, 0, 0).unwrap();
    let mut record = String::new();
    for (p, b, m) in &files {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(when)
            .unix_permissions(*m);
        z.start_file(p.as_str(), opts).unwrap();
        z.write_all(b).unwrap();
        record.push_str(&format!(
            "{p},{},{}\n",
            kpack_wheel::record_hash(b),
            b.len()
        ));
    }
    record.push_str(&format!("{di}/RECORD,,\n"));
    let opts = zip::write::SimpleFileOptions::default().last_modified_time(when);
    z.start_file(format!("{di}/RECORD"), opts).unwrap();
    z.write_all(record.as_bytes()).unwrap();
    z.finish().unwrap().into_inner()
}

#[test]
fn the_example_wheel_is_built_from_the_fixtures() {
    let path = fixture("examples").join(WHEEL);
    let built = example_wheel();
    if std::env::var_os("KPACK_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &built).unwrap();
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == built,
        "{} is not the wheel built from tests/fixtures: regenerate it with \
         `KPACK_BLESS=1 cargo test -p kpack-cli --test docs`",
        rel(&path)
    );
}

/// The directory the examples run in, made by the script the guide names
/// (`scripts/make-examples.sh DIR`): what a newcomer has, nothing more.
fn playground(dir: &Path) {
    let out = Command::new("bash")
        .arg(workspace_root().join("scripts/make-examples.sh"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/make-examples.sh {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The program `name` on `PATH`; the test fails, naming it, when it is
/// missing.
fn on_path(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} is required by the guide's examples (scripts/test.sh installs it)")
        })
}

/// A copy of the `kpack` binary cargo built, in `scratch/exe/bin`, a
/// directory holding nothing else. The handler
/// search path holds `<exe dir>/plugins` and `<exe dir>/../wasm32-wasip2/plugin`:
/// for the binary in `<target>/debug` that is the target directory, where a
/// release build or `scripts/build-plugins.sh` leaves handlers, and the
/// examples would list them as `bundled` instead of `embedded`. The copy
/// sees only what it embeds, whatever else was built.
fn hermetic_kpack(scratch: &Path) -> PathBuf {
    let bin = scratch.join("exe/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("kpack");
    std::fs::copy(KPACK, &copy).unwrap();
    copy
}

#[test]
fn console_examples_run_as_shown() {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("docs-examples");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    // trycmd runs a page `X.md` in `X.in/` when that directory exists: each
    // page gets a copy of itself beside its own playground.
    let mut pages = Vec::new();
    for f in markdown_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        if !text.contains("```console") {
            continue;
        }
        let slug = rel(&f)
            .replace('/', "-")
            .trim_end_matches(".md")
            .to_string();
        let copy = scratch.join(format!("{slug}.md"));
        std::fs::write(&copy, &text).unwrap();
        playground(&scratch.join(format!("{slug}.in")));
        pages.push((f, copy));
    }
    assert!(pages.len() >= 8, "only {} pages have examples", pages.len());
    let cases = trycmd::TestCases::new();
    let home = |dir: &str| scratch.join(dir).display().to_string();
    cases
        .register_bin("kpack", hermetic_kpack(&scratch))
        // Nothing of the machine's: no home, no installed handlers, no
        // cache, no handler directory.
        .env("HOME", home("home"))
        .env("XDG_CACHE_HOME", home("cache"))
        .env("XDG_DATA_HOME", home("data"))
        .env("XDG_CONFIG_HOME", home("config"))
        .env("KPACK_PLUGIN_DIR", home("no-plugins"))
        .env("SOURCE_DATE_EPOCH", "1767225600");
    // The native-packages page shows Debian's own tools reading the
    // outputs (scripts/test.sh installs dpkg-dev).
    for p in &PROGRAMS[1..] {
        cases.register_bin(*p, on_path(p));
    }
    for (_, copy) in &pages {
        cases.case(copy);
    }
    cases.run();
    // TRYCMD=overwrite rewrote the copies: carry the new output back.
    if std::env::var_os("TRYCMD").is_some_and(|v| v == "overwrite") {
        for (page, copy) in &pages {
            let new = std::fs::read_to_string(copy).unwrap();
            if new != std::fs::read_to_string(page).unwrap() {
                std::fs::write(page, new).unwrap();
            }
        }
    }
}

#[test]
fn command_reference_is_generated_from_the_cli() {
    let out = Command::new(KPACK).arg("help-markdown").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let page = workspace_root().join("docs/src/reference/commands.md");
    if std::env::var_os("KPACK_BLESS").is_some() {
        assert!(
            std::env::var_os("CI").is_none(),
            "KPACK_BLESS under CI: regenerate the reference on a development machine"
        );
        std::fs::write(&page, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: regenerate it with `KPACK_BLESS=1 cargo test -p kpack-cli --test docs`",
        rel(&page)
    );
}

#[test]
fn the_reference_generator_is_hidden() {
    for flag in ["--help", "--list"] {
        let out = Command::new(KPACK).arg(flag).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("offload"), "kpack {flag}: {text}");
        assert!(
            !text.contains("help-markdown"),
            "kpack {flag} lists help-markdown: {text}"
        );
    }
}

/// The id mdBook (and GitHub) gives a heading: its text lower-cased,
/// spaces to `-`, everything but letters, digits, `-` and `_` dropped.
fn anchor_of(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // Links keep their text only.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a Markdown page's headings (duplicates get `-1`, `-2`).
fn anchors(path: &Path) -> BTreeSet<String> {
    let (_, prose) = split_blocks(&std::fs::read_to_string(path).unwrap());
    let mut out = BTreeSet::new();
    for line in prose.lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let id = anchor_of(&line[hashes + 1..]);
            let mut unique = id.clone();
            let mut n = 1;
            while out.contains(&unique) {
                unique = format!("{id}-{n}");
                n += 1;
            }
            out.insert(unique);
        }
    }
    out
}

/// `[text](target)` links of a Markdown text outside code (inline code
/// spans removed), with their line numbers.
fn links(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose.lines().enumerate() {
        let mut clean = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                clean.push_str(part);
            }
        }
        let mut rest = clean.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut problems = Vec::new();
    for f in markdown_files() {
        let (_, prose) = split_blocks(&std::fs::read_to_string(&f).unwrap());
        for (line, target) in links(&prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            let at = format!("{}:{line}: {target}", rel(&f));
            if !dest.exists() {
                problems.push(format!("{at}: no such file"));
                continue;
            }
            if let Some(a) = anchor
                && dest.extension().is_some_and(|x| x == "md")
                && !anchors(&dest).contains(a)
            {
                problems.push(format!("{at}: no heading with that anchor"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_newcomer_questions_are_one_click_from_the_readme() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines (at most 300)");
    for target in [
        "docs/src/guide/wheels.md#a-wheel-for-gfx1100-only",
        "docs/src/guide/troubleshooting.md",
    ] {
        assert!(
            readme.contains(&format!("]({target})")),
            "README.md does not link {target}"
        );
    }
}

#[test]
fn architecture_names_every_workspace_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let missing: Vec<&str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .filter(|name| !text.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these crates: {missing:?}"
    );
}

#[test]
fn every_published_crate_ships_the_license() {
    let root = workspace_root();
    let license = std::fs::read(root.join("LICENSE")).expect("LICENSE at the workspace root");
    assert!(
        String::from_utf8_lossy(&license).starts_with("MIT License"),
        "LICENSE is not the MIT license the manifests name"
    );
    let mut published = 0;
    let mut problems = Vec::new();
    for dir in ["host", "."] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let crate_dir = e.unwrap().path();
            let Ok(manifest) = std::fs::read_to_string(crate_dir.join("Cargo.toml")) else {
                continue;
            };
            if !manifest.lines().any(|l| l.trim() == "publish = true") {
                continue;
            }
            published += 1;
            let at = rel(&crate_dir);
            // `cargo package` takes only what `include` lists; the LICENSE
            // beside the manifest is a link to the root's.
            let include = manifest
                .lines()
                .find(|l| l.starts_with("include = "))
                .unwrap_or("");
            if !include.contains("\"LICENSE\"") {
                problems.push(format!("{at}/Cargo.toml: `include` does not list LICENSE"));
            }
            if std::fs::read(crate_dir.join("LICENSE")).ok().as_ref() != Some(&license) {
                problems.push(format!("{at}/LICENSE is not the root LICENSE"));
            }
        }
    }
    assert!(published >= 20, "only {published} published crates found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `cargo tree` of the selected packages: one sorted `name version
/// features` line per package and build kind.
fn feature_tree(packages: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["tree", "--locked", "--offline", "-e", "normal,build"])
        .args(["-f", "{p} {f}", "--prefix", "none"])
        .current_dir(workspace_root());
    for p in packages {
        cmd.args(["-p", p]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_end_matches(" (*)").to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The packages (`-p NAME`) of the `cargo build` line in `script` that
/// builds the C library.
fn library_build_packages(script: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join(script)).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("cargo build") && l.contains("-p kpack-capi"))
        .unwrap_or_else(|| panic!("{script}: no `cargo build ... -p kpack-capi` line"));
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1].trim_end_matches(')').to_string())
        .collect()
}

/// `scripts/install-runtime.sh` and `scripts/build-wheels.sh` build the C
/// library right after (or long after) the CLI's release build; it must
/// reuse every dependency that build compiled. Cargo resolves a shared
/// dependency's features from the packages a command selects, so the
/// library's build must select packages that give every shared dependency
/// exactly the CLI's features (`-p kpack-capi` alone does not: serde,
/// rustix, syn, ... differ and everything under them is recompiled).
#[test]
fn the_c_library_builds_with_the_cli_build_features() {
    let cli = feature_tree(&["kpack-cli"]);
    for script in ["scripts/install-runtime.sh", "scripts/build-wheels.sh"] {
        let packages = library_build_packages(script);
        let refs: Vec<&str> = packages.iter().map(String::as_str).collect();
        let lib = feature_tree(&refs);
        let differ: Vec<&String> = lib
            .difference(&cli)
            .filter(|l| !l.starts_with("kpack-capi "))
            .collect();
        assert!(
            differ.is_empty(),
            "{script} builds the C library with -p {}: these dependencies get other \
             features than in `cargo build --release -p kpack-cli`, so they are compiled \
             again: {differ:#?}",
            packages.join(" -p ")
        );
    }
}

/// The README's promise about `scripts/test.sh`: on a machine without
/// `apt-get`, it names every tool it lacks before running anything (here:
/// a PATH holding only bash and dirname), and exits 2.
#[test]
fn the_test_command_lists_what_it_lacks_without_apt_get() {
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-apt-bin");
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["bash", "dirname"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("no {tool} in /usr/bin or /bin"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    let out = Command::new(bin.join("bash"))
        .arg(workspace_root().join("scripts/test.sh"))
        .env_clear()
        .env("PATH", &bin)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("lacks"), "{stderr}");
    for tool in [
        "  cc [gcc]",
        "  cmake",
        "  clang-19",
        "  llvm-readobj-22 [llvm-22]",
        "  rustup [not Debian's: https://rustup.rs]",
    ] {
        assert!(
            stderr.lines().any(|l| l == tool),
            "scripts/test.sh does not list {tool:?}:\n{stderr}"
        );
    }
}
