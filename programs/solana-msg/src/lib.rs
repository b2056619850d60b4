//! Program logging (`msg!`, `sol_log`), API-compatible with solana-msg 3.1.0.
//!
//! On SBF a program logs through the `sol_log_` syscall into the transaction's log. Built for the
//! host, upstream solana-msg can only print to stdout, so a program that a runtime executes
//! natively (our local ledger) would lose its `Program log:` lines. This crate adds one thing:
//! `set_host_logger`, through which that runtime receives every message and appends it to the
//! transaction it is executing. Without a logger installed it prints, like upstream.
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "alloc")]
#[doc(hidden)]
pub use alloc::format;

/// Logs a message: a single expression is logged as it is, anything else goes through `format!`.
#[cfg(feature = "alloc")]
#[macro_export]
macro_rules! msg {
    ($msg:expr) => {
        $crate::sol_log($msg)
    };
    ($($arg:tt)*) => ($crate::sol_log(&$crate::format!($($arg)*)));
}

#[cfg(target_os = "solana")]
pub mod syscalls {
    pub use solana_define_syscall::definitions::{sol_log_, sol_log_64_, sol_log_compute_units_, sol_log_data};
}

#[cfg(all(not(target_os = "solana"), feature = "std"))]
mod host {
    use std::sync::OnceLock;

    static LOGGER: OnceLock<fn(&str)> = OnceLock::new();

    /// Installs the process-wide receiver of host-side program logs. The first call wins;
    /// returns whether this one did.
    pub fn set_host_logger(logger: fn(&str)) -> bool {
        LOGGER.set(logger).is_ok()
    }

    pub(crate) fn log(message: &str) {
        match LOGGER.get() {
            Some(logger) => logger(message),
            None => std::println!("{message}"),
        }
    }
}

#[cfg(all(not(target_os = "solana"), feature = "std"))]
pub use host::set_host_logger;

/// Prints a string to the log.
#[inline]
pub fn sol_log(message: &str) {
    #[cfg(target_os = "solana")]
    unsafe {
        syscalls::sol_log_(message.as_ptr(), message.len() as u64);
    }

    #[cfg(all(not(target_os = "solana"), feature = "std"))]
    host::log(message);

    #[cfg(all(not(target_os = "solana"), not(feature = "std")))]
    core::hint::black_box(message);
}
