//! A per-second budget for log lines that a remote client can trigger, so
//! that the log never grows with the query rate.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Log lines per second allowed for each kind of per-query failure.
const LOG_PER_SECOND: u32 = 10;

/// A per-second budget for log lines written per query: any client can make
/// every query fail the same way (a broken row), and the log must not grow
/// with the query rate. Lines over the budget are counted, and the count is
/// reported (`suppressed`) with the next line allowed.
pub(crate) struct LogLimit {
    /// The second (since the Unix epoch) the budget is for.
    second: AtomicU64,
    /// Lines allowed in that second.
    used: AtomicU32,
    /// Lines dropped since the last one allowed.
    suppressed: AtomicU64,
}

impl LogLimit {
    pub(crate) const fn new() -> LogLimit {
        LogLimit {
            second: AtomicU64::new(0),
            used: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(lines dropped before this one)` when a line may be written now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.allow_at(now)
    }

    /// [`Self::allow`] at second `now`.
    fn allow_at(&self, now: u64) -> Option<u64> {
        if self.second.swap(now, Ordering::Relaxed) != now {
            self.used.store(0, Ordering::Relaxed);
        }
        if self.used.fetch_add(1, Ordering::Relaxed) < LOG_PER_SECOND {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LOG_PER_SECOND, LogLimit};

    #[test]
    fn ten_lines_a_second_then_the_count_of_those_dropped() {
        let limit = LogLimit::new();
        for _ in 0..LOG_PER_SECOND {
            assert_eq!(limit.allow_at(100), Some(0));
        }
        for _ in 0..25 {
            assert_eq!(limit.allow_at(100), None);
        }
        assert_eq!(limit.allow_at(101), Some(25));
        assert_eq!(limit.allow_at(101), Some(0));
    }
}
