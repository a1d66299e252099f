//! Sandbox test guest: `classify` panics; the host must report a trap naming the handler, with the panic message.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct Trap;

impl Handler for Trap {
    const NAME: &'static str = "trap";
    const VERSION: &'static str = "0.1.0";

    fn classify(file: &File<'_>) -> Classification {
        #[allow(clippy::panic, reason = "the point of this guest")]
        {
            panic!("deliberate panic while classifying {}", file.path)
        }
    }
}

export_handler!(Trap);
