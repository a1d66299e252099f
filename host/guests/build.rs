//! Builds every WebAssembly guest of the workspace in one nested
//! `cargo build` and writes `$OUT_DIR/guests.rs` naming what it built.
//!
//! The nested build gets its own target directory next to the outer one
//! (`<target>/wasm-guests`): building into the outer target directory would
//! wait forever on the lock the outer cargo holds, and one directory shared
//! by every host profile means `cargo build`, `cargo test --release` and
//! `cargo clippy` reuse a single wasm build.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "plugin";

/// Which family a guest belongs to: where its crate lives, how its package
/// is named, and what the generated items are called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Handler,
    TestGuest,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Handler => "plugins",
            Kind::TestGuest => "tests/guests",
        }
    }

    fn package_prefix(self) -> &'static str {
        match self {
            Kind::Handler => "kpack-handler-",
            Kind::TestGuest => "kpack-guest-",
        }
    }

    fn const_prefix(self) -> &'static str {
        match self {
            Kind::Handler => "HANDLER_",
            Kind::TestGuest => "GUEST_",
        }
    }
}

struct Guest {
    kind: Kind,
    /// Package name, e.g. `kpack-handler-rocblas`.
    package: String,
    /// The package name without its prefix, e.g. `rocblas`.
    name: String,
    /// The built component.
    wasm: PathBuf,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    // host/guests -> the workspace root.
    let root = manifest_dir
        .parent()
        .and_then(Path::parent)
        .ok_or("kpack-guests must live two levels below the workspace root")?
        .to_path_buf();
    let out_dir = PathBuf::from(var("OUT_DIR")?);
    if !root.join("plugins").is_dir() {
        return packaged(&manifest_dir, &out_dir);
    }
    let outer_target = outer_target_dir(&out_dir);
    let wasm_target = outer_target.join("wasm-guests");
    let test_guests = std::env::var_os("CARGO_FEATURE_TEST_GUESTS").is_some();
    let embed = std::env::var_os("CARGO_FEATURE_EMBED").is_some();

    let mut kinds = vec![Kind::Handler];
    if test_guests {
        kinds.push(Kind::TestGuest);
    }
    let mut guests = Vec::new();
    for &kind in &kinds {
        guests.extend(discover(&root, kind, &wasm_target)?);
    }

    // Rerun when anything a guest is built from changes. Directories are
    // scanned recursively by cargo, so a new guest crate is picked up; the
    // guests' own path dependencies are added from their dep-info below.
    let mut reruns = BTreeSet::new();
    for rel in ["Cargo.toml", "Cargo.lock", "sdk", "wit", "host/amdgpu"]
        .into_iter()
        .chain(kinds.iter().map(|k| k.dir()))
    {
        let p = root.join(rel);
        // A missing path would make cargo rerun the script on every build.
        if p.exists() {
            reruns.insert(p);
        }
    }

    check_target_installed()?;
    build(&root, &wasm_target, &guests)?;

    for g in &guests {
        if !g.wasm.is_file() {
            return Err(format!(
                "the nested build succeeded but {} is missing",
                g.wasm.display()
            ));
        }
        // Registry sources never change and the build's own outputs are not
        // inputs: keep only workspace files outside any target directory.
        for dep in dep_info(&g.wasm.with_extension("d"))? {
            if dep.starts_with(&root) && !dep.starts_with(&outer_target) && dep.exists() {
                reruns.insert(dep);
            }
        }
    }
    for p in &reruns {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let code = generate(
        &guests,
        &wasm_target.join(TARGET).join(PROFILE),
        test_guests,
        embed,
    )?;
    std::fs::write(out_dir.join("guests.rs"), code)
        .map_err(|e| format!("cannot write {}: {e}", out_dir.join("guests.rs").display()))
}

/// The crate as published (`cargo package`): the repository's guest
/// sources are not beside it, so the handlers come prebuilt in
/// `prebuilt/kpack_handler_<name>.wasm` (put there by
/// `scripts/package-crates.sh` from the nested build). The test guests
/// exist only in the repository.
fn packaged(manifest_dir: &Path, out_dir: &Path) -> Result<(), String> {
    let dir = manifest_dir.join("prebuilt");
    if std::env::var_os("CARGO_FEATURE_TEST_GUESTS").is_some() {
        return Err(format!(
            "the `test-guests` feature builds tests/guests/* of the kpack repository, \
             which {} is not part of",
            manifest_dir.display()
        ));
    }
    let mut guests = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = file
                .strip_prefix("kpack_handler_")
                .and_then(|f| f.strip_suffix(".wasm"))
            else {
                continue;
            };
            let name = stem.replace('_', "-");
            guests.push(Guest {
                kind: Kind::Handler,
                package: format!("kpack-handler-{name}"),
                name,
                wasm: e.path(),
            });
        }
    }
    if guests.is_empty() {
        return Err(format!(
            "neither the kpack repository's plugins/ beside {} nor prebuilt handlers in {} \
             (a package made by scripts/package-crates.sh carries them)",
            manifest_dir.display(),
            dir.display()
        ));
    }
    guests.sort_by(|a, b| a.name.cmp(&b.name));
    println!("cargo:rerun-if-changed={}", dir.display());
    let embed = std::env::var_os("CARGO_FEATURE_EMBED").is_some();
    let code = generate(&guests, &dir, false, embed)?;
    std::fs::write(out_dir.join("guests.rs"), code)
        .map_err(|e| format!("cannot write {}: {e}", out_dir.join("guests.rs").display()))
}

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|e| format!("${name}: {e}"))
}

/// The outer build's target (or build) directory: the ancestor of `OUT_DIR`
/// that cargo marked with `CACHEDIR.TAG`; for a cross build (`--target`),
/// whose `<target>/<triple>` is marked too, the one above it, so every
/// target shares one wasm build. `OUT_DIR` is
/// `<target>/[<triple>/]<profile>/build/<pkg>-<hash>/out`, which is the
/// fallback when no tag is found.
fn outer_target_dir(out_dir: &Path) -> PathBuf {
    let tagged = |d: &&Path| d.join("CACHEDIR.TAG").is_file();
    let Some(dir) = out_dir.ancestors().find(tagged) else {
        return out_dir.ancestors().nth(4).unwrap_or(out_dir).to_path_buf();
    };
    let triple = std::env::var_os("TARGET");
    match dir.parent() {
        Some(up) if dir.file_name() == triple.as_deref() && tagged(&up) => up.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// Every guest crate of `kind`: the directories under `kind.dir()` with a
/// `Cargo.toml`, sorted by name so the generated code is deterministic.
fn discover(root: &Path, kind: Kind, wasm_target: &Path) -> Result<Vec<Guest>, String> {
    let dir = root.join(kind.dir());
    let entries =
        std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut manifests = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let manifest = e.path().join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();
    let mut guests = Vec::new();
    for manifest in manifests {
        let package = package_name(&manifest)?;
        let prefix = kind.package_prefix();
        let Some(name) = package.strip_prefix(prefix) else {
            return Err(format!(
                "{}: package `{package}` must be named `{prefix}<name>`",
                manifest.display()
            ));
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(format!(
                "{}: `{name}` must be lowercase ASCII letters, digits and `-`",
                manifest.display()
            ));
        }
        let wasm = wasm_target
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{}.wasm", package.replace('-', "_")));
        guests.push(Guest {
            kind,
            name: name.to_string(),
            package,
            wasm,
        });
    }
    Ok(guests)
}

/// The `name = "..."` of a manifest's `[package]` table.
fn package_name(manifest: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("name") {
            let value = rest.trim_start().strip_prefix('=').map(str::trim);
            if let Some(name) = value.and_then(|v| v.strip_prefix('"')?.strip_suffix('"')) {
                return Ok(name.to_string());
            }
        }
    }
    Err(format!("{}: no `name` in [package]", manifest.display()))
}

/// Fail early, with the fix, when the standard library for wasm32-wasip2 is
/// missing: the nested build would otherwise bury it in rustc's output.
fn check_target_installed() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && !sysroot.join("lib/rustlib").join(TARGET).is_dir() {
        return Err(format!(
            "the {TARGET} target is not installed in {}; kpack's WebAssembly \
             handlers need it: run `rustup target add {TARGET}`",
            sysroot.display()
        ));
    }
    Ok(())
}

/// Environment the outer cargo sets for build scripts that must not reach
/// the nested build: flags meant for host code, the outer target directory,
/// wrappers (clippy's would lint the guests and change their fingerprint),
/// and the outer jobserver.
const CLEARED_ENV: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CLIPPY_ARGS",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
];

/// One `cargo build` of every guest into `wasm_target`.
fn build(root: &Path, wasm_target: &Path, guests: &[Guest]) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .arg("build")
        .arg("--locked")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(wasm_target);
    for g in guests {
        cmd.args(["-p", &g.package]);
    }
    for name in CLEARED_ENV {
        cmd.env_remove(name);
    }
    // `CARGO_TARGET_<TRIPLE>_LINKER` and the like name the outer build's
    // toolchain (a cross or zig linker), not the one the nested build's
    // own build scripts are linked with.
    for (name, _) in std::env::vars_os() {
        let name_str = name.to_string_lossy();
        if name_str.starts_with("CARGO_BUILD_") || name_str.starts_with("CARGO_TARGET_") {
            cmd.env_remove(name);
        }
    }
    // Cargo reads a build script's stdout for directives: the nested
    // build's output goes to stderr, which cargo shows when the build fails.
    cmd.stdout(Stdio::from(std::io::stderr()));
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !status.success() {
        return Err(format!(
            "building kpack's WebAssembly guests for {TARGET} failed ({status}); \
             see the output above. If it says the target may not be installed: \
             run `rustup target add {TARGET}`"
        ));
    }
    Ok(())
}

/// The files a Makefile-style dep-info file (`x.wasm: a.rs b.rs`) lists.
fn dep_info(path: &Path) -> Result<Vec<PathBuf>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut files = Vec::new();
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        // Spaces inside a path are escaped as `\ `.
        let mut file = String::new();
        let mut parts = deps.split(' ').peekable();
        while let Some(part) = parts.next() {
            if let Some(stem) = part.strip_suffix('\\')
                && parts.peek().is_some()
            {
                file.push_str(stem);
                file.push(' ');
                continue;
            }
            file.push_str(part);
            if !file.is_empty() {
                files.push(PathBuf::from(std::mem::take(&mut file)));
            }
        }
    }
    Ok(files)
}

/// `$OUT_DIR/guests.rs`: a constant per guest, the lists, and the
/// `foreach_*!` macros.
fn generate(
    guests: &[Guest],
    dir: &Path,
    test_guests: bool,
    embed: bool,
) -> Result<String, String> {
    let utf8 = |p: &Path| {
        p.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not UTF-8", p.display()))
    };
    let mut code = String::new();
    let w = &mut code;
    // `write!` to a String cannot fail.
    let _ = writeln!(
        w,
        "/// Directory holding every built component \
         (`kpack_handler_*.wasm`, `kpack_guest_*.wasm`): what \
         `KPACK_PLUGIN_DIR` points at.\npub const DIR: &str = {:?};\n",
        utf8(dir)?
    );
    for g in guests {
        let ident = g.name.replace('-', "_").to_ascii_uppercase();
        let _ = writeln!(
            w,
            "/// The `{}` component.\npub const {}{ident}: &str = {:?};\n",
            g.package,
            g.kind.const_prefix(),
            utf8(&g.wasm)?
        );
    }
    let mut families = vec![(
        Kind::Handler,
        "HANDLERS",
        "Every standard database handler (`plugins/*`), sorted by name.",
        "foreach_handler",
        "standard database handler (`plugins/*`)",
    )];
    if test_guests {
        families.push((
            Kind::TestGuest,
            "TEST_GUESTS",
            "Every test guest (`tests/guests/*`), sorted by name.",
            "foreach_test_guest",
            "test guest (`tests/guests/*`)",
        ));
    }
    for (kind, list, list_doc, mac, what) in families {
        let members: Vec<&Guest> = guests.iter().filter(|g| g.kind == kind).collect();
        let _ = writeln!(w, "/// {list_doc}\npub const {list}: &[Guest] = &[");
        for g in &members {
            let ident = g.name.replace('-', "_").to_ascii_uppercase();
            let _ = writeln!(
                w,
                "    Guest {{ name: {:?}, path: {}{ident} }},",
                g.name,
                kind.const_prefix()
            );
        }
        let _ = writeln!(w, "];\n");
        let _ = writeln!(
            w,
            "/// Calls `$mac!(name)` once per {what}, `name` being its short \
             name with `-` turned into `_`: invoked with a macro that names \
             a test, a guest without one fails to compile.\n\
             #[macro_export]\nmacro_rules! {mac} {{\n    ($mac:ident) => {{"
        );
        for g in &members {
            let _ = writeln!(w, "        $mac!({});", g.name.replace('-', "_"));
        }
        let _ = writeln!(w, "    }};\n}}\n");
    }
    if embed {
        // `include_bytes!` takes a literal, not a constant: repeat the path.
        // It also makes the component an input of this crate, so a rebuilt
        // handler recompiles whatever embeds it.
        let _ = writeln!(
            w,
            "/// Every standard database handler's component, `(name, bytes)`, \
             sorted by name: what the `kpack` binary carries inside itself.\n\
             pub const EMBEDDED: &[(&str, &[u8])] = &["
        );
        for g in guests.iter().filter(|g| g.kind == Kind::Handler) {
            let _ = writeln!(
                w,
                "    ({:?}, include_bytes!({:?})),",
                g.name,
                utf8(&g.wasm)?
            );
        }
        let _ = writeln!(w, "];\n");
    }
    Ok(code)
}
