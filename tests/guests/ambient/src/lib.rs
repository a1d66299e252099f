//! Sandbox test guest: `classify` reaches for one ambient capability, chosen
//! by the file's name (`clock`, `env`, `random`, `net`), through Rust's
//! standard library as any handler would. The sandbox provides none of
//! them, so each call must stop the handler; a result naming the capability
//! means it got through.

use kpack_sdk::{Classification, File, Handler, export_handler};

/// The guest.
pub struct Ambient;

impl Handler for Ambient {
    const NAME: &'static str = "ambient";
    const VERSION: &'static str = "0.1.0";

    fn classify(file: &File<'_>) -> Classification {
        let name = file.name();
        let got = if name.contains("clock") {
            // wasi:clocks/wall-clock
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .is_ok()
        } else if name.contains("env") {
            // wasi:cli/environment
            std::env::vars().count() > 0 || std::env::var_os("PATH").is_some()
        } else if name.contains("random") {
            // wasi:random (RandomState seeds from the host's randomness).
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one(1u8) != 0
        } else if name.contains("net") {
            // wasi:sockets
            std::net::TcpStream::connect("127.0.0.1:9").is_ok()
        } else {
            false
        };
        if got {
            Classification::Arch(format!("escaped-{name}"))
        } else {
            Classification::Generic
        }
    }
}

export_handler!(Ambient);
