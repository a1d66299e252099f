//! Tidy: what `ARCHITECTURE.md` claims about the tree, checked against
//! the tree (the way rustc's `tidy` checks its dependency lists).
//!
//! - the crates table: each row's `uses` column is its crates' normal
//!   workspace dependencies (`cargo metadata`), and a crate only uses
//!   crates in rows above it (`uses.rs`);
//! - the fuzz list names every file of `fuzz/fuzz_targets/` (`fuzz.rs`);
//! - the `unsafe` list names every file that allows `unsafe_code`
//!   (`unsafe_list.rs`);
//! - magic numbers appear in non-test code only in their homes
//!   (`magic.rs`), and target strings are cut only by `kpack_amdgpu`
//!   (`cuts.rs`), and archive file names are made only by `kpack_format`
//!   (`names.rs`);
//! - outputs are written only through `kpack_fsafe`, libraries read no
//!   environment, print nothing and make no memory budget, and the CLI
//!   builds no JSON by hand (`doors.rs`);
//! - every published crate that is not public API says so in its
//!   description (`published.rs`).
//!
//! Each check is a function over text, so its unit tests feed it a
//! doctored `ARCHITECTURE.md` or file list and watch it fail. Module
//! cycles are checked by `scripts/modcycles.py`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    reason = "test code"
)]

mod cuts;
mod doors;
mod fuzz;
mod homes;
mod magic;
mod names;
mod published;
mod source;
mod unsafe_list;
mod uses;

fn architecture() -> String {
    std::fs::read_to_string(source::repo_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_crates_table_matches_the_manifests() {
    let rows = uses::table(&architecture()).unwrap_or_else(|e| panic!("{e}"));
    let packages = uses::workspace(&source::repo_root());
    assert!(
        packages.len() > 20,
        "cargo metadata lists {} packages",
        packages.len()
    );
    assert_none(uses::check(&rows, &packages));
}

#[test]
fn the_fuzz_list_is_every_fuzz_target() {
    let claimed = fuzz::claimed(&architecture()).unwrap_or_else(|e| panic!("{e}"));
    let files = source::files(&source::repo_root().join("fuzz"), &[".rs"]);
    let files: Vec<source::SourceFile> = files
        .into_iter()
        .map(|f| source::SourceFile::new(&format!("fuzz/{}", f.path), ""))
        .collect();
    let targets = fuzz::targets(&files);
    assert!(targets.len() > 5, "fuzz/fuzz_targets holds {targets:?}");
    assert_none(fuzz::check(&claimed, &targets));
}

#[test]
fn the_unsafe_list_is_every_allow_of_unsafe_code() {
    let claimed = unsafe_list::claimed(&architecture()).unwrap_or_else(|e| panic!("{e}"));
    let files = source::files(&source::repo_root(), &[".rs", "Cargo.toml"]);
    let sites = unsafe_list::sites(&files);
    assert!(sites.contains("host/capi/src/lib.rs"), "{sites:?}");
    assert_none(unsafe_list::check(&claimed, &sites));
}

#[test]
fn magic_numbers_stay_in_their_homes() {
    let files = source::production(&source::repo_root());
    assert_none(homes::check(magic::MAGICS, &files));
}

#[test]
fn target_strings_are_cut_only_by_kpack_amdgpu() {
    let files = source::production(&source::repo_root());
    assert_none(homes::check(cuts::CUTS, &files));
}

#[test]
fn archive_file_names_are_made_only_by_kpack_format() {
    let files = source::production(&source::repo_root());
    assert_none(homes::check(names::NAMES, &files));
}

#[test]
fn internal_crates_say_so_in_their_description() {
    let packages = published::packages(&source::repo_root());
    let public = published::public(&architecture()).unwrap_or_else(|e| panic!("{e}"));
    assert!(public.contains("kpack-format"), "{public:?}");
    assert_none(published::check(&public, &packages));
}

#[test]
fn each_door_is_the_only_one() {
    let files = source::production(&source::repo_root());
    assert!(files.len() > 100, "{} production files", files.len());
    assert_none(doors::check(&files));
}
