//! What kpack promises about your files, in one place every writer uses:
//!
//! - every command's outputs are planned, staged, checked and committed
//!   all or nothing through [`Outputs`] (one rule for existing outputs,
//!   [`Existing`]; dependents first, [`Order`]);
//! - outputs are written to a temp file beside them and renamed into place
//!   ([`Staged`], [`write_atomically`], [`copy_atomically`]);
//! - temp files and staging directories are named
//!   `.kpack-tmp-<pid>-<what>-<random>` ([`temp_file_in`], [`temp_dir_in`]),
//!   so a later run can remove the stale ones of dead processes
//!   ([`remove_stale_temps`]);
//! - inputs are only read: an output that is the same file as an input is
//!   refused ([`not_same_file`]; at plan by [`Outputs`] given the
//!   command's inputs, [`OutputsBuilder::inputs`]), and so are output directories inside an
//!   input tree and inputs inside an output ([`not_nested`]);
//! - inputs must be regular files ([`regular_file`]: a FIFO would block, a
//!   device never ends);
//! - existing outputs are refused unless forced ([`not_existing`]);
//! - output directories a failed run created are removed again
//!   ([`CreatedDir`]);
//! - writers into one directory take turns ([`lock_dir`], held by
//!   [`Outputs`] with [`OutputsBuilder::lock`]);
//! - paths read from files, archives, indexes or flags stay inside their
//!   root ([`is_plain_relative`], [`is_plain_name`], [`inside_root`],
//!   [`plain_name`]), and names taken from an input are checked once
//!   ([`input_name`]) with an error naming the field and the file.

mod atomic;
mod check;
mod compare;
mod dir;
mod error;
mod interrupt;
mod output;
mod path;
mod temp;
mod tree;

pub use atomic::{Staged, copy_atomically, write_atomically};
pub use check::{
    CreatedDir, file_kind, input_name, inside_root, lock_dir, not_existing, not_nested,
    not_same_file, plain_name, regular_file,
};
pub use compare::first_difference;
pub use dir::Entry;
pub use error::{Error, IoError, Result};
pub use interrupt::{Registered, remove_on_interrupt, remove_registered};
pub use output::{
    Committed, Existing, LeftBehind, Order, Outputs, OutputsBuilder, commit_all,
    remove_stale_temps, take_left_behind,
};
pub use path::{is_plain_name, is_plain_relative, normalize, relative_path, resolved};
pub use temp::{
    TEMP_PREFIX, is_stale_temp, private_temp_file_in, stale_temps, temp_dir_in, temp_file_in,
    temp_owner, temp_prefix,
};
pub use tree::Tree;
