//! Building the [`Dispatcher`] a [`Config`] asks for: at start-up
//! ([`dispatcher`]) and on each reload, from the one it replaces
//! ([`reloaded`]). A reload builds a whole new snapshot (sources, CH
//! answers, transfer and update policy, keys, secondary zones, guards), but
//! some state outlives the snapshot that made it:
//!
//! | state | on reload |
//! |---|---|
//! | the counters, the dnstap log | kept: one of each for the process (`[metrics]` and `[dnstap]` changes need a restart) |
//! | a random cookie key (no `[cookies] secret`) | kept: it is not configuration |
//! | a configured cookie secret | replaced; a changed one keeps the old one accepted for [`crate::cookies::PREVIOUS_SECRET_GRACE`] ([`Cookies::reloaded`]); one taken out of the file (say, leaked) is not kept: a new random key |
//! | the rate limiter's buckets | kept when the `[rrl]` settings are unchanged, so a reload forgives no one; new settings start an empty table |
//!
//! The sources come from [`super::reload::load`], the secondary zones'
//! policy (who may NOTIFY, which zones expired) from the running
//! [`Refresher`].

use std::sync::Arc;

use authd_datasrc::SourceList;

use crate::config::Config;
use crate::cookies::{CookieError, Cookies};
use crate::dispatch::Dispatcher;
use crate::dnstap::Dnstap;
use crate::metrics::Metrics;
use crate::rrl::RateLimiter;
use crate::secondary::Refresher;

/// The dispatcher `config` asks for at start-up, answering from `sources`,
/// counting into `metrics` and logging to `dnstap` (`None`: off; one of each
/// for the process, carried by every reload).
///
/// Errors: no random bytes for a cookie secret.
pub fn dispatcher(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    metrics: Option<Arc<Metrics>>,
    dnstap: Option<Arc<Dnstap>>,
) -> Result<Dispatcher, CookieError> {
    build(config, sources, refresher, None, metrics, dnstap)
}

/// The dispatcher a reload to `config` swaps in for `previous`, answering
/// from `sources`: what carries over is in the module documentation.
///
/// Errors: no random bytes for a cookie secret.
pub fn reloaded(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    previous: &Dispatcher,
) -> Result<Dispatcher, CookieError> {
    let metrics = previous.metrics().cloned();
    let dnstap = previous.dnstap().cloned();
    build(config, sources, refresher, Some(previous), metrics, dnstap)
}

/// Everything `config` says about answering, over `sources`, with the state
/// of `previous` carried over (when there is one).
fn build(
    config: &Config,
    sources: SourceList,
    refresher: &Refresher,
    previous: Option<&Dispatcher>,
    metrics: Option<Arc<Metrics>>,
    dnstap: Option<Arc<Dnstap>>,
) -> Result<Dispatcher, CookieError> {
    let cookies = if config.cookies.enabled {
        let fresh = match config.cookies.secret {
            Some(secret) => Cookies::with_secret(secret),
            // Keep a random key across reloads; a configured secret taken
            // out of the file (say, leaked) is not kept: a new random one.
            None => match previous.and_then(Dispatcher::cookies) {
                Some(c) if c.is_random() => c.clone(),
                _ => Cookies::random()?,
            },
        };
        Some(match previous.and_then(Dispatcher::cookies) {
            Some(old) => old.reloaded(fresh, crate::sys::unix_seconds()),
            None => fresh,
        })
    } else {
        None
    };
    let rrl = config.rrl.enabled.then(|| {
        match previous.and_then(Dispatcher::rrl) {
            // Same settings: keep the buckets, so a reload forgives no one.
            Some(old) if *old.settings() == config.rrl.settings => Arc::clone(old),
            _ => Arc::new(RateLimiter::new(config.rrl.settings.clone())),
        }
    });
    Ok(Dispatcher::new(sources)
        .with_chaos(config.chaos.options())
        .with_transfer(config.transfer_policy())
        .with_update(config.update_policy())
        .with_keys(config.key_ring())
        .with_cookies(cookies)
        .with_rrl(rrl)
        .with_metrics(metrics)
        .with_secondary(refresher.policy(&config.secondary, &config.notify.allow))
        .with_dnstap(dnstap))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::rrl::{Action, ResponseKind};
    use crate::secondary::SecondarySettings;
    use crate::wire::Cookie;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

    fn sources() -> SourceList {
        SourceList::new(Vec::new())
    }

    /// What `d`'s rate limiter does with one more answer to [`CLIENT`].
    fn one_more(d: &Dispatcher, now: u64) -> Action {
        let rrl = d.rrl().expect("rate limiting on");
        rrl.account(CLIENT, ResponseKind::Answer, 1, now)
    }

    /// The server cookie `d` makes for client cookie `client` at `now`.
    fn server_cookie(d: &Dispatcher, client: [u8; 8], now: u64) -> Vec<u8> {
        let cookies = d.cookies().expect("cookies on");
        let checked = cookies.answer(
            &Cookie {
                client,
                server: &[],
            },
            CLIENT,
            now,
        );
        checked.reply[8..].to_vec()
    }

    /// Whether `d` takes `server` back from the client of cookie `client`.
    fn takes(d: &Dispatcher, client: [u8; 8], server: &[u8], now: u64) -> bool {
        let cookies = d.cookies().expect("cookies on");
        cookies
            .answer(&Cookie { client, server }, CLIENT, now)
            .valid
    }

    /// Built twice (a reload) with the same settings: the random cookie key
    /// (its cookies still valid), the rate limiter's buckets (a limited
    /// client still limited), the counters and the dnstap log are the same;
    /// a changed `[rrl]` setting starts a new table (the client forgiven),
    /// the cookies still carried over.
    #[tokio::test]
    async fn a_reload_keeps_the_random_cookie_key_and_unchanged_rate_limits() {
        let refresher = Refresher::spawn(SecondarySettings::default(), None);
        let mut config = Config::default();
        config.cookies.enabled = true;
        config.cookies.secret = None;
        config.rrl.enabled = true;
        config.rrl.settings.responses_per_second = 1;
        config.rrl.settings.slip = 0;
        let metrics = Metrics::new();
        let dir = tempfile::tempdir().expect("tempdir");
        let tap = Dnstap::start(&crate::dnstap::Settings {
            output: crate::dnstap::Output::File(dir.path().join("tap")),
            identity: None,
            version: None,
        })
        .expect("dnstap");
        let now = crate::sys::unix_seconds();
        let client = *b"clientck";

        let first = dispatcher(
            &config,
            sources(),
            &refresher,
            Some(Arc::clone(&metrics)),
            Some(Arc::clone(&tap)),
        )
        .expect("first");
        let cookies = first.cookies().expect("cookies on").clone();
        assert!(cookies.is_random());
        let made = server_cookie(&first, client, now);
        assert_eq!(one_more(&first, now), Action::Send);
        assert_eq!(one_more(&first, now), Action::Drop, "over 1/s");

        let second = reloaded(&config, sources(), &refresher, &first).expect("reload");
        assert_eq!(second.cookies(), Some(&cookies));
        assert!(takes(&second, client, &made, now));
        let rrl = first.rrl().expect("rate limiting on");
        assert!(Arc::ptr_eq(second.rrl().expect("rate limiting on"), rrl));
        assert_eq!(one_more(&second, now), Action::Drop, "still limited");
        assert!(Arc::ptr_eq(second.metrics().expect("metrics"), &metrics));
        assert!(Arc::ptr_eq(second.dnstap().expect("dnstap"), &tap));

        // Another start draws another key: the first one's cookies fail.
        let other = dispatcher(&config, sources(), &refresher, None, None).expect("other");
        assert_ne!(other.cookies(), Some(&cookies));
        assert!(!takes(&other, client, &made, now));

        config.rrl.settings.responses_per_second = 2;
        let third = reloaded(&config, sources(), &refresher, &second).expect("reload");
        let new = third.rrl().expect("rate limiting on");
        assert!(!Arc::ptr_eq(new, rrl));
        assert_eq!(*new.settings(), config.rrl.settings);
        assert_eq!(one_more(&third, now), Action::Send, "a new table");
        assert_eq!(third.cookies(), Some(&cookies));
        assert!(Arc::ptr_eq(third.metrics().expect("metrics"), &metrics));

        // Rate limiting or cookies turned off: gone.
        config.rrl.enabled = false;
        config.cookies.enabled = false;
        let fourth = reloaded(&config, sources(), &refresher, &third).expect("reload");
        assert!(fourth.rrl().is_none() && fourth.cookies().is_none());
        tap.shutdown();
    }

    /// A changed configured secret keeps the old one's cookies valid; a
    /// secret taken out of the configuration is not kept (a new random key).
    #[tokio::test]
    async fn a_reload_keeps_a_replaced_cookie_secret_accepted() {
        let refresher = Refresher::spawn(SecondarySettings::default(), None);
        let mut config = Config::default();
        config.cookies.enabled = true;
        config.cookies.secret = Some([1; 16]);
        let now = crate::sys::unix_seconds();
        let client = *b"clientck";
        let first = dispatcher(&config, sources(), &refresher, None, None).expect("first");
        let made = server_cookie(&first, client, now);
        config.cookies.secret = Some([2; 16]);
        let second = reloaded(&config, sources(), &refresher, &first).expect("reload");
        assert!(takes(&second, client, &made, now), "the previous secret");
        assert_ne!(
            server_cookie(&second, client, now),
            made,
            "made with the new one"
        );
        config.cookies.secret = None;
        let third = reloaded(&config, sources(), &refresher, &second).expect("reload");
        assert!(third.cookies().expect("cookies on").is_random());
        assert!(!takes(&third, client, &made, now));
    }
}
