//! Bindings for `wit/handler@1.1.0` (frozen, like the directory), the
//! newest version: it implements the `host` interface for every version and
//! converts between the WIT types and kpack's.

use kpack_split::{Classification, FileInfo};
use wasmtime::Store;
use wasmtime::component::{Component, HasSelf, Linker};

use super::{Bindings, Guest, GuestError, RawInfo};
use crate::sandbox::HostState;

wasmtime::component::bindgen!({
    path: "wit/handler@1.1.0",
    world: "handler-world",
});

pub(super) use exports::kpack::handler::handler as wit;
use kpack::handler::host;

impl host::Host for HostState {
    fn log(&mut self, level: host::Level, message: String) {
        let level = match level {
            host::Level::Error => crate::LogLevel::Error,
            host::Level::Warn => crate::LogLevel::Warn,
            host::Level::Info => crate::LogLevel::Info,
            host::Level::Debug => crate::LogLevel::Debug,
        };
        self.log(level, message);
    }
}

/// Serve the `host` interface to a guest that imports it as
/// `kpack:handler/host@{version}`.
///
/// Registered under the guest's exact name: the linker would also find a
/// semver-compatible `@1.1.0` for an `@1.0.0` import, but
/// `define_unknown_imports_as_traps` opens the exact name and would fill it
/// with trapping stubs first.
pub(super) fn add_host(linker: &mut Linker<HostState>, version: &str) -> wasmtime::Result<()> {
    let mut inst = linker.instance(&format!("kpack:handler/host@{version}"))?;
    host::add_to_linker_instance::<HostState, HasSelf<HostState>>(&mut inst, |s| s)
}

/// The entries for `files`, each with the prefix the handler asked for.
pub(super) fn file_entries(files: &[&FileInfo], prefix_bytes: usize) -> Vec<wit::FileEntry> {
    files
        .iter()
        .map(|f| wit::FileEntry {
            path: f.path.clone(),
            size: f.size,
            prefix: f
                .prefix
                .get(..prefix_bytes.min(f.prefix.len()))
                .unwrap_or_default()
                .to_vec(),
        })
        .collect()
}

/// kpack's verdicts (`None` = not mine) from the guest's answer.
pub(super) fn verdicts(
    answer: Result<Vec<wit::Classification>, wit::HandlerError>,
) -> Result<Vec<Option<Classification>>, GuestError> {
    match answer {
        Ok(out) => Ok(out
            .into_iter()
            .map(|c| match c {
                wit::Classification::NotMine => None,
                wit::Classification::Generic => Some(Classification::Generic),
                wit::Classification::ArchSpecific(k) => Some(Classification::Arch(k)),
            })
            .collect()),
        Err(wit::HandlerError::InvalidInput(m)) => Err(GuestError::InvalidInput(m)),
        Err(wit::HandlerError::Internal(m)) => Err(GuestError::Internal(m)),
    }
}

pub(crate) struct Linked(HandlerWorldPre<HostState>);

impl Linked {
    pub(crate) fn new(
        linker: &mut Linker<HostState>,
        component: &Component,
    ) -> wasmtime::Result<Self> {
        add_host(linker, "1.1.0")?;
        super::sandbox_imports(linker, component)?;
        Ok(Linked(HandlerWorldPre::new(
            linker.instantiate_pre(component)?,
        )?))
    }
}

impl Bindings for Linked {
    fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Box<dyn Guest>> {
        Ok(Box::new(Instance(self.0.instantiate(store)?)))
    }
}

struct Instance(HandlerWorld);

impl Guest for Instance {
    fn info(&self, store: &mut Store<HostState>) -> wasmtime::Result<RawInfo> {
        let i = self.0.kpack_handler_handler().call_info(store)?;
        Ok(RawInfo {
            name: i.name,
            version: i.version,
            prefix_bytes: i.prefix_bytes,
        })
    }

    fn path_hints(&self, store: &mut Store<HostState>) -> wasmtime::Result<Vec<String>> {
        self.0.kpack_handler_handler().call_path_hints(store)
    }

    fn classify(
        &self,
        store: &mut Store<HostState>,
        files: &[&FileInfo],
        prefix_bytes: usize,
    ) -> wasmtime::Result<Result<Vec<Option<Classification>>, GuestError>> {
        let entries = file_entries(files, prefix_bytes);
        let answer = self
            .0
            .kpack_handler_handler()
            .call_classify(store, &entries)?;
        Ok(verdicts(answer))
    }
}
