//! Bindings for `wit/handler@1.0.0` (frozen, like the directory).

use wasmtime::Store;
use wasmtime::component::{Component, HasSelf, Linker};

use super::{Bindings, Guest, GuestError, RawInfo};
use crate::sandbox::HostState;
use crate::{Classification, FileInfo};

wasmtime::component::bindgen!({
    path: "../../wit/handler@1.0.0",
    world: "handler-world",
});

use exports::kpack::handler::handler as wit;
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

pub(crate) struct Linked(HandlerWorldPre<HostState>);

impl Linked {
    pub(crate) fn new(
        linker: &mut Linker<HostState>,
        component: &Component,
    ) -> wasmtime::Result<Self> {
        HandlerWorld::add_to_linker::<HostState, HasSelf<HostState>>(linker, |s| s)?;
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
        let entries: Vec<wit::FileEntry> = files
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
            .collect();
        Ok(
            match self
                .0
                .kpack_handler_handler()
                .call_classify(store, &entries)?
            {
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
            },
        )
    }
}
