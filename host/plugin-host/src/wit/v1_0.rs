//! Bindings for `wit/handler@1.0.0` (frozen, like the directory), adapted
//! to the newest version: the `host` interface is the newest one's (it has
//! not changed), and the export types convert to and from the newest ones.

use kpack_split::{Classification, FileInfo};
use wasmtime::Store;
use wasmtime::component::{Component, Linker};

use super::v1_1::{self, wit as latest};
use super::{Bindings, Guest, GuestError, RawInfo};
use crate::sandbox::HostState;

wasmtime::component::bindgen!({
    path: "wit/handler@1.0.0",
    world: "handler-world",
    with: {
        "kpack:handler/host@1.0.0": super::v1_1::kpack::handler::host,
    },
});

use exports::kpack::handler::handler as wit;

impl From<latest::FileEntry> for wit::FileEntry {
    fn from(e: latest::FileEntry) -> Self {
        wit::FileEntry {
            path: e.path,
            size: e.size,
            prefix: e.prefix,
        }
    }
}

impl From<wit::Classification> for latest::Classification {
    fn from(c: wit::Classification) -> Self {
        match c {
            wit::Classification::NotMine => latest::Classification::NotMine,
            wit::Classification::Generic => latest::Classification::Generic,
            wit::Classification::ArchSpecific(k) => latest::Classification::ArchSpecific(k),
        }
    }
}

impl From<wit::HandlerError> for latest::HandlerError {
    fn from(e: wit::HandlerError) -> Self {
        match e {
            wit::HandlerError::InvalidInput(m) => latest::HandlerError::InvalidInput(m),
            wit::HandlerError::Internal(m) => latest::HandlerError::Internal(m),
        }
    }
}

pub(crate) struct Linked(HandlerWorldPre<HostState>);

impl Linked {
    pub(crate) fn new(
        linker: &mut Linker<HostState>,
        component: &Component,
    ) -> wasmtime::Result<Self> {
        v1_1::add_host(linker, "1.0.0")?;
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

    /// 1.0.0 has no `path-hints`: every file is sent.
    fn path_hints(&self, _store: &mut Store<HostState>) -> wasmtime::Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn classify(
        &self,
        store: &mut Store<HostState>,
        files: &[&FileInfo],
        prefix_bytes: usize,
    ) -> wasmtime::Result<Result<Vec<Option<Classification>>, GuestError>> {
        let entries: Vec<wit::FileEntry> = v1_1::file_entries(files, prefix_bytes)
            .into_iter()
            .map(Into::into)
            .collect();
        let answer = self
            .0
            .kpack_handler_handler()
            .call_classify(store, &entries)?;
        Ok(v1_1::verdicts(
            answer
                .map(|v| v.into_iter().map(Into::into).collect())
                .map_err(Into::into),
        ))
    }
}
