//! Settings for mimalloc, the global allocator of the `authd` and
//! `query-bench` binaries (chosen there: the sqlite3 path allocates a few
//! small objects per row read, and glibc's malloc was a fifth of its time;
//! docs/performance-log.md, "Allocator").
//!
//! With its defaults mimalloc backs the heap with transparent huge pages and
//! returns freed pages a second late (ten for whole arenas), which left authd
//! serving the root zone from memory at 35–41 MiB RSS instead of glibc's
//! 17–24 MiB. [`tune`] turns
//! both off; in `query-bench` the uncached sqlite3 throughput did not change.

use std::os::raw::{c_int, c_long};

/// `mi_option_purge_delay` in mimalloc.h (v3, libmimalloc-sys 0.1's
/// default): milliseconds before freed pages are returned; default 1000.
const PURGE_DELAY: c_int = 15;
/// `mi_option_allow_thp` in mimalloc.h (v3): transparent huge pages; default 1.
const ALLOW_THP: c_int = 43;

/// Makes mimalloc return freed pages at once and turns transparent huge pages
/// off for the process, as mimalloc itself does at start-up when its
/// `MIMALLOC_ALLOW_THP=0` is set (`prctl(PR_SET_THP_DISABLE)`, Linux). Call
/// first thing in `main`: the options are read at each mapping and each
/// purge, and the prctl covers the pages touched from then on (the zones).
pub fn tune() {
    set(PURGE_DELAY, 0);
    set(ALLOW_THP, 0);
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        // Only memory use is at stake; nothing is logged yet at this point.
        eprintln!("authd: cannot turn transparent huge pages off: {e}");
    }
}

#[allow(unsafe_code)]
fn set(option: c_int, value: c_long) {
    // SAFETY: mi_option_set stores an integer in mimalloc's option table
    // (an atomic store in its options.c); it has no preconditions, and an
    // option number it does not know is ignored with a warning.
    unsafe { libmimalloc_sys::mi_option_set(option, value) }
}

#[cfg(test)]
#[allow(unsafe_code)]
fn get(option: c_int) -> c_long {
    // SAFETY: as for `set`, a read of the option table.
    unsafe { libmimalloc_sys::mi_option_get(option) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option numbers are mimalloc.h's enum positions: if an upgrade of
    /// libmimalloc-sys moved them, their defaults read here would differ.
    #[test]
    fn option_numbers_match_the_bundled_mimalloc() {
        if std::env::vars().any(|(k, _)| k.starts_with("MIMALLOC_")) {
            return; // defaults overridden from the environment
        }
        assert_eq!(get(PURGE_DELAY), 1000, "mi_option_purge_delay default");
        assert_eq!(get(ALLOW_THP), 1, "mi_option_allow_thp default");
        // Neighbours with distinctive defaults.
        assert_eq!(get(18), 100, "mi_option_os_tag default");
        assert_eq!(get(36), 2, "mi_option_page_full_retain default");
        assert_eq!(get(37), 4, "mi_option_page_max_candidates default");
        tune();
        assert_eq!(get(PURGE_DELAY), 0);
        assert_eq!(get(ALLOW_THP), 0);
    }
}
