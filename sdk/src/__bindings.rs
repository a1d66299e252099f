//! wit-bindgen output for `wit/handler@1.1.0`; not public API.
//!
//! Kept in its own module so the generated code (which uses `unsafe` for
//! the canonical ABI) stays apart from the hand-written SDK.

wit_bindgen::generate!({
    path: "wit/handler@1.1.0",
    world: "handler-world",
    pub_export_macro: true,
    export_macro_name: "__export_handler_world",
    default_bindings_module: "::kpack_sdk::__bindings",
    runtime_path: "::kpack_sdk::__rt",
});
