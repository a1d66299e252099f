//! kpack's integration tests: one binary, one module per area, running the
//! `kpack` binary cargo built for this test run (`CARGO_BIN_EXE_kpack`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod amd_flags;
mod archive;
mod archive_delta;
mod archive_group;
mod artifact_archives;
mod audit;
mod auditwheel;
mod compression_modes;
mod deploy;
mod deploy_windows;
mod derived_outputs;
mod detect;
mod embedded;
mod fetch;
mod first_use;
mod front_door;
mod generic_strict;
mod handler_authors;
mod hardening_cli;
mod host_only_inputs;
mod hostile_artifacts;
mod independent_reader;
mod inspect;
mod installers;
mod instrumented;
mod manners;
mod native_packages;
mod offload;
mod offloading;
mod outputs;
mod pe;
mod pe_split;
mod plugins;
mod prune;
mod prune_objects;
mod refusals;
mod rerun;
mod runtime_e2e;
mod safety;
mod spellings;
mod spirv;
mod split;
mod steppings;
mod stripped;
mod targets;
mod through_marker;
mod util;
mod variant_provider;
mod verify_gpu;
mod wheel;
mod wheel_amd;
mod wheel_amd_reference;
mod wheel_groups;
mod wheel_hardening;
mod wheel_prune;
