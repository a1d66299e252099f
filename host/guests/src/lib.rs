//! kpack's WebAssembly guests, built from source by this crate's `build.rs`.
//!
//! The build script runs one nested `cargo build --target wasm32-wasip2
//! --profile plugin` over every standard database handler (`plugins/*`,
//! packages `kpack-handler-*`) and, with the `test-guests` feature, every
//! test guest (`tests/guests/*`, packages `kpack-guest-*`). The nested build
//! has its own target directory (`<target>/wasm-guests`), so debug, release
//! and clippy builds of the host share one wasm build and never wait on the
//! outer build's lock.
//!
//! What it built is named at compile time:
//! - one constant per guest holding the component's absolute path
//!   (`HANDLER_ROCBLAS`, `GUEST_LOOP_FOREVER`, ...), plus [`HANDLERS`] (and
//!   `TEST_GUESTS`) listing them with their short names;
//! - [`DIR`], the directory holding every component (what
//!   `KPACK_PLUGIN_DIR` points at);
//! - `foreach_handler!(mac)` and `foreach_test_guest!(mac)`, which call
//!   `mac!(name)` once per guest, so a test suite can make a guest without
//!   a test a compile error;
//! - with the `embed` feature, `EMBEDDED`: `(name, bytes)` of every standard
//!   handler, included in the binary with `include_bytes!` (what the `kpack`
//!   CLI loads as origin `embedded`).
//!
//! ```
//! let rocblas = kpack_guests::HANDLERS
//!     .iter()
//!     .find(|g| g.name == "rocblas")
//!     .map(|g| g.path);
//! assert_eq!(rocblas, Some(kpack_guests::HANDLER_ROCBLAS));
//! ```
//!
//! The build needs the `wasm32-wasip2` target (`rustup target add
//! wasm32-wasip2`).
#![forbid(unsafe_code)]

/// One WebAssembly component built by this crate's build script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guest {
    /// The package name without its `kpack-handler-` / `kpack-guest-`
    /// prefix: `rocblas`, `loop-forever`. For a handler this is the name
    /// the `kpack` CLI knows it by.
    pub name: &'static str,
    /// Absolute path of the built component, e.g.
    /// `…/wasm32-wasip2/plugin/kpack_handler_rocblas.wasm`.
    pub path: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
