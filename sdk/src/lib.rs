//! `kpack-sdk`: write a kpack database handler as a sandboxed WebAssembly
//! component, without touching wit-bindgen.
//!
//! A handler looks at files below a ROCm install prefix and says, for each,
//! whether it belongs to its library's kernel database and for which GPU
//! target. kpack's plugin host runs it in wasmtime with no filesystem,
//! network, clock or environment. The SDK provides:
//!
//! * the [`Handler`] trait and the [`export_handler!`] macro (the glue to the
//!   `kpack:handler@1.1.0` WIT world);
//! * helpers every handler needs: [`find_target`] (gfx targets in file names,
//!   `gfx90a-xnack+` and `gfx90a:xnack+` spellings, `-strict`),
//!   [`split_processor`] (processor grammar, for names with glued suffixes),
//!   [`family_key`] (AMD's family bundle keys), [`sniff`] (AMDGPU ELF /
//!   offload bundle from the first bytes), and [`tensile::classify`]; the
//!   target-id helpers are `kpack_amdgpu`'s, re-exported;
//! * [`log`], the only output channel a handler has.
//!
//! # Example: a complete handler
//!
//! ```
//! use kpack_sdk::{Classification, File, Handler, export_handler, find_target};
//!
//! /// Kernels of the (imaginary) rocfoo library.
//! struct RocFoo;
//!
//! impl Handler for RocFoo {
//!     const NAME: &'static str = "rocfoo";
//!     const VERSION: &'static str = "1.0.0";
//!     const PATH_HINTS: &'static [&'static str] = &["rocfoo/"];
//!
//!     fn classify(file: &File<'_>) -> Classification {
//!         if file.below(&["rocfoo", "kernels"]).is_none() {
//!             return Classification::NotMine;
//!         }
//!         match find_target(file.name()) {
//!             Some(t) => Classification::Arch(t.to_string()),
//!             None => Classification::Generic,
//!         }
//!     }
//! }
//!
//! export_handler!(RocFoo);
//! # fn main() {
//! # assert_eq!(RocFoo::classify(&File::new("share/rocfoo/kernels/k_gfx942.co", 0, &[])),
//! #            Classification::Arch("gfx942".into()));
//! # }
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --profile plugin -p
//! <crate>`; the `.wasm` in `target/wasm32-wasip2/plugin/` is the component.

// The generated glue refers to this crate by name, also from inside it.
extern crate self as kpack_sdk;

#[doc(hidden)]
pub mod __bindings;
mod family;
mod sniff;
pub mod tensile;

pub use family::family_key;
pub use kpack_amdgpu::{
    TargetId as Target, find_target, parse_sanitized_target, parse_target,
    processor_for_mach as mach_name, split_processor,
};
pub use sniff::{Content, SNIFF_BYTES, sniff};

#[doc(hidden)]
pub use wit_bindgen::rt as __rt;

use __bindings::exports::kpack::handler::handler as wit;

/// The WIT interface version this SDK builds handlers against.
pub const WIT_VERSION: &str = "1.1.0";

/// A file offered to a handler.
#[derive(Clone, Copy, Debug)]
pub struct File<'a> {
    /// Path relative to the install prefix, `/`-separated, no leading `/`.
    pub path: &'a str,
    /// File size in bytes.
    pub size: u64,
    /// The first [`Handler::PREFIX_BYTES`] bytes (fewer for short files).
    pub prefix: &'a [u8],
}

impl<'a> File<'a> {
    /// A file entry (used by tests and by the SDK glue).
    pub fn new(path: &'a str, size: u64, prefix: &'a [u8]) -> Self {
        File { path, size, prefix }
    }

    /// The last path component.
    pub fn name(&self) -> &'a str {
        self.path.rsplit('/').next().unwrap_or(self.path)
    }

    /// The path components, in order.
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &'a str> + 'a {
        self.path.split('/')
    }

    /// The rest of the path after the first run of whole components equal to
    /// `dirs` (e.g. `&["rocblas", "library"]`), if there is at least one more
    /// component. Whole components, so `xrocblas/library_old` does not match.
    pub fn below(&self, dirs: &[&str]) -> Option<&'a str> {
        let parts: Vec<&str> = self.path.split('/').collect();
        let n = dirs.len();
        (0..parts.len().saturating_sub(n))
            .find(|&i| parts[i..i + n] == *dirs)
            .and_then(|i| {
                let skip: usize = parts[..i + n].iter().map(|p| p.len() + 1).sum();
                self.path.get(skip..).filter(|r| !r.is_empty())
            })
    }
}

impl<'a> File<'a> {
    /// As [`below`](Self::below), also matching one version directory
    /// between any two of `dirs`: `&["rocblas", "library"]` matches
    /// `rocblas/library/…` and `rocblas/4.3.0/library/…` (a distribution's
    /// `lib/<triplet>/rocblas/<version>/library/`). A version directory
    /// starts with a digit and holds only digits, letters, `.`, `-`, `+`
    /// and `_`.
    pub fn below_versioned(&self, dirs: &[&str]) -> Option<&'a str> {
        if let Some(rest) = self.below(dirs) {
            return Some(rest);
        }
        let parts: Vec<&str> = self.path.split('/').collect();
        (0..parts.len()).find_map(|i| {
            let end = match_versioned(&parts[i..], dirs)?;
            let skip: usize = parts[..i + end].iter().map(|p| p.len() + 1).sum();
            self.path.get(skip..).filter(|r| !r.is_empty())
        })
    }
}

/// How many of `parts` the run `dirs` (with at most one version directory
/// between two of them) takes from the start, if it matches there.
fn match_versioned(parts: &[&str], dirs: &[&str]) -> Option<usize> {
    let (first, more) = dirs.split_first()?;
    if parts.first() != Some(first) {
        return None;
    }
    let mut at = 1;
    for d in more {
        if parts.get(at) == Some(d) {
            at += 1;
        } else if parts.get(at).is_some_and(|p| is_version_dir(p)) && parts.get(at + 1) == Some(d) {
            at += 2;
        } else {
            return None;
        }
    }
    Some(at)
}

/// A directory named like a version: `4.3.0`, `6`, `0.8b`, `7.0.0-rc1`.
fn is_version_dir(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
}

/// A handler's verdict on one file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Classification {
    /// Not part of this handler's database; the next handler is asked.
    NotMine,
    /// Part of the database, needed on every GPU target.
    Generic,
    /// Part of the database, needed only for this bundle key (a target id
    /// such as `gfx90a:xnack+`, or a family key such as `gfx11`).
    Arch(String),
}

/// A database handler. Implement it on a unit struct and call
/// [`export_handler!`] once.
pub trait Handler {
    /// Registry name, e.g. `"rocblas"` (lowercase, `[a-z0-9_-]+`).
    const NAME: &'static str;
    /// Semver version of the handler; usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// How many leading bytes of each file to receive (0 = none); use
    /// [`SNIFF_BYTES`] for [`sniff`].
    const PREFIX_BYTES: u32 = 0;
    /// Substrings one of which every claimed path contains; the host skips
    /// other files without calling the handler. Empty = no hint.
    const PATH_HINTS: &'static [&'static str] = &[];

    /// Classify one file. Must be pure.
    fn classify(file: &File<'_>) -> Classification;
}

/// Severity of a [`log`] message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Something went wrong.
    Error,
    /// Something looks odd.
    Warn,
    /// Progress information.
    Info,
    /// Detail for debugging.
    Debug,
}

/// Send a log line to the host (handlers cannot print). Outside WebAssembly
/// (native unit tests) the line goes to stderr.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use __bindings::kpack::handler::host::Level as L;
        let level = match level {
            Level::Error => L::Error,
            Level::Warn => L::Warn,
            Level::Info => L::Info,
            Level::Debug => L::Debug,
        };
        __bindings::kpack::handler::host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(Level::Error, &format!("handler panicked: {info}"))
        }));
    });
}

/// Glue between a [`Handler`] and the generated WIT exports.
#[doc(hidden)]
pub struct __Adapter<T>(core::marker::PhantomData<T>);

impl<T: Handler> wit::Guest for __Adapter<T> {
    fn info() -> wit::HandlerInfo {
        install_panic_hook();
        wit::HandlerInfo {
            name: T::NAME.into(),
            version: T::VERSION.into(),
            prefix_bytes: T::PREFIX_BYTES,
        }
    }

    fn classify(files: Vec<wit::FileEntry>) -> Result<Vec<wit::Classification>, wit::HandlerError> {
        install_panic_hook();
        let mut out = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            if f.path.is_empty() || f.path.starts_with('/') {
                return Err(wit::HandlerError::InvalidInput(format!(
                    "entry {i}: path {:?} is not relative to the install prefix",
                    f.path
                )));
            }
            out.push(match T::classify(&File::new(&f.path, f.size, &f.prefix)) {
                Classification::NotMine => wit::Classification::NotMine,
                Classification::Generic => wit::Classification::Generic,
                Classification::Arch(k) => wit::Classification::ArchSpecific(k),
            });
        }
        Ok(out)
    }

    fn path_hints() -> Vec<String> {
        T::PATH_HINTS.iter().map(|s| s.to_string()).collect()
    }
}

/// Export `$handler` (a type implementing [`Handler`]) as the component's
/// `kpack:handler/handler` interface. Call it once, at the crate root.
///
/// The export exists only when building for WebAssembly: a host build of
/// the crate (`cargo build --workspace`, its unit tests) compiles the
/// handler without the component's exports, whose names (`kpack:handler/…`)
/// no host linker's symbol list accepts.
#[macro_export]
macro_rules! export_handler {
    ($handler:ty) => {
        #[doc(hidden)]
        #[cfg(target_family = "wasm")]
        type __KpackHandlerAdapter = $crate::__Adapter<$handler>;
        #[cfg(target_family = "wasm")]
        $crate::__bindings::__export_handler_world!(__KpackHandlerAdapter with_types_in $crate::__bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_matches_whole_components() {
        let f = File::new("lib/rocblas/library/gfx942/x.co", 0, &[]);
        assert_eq!(f.below(&["rocblas", "library"]), Some("gfx942/x.co"));
        assert_eq!(f.below(&["blas", "library"]), None);
        assert_eq!(
            File::new("lib/rocblas/library", 0, &[]).below(&["rocblas", "library"]),
            None
        );
        assert_eq!(f.name(), "x.co");
    }

    #[test]
    fn below_versioned_takes_one_version_directory_between_components() {
        let f = |p| File::new(p, 0, &[]);
        let dirs = ["rocblas", "library"];
        assert_eq!(
            f("lib/x86_64-linux-gnu/rocblas/4.3.0/library/TensileLibrary_gfx1100.dat")
                .below_versioned(&dirs),
            Some("TensileLibrary_gfx1100.dat")
        );
        assert_eq!(
            f("lib/rocblas/library/gfx942/x.co").below_versioned(&dirs),
            Some("gfx942/x.co")
        );
        for not in [
            "lib/rocblas/extra/library/x.dat",
            "lib/rocblas/4.3/5.0/library/x.dat",
            "lib/rocblas/4.3.0/library",
            "lib/rocblas/v4/library/x.dat",
            "lib/xrocblas/4.3.0/library/x.dat",
        ] {
            assert_eq!(f(not).below_versioned(&dirs), None, "{not}");
        }
    }
}
