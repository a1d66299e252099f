//! `kpack plugins new`'s templates: a handler crate on `kpack-sdk` that
//! builds into a component with one command, `cargo build --release
//! --target wasm32-wasip2` (rustc's wasip2 target links a component
//! itself, as for the standard handlers in `plugins/`). [`scaffold`]
//! checks the name and finds the SDK; the caller writes the files.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// A handler crate to create: where, its files, and its SDK dependency.
#[derive(Debug)]
pub struct Scaffold {
    /// The directory to create.
    pub dir: PathBuf,
    /// Its files, `(path relative to dir, contents)`.
    pub files: Vec<(&'static str, String)>,
    /// The `sdk/` its `Cargo.toml` depends on by path; `None`: a version
    /// placeholder the README explains.
    pub sdk: Option<PathBuf>,
    /// The crate's library name (`kpack_handler_<name>`), which names
    /// the built component.
    pub krate: String,
}

/// The crate for handler `name` in `path` (default
/// `./kpack-handler-NAME`, which must not exist), on the kpack `sdk/`
/// given, else the one of the kpack checkout it is created in, if any.
pub fn scaffold(name: &str, path: Option<&Path>, sdk: Option<&Path>) -> Result<Scaffold> {
    check_name(name)?;
    let dir = path.map_or_else(
        || PathBuf::from(format!("kpack-handler-{name}")),
        Path::to_path_buf,
    );
    if dir.exists() {
        return Err(Error::new(
            ErrorKind::Usage,
            format!(
                "{} already exists; choose another --path (nothing was written)",
                dir.display()
            ),
        ));
    }
    let sdk = match sdk {
        Some(s) => {
            let s = std::path::absolute(s).map_err(|e| Error::io(s.display(), e))?;
            if !is_sdk(&s) {
                return Err(Error::new(
                    ErrorKind::Usage,
                    format!(
                        "{}: not kpack's sdk/ (no kpack-sdk Cargo.toml)",
                        s.display()
                    ),
                ));
            }
            Some(s)
        }
        None => find_sdk(&std::path::absolute(&dir).map_err(|e| Error::io(dir.display(), e))?),
    };
    Ok(Scaffold {
        files: files(name, sdk.as_deref()),
        krate: crate_name(name),
        dir,
        sdk,
    })
}

/// `kpack_handler_<name>`, `-` as `_`.
fn crate_name(name: &str) -> String {
    format!("kpack_handler_{}", name.replace('-', "_"))
}

/// Handler names are registry names and part of the crate name.
fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
    if !ok {
        return Err(Error::new(
            ErrorKind::Usage,
            format!(
                "handler name {name:?}: use 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter"
            ),
        ));
    }
    Ok(())
}

/// Whether `dir` is kpack's `sdk/` (its `Cargo.toml` names `kpack-sdk`).
fn is_sdk(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "name = \"kpack-sdk\""))
}

/// `sdk/` of the kpack checkout `dir` would be created in, if any, relative
/// to `dir` (`../../sdk`), so the crate can be committed to that checkout.
fn find_sdk(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .enumerate()
        .skip(1)
        .find(|(_, a)| is_sdk(&a.join("sdk")))
        .map(|(up, _)| {
            let mut rel = PathBuf::new();
            for _ in 0..up {
                rel.push("..");
            }
            rel.join("sdk")
        })
}

/// The crate's files, `(relative path, contents)`.
fn files(name: &str, sdk: Option<&Path>) -> Vec<(&'static str, String)> {
    let ty: String = name
        .split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    let krate = crate_name(name);
    vec![
        ("Cargo.toml", cargo_toml(name, sdk)),
        ("src/lib.rs", lib_rs(name, &ty)),
        ("README.md", readme(name, &krate)),
        (".gitignore", "/target\n".to_string()),
    ]
}

/// The crate's `Cargo.toml`: a cdylib depending on `kpack-sdk` (a path
/// dependency on `sdk`, else a version placeholder to replace).
fn cargo_toml(name: &str, sdk: Option<&Path>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let sdk_dep = match sdk {
        // TOML basic strings: escape what could break out of the quotes.
        Some(p) => format!(
            "kpack-sdk = {{ path = \"{}\" }}",
            p.display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        ),
        None => format!(
            "# kpack-sdk is not on crates.io: replace this with\n\
             # `{{ path = \"/path/to/kpack/sdk\" }}` or `{{ git = \"<kpack repository>\" }}`.\n\
             kpack-sdk = \"{version}\""
        ),
    };
    format!(
        r#"[package]
name = "kpack-handler-{name}"
description = "kpack database handler for {name}."
version = "0.1.0"
edition = "2024"
publish = false

# A WebAssembly component: rustc's wasm32-wasip2 target links one from a cdylib.
[lib]
crate-type = ["cdylib"]

[dependencies]
{sdk_dep}

# Handlers run sandboxed and are loaded by every kpack run: small, no unwinding.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = "debuginfo"

# A workspace of its own, also when created inside another one.
[workspace]
"#
    )
}

/// The handler's `src/lib.rs` (type `ty`), with a unit test.
fn lib_rs(name: &str, ty: &str) -> String {
    format!(
        r#"//! kpack database handler for {name}: claims the files under
//! `share/{name}/` and files each under the GPU target its name carries
//! (`k_gfx942.co` → `gfx942`), or as generic when it names none.

use kpack_sdk::{{Classification, File, Handler, export_handler, find_target}};

/// The {name} handler.
pub struct {ty};

impl Handler for {ty} {{
    const NAME: &'static str = "{name}";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    // The host skips files whose path contains none of these, without a call.
    const PATH_HINTS: &'static [&'static str] = &["share/{name}/"];

    fn classify(file: &File<'_>) -> Classification {{
        if !file.path.starts_with("share/{name}/") {{
            return Classification::NotMine;
        }}
        match find_target(file.name()) {{
            Some(t) => Classification::Arch(t.to_string()),
            None => Classification::Generic,
        }}
    }}
}}

export_handler!({ty});

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn files_kernels_under_their_target() {{
        let c = |p: &str| {ty}::classify(&File::new(p, 0, b""));
        assert_eq!(c("share/{name}/k_gfx942.co"), Classification::Arch("gfx942".into()));
        assert_eq!(c("share/{name}/index.txt"), Classification::Generic);
        assert_eq!(c("lib/libother.so"), Classification::NotMine);
    }}
}}
"#
    )
}

/// The crate's `README.md`: build, use, and the `kpack-sdk` dependency.
fn readme(name: &str, krate: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        r#"# kpack-handler-{name}

A kpack database handler: a sandboxed WebAssembly
component that tells `kpack split`, `kpack wheel split` and `kpack plugins
classify` which files under an install prefix belong to {name}'s kernel
database, and for which GPU target. Edit `classify` in `src/lib.rs`.

## Build

```sh
rustup target add wasm32-wasip2                   # once
cargo build --release --target wasm32-wasip2
```

The component is `target/wasm32-wasip2/release/{krate}.wasm`.
`cargo test` runs the unit tests on the host.

## Use

```sh
kpack plugins classify --plugin target/wasm32-wasip2/release/{krate}.wasm /opt/rocm
kpack split ARTIFACT_DIR -o OUT --plugin target/wasm32-wasip2/release/{krate}.wasm
kpack plugins publish target/wasm32-wasip2/release/{krate}.wasm --registry ./registry
```

`--plugin FILE.wasm` loads it for one run; a published handler is found by
name (`--split-databases {name}@^0.1 --registry https://…/index/`), and
`kpack plugins add {name} --registry …` installs it for every run.

## The kpack-sdk dependency

`kpack-sdk` is not published on crates.io. `kpack plugins new` writes a
`path` dependency when it runs inside a kpack checkout (or with `--sdk
DIR`); otherwise `Cargo.toml` holds the version placeholder
`kpack-sdk = "{version}"`: replace it with `{{ path = "/path/to/kpack/sdk" }}`
or `{{ git = "<kpack repository URL>" }}`.
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_names_that_are_not_crate_or_registry_names() {
        for bad in ["", "Foo", "9lives", "a b", "x/y", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("my-lib_2").unwrap();
    }

    #[test]
    fn placeholder_dependency_without_an_sdk() {
        let files = files("my-lib", None);
        let toml = &files[0].1;
        assert!(toml.contains("name = \"kpack-handler-my-lib\""), "{toml}");
        assert!(
            toml.contains(&format!("kpack-sdk = \"{}\"", env!("CARGO_PKG_VERSION"))),
            "{toml}"
        );
        assert!(files[1].1.contains("pub struct MyLib;"));
    }
}
