//! Detection without KFD (WSL, Windows, containers without
//! `/sys/class/kfd`): ask the HIP runtime, if one is installed, loaded at
//! run time as rattler (conda's AMD virtual packages) does:
//! `hipGetDeviceCount`, then per device `hipGetDeviceProperties` for
//! `gcnArchName`, `multiProcessorCount` and `name`.
//!
//! The properties struct changed layout across HIP releases; each layout
//! has its own exported symbol. Only three members are read, at their
//! offsets in each layout, from a zeroed buffer larger than any of them.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

/// A device as the HIP runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HipDevice {
    /// `gcnArchName` (`gfx90a:sramecc+:xnack-`).
    pub arch: String,
    /// `multiProcessorCount`, the compute units; `None` when not positive.
    pub compute_units: Option<u32>,
    /// The marketing name, if any.
    pub name: Option<String>,
}

/// Why the HIP runtime could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum HipError {
    /// No library of [`LIBRARIES`] loads.
    #[error("no HIP runtime could be loaded ({})", tried.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; "))]
    NotLoaded {
        /// Each name tried and why it did not load.
        tried: Vec<(&'static str, libloading::Error)>,
    },
    /// The loaded runtime lacks `hipGetDeviceCount`.
    #[error("{library}: no hipGetDeviceCount")]
    NoDeviceCount {
        /// The library loaded.
        library: &'static str,
        /// The loader's answer.
        #[source]
        source: libloading::Error,
    },
    /// The loaded runtime has no `hipGetDeviceProperties` of a known layout.
    #[error("{library}: no hipGetDeviceProperties of a known layout")]
    NoKnownLayout {
        /// The library loaded.
        library: &'static str,
    },
}

/// `(symbol, offset of gcnArchName, offset of multiProcessorCount)`, newest
/// layout first; `name` is the first member of every layout. Before HIP
/// 6.0 only the unversioned symbol exists, with the R0000 layout.
const LAYOUTS: [(&[u8], usize, usize); 3] = [
    (b"hipGetDevicePropertiesR0600\0", 1160, 388),
    (b"hipGetDevicePropertiesR0000\0", 396, 336),
    (b"hipGetDeviceProperties\0", 396, 336),
];

/// `name` and `gcnArchName` are `char[256]`.
const NAME_LEN: usize = 256;
/// More than any layout's size (R0600's is 1480 bytes).
const BUFFER: usize = 4096;

/// The names the runtime is loaded by, in order.
#[cfg(windows)]
const LIBRARIES: &[&str] = &[
    "amdhip64_7.dll",
    "amdhip64_6.dll",
    "amdhip64_5.dll",
    "amdhip64.dll",
];
/// The names the runtime is loaded by, in order.
#[cfg(not(windows))]
const LIBRARIES: &[&str] = &[
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libamdhip64.so",
    "/opt/rocm/lib/libamdhip64.so",
];

type GetCount = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetProps = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// What the HIP runtime says (the library loaded and its devices), or
/// why it could not be asked.
pub fn devices() -> Result<(String, Vec<HipDevice>), HipError> {
    let mut tried = Vec::new();
    for name in LIBRARIES {
        // SAFETY: loading the HIP runtime runs its initialisers; that is
        // what every HIP program does, and nothing else is loaded here.
        match unsafe { libloading::Library::new(*name) } {
            Ok(lib) => return query(&lib, name).map(|d| (name.to_string(), d)),
            Err(e) => tried.push((*name, e)),
        }
    }
    Err(HipError::NotLoaded { tried })
}

fn query(lib: &libloading::Library, library: &'static str) -> Result<Vec<HipDevice>, HipError> {
    // SAFETY: the symbol has this C signature in every HIP release.
    let count: libloading::Symbol<'_, GetCount> = unsafe { lib.get(b"hipGetDeviceCount\0") }
        .map_err(|source| HipError::NoDeviceCount { library, source })?;
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out pointer.
    let rc = unsafe { count(&mut n) };
    if rc != 0 || n <= 0 {
        return Ok(Vec::new());
    }
    let (props, arch_at, cus_at) = LAYOUTS
        .iter()
        .find_map(|(sym, a, c)| {
            // SAFETY: every layout's symbol has this C signature.
            let s: libloading::Symbol<'_, GetProps> = unsafe { lib.get(*sym) }.ok()?;
            Some((s, *a, *c))
        })
        .ok_or(HipError::NoKnownLayout { library })?;
    let mut out = Vec::new();
    for dev in 0..n {
        // u64 storage: aligned for every member.
        let mut buf = [0u64; BUFFER / 8];
        // SAFETY: the buffer is larger than any layout of the struct.
        if unsafe { props(buf.as_mut_ptr().cast::<c_void>(), dev) } != 0 {
            continue;
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let text = |at: usize| {
            let b = &bytes[at..at + NAME_LEN];
            let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
            std::str::from_utf8(b)
                .ok()
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let Some(arch) = text(arch_at) else { continue };
        let mut cus = [0u8; 4];
        cus.copy_from_slice(&bytes[cus_at..cus_at + 4]);
        out.push(HipDevice {
            arch,
            compute_units: u32::try_from(c_int::from_ne_bytes(cus))
                .ok()
                .filter(|c| *c > 0),
            name: text(0),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_the_error_names_every_library_tried_and_keeps_each_cause() {
        let Err(e) = devices() else {
            return; // a HIP runtime is installed here: nothing to refuse
        };
        let HipError::NotLoaded { tried } = &e else {
            panic!("{e}");
        };
        assert_eq!(tried.len(), LIBRARIES.len());
        let text = e.to_string();
        for name in LIBRARIES {
            assert!(text.contains(name), "{text}");
        }
    }
}
