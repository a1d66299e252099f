//! Sandbox test guest: `classify` tries to create a file named by the path it is given; the sandbox must stop it before anything is written.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct OpenFile;

impl Handler for OpenFile {
    const NAME: &'static str = "open-file";
    const VERSION: &'static str = "0.1.0";

    fn classify(file: &File<'_>) -> Classification {
        match std::fs::write(format!("/tmp/{}", file.name()), b"escaped the sandbox") {
            Ok(()) => Classification::Arch("escaped".into()),
            Err(_) => Classification::Generic,
        }
    }
}

export_handler!(OpenFile);
