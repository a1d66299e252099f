//! kpack's integration tests: one binary, one module per area.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod archive;
mod inspect;
mod offload;
mod offloading;
mod plugins;
mod runtime_e2e;
mod split;
mod wheel;
