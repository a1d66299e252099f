//! Test guest built against a future, incompatible `kpack:handler@2.0.0`:
//! the host must refuse it before running it, naming both versions.

wit_bindgen::generate!({ path: "wit", world: "handler-world" });

/// The guest.
struct Future;

impl exports::kpack::handler::handler::Guest for Future {
    fn classify(paths: Vec<String>) -> Vec<Option<String>> {
        kpack::handler::host::log("2.0 guest running");
        paths.into_iter().map(|_| None).collect()
    }
}

// Exported only for WebAssembly (a host build's linker rejects the names).
#[cfg(target_family = "wasm")]
export!(Future);
