//! Response rate limiting (RRL) for UDP, as BIND 9, NSD and Knot DNS define
//! it: a client prefix (IPv4 /24, IPv6 /56 by default) gets at most
//! `responses_per_second` responses of one kind a second — positive answers
//! per (qname, qtype), NXDOMAIN and NODATA per zone, referrals per zone cut,
//! errors per client — so that a spoofed flood cannot use authd to amplify
//! traffic toward its victim. Of the responses over the limit, every
//! `slip`-th is sent as a minimal truncated reply (TC=1, the question only)
//! so a real client behind that prefix retries over TCP (never limited); the
//! others are dropped.
//!
//! Accounting is a token bucket per (prefix, kind, name): it refills at the
//! rate, holds at most one second's worth, and a limited client's debt is
//! kept for up to `window` seconds, so a flood is limited until it has been
//! below the rate for that long (BIND's window).
//!
//! Memory is a fixed table of [`AtomicU64`] buckets (tag, time, balance
//! packed in one word), updated without locks; two keys sharing a slot evict
//! each other, which only forgives a limited client early. A prefix starting
//! to be limited is logged once, through a per-second budget.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;

use crate::acl::Cidr;
use crate::cookies::Checked;
use crate::log_limit::LogLimit;
use crate::metrics::{Limited, Seen};
use crate::name_hash::mix;
pub use crate::name_hash::name_key;
pub use crate::query::ResponseKind;
use crate::query::{Answer, Response, Transport, render};
use crate::settings::{Context, Invalid, Kind, Schema, Section, in_range, string_or_list, whole};
use crate::wire::{Flags, Rcode, Request};

/// What to do with a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send it.
    Send,
    /// Send a minimal truncated reply instead (TC=1, question only).
    Slip,
    /// Send nothing.
    Drop,
}

/// Rate limiting settings (`[rrl]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrlSettings {
    /// Responses a second per client prefix and kind.
    pub responses_per_second: u32,
    /// Every `slip`-th limited response is sent truncated; 0: none, 1: all.
    pub slip: u32,
    /// How long a limited client's excess is remembered, seconds.
    pub window: u32,
    /// IPv4 client prefix length, bits.
    pub ipv4_prefix: u8,
    /// IPv6 client prefix length, bits.
    pub ipv6_prefix: u8,
    /// Clients never limited.
    pub exempt: Vec<Cidr>,
    /// Only log what would be limited; send everything.
    pub log_only: bool,
    /// Buckets in the table (memory: 8 bytes each).
    pub table_size: usize,
}

impl Default for RrlSettings {
    /// NSD's defaults, with BIND's window: 200 responses/s per /24 or /56,
    /// slip 2, 15 s window, a 65,536-bucket table (512 KiB).
    fn default() -> RrlSettings {
        RrlSettings {
            responses_per_second: 200,
            slip: 2,
            window: 15,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            exempt: Vec::new(),
            log_only: false,
            table_size: 65_536,
        }
    }
}

/// Response rate limiting (`[rrl]`): on by default, as in NSD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrlConfig {
    /// Whether UDP responses are rate limited.
    pub enabled: bool,
    /// The limits.
    pub settings: RrlSettings,
}

impl Default for RrlConfig {
    fn default() -> Self {
        RrlConfig {
            enabled: true,
            settings: RrlSettings::default(),
        }
    }
}

/// `[rrl]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRrl {
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    responses_per_second: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    slip: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    window: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    ipv4_prefix: Option<u8>,
    #[serde(default, deserialize_with = "whole")]
    ipv6_prefix: Option<u8>,
    #[serde(default, deserialize_with = "string_or_list")]
    exempt: Option<Vec<String>>,
    log_only: Option<bool>,
    #[serde(default, deserialize_with = "whole")]
    table_size: Option<usize>,
}

impl Section for RawRrl {
    type Value = RrlConfig;

    const SCHEMA: Schema = &[(
        "rrl",
        &[
            ("enabled", Kind::Bool),
            ("responses_per_second", Kind::Whole),
            ("slip", Kind::Whole),
            ("window", Kind::Whole),
            ("ipv4_prefix", Kind::Whole),
            ("ipv6_prefix", Kind::Whole),
            ("exempt", Kind::List),
            ("log_only", Kind::Bool),
            ("table_size", Kind::Whole),
        ],
    )];

    fn check(self, _: &Context<'_>) -> Result<RrlConfig, Invalid> {
        let d = RrlConfig::default();
        let s = d.settings;
        let mut exempt = Vec::new();
        for (i, a) in self.exempt.unwrap_or_default().iter().enumerate() {
            exempt.push(
                a.parse::<Cidr>()
                    .map_err(|r| Invalid::new(format!("rrl.exempt[{i}]"), r))?,
            );
        }
        let settings = RrlSettings {
            responses_per_second: in_range(
                "rrl.responses_per_second",
                self.responses_per_second,
                s.responses_per_second,
                1..=1_000_000,
                "",
            )?,
            slip: in_range("rrl.slip", self.slip, s.slip, 0..=10, "")?,
            window: in_range("rrl.window", self.window, s.window, 1..=3600, " seconds")?,
            ipv4_prefix: in_range(
                "rrl.ipv4_prefix",
                self.ipv4_prefix,
                s.ipv4_prefix,
                1..=32,
                " bits",
            )?,
            ipv6_prefix: in_range(
                "rrl.ipv6_prefix",
                self.ipv6_prefix,
                s.ipv6_prefix,
                1..=128,
                " bits",
            )?,
            exempt,
            log_only: self.log_only.unwrap_or(s.log_only),
            table_size: in_range(
                "rrl.table_size",
                self.table_size,
                s.table_size,
                1..=64 << 20,
                " buckets",
            )?,
        };
        Ok(RrlConfig {
            enabled: self.enabled.unwrap_or(d.enabled),
            settings,
        })
    }
}

/// A reply as the rate-limiting guard sees it ([`RateLimiter::limit`]).
pub struct Outgoing<'a> {
    /// Whom it goes to.
    pub client: IpAddr,
    /// Over what: only UDP replies are limited.
    pub transport: Transport,
    /// What it is, and about which name: its bucket.
    pub response: Response,
    /// The request, when it parsed as one (a slip repeats its question);
    /// `None`: a limited reply is dropped, never slipped.
    pub request: Option<&'a Request<'a>>,
    /// What the cookie guard found, when the request had a COOKIE option: a
    /// valid server cookie exempts the client; otherwise a slip is
    /// BADCOOKIE with the new server cookie.
    pub cookie: Option<&'a Checked>,
    /// The request's TSIG verified: exempt.
    pub authenticated: bool,
    /// The Unix time, seconds (read once per message).
    pub now: u64,
}

/// Limited prefixes logged (once each as they start being limited, and at
/// most this budget a second over all of them).
static LIMITED_LOG: LogLimit = LogLimit::new();

/// Bits of a bucket word: 24-bit tag, 16-bit time (seconds, wrapping), 24-bit
/// signed balance.
const BALANCE_BITS: u32 = 24;
const TIME_BITS: u32 = 16;
const BALANCE_MASK: u64 = (1 << BALANCE_BITS) - 1;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Lowest balance a bucket holds (the 24-bit field's range).
const MIN_BALANCE: i64 = -(1 << (BALANCE_BITS - 1)) + 1;

/// The limiter: settings and the bucket table.
pub struct RateLimiter {
    settings: RrlSettings,
    table: Box<[AtomicU64]>,
    /// Per client prefix (hashed), when it was last logged: prefix tag in the
    /// upper 32 bits, the second in the lower 32.
    logged: Box<[AtomicU64]>,
}

/// Slots of the table remembering which prefixes were logged when.
const LOGGED_SLOTS: usize = 4096;

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter with `settings` (a table size of 0 is taken as 1).
    pub fn new(settings: RrlSettings) -> RateLimiter {
        let size = settings.table_size.max(1);
        RateLimiter {
            table: (0..size).map(|_| AtomicU64::new(0)).collect(),
            logged: (0..LOGGED_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            settings,
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &RrlSettings {
        &self.settings
    }

    /// The rate-limiting guard, after the table and the cookie option: UDP
    /// only, and never for a client that proved its address (a valid
    /// server cookie, a verified TSIG), as BIND 9. Accounts `reply` (in
    /// `out`) and says whether to send `out`: the reply as it is, or the
    /// slip it was replaced with — BADCOOKIE and a new server cookie to a
    /// client that sent a client cookie (RFC 7873 §5.2.3: a real client
    /// retries with it, and is not limited), else a minimal reply with TC
    /// set (a real client retries over TCP). `false`: send nothing. What
    /// was done is noted in `seen`. Inlined into the dispatcher, as it was
    /// before it had a file of its own (no call per reply).
    #[inline(always)]
    pub fn limit(&self, reply: &Outgoing<'_>, out: &mut Vec<u8>, seen: &mut Seen) -> bool {
        if reply.transport != Transport::Udp
            || reply.authenticated
            || reply.cookie.is_some_and(|c| c.valid)
        {
            return true;
        }
        match self.account(
            reply.client,
            reply.response.kind,
            reply.response.key,
            reply.now,
        ) {
            Action::Send => true,
            Action::Drop => {
                seen.limited = Some(Limited::Dropped);
                false
            }
            Action::Slip => {
                seen.limited = Some(Limited::Slipped);
                let Some(req) = reply.request else {
                    return false;
                };
                if let Some(c) = reply.cookie {
                    render(
                        req,
                        &Answer::new(Rcode::BADCOOKIE, false),
                        reply.transport,
                        out,
                    );
                    c.append_to(out);
                } else {
                    render(
                        req,
                        &Answer::new(Rcode::NOERROR, false),
                        reply.transport,
                        out,
                    );
                    if let Some(b) = out.get_mut(2) {
                        *b |= (Flags::TC.bits() >> 8) as u8;
                    }
                }
                true
            }
        }
    }

    /// Accounts one UDP response of `kind` to `client` at Unix time `now`
    /// (seconds), identified within the kind by `name` (a case-insensitive
    /// hash of qname and qtype, the zone cut or the apex; 0 for errors), and
    /// says what to do with it.
    pub fn account(&self, client: IpAddr, kind: ResponseKind, name: u64, now: u64) -> Action {
        self.account_at(client, kind, name, Duration::from_secs(now))
    }

    /// [`Self::account`] at `now` (only whole seconds count).
    fn account_at(&self, client: IpAddr, kind: ResponseKind, name: u64, now: Duration) -> Action {
        if self.settings.exempt.iter().any(|c| c.contains(client)) {
            return Action::Send;
        }
        let (block, prefix, v6) = self.prefix(client);
        let key = mix(
            mix(
                mix(prefix as u64, (prefix >> 64) as u64),
                kind as u64 | u64::from(v6) << 8,
            ),
            name,
        );
        let slot = &self.table[(key % self.table.len() as u64) as usize];
        let tag = key >> 40;
        let now_s = now.as_secs();
        let rate = i64::from(self.settings.responses_per_second.max(1));
        let floor = (-rate * i64::from(self.settings.window.max(1))).max(MIN_BALANCE);
        let mut old = slot.load(Ordering::Relaxed);
        let (before, after) = loop {
            let before = if old >> (BALANCE_BITS + TIME_BITS) == tag && old != 0 {
                let then = (old >> BALANCE_BITS) & TIME_MASK;
                let elapsed = (now_s.wrapping_sub(then)) & TIME_MASK;
                let balance = sign_extend(old & BALANCE_MASK);
                (balance + rate.saturating_mul(elapsed as i64)).min(rate)
            } else {
                rate
            };
            let after = (before - 1).max(floor);
            let new = (tag << (BALANCE_BITS + TIME_BITS))
                | ((now_s & TIME_MASK) << BALANCE_BITS)
                | ((after as u64) & BALANCE_MASK);
            // A lost race costs a retry, never a lock; the table is a heuristic.
            match slot.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break (before, after),
                Err(current) => old = current,
            }
        };
        if after >= 0 {
            return Action::Send;
        }
        if before >= 0
            && self.first_in_window(
                mix(prefix as u64, (prefix >> 64) as u64 ^ u64::from(v6)),
                now_s,
            )
            && let Some(suppressed) = LIMITED_LOG.allow()
        {
            tracing::warn!(
                suppressed,
                "rate limit: {block} exceeds {} {} responses/s{}",
                self.settings.responses_per_second,
                kind_label(kind),
                if self.settings.log_only {
                    " (log only)"
                } else {
                    ""
                }
            );
        }
        if self.settings.log_only {
            return Action::Send;
        }
        slip_or_drop(self.settings.slip)
    }

    /// True (and remembered) when the prefix hashed to `prefix` was not
    /// logged in the last `window` seconds: a prefix is logged once per
    /// window however many of its buckets start being limited.
    fn first_in_window(&self, prefix: u64, now: u64) -> bool {
        let slot = &self.logged[(prefix % LOGGED_SLOTS as u64) as usize];
        let tag = prefix >> 32;
        let old = slot.load(Ordering::Relaxed);
        let then = old & 0xFFFF_FFFF;
        if old >> 32 == tag
            && old != 0
            && now.saturating_sub(then) < u64::from(self.settings.window.max(1))
        {
            return false;
        }
        slot.store(tag << 32 | (now & 0xFFFF_FFFF), Ordering::Relaxed);
        true
    }

    /// The client's block ([`Cidr::client_block`]) as its masked address
    /// bits, and whether it is IPv6.
    fn prefix(&self, client: IpAddr) -> (Cidr, u128, bool) {
        let block =
            Cidr::client_block(client, self.settings.ipv4_prefix, self.settings.ipv6_prefix);
        let (bits, v6) = match block.addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), false),
            IpAddr::V6(a) => (u128::from(a), true),
        };
        (block, bits, v6)
    }
}

fn kind_label(kind: ResponseKind) -> &'static str {
    match kind {
        ResponseKind::Answer => "answer",
        ResponseKind::Referral => "referral",
        ResponseKind::NxDomain => "NXDOMAIN",
        ResponseKind::NoData => "NODATA",
        ResponseKind::Error => "error",
    }
}

/// Every `slip`-th limited response (counted per thread) slips through
/// truncated; the rest are dropped.
fn slip_or_drop(slip: u32) -> Action {
    if slip == 0 {
        return Action::Drop;
    }
    thread_local! {
        static LIMITED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let n = LIMITED.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    if n.is_multiple_of(slip) {
        Action::Slip
    } else {
        Action::Drop
    }
}

/// The 24-bit two's complement balance as a signed number.
fn sign_extend(bits: u64) -> i64 {
    ((bits << (64 - BALANCE_BITS)) as i64) >> (64 - BALANCE_BITS)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn limiter(rate: u32, slip: u32) -> RateLimiter {
        RateLimiter::new(RrlSettings {
            responses_per_second: rate,
            slip,
            window: 5,
            ..RrlSettings::default()
        })
    }

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    /// Counts of (sent, slipped, dropped) for `n` responses at `at` seconds.
    fn burst(
        l: &RateLimiter,
        client: IpAddr,
        kind: ResponseKind,
        name: u64,
        n: usize,
        at: f64,
    ) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for _ in 0..n {
            match l.account_at(client, kind, name, Duration::from_secs_f64(at)) {
                Action::Send => counts.0 += 1,
                Action::Slip => counts.1 += 1,
                Action::Drop => counts.2 += 1,
            }
        }
        counts
    }

    /// 200/s: a burst of 1,000 in one second gets 200 answers, then every
    /// second limited response slips (400) and the rest are dropped (400).
    #[test]
    fn the_rate_then_slip_every_second() {
        let l = limiter(200, 2);
        let (sent, slipped, dropped) =
            burst(&l, v4(192, 0, 2, 1), ResponseKind::Answer, 7, 1000, 0.0);
        assert_eq!(sent, 200);
        assert_eq!(slipped + dropped, 800);
        assert!((399..=401).contains(&slipped), "{slipped}");
    }

    /// The whole /24 shares one budget; another /24, another kind or another
    /// name has its own; IPv6 is grouped by /56.
    #[test]
    fn prefixes_kinds_and_names_are_separate() {
        let l = limiter(10, 0);
        assert_eq!(
            burst(&l, v4(192, 0, 2, 1), ResponseKind::NxDomain, 1, 6, 0.0).0,
            6
        );
        assert_eq!(
            burst(&l, v4(192, 0, 2, 200), ResponseKind::NxDomain, 1, 6, 0.0).0,
            4
        );
        assert_eq!(
            burst(&l, v4(192, 0, 3, 1), ResponseKind::NxDomain, 1, 20, 0.0).0,
            10
        );
        assert_eq!(
            burst(&l, v4(192, 0, 2, 1), ResponseKind::NoData, 1, 20, 0.0).0,
            10
        );
        assert_eq!(
            burst(&l, v4(192, 0, 2, 1), ResponseKind::NxDomain, 2, 20, 0.0).0,
            10
        );
        let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0x12, 1, 2, 3, 4));
        let same56 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0x34, 9, 9, 9, 9));
        let other56 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0x134, 1, 2, 3, 4));
        assert_eq!(burst(&l, a, ResponseKind::Answer, 1, 6, 0.0).0, 6);
        assert_eq!(burst(&l, same56, ResponseKind::Answer, 1, 6, 0.0).0, 4);
        assert_eq!(burst(&l, other56, ResponseKind::Answer, 1, 20, 0.0).0, 10);
    }

    /// Tokens come back at the rate; a flood's excess is remembered for the
    /// window: after 1,000 over a 10/s rate, quiet for less than the window
    /// still limits, quiet for the window forgives.
    #[test]
    fn refill_and_window() {
        let l = limiter(10, 0);
        let c = v4(198, 51, 100, 7);
        assert_eq!(burst(&l, c, ResponseKind::Answer, 1, 10, 0.0).0, 10);
        assert_eq!(burst(&l, c, ResponseKind::Answer, 1, 5, 0.0).0, 0);
        // One second later: 10 more tokens, but the 5 over the limit are owed.
        assert_eq!(burst(&l, c, ResponseKind::Answer, 1, 10, 1.0).0, 5);
        let f = v4(198, 51, 101, 7);
        burst(&l, f, ResponseKind::Answer, 1, 1000, 0.0);
        assert_eq!(
            burst(&l, f, ResponseKind::Answer, 1, 1, 4.0).0,
            0,
            "within the 5 s window"
        );
        assert_eq!(
            burst(&l, f, ResponseKind::Answer, 1, 10, 7.0).0,
            10,
            "forgiven after it"
        );
    }

    /// Exempt prefixes and log-only mode send everything.
    #[test]
    fn exempt_and_log_only() {
        let exempt = RateLimiter::new(RrlSettings {
            responses_per_second: 1,
            exempt: vec!["192.0.2.0/24".parse().expect("cidr")],
            ..RrlSettings::default()
        });
        assert_eq!(
            burst(&exempt, v4(192, 0, 2, 9), ResponseKind::Answer, 1, 100, 0.0).0,
            100
        );
        assert_eq!(
            burst(&exempt, v4(192, 0, 3, 9), ResponseKind::Answer, 1, 100, 0.0).0,
            1
        );
        let log_only = RateLimiter::new(RrlSettings {
            responses_per_second: 1,
            log_only: true,
            ..RrlSettings::default()
        });
        assert_eq!(
            burst(
                &log_only,
                v4(192, 0, 2, 9),
                ResponseKind::Answer,
                1,
                100,
                0.0
            )
            .0,
            100
        );
    }

    /// A prefix is logged once per window, whatever number of its buckets
    /// start being limited.
    #[test]
    fn a_prefix_is_logged_once_per_window() {
        let l = limiter(10, 0); // window 5 s
        assert!(l.first_in_window(42, 100));
        assert!(!l.first_in_window(42, 101), "another name, same prefix");
        assert!(!l.first_in_window(42, 104));
        assert!(l.first_in_window(43, 104), "another prefix");
        assert!(l.first_in_window(42, 105), "a window later");
    }

    #[test]
    fn name_keys_ignore_case_and_tell_types_apart() {
        assert_eq!(
            name_key(b"\x03WWW\x07example\x00", 1),
            name_key(b"\x03www\x07EXAMPLE\x00", 1)
        );
        assert_ne!(
            name_key(b"\x03www\x07example\x00", 1),
            name_key(b"\x03www\x07example\x00", 28)
        );
        assert_ne!(
            name_key(b"\x03www\x07example\x00", 1),
            name_key(b"\x03wwx\x07example\x00", 1)
        );
    }

    #[test]
    fn balances_round_trip_through_the_packed_word() {
        for b in [0i64, 1, -1, 200, -3000, MIN_BALANCE, (1 << 23) - 1] {
            assert_eq!(sign_extend(b as u64 & BALANCE_MASK), b);
        }
    }
}
