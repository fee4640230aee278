//! Small helpers about the operating system, shared by the configuration and
//! the server.
//!
//! A leaf module (std only): the configuration needs these defaults and error
//! texts without depending on the server.

use std::io;

/// The default number of UDP workers per address: one per CPU available to
/// the process (its affinity mask, so `taskset -c 1 authd` gets 1), at least 1.
pub fn default_udp_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The text of an I/O error without Rust's " (os error N)" suffix, as C tools print it.
pub fn io_reason(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// Seconds since the Unix epoch from the kernel's coarse clock (updated
/// every few milliseconds; no hardware clock read), for per-message
/// accounting that needs whole seconds: cookie timestamps and rate limits.
pub fn unix_seconds() -> u64 {
    #[cfg(target_os = "linux")]
    if let Ok(t) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE) {
        return u64::try_from(t.tv_sec()).unwrap_or(0);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_reason_strips_os_error() {
        let e = io::Error::from_raw_os_error(98);
        assert_eq!(io_reason(&e), "Address already in use");
        let e = io::Error::other("plain");
        assert_eq!(io_reason(&e), "plain");
    }
}
