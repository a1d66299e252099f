//! Sandbox test guest: `classify` spins forever; the host's fuel budget must stop it.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct LoopForever;

impl Handler for LoopForever {
    const NAME: &'static str = "loop-forever";
    const VERSION: &'static str = "0.1.0";

    fn classify(file: &File<'_>) -> Classification {
        let mut n = file.size;
        loop {
            n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

export_handler!(LoopForever);
