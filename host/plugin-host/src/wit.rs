//! The WIT versions this host runs, one small module per released
//! `wit/handler@X.Y.Z/`, behind one internal trait ([`Bindings`]).
//!
//! A guest's version is read from the name of its exported interface
//! (`kpack:handler/handler@1.0.0`) before instantiation, so an incompatible
//! guest gets a readable message instead of a type-mismatch error.
//!
//! The newest version's module (`v1_1`) holds the one implementation of the
//! `host` interface and the conversions to and from kpack's types; older
//! modules reuse its `host` bindings (bindgen's `with:`) and adapt their
//! own export types to the newest ones, as Zed's extension host does.

mod v1_0;
mod v1_1;

use kpack_split::{Classification, FileInfo};
use semver::Version;
use wasmtime::Store;
use wasmtime::component::{Component, Linker};

use crate::sandbox::HostState;
use crate::{Error, ErrorKind, Result};

/// The newest `kpack:handler` version this host implements.
pub const SUPPORTED_WIT: &str = "1.1.0";

/// Every released version this host runs, oldest first.
pub const RELEASED_WIT: &[&str] = &["1.0.0", "1.1.0"];

const EXPORT_PREFIX: &str = "kpack:handler/handler@";

/// What a handler says about itself.
pub(crate) struct RawInfo {
    pub name: String,
    pub version: String,
    pub prefix_bytes: u32,
}

/// `handler-error` from any WIT version.
pub(crate) enum GuestError {
    InvalidInput(String),
    Internal(String),
}

/// One instantiated guest, whatever its WIT version.
pub(crate) trait Guest {
    fn info(&self, store: &mut Store<HostState>) -> wasmtime::Result<RawInfo>;
    fn path_hints(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<String>>;
    /// One verdict per file (`None` = not mine), in order.
    fn classify(
        &self,
        store: &mut Store<HostState>,
        files: &[&FileInfo],
        prefix_bytes: usize,
    ) -> wasmtime::Result<Result<Vec<Option<Classification>>, GuestError>>;
}

/// A linked, pre-instantiated component of one WIT version.
pub(crate) trait Bindings: Send + Sync {
    fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Box<dyn Guest>>;
}

/// The WIT version a component was built against, from its export name.
pub(crate) fn guest_version(
    component: &Component,
    engine: &wasmtime::Engine,
    origin: &str,
) -> Result<Version> {
    let ty = component.component_type();
    let mut found = None;
    for (name, _) in ty.exports(engine) {
        if let Some(v) = name.strip_prefix(EXPORT_PREFIX) {
            found = Some(Version::parse(v).map_err(|e| {
                Error::with_source(
                    ErrorKind::Invalid,
                    format!("{origin}: export {name:?} has a malformed version"),
                    e,
                )
            })?);
        }
    }
    found.ok_or_else(|| {
        let names: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        Error::new(
            ErrorKind::Invalid,
            format!("{origin}: not a kpack handler: it exports no `{EXPORT_PREFIX}X.Y.Z` (exports: {names:?})"),
        )
    })
}

/// Pick the bindings for `version`: same major, minor not newer than ours.
pub(crate) fn link(
    engine: &wasmtime::Engine,
    component: &Component,
    version: &Version,
    origin: &str,
) -> Result<Box<dyn Bindings>> {
    let supported = Version::new(1, 1, 0);
    let too_new = || {
        Error::new(
            ErrorKind::IncompatibleVersion,
            format!(
                "{origin}: built against kpack:handler@{version}; this kpack supports up to {supported} \
                 (upgrade kpack, or use a handler built for kpack:handler@1.x)"
            ),
        )
    };
    if version.major != 1 || !version.pre.is_empty() {
        return Err(too_new());
    }
    let mut linker: Linker<HostState> = Linker::new(engine);
    let link_err = |e: wasmtime::Error| {
        Error::new(ErrorKind::Invalid, format!("{origin}: cannot link: {e:#}"))
    };
    let bindings: Box<dyn Bindings> = match version.minor {
        0 => Box::new(v1_0::Linked::new(&mut linker, component).map_err(link_err)?),
        1 => Box::new(v1_1::Linked::new(&mut linker, component).map_err(link_err)?),
        _ => return Err(too_new()),
    };
    Ok(bindings)
}

/// Make every import the guest has that kpack does not provide (all of
/// WASI: files, sockets, environment, clocks, stdio) a stub that traps.
pub(crate) fn sandbox_imports(
    linker: &mut Linker<HostState>,
    component: &Component,
) -> wasmtime::Result<()> {
    linker.define_unknown_imports_as_traps(component)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// Released WIT directories are frozen: their checksums are committed in
    /// `wit/SHA256SUMS`; a change must go into a new minor directory.
    #[test]
    fn released_wit_directories_are_frozen() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let sums = std::fs::read_to_string(wit.join("SHA256SUMS")).unwrap();
        let mut checked = 0;
        for line in sums.lines().filter(|l| !l.trim().is_empty()) {
            let (sum, file) = line.split_once("  ").unwrap();
            let bytes = std::fs::read(wit.join(file)).unwrap();
            assert_eq!(
                hex::encode(Sha256::digest(&bytes)),
                sum,
                "{file} changed; released WIT is frozen"
            );
            checked += 1;
        }
        // Every released directory is listed, and every file in it.
        for v in super::RELEASED_WIT {
            let dir = wit.join(format!("handler@{v}"));
            for entry in std::fs::read_dir(&dir).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let rel = format!("handler@{v}/{name}");
                assert!(
                    sums.lines().any(|l| l.ends_with(&format!("  {rel}"))),
                    "{rel} has no checksum"
                );
            }
        }
        assert!(checked >= super::RELEASED_WIT.len());
    }
}
