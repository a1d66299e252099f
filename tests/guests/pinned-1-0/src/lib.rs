//! Compatibility test guest built directly against the frozen
//! `wit/handler@1.0.0` (no SDK, which targets the newest minor): it must
//! keep loading and classifying now that 1.1.0 exists.

wit_bindgen::generate!({ path: "../../../wit/handler@1.0.0", world: "handler-world" });

use exports::kpack::handler::handler::{
    Classification, FileEntry, Guest, HandlerError, HandlerInfo,
};

/// The guest.
struct Pinned;

impl Guest for Pinned {
    fn info() -> HandlerInfo {
        HandlerInfo {
            name: "pinned".into(),
            version: "1.0.0".into(),
            prefix_bytes: 8,
        }
    }

    /// `pinned/<key>/...` → that key; `pinned/<file>` → generic; a file under
    /// `pinned/` starting with the ELF magic → `elf` (proves prefixes arrive).
    fn classify(files: Vec<FileEntry>) -> Result<Vec<Classification>, HandlerError> {
        kpack::handler::host::log(
            kpack::handler::host::Level::Debug,
            &format!("{} files", files.len()),
        );
        Ok(files
            .iter()
            .map(|f| match f.path.strip_prefix("pinned/") {
                None => Classification::NotMine,
                Some(_) if f.prefix.starts_with(b"\x7fELF") => {
                    Classification::ArchSpecific("elf".into())
                }
                Some(rest) => match rest.split_once('/') {
                    Some((key, _)) => Classification::ArchSpecific(key.into()),
                    None => Classification::Generic,
                },
            })
            .collect())
    }
}

// Exported only for WebAssembly (a host build's linker rejects the names).
#[cfg(target_family = "wasm")]
export!(Pinned);
