//! What a handler runs inside: the engine configuration, the per-call
//! store with its memory cap and fuel budget, and the mapping of traps to
//! typed errors.

use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

use crate::{Error, ErrorKind};

/// Resource limits for every handler call.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Cap on a handler's linear memory, in bytes (default 64 MiB).
    pub memory_bytes: usize,
    /// Fuel (≈ wasm instructions) granted per call, before the per-file share.
    pub fuel_per_call: u64,
    /// Extra fuel per file in a batch (a typical handler needs about 4,000).
    pub fuel_per_file: u64,
    /// Most files sent in one call; batches are also cut so their payload
    /// stays within a quarter of `memory_bytes`.
    pub max_batch: usize,
    /// Most leading bytes per file a handler may ask for.
    pub max_prefix_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            fuel_per_call: 200_000_000,
            fuel_per_file: 400_000,
            max_batch: 4096,
            max_prefix_bytes: 4096,
        }
    }
}

/// Severity of a handler's log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Something went wrong.
    Error,
    /// Something looks odd.
    Warn,
    /// Progress.
    Info,
    /// Debugging detail.
    Debug,
}

/// A line a handler logged through the `host.log` import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// Handler name.
    pub handler: String,
    /// Severity.
    pub level: LogLevel,
    /// The text.
    pub message: String,
}

const MAX_LOG_LINES: usize = 1000;
const MAX_LOG_LINE: usize = 4096;

/// Store data: the memory cap and what the guest logged.
pub(crate) struct HostState {
    cap: MemoryCap,
    logs: Vec<(LogLevel, String)>,
}

struct MemoryCap {
    bytes: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.bytes {
            self.refused = Some(desired);
            // An error (not `Ok(false)`) stops the guest at once, instead of
            // letting its allocator turn the refusal into a vaguer trap.
            wasmtime::bail!(
                "memory cap of {} bytes reached (wanted {desired})",
                self.bytes
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

impl HostState {
    pub(crate) fn log(&mut self, level: LogLevel, mut message: String) {
        if self.logs.len() < MAX_LOG_LINES {
            if message.len() > MAX_LOG_LINE {
                let mut end = MAX_LOG_LINE;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
            }
            self.logs.push((level, message));
        }
    }

    pub(crate) fn take_logs(&mut self) -> Vec<(LogLevel, String)> {
        std::mem::take(&mut self.logs)
    }
}

/// The engine every handler runs on. Fuel metering is on: it bounds each
/// call deterministically (a compiled component records this, so it is part
/// of the cache key through the engine's compatibility hash).
pub(crate) fn engine() -> Result<Engine, Error> {
    let mut cfg = Config::new();
    cfg.consume_fuel(true);
    cfg.max_wasm_stack(1 << 20);
    Engine::new(&cfg)
        .map_err(|e| Error::new(ErrorKind::Invalid, format!("cannot start wasmtime: {e:#}")))
}

/// A fresh store for one call sequence.
pub(crate) fn store(engine: &Engine, limits: &Limits) -> Store<HostState> {
    let mut store = Store::new(
        engine,
        HostState {
            cap: MemoryCap {
                bytes: limits.memory_bytes,
                refused: None,
            },
            logs: Vec::new(),
        },
    );
    store.limiter(|s| &mut s.cap);
    store
}

/// Give the store the budget for a call over `files` files.
pub(crate) fn refuel(
    store: &mut Store<HostState>,
    limits: &Limits,
    files: usize,
) -> Result<u64, Error> {
    let fuel = limits
        .fuel_per_call
        .saturating_add(limits.fuel_per_file.saturating_mul(files as u64));
    store
        .set_fuel(fuel)
        .map_err(|e| Error::new(ErrorKind::Invalid, format!("cannot set fuel: {e:#}")))?;
    Ok(fuel)
}

/// Turn a failed call into an error naming the handler (`who`).
pub(crate) fn call_error(
    who: &str,
    what: &str,
    e: &wasmtime::Error,
    store: &mut Store<HostState>,
    fuel: u64,
) -> Error {
    let last_error = store
        .data()
        .logs
        .iter()
        .rev()
        .find(|(l, _)| *l == LogLevel::Error)
        .map(|(_, m)| format!(" (it logged: {m})"))
        .unwrap_or_default();
    if let Some(wanted) = store.data().cap.refused {
        let cap = store.data().cap.bytes;
        return Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "{who} ran out of memory during {what}: it tried to grow to {wanted} bytes; the cap is {cap} bytes"
            ),
        );
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => {
            return Error::new(
                ErrorKind::Timeout,
                format!(
                    "{who} timed out during {what}: it used up its budget of {fuel} fuel units"
                ),
            );
        }
        Some(Trap::Interrupt) => {
            return Error::new(
                ErrorKind::Timeout,
                format!("{who} timed out during {what} (interrupted)"),
            );
        }
        _ => {}
    }
    let text = format!("{e:#}");
    if let Some(at) = text.find("unknown import") {
        let what_import = text[at..].lines().next().unwrap_or_default();
        return Error::new(
            ErrorKind::SandboxViolation,
            format!(
                "{who} was stopped during {what}: it called a function the sandbox does not provide \
                 (handlers get no filesystem, network, environment, clock or stdio): {what_import}"
            ),
        );
    }
    // The trap itself, without wasmtime's multi-line backtrace.
    let summary = match e.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => text.lines().last().unwrap_or_default().to_string(),
    };
    Error::new(
        ErrorKind::Trap,
        format!("{who} trapped during {what}: {summary}{last_error}"),
    )
}
