//! Registry test guest: handler `demo`, version 1.3.0; claims `demo/` files, key = the version.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct Demo;

impl Handler for Demo {
    const NAME: &'static str = "demo";
    const VERSION: &'static str = "1.3.0";

    fn classify(file: &File<'_>) -> Classification {
        if file.path.starts_with("demo/") {
            Classification::Arch("v1.3.0".into())
        } else {
            Classification::NotMine
        }
    }
}

export_handler!(Demo);
