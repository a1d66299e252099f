//! kpack's integration tests: one binary, one module per area, running the
//! `kpack` binary cargo built for this test run (`CARGO_BIN_EXE_kpack`).
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
mod pe;
mod plugins;
mod rerun;
mod runtime_e2e;
mod split;
mod targets;
mod util;
mod wheel;
