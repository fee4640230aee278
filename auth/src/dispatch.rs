//! The dispatcher: one place that decides what a message is and which handler
//! answers it, before any handler looks at it. The server hands it every
//! message ([`Dispatcher::handle`]); sockets, framing and limits stay in
//! [`crate::server`], DNS semantics in the handlers.
//!
//! The guards are layers around the table, in a fixed order; each lives in
//! the file that owns its settings and state, and this one only calls them:
//!
//! | step | guard | what it does |
//! |---|---|---|
//! | around | metrics ([`crate::metrics::Metrics::count`]) | counts the message and its reply (what the steps noted in a [`crate::metrics::Seen`]) |
//! | 1 | TSIG verify ([`crate::tsig::check_request`], RFC 8945 §5.2) | a signed request that fails is answered FORMERR or NOTAUTH with its TSIG error (BADKEY, BADSIG, BADTIME) and goes no further; one that passes is routed with the key it was signed with (for ACLs) |
//! | 2 | cookie check ([`crate::cookies::Cookies::check`], RFC 7873 §5.2) | the server cookie checked, a new one made |
//! | 3 | the table (below) | one handler writes the reply |
//! | 4 | reply options ([`crate::edns::append`]) | the one reply's COOKIE option; NSID (`[server] nsid`, RFC 5001) to a query carrying NSID; the TCP idle timeout (RFC 7828) to a TCP query carrying edns-tcp-keepalive, never over UDP |
//! | 5 | rate limiting ([`crate::rrl::RateLimiter::limit`]) | UDP only; never for a valid server cookie, a verified TSIG or a successful UPDATE's NOERROR, as BIND 9: send, slip (a minimal TC=1 reply, or BADCOOKIE to a client that sent a client cookie) or drop |
//! | 6 | TSIG sign ([`crate::tsig::Signer::sign_reply`], [`crate::tsig::Signer::sign_next`], §5.3) | the one reply, or each message of a transfer (§5.3.1); a signed reply over the size limit is cut to the question and the TSIG, with TC set |
//!
//! dnstap is outermost, around the server's panic guard
//! ([`crate::dnstap::Dnstap::exchange`], called by [`crate::server`]); the
//! dispatcher only carries the log. Signed requests are verified whatever
//! their opcode: a signed UPDATE reaches [`crate::update`] with its key, a
//! signed NOTIFY gets a signed answer. A message that does not parse as a
//! query, or an unsigned one of an opcode without a handler, skips steps
//! 1–4: its error reply is rate limited (dropped, never slipped).
//!
//! The table routes by opcode, class and qtype to the handlers, each in its
//! own file:
//!
//! | opcode | class | qtype | handler |
//! |---|---|---|---|
//! | any | any | any, EDNS version > 0 | BADVERS (RFC 6891 §6.1.3) |
//! | QUERY | any | AXFR, IXFR over TCP | [`crate::xfr::transfer`] (`[transfer] allow`) |
//! | QUERY | any | IXFR over UDP | [`crate::xfr::transfer`], one message (RFC 1995 §2) |
//! | QUERY | any | AXFR over UDP | REFUSED, EDE 21 (RFC 5936 §4.2) |
//! | QUERY | IN | OPT | FORMERR (RFC 6891 §6.1.1) |
//! | QUERY | IN | other meta types (TSIG, TKEY, MAILA, MAILB) | NOTIMP, EDE 21 |
//! | QUERY | IN | ANY and data types | [`crate::query::QueryProcessor`] (a name in no zone: REFUSED, EDE 20) |
//! | QUERY | CH | any | [`crate::chaos`] (`version.bind`, `hostname.bind`) |
//! | QUERY | other | any | REFUSED, EDE 20 |
//! | QUERY | IN | any, answered from an expired secondary zone | SERVFAIL (RFC 1035 §4.3.5), EDE 24 "Zone has expired" |
//! | NOTIFY | IN | SOA, a secondary zone, from a primary or `[notify] allow` | [`crate::notify_in::notify`]: NOERROR, AA (RFC 1996 §4.7); refresh woken ([`crate::secondary`]) |
//! | NOTIFY | | other zones or senders | [`crate::notify_in::notify`]: REFUSED |
//! | UPDATE | | a secondary zone | [`crate::notify_in::refuse_update`]: REFUSED |
//! | UPDATE | | | [`crate::update::update`] (`[update]`: RFC 2136) |
//! | others | | | NOTIMP, RD echoed but not CD, no question, EDE 21 |
//!
//! Extended DNS Errors ([`crate::edns::Ede`], RFC 8914) go only to queries
//! with EDNS, in the OPT record every error reply to one carries (RFC 6891
//! §6.1.1), as do the FORMERR of a malformed COOKIE or Client Subnet option
//! (§7) and the NOTIMP of an unknown opcode. A rate-limited slip carries
//! none: Knot DNS's `mod-rrl` sets none on its truncated slips (it only
//! marks them truncated), and a slip is kept minimal.
//!
//! A message shorter than a header, or a response (QR=1), gets nothing; a
//! malformed QUERY gets FORMERR ([`crate::wire::parse_query`]). Over UDP an
//! ANY query is answered with one RRset (RFC 8482 §4.1).
//!
//! A [`Dispatcher`] is an immutable snapshot of everything a reload replaces
//! — the sources (through the query processor), the CH answers, the transfer
//! policy, the TSIG keys, the cookie secrets and rate limits — swapped whole
//! by [`crate::server::DispatcherHandle::store`], so a message is handled
//! entirely under the old configuration or entirely under the new one.
//! The update policy ([`crate::update::UpdatePolicy`]) is part of it.

use std::net::IpAddr;
use std::sync::Arc;

use authd_datasrc::{Class, Name, RType, SourceList};

use crate::chaos::{self, ChaosOptions};
use crate::cookies::Cookies;
use crate::edns::{self, Ede};
use crate::keys::KeyRing;
use crate::metrics::{Metrics, Seen, Sent};
use crate::notify::NotifyWake;
use crate::notify_in;
use crate::query::{
    Answer, QueryProcessor, Response, ResponseKind, Transport, message_limit, render,
};
use crate::rrl::{Outgoing, RateLimiter};
use crate::secondary::SecondaryPolicy;
use crate::tsig::{self, Signer};
use crate::update::{self, UpdatePolicy};
use crate::wire::{self, ErrorOpt, Flags, Header, Opcode, ParseError, Rcode, Request};
use crate::xfr::{self, TransferPolicy};

/// Whether every query is logged (`authc querylog on|off`); off at start.
pub static QUERY_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True when `msg` may write to a zone (an UPDATE, RFC 2136) and so may wait
/// on storage locks (up to [`crate::update::BUSY_WAIT`]): the server answers
/// it off its query workers, so a slow write delays no query. Reads only the
/// header; a message too short for one is not a write.
pub fn may_block(msg: &[u8]) -> bool {
    wire::peek_head(msg).is_some_and(|h| h.opcode == Opcode::UPDATE)
}

/// What [`Dispatcher::handle`] produced.
#[derive(Debug)]
pub enum Reply {
    /// Send nothing (a response, less than a header, or a rate-limited reply
    /// dropped).
    Nothing,
    /// One reply, written into the caller's buffer.
    Message,
    /// Several replies in order, each without a TCP length prefix, rendered
    /// (and signed) as they are taken (a zone transfer; only over TCP).
    Stream(Box<xfr::Messages>),
}

/// Two streams are never equal: they are taken, not compared.
impl PartialEq for Reply {
    fn eq(&self, other: &Reply) -> bool {
        matches!(
            (self, other),
            (Reply::Nothing, Reply::Nothing) | (Reply::Message, Reply::Message)
        )
    }
}

/// Routes messages to their handlers under one configuration snapshot.
pub struct Dispatcher {
    query: QueryProcessor,
    chaos: ChaosOptions,
    transfer: TransferPolicy,
    update: UpdatePolicy,
    keys: KeyRing,
    /// DNS cookies (RFC 7873), when on.
    cookies: Option<Cookies>,
    /// Counters, when metrics are on (one set for the process, shared by
    /// every snapshot).
    metrics: Option<Arc<Metrics>>,
    /// The dnstap log, when on (one for the process, shared by every
    /// snapshot; the server writes to it, the dispatcher only carries it).
    dnstap: Option<Arc<crate::dnstap::Dnstap>>,
    /// UDP response rate limiting, when on (shared with the next snapshot
    /// when a reload leaves its settings alone, so no client is forgiven).
    rrl: Option<Arc<RateLimiter>>,
    /// Secondary zones: who may NOTIFY them, which have expired.
    secondary: SecondaryPolicy,
    /// The NSID sent to queries that ask for it (`[server] nsid`, RFC
    /// 5001); `None`: none.
    nsid: Option<Box<[u8]>>,
    /// The TCP idle timeout in units of 100 ms, sent to TCP queries with
    /// edns-tcp-keepalive (RFC 7828 §3.3.2).
    keepalive: u16,
    /// The TLS listeners' certificate and key (`[tls]`), taken by each new
    /// TLS connection, so a reload's new certificate serves the next one.
    tls_server: Option<Arc<rustls::ServerConfig>>,
    /// Woken after a successful UPDATE, so its NOTIFYs leave at once (one
    /// for the process, carried by every snapshot; `None`: no notifier).
    notify_wake: Option<NotifyWake>,
}

/// A routed query before the guards after the table: one message (of this
/// kind) in the caller's buffer, or a transfer's messages.
enum Handled {
    Message(Response),
    /// A reply rate limiting does not count: a successful UPDATE's
    /// (NOERROR), as BIND 9, which limits only query responses and errors.
    Unlimited,
    Stream(Box<xfr::Messages>),
}

impl Dispatcher {
    /// A dispatcher answering from `sources`, with no CH answers (REFUSED),
    /// no transfers allowed, no keys, no cookies and no rate limiting.
    pub fn new(sources: SourceList) -> Dispatcher {
        Dispatcher {
            query: QueryProcessor::new(sources),
            chaos: ChaosOptions::default(),
            transfer: TransferPolicy::default(),
            update: UpdatePolicy::default(),
            keys: KeyRing::default(),
            cookies: None,
            rrl: None,
            metrics: None,
            dnstap: None,
            secondary: SecondaryPolicy::default(),
            nsid: None,
            keepalive: edns::keepalive_units(crate::config::DEFAULT_TCP_IDLE_TIMEOUT_SECS),
            tls_server: None,
            notify_wake: None,
        }
    }

    /// The same, waking `wake` after each successful UPDATE.
    pub fn with_notify_wake(self, wake: Option<NotifyWake>) -> Dispatcher {
        Dispatcher {
            notify_wake: wake,
            ..self
        }
    }

    /// What a successful UPDATE wakes (the NOTIFY poller), if anything.
    pub fn notify_wake(&self) -> Option<&NotifyWake> {
        self.notify_wake.as_ref()
    }

    /// The same, taking TLS connections with `server` (`None`: none).
    pub fn with_tls_server(self, server: Option<Arc<rustls::ServerConfig>>) -> Dispatcher {
        Dispatcher {
            tls_server: server,
            ..self
        }
    }

    /// The TLS server side new TLS connections take (`None`: no `[tls]`
    /// certificate).
    pub fn tls_server(&self) -> Option<&Arc<rustls::ServerConfig>> {
        self.tls_server.as_ref()
    }

    /// The same, sending `nsid` to queries that ask for it (RFC 5001; `None`:
    /// no NSID option).
    pub fn with_nsid(self, nsid: Option<&[u8]>) -> Dispatcher {
        Dispatcher {
            nsid: nsid.map(Box::from),
            ..self
        }
    }

    /// The same, telling TCP clients that ask (RFC 7828) an idle timeout of
    /// `units` × 100 ms ([`edns::keepalive_units`]).
    pub fn with_tcp_keepalive(self, units: u16) -> Dispatcher {
        Dispatcher {
            keepalive: units,
            ..self
        }
    }

    /// The idle timeout told to TCP clients, in units of 100 ms.
    pub fn tcp_keepalive(&self) -> u16 {
        self.keepalive
    }

    /// Bytes the options step 4 appends for a query asking for NSID (`nsid`)
    /// and keepalive (`keepalive`) over `transport` take, at most.
    #[inline(never)]
    fn option_room(&self, nsid: bool, keepalive: bool, transport: Transport) -> u16 {
        let mut room = 0;
        if let (true, Some(id)) = (nsid, &self.nsid) {
            room += 4 + id.len();
        }
        if keepalive && transport.is_stream() {
            room += edns::KEEPALIVE_OPTION_LEN;
        }
        room as u16
    }

    /// The same, with the secondary zones of `secondary` (NOTIFY in, expired
    /// zones answered SERVFAIL).
    pub fn with_secondary(self, secondary: SecondaryPolicy) -> Dispatcher {
        Dispatcher { secondary, ..self }
    }

    /// The same, answering CH-class queries per `chaos`.
    pub fn with_chaos(self, chaos: ChaosOptions) -> Dispatcher {
        Dispatcher { chaos, ..self }
    }

    /// The same, transferring zones per `transfer`.
    pub fn with_transfer(self, transfer: TransferPolicy) -> Dispatcher {
        Dispatcher { transfer, ..self }
    }

    /// The same, taking dynamic updates per `update` (RFC 2136).
    pub fn with_update(self, update: UpdatePolicy) -> Dispatcher {
        Dispatcher { update, ..self }
    }

    /// The same, verifying signed requests and signing replies with `keys`
    /// (RFC 8945).
    pub fn with_keys(self, keys: KeyRing) -> Dispatcher {
        Dispatcher { keys, ..self }
    }

    /// The same, with DNS cookies (`None`: off).
    pub fn with_cookies(self, cookies: Option<Cookies>) -> Dispatcher {
        Dispatcher { cookies, ..self }
    }

    /// The same, rate limiting UDP responses (`None`: off).
    pub fn with_rrl(self, rrl: Option<Arc<RateLimiter>>) -> Dispatcher {
        Dispatcher { rrl, ..self }
    }

    /// The same, counting into `metrics` (`None`: off).
    pub fn with_metrics(self, metrics: Option<Arc<Metrics>>) -> Dispatcher {
        Dispatcher {
            query: self.query.counting_zones(metrics.is_some()),
            metrics,
            ..self
        }
    }

    /// The same, logging messages to `dnstap` (`None`: off).
    pub fn with_dnstap(self, dnstap: Option<Arc<crate::dnstap::Dnstap>>) -> Dispatcher {
        Dispatcher { dnstap, ..self }
    }

    /// The dnstap log, if on.
    #[inline]
    pub fn dnstap(&self) -> Option<&Arc<crate::dnstap::Dnstap>> {
        self.dnstap.as_ref()
    }

    /// The data sources answered from.
    pub fn sources(&self) -> &SourceList {
        self.query.sources()
    }

    /// The transfer policy in force.
    pub fn transfer_policy(&self) -> &TransferPolicy {
        &self.transfer
    }

    /// The cookie secrets in force, if cookies are on (a reload keeps the
    /// previous secret accepted: [`Cookies::reloaded`]).
    pub fn cookies(&self) -> Option<&Cookies> {
        self.cookies.as_ref()
    }

    /// The counters, if metrics are on.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// The rate limiter in force, if any.
    pub fn rrl(&self) -> Option<&Arc<RateLimiter>> {
        self.rrl.as_ref()
    }

    /// Handles message `msg` received over `transport` from `peer`; a single
    /// reply is written into `out` (cleared first).
    pub fn handle(
        &self,
        msg: &[u8],
        transport: Transport,
        peer: IpAddr,
        out: &mut Vec<u8>,
    ) -> Reply {
        let Some(metrics) = &self.metrics else {
            return self.handle_seen(msg, transport, peer, out, &mut Seen::default());
        };
        let mut seen = Seen::default();
        let reply = self.handle_seen(msg, transport, peer, out, &mut seen);
        let sent = match &reply {
            Reply::Nothing => Sent::Nothing,
            Reply::Message => Sent::Message(out),
            Reply::Stream(messages) => Sent::Stream(messages.first_rcode()),
        };
        metrics.count(transport, &seen, sent);
        reply
    }

    /// [`Self::handle`], noting what the message was in `seen` (for
    /// metrics): the pipeline of the module documentation.
    fn handle_seen(
        &self,
        msg: &[u8],
        transport: Transport,
        peer: IpAddr,
        out: &mut Vec<u8>,
        seen: &mut Seen,
    ) -> Reply {
        let Some(head) = wire::peek_head(msg) else {
            return Reply::Nothing;
        };
        seen.opcode = Some(head.opcode);
        // One clock read for the guards (cookie timestamps, rate limits).
        let now = if self.cookies.is_some() || self.rrl.is_some() {
            crate::sys::unix_seconds()
        } else {
            0
        };
        let parsed = wire::parse_query(msg);
        // Other opcodes than QUERY are parsed only to find a TSIG to verify.
        let signed = parsed.as_ref().is_ok_and(|r| r.tsig.is_some());
        if !matches!(head.opcode, Opcode::QUERY | Opcode::NOTIFY | Opcode::UPDATE) && !signed {
            // No question (its format is the opcode's), RD alone
            // ([`Flags::rd_only`]), an OPT with EDE 21 Not Supported when
            // the message parsed with one (RFC 6891 §6.1.1).
            let opt = parsed
                .as_ref()
                .ok()
                .and_then(|req| ErrorOpt::to(req, Some(Ede::NOT_SUPPORTED)));
            not_implemented(head.id, head.opcode, head.flags, opt, out);
            return self.rate_limit(&unparsed(peer, transport, now), out, seen);
        }
        let mut req = match parsed {
            Ok(req) => req,
            Err(ParseError::Drop) => return Reply::Nothing,
            Err(ParseError::Reject {
                id,
                opcode,
                flags,
                rcode,
                question,
                edns,
            }) => {
                let header = Header::reply(id, opcode, flags, wire::Flags::empty(), rcode);
                let question = question.and_then(|(start, end)| msg.get(start..end));
                // A malformed option in a whole OPT record: FORMERR with an
                // OPT (RFC 6891 §7), as BIND 9 answers.
                let opt = edns.then_some(ErrorOpt {
                    dnssec_ok: false,
                    ede: None,
                });
                wire::write_error(out, header, question, opt);
                return self.rate_limit(&unparsed(peer, transport, now), out, seen);
            }
        };
        // Room for the options step 4 appends, when the query asked for any.
        if let Some(e) = &mut req.edns
            && (e.nsid || e.keepalive)
        {
            e.option_room = self.option_room(e.nsid, e.keepalive, transport);
        }
        seen.qtype = Some(req.qtype);
        if QUERY_LOG.load(std::sync::atomic::Ordering::Relaxed) {
            log_query(&req, transport, peer);
        }
        // 1. TSIG (RFC 8945 §5.2): verified before anything else looks at it.
        let signer = match req.tsig {
            None => None,
            Some(at) => {
                let metrics = self.metrics.as_deref();
                match tsig::check_request(
                    &self.keys,
                    metrics,
                    msg,
                    &req,
                    at,
                    (transport, peer),
                    out,
                ) {
                    Some(signer) => Some(signer),
                    // Rejected: its reply is in `out`.
                    None => return Reply::Message,
                }
            }
        };
        // 2. Cookies (RFC 7873 §5.2): the server cookie checked, and a new
        // one made, whatever the query is.
        let cookie = match &self.cookies {
            Some(cookies) => cookies.check(&req, peer, now, seen),
            None => None,
        };
        // 3. The table.
        let handled = self.route(msg, &req, transport, peer, out, signer.as_ref());
        // 4. The options appended to the one reply's OPT: cookie, NSID,
        // keepalive.
        if let (Some(e), Handled::Message(_) | Handled::Unlimited) = (&req.edns, &handled) {
            let nsid = if e.nsid { self.nsid.as_deref() } else { None };
            let keepalive = (e.keepalive && transport.is_stream()).then_some(self.keepalive);
            if cookie.is_some() || nsid.is_some() || keepalive.is_some() {
                let add = edns::Appended {
                    cookie: cookie.as_ref().map(|c| &c.reply),
                    nsid,
                    keepalive,
                };
                edns::append(out, &add, message_limit(&req, transport));
            }
        }
        let mut reply = match handled {
            Handled::Stream(messages) => Reply::Stream(messages),
            // Not a response to a standard query: no kind for the metrics.
            Handled::Unlimited => Reply::Message,
            Handled::Message(response) => {
                seen.kind = Some(response.kind);
                seen.zone = response.zone;
                // 5. Rate limiting.
                let outgoing = Outgoing {
                    client: peer,
                    transport,
                    response,
                    request: Some(&req),
                    cookie: cookie.as_ref(),
                    authenticated: signer.is_some(),
                    now,
                };
                self.rate_limit(&outgoing, out, seen)
            }
        };
        // 6. TSIG: the signature covers everything before it, last (RFC 8945
        // §5.3).
        if let Some(mut signer) = signer {
            match &mut reply {
                Reply::Nothing => {}
                Reply::Message => signer.sign_reply(&req, transport, out),
                Reply::Stream(messages) => messages.sign_with(signer.into_owned()),
            }
        }
        reply
    }

    /// Rate limiting, when on ([`RateLimiter::limit`]): the one reply in
    /// `out` is sent, replaced by a slip, or dropped. Inlined into each of
    /// its three callers, as the guard was before it had a file of its own:
    /// with rate limiting off it is one branch.
    #[inline(always)]
    fn rate_limit(&self, reply: &Outgoing<'_>, out: &mut Vec<u8>, seen: &mut Seen) -> Reply {
        match &self.rrl {
            Some(rrl) if !rrl.limit(reply, out, seen) => Reply::Nothing,
            _ => Reply::Message,
        }
    }

    /// The table (see the module documentation) for `req`, the parsed `msg`;
    /// `signer` holds the key a signed request was verified with.
    #[inline(always)]
    fn route(
        &self,
        msg: &[u8],
        req: &Request<'_>,
        transport: Transport,
        peer: IpAddr,
        out: &mut Vec<u8>,
        signer: Option<&Signer<'_>>,
    ) -> Handled {
        if req.opcode == Opcode::UPDATE {
            if self.secondary.is_secondary(&req.qname) {
                notify_in::refuse_update(req, peer, self.metrics.as_deref(), out);
                return Handled::Message(ERROR);
            }
            let client = update::Client {
                addr: peer,
                key: signer.map(|s| &s.key().name),
                tls: transport == Transport::Tls,
            };
            let rcode = update::update(self.sources(), &self.update, msg, req, &client, out);
            if let Some(m) = &self.metrics {
                m.count_update(crate::metrics::UpdateResult::of(rcode));
            }
            // Only a client the update policy let in gets NOERROR, and the
            // reply is no larger than the request: no amplification. Limiting
            // it dropped replies to a busy nsupdate (retried after 3 s).
            if rcode == Rcode::NOERROR {
                // Committed: NOTIFY the secondaries now, not at the next poll.
                if let Some(w) = &self.notify_wake {
                    w.wake();
                }
                return Handled::Unlimited;
            }
            return Handled::Message(ERROR);
        }
        if req.opcode == Opcode::NOTIFY {
            let key = signer.map(|s| &s.key().name);
            notify_in::notify(&self.secondary, req, peer, key, out);
            return Handled::Message(ERROR);
        }
        if req.opcode != Opcode::QUERY {
            // Only a signed request of another opcode gets here.
            let opt = ErrorOpt::to(req, Some(Ede::NOT_SUPPORTED));
            not_implemented(req.id, req.opcode, req.flags, opt, out);
            return Handled::Message(ERROR);
        }
        if req.edns.is_some_and(|e| e.version > 0) {
            return error(req, Rcode::BADVERS, None, transport, out);
        }
        if req.qclass == Class::IN && self.in_expired_zone(&req.qname) {
            return error(
                req,
                Rcode::SERVFAIL,
                Some(Ede::ZONE_EXPIRED),
                transport,
                out,
            );
        }
        match (req.qtype, transport) {
            (RType::AXFR | RType::IXFR, Transport::Tcp | Transport::Tls)
            | (RType::IXFR, Transport::Udp) => {
                let client = xfr::Client {
                    addr: peer,
                    key: signer.map(|s| &s.key().name),
                    transport,
                    reserve: signer.map_or(0, Signer::record_len),
                };
                let mut messages = xfr::transfer(self.sources(), &self.transfer, msg, req, &client);
                if transport.is_stream() {
                    return Handled::Stream(Box::new(messages));
                }
                *out = messages.next().unwrap_or_default();
                // Rate limited as an answer about this zone.
                return Handled::Message(Response {
                    kind: ResponseKind::Answer,
                    key: crate::name_hash::name_key(req.qname.as_wire(), req.qtype.0),
                    zone: 0,
                });
            }
            (RType::AXFR, Transport::Udp) => {
                // RFC 5936 §4.2: no AXFR over UDP; EDE 21 Not Supported.
                return error(
                    req,
                    Rcode::REFUSED,
                    Some(Ede::NOT_SUPPORTED),
                    transport,
                    out,
                );
            }
            _ => {}
        }
        // The rate-limiting name key is hashed only where it is read: UDP.
        let keyed = self.rrl.is_some() && transport == Transport::Udp;
        match req.qclass {
            Class::IN => {}
            Class::CH => {
                let answer = chaos::answer(&self.chaos, req);
                render(req, &answer, transport, out);
                return Handled::Message(answer.summary(req, keyed));
            }
            // No zone is served in other classes: EDE 20 Not Authoritative.
            _ => {
                let ede = Some(Ede::NOT_AUTHORITATIVE);
                return error(req, Rcode::REFUSED, ede, transport, out);
            }
        }
        match req.qtype {
            RType::OPT => error(req, Rcode::FORMERR, None, transport, out),
            t if t.is_meta() && t != RType::ANY => {
                error(req, Rcode::NOTIMP, Some(Ede::NOT_SUPPORTED), transport, out)
            }
            _ => Handled::Message(self.query.respond(req, transport, keyed, out)),
        }
    }

    /// True when the zone that answers `qname` is an expired secondary zone
    /// (one atomic load while no zone is expired).
    #[inline(always)]
    fn in_expired_zone(&self, qname: &Name) -> bool {
        self.secondary.expired.covers(qname) && self.best_zone_expired(qname)
    }

    /// The slow half of [`Self::in_expired_zone`]: the best zone for `qname`
    /// among the sources (a zone below the expired one, served from
    /// elsewhere, still answers).
    #[inline(never)]
    fn best_zone_expired(&self, qname: &Name) -> bool {
        match self.sources().find_zone(qname) {
            Ok(Some((_, zone))) => self.secondary.expired.contains(&zone.origin),
            _ => false,
        }
    }
}

/// One query log line (`authc querylog on`): client, transport, question,
/// flags that matter. Out of line: the query path only tests the switch.
#[inline(never)]
fn log_query(req: &Request<'_>, transport: Transport, peer: IpAddr) {
    let transport = match transport {
        Transport::Udp => "UDP",
        Transport::Tcp => "TCP",
        Transport::Tls => "TLS",
    };
    let edns = match req.edns {
        Some(e) if e.dnssec_ok => " +EDNS +DO",
        Some(_) => " +EDNS",
        None => "",
    };
    let tsig = if req.tsig.is_some() { " +TSIG" } else { "" };
    tracing::info!(
        target: "authd::querylog",
        "client {peer} {transport}: {} {} {}{edns}{tsig}",
        req.qname,
        class_name(req.qclass),
        req.qtype
    );
}

fn class_name(class: Class) -> String {
    match class {
        Class::IN => "IN".into(),
        Class::CH => "CH".into(),
        Class(n) => format!("CLASS{n}"),
    }
}

/// The response summary of an error reply (rate limited per client prefix).
const ERROR: Response = Response {
    kind: ResponseKind::Error,
    key: 0,
    zone: 0,
};

/// The error reply to a message that did not parse as a query (in `out`),
/// as rate limiting sees it: an error to `client`, dropped rather than
/// slipped, never exempt.
fn unparsed(client: IpAddr, transport: Transport, now: u64) -> Outgoing<'static> {
    Outgoing {
        client,
        transport,
        response: ERROR,
        request: None,
        cookie: None,
        authenticated: false,
        now,
    }
}

/// A reply to `req` with `rcode` and nothing but the question (and an OPT
/// when the query had one, with `ede`).
fn error(
    req: &Request<'_>,
    rcode: Rcode,
    ede: Option<Ede>,
    transport: Transport,
    out: &mut Vec<u8>,
) -> Handled {
    render(req, &Answer::error(rcode, ede), transport, out);
    Handled::Message(ERROR)
}

/// The NOTIMP reply to a message of opcode `opcode` not answered here, with
/// id `id` and flags `received`: no question, RD alone echoed
/// ([`Flags::rd_only`]), and `opt`.
fn not_implemented(
    id: u16,
    opcode: Opcode,
    received: Flags,
    opt: Option<ErrorOpt>,
    out: &mut Vec<u8>,
) {
    let header = Header::reply(
        id,
        opcode,
        received.rd_only(),
        Flags::empty(),
        Rcode::NOTIMP,
    );
    wire::write_error(out, header, None, opt);
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::sync::Arc;

    use authd_datasrc::DataSource;
    use authd_datasrc::memory::{MemorySource, MemoryZone};

    use super::*;
    use crate::acl::{Acl, AclEntry};
    use crate::keys::{Algorithm, Key, Secret};
    use crate::tsig::{ReplyProblem, ReplyVerifier, TsigError};

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn acl(entries: &[&str]) -> Acl {
        entries
            .iter()
            .map(|a| a.parse::<AclEntry>().expect("ACL entry"))
            .collect()
    }

    fn dispatcher(allow: &[&str]) -> Dispatcher {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/example.com.zone");
        dispatcher_for(&file, allow)
    }

    /// Serves `example.com.` from `file`, transfers per `allow`, knows the
    /// keys of [`keys`].
    fn dispatcher_for(file: &Path, allow: &[&str]) -> Dispatcher {
        let origin: Name = "example.com.".parse().expect("origin");
        let source = MemorySource::new("test");
        source.insert_zone(MemoryZone::from_master_file(&origin, file).expect("zone"));
        let source: Arc<dyn DataSource> = Arc::new(source);
        Dispatcher::new(SourceList::new(vec![source]))
            .with_chaos(ChaosOptions {
                version: Some("authd test".into()),
                hostname: None,
            })
            .with_transfer(TransferPolicy {
                allow: acl(allow),
                zones: Vec::new(),
            })
            .with_keys(KeyRing::new(keys().to_vec()))
    }

    /// `tk.` (HMAC-SHA256) and `other.` (HMAC-SHA1).
    fn keys() -> [Key; 2] {
        let key = |name: &str, algorithm, secret: &str| Key {
            name: name.parse().expect("name"),
            algorithm,
            secret: Secret::from_base64(secret).expect("secret"),
        };
        [
            key(
                "tk.",
                Algorithm::HmacSha256,
                "8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=",
            ),
            key("other.", Algorithm::HmacSha1, "c2VjcmV0IQ=="),
        ]
    }

    /// A one-question message: id 0x1234, header byte 2 `byte2` (QR, opcode,
    /// AA, TC, RD), `www.example.com.`, `qtype`, `qclass`; with `edns` an OPT
    /// of that version.
    fn message(byte2: u8, qtype: u16, qclass: u16, edns: Option<u8>) -> Vec<u8> {
        let mut m = vec![
            0x12,
            0x34,
            byte2,
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            u8::from(edns.is_some()),
        ];
        m.extend_from_slice(b"\x03www\x07example\x03com\x00");
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&qclass.to_be_bytes());
        if let Some(version) = edns {
            m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, version, 0, 0, 0, 0]);
        }
        m
    }

    /// (rcode with the OPT's upper bits, header byte 2, QDCOUNT, ANCOUNT).
    fn summary(reply: &[u8]) -> (u16, u8, u16, u16) {
        let mut rcode = u16::from(reply[3] & 0xF);
        let arcount = u16::from_be_bytes([reply[10], reply[11]]);
        if arcount > 0 && reply.len() >= 11 && reply[reply.len() - 11..][..3] == [0, 0, 41] {
            rcode |= u16::from(reply[reply.len() - 6]) << 4;
        }
        let qd = u16::from_be_bytes([reply[4], reply[5]]);
        let an = u16::from_be_bytes([reply[6], reply[7]]);
        (rcode, reply[2], qd, an)
    }

    fn one(d: &Dispatcher, msg: &[u8], transport: Transport) -> (u16, u8, u16, u16) {
        let mut out = Vec::new();
        assert_eq!(d.handle(msg, transport, PEER, &mut out), Reply::Message);
        assert_eq!(out[..2], [0x12, 0x34], "id echoed");
        summary(&out)
    }

    const IN: u16 = 1;
    const CH: u16 = 3;
    const HS: u16 = 4;
    const RD: u8 = 0x01;
    const QR: u8 = 0x80;
    const AA: u8 = 0x04;

    /// Every row of the table in the module documentation, with the exact
    /// rcode, header flags and section counts.
    #[test]
    fn each_row_of_the_table() {
        let d = dispatcher(&[]);
        let udp = Transport::Udp;
        // Opcodes other than QUERY, NOTIFY and UPDATE: NOTIMP, opcode and RD
        // echoed, no question.
        for opcode in [1u8, 2, 3, 6, 15] {
            let byte2 = (opcode << 3) | RD;
            assert_eq!(
                one(&d, &message(byte2, 6, IN, None), udp),
                (4, QR | byte2, 0, 0),
                "opcode {opcode}"
            );
        }
        // UPDATE goes to its handler: www.example.com. is no zone (and
        // example.com. is in memory), NOTAUTH with the zone section echoed.
        let byte2 = 5 << 3;
        assert_eq!(
            one(&d, &message(byte2, 6, IN, None), udp),
            (9, QR | byte2, 1, 0)
        );
        // NOTIFY for a zone that is not a secondary zone here: REFUSED, the
        // question echoed.
        let notify = (4 << 3) | RD;
        assert_eq!(
            one(&d, &message(notify, 6, IN, None), udp),
            (5, QR | notify, 1, 0)
        );
        // For a secondary zone, from its primary: NOERROR, AA (RFC 1996
        // §4.7), the refresh woken; from elsewhere, or not SOA: REFUSED.
        let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
        let expired = Arc::new(crate::secondary::ExpiredZones::default());
        let www: Name = "www.example.com.".parse().expect("name");
        let sd = dispatcher(&[]).with_secondary(SecondaryPolicy {
            zones: vec![(www.clone(), vec![(PEER, None)])],
            allow: Acl::default(),
            wake: Some(wake),
            expired: Arc::clone(&expired),
        });
        assert_eq!(
            one(&sd, &message(notify, 6, IN, None), udp),
            (0, QR | AA | notify, 1, 0)
        );
        assert_eq!(woken.try_recv().ok(), Some(www.clone()));
        // UPDATE for a secondary zone: REFUSED, the zone section echoed (a
        // change would be lost at the next transfer).
        let update = 5 << 3;
        assert_eq!(
            one(&sd, &message(update, 6, IN, None), udp),
            (5, QR | update, 1, 0)
        );
        assert_eq!(
            one(&sd, &message(notify, 1, IN, None), udp),
            (5, QR | notify, 1, 0)
        );
        let mut out = Vec::new();
        let elsewhere = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
        sd.handle(&message(notify, 6, IN, None), udp, elsewhere, &mut out);
        assert_eq!(summary(&out), (5, QR | notify, 1, 0));
        assert!(woken.try_recv().is_err());
        // A name in an expired secondary zone: SERVFAIL (RFC 1035 §4.3.5);
        // not when a zone below the expired one answers it, nor for CH.
        let com: Name = "example.com.".parse().expect("name");
        expired.set(&com, true);
        assert_eq!(one(&sd, &message(RD, 1, IN, None), udp), (2, QR | RD, 1, 0));
        expired.set(&com, false);
        expired.set(&Name::root(), true);
        assert_eq!(
            one(&sd, &message(RD, 1, IN, None), udp),
            (0, QR | AA | RD, 1, 2)
        );
        expired.set(&Name::root(), false);
        // A plain query: NOERROR, AA, the answer (www has two A records).
        assert_eq!(
            one(&d, &message(RD, 1, IN, None), udp),
            (0, QR | AA | RD, 1, 2)
        );
        // EDNS version 1: BADVERS (16: header 0, OPT 1), whatever the rest.
        assert_eq!(one(&d, &message(0, 1, IN, Some(1)), udp), (16, QR, 1, 0));
        assert_eq!(one(&d, &message(0, 252, CH, Some(1)), udp), (16, QR, 1, 0));
        // AXFR over UDP: REFUSED, even for an allowed client; IXFR over UDP
        // goes to the transfer handler (www.example.com. is no zone: NOTAUTH).
        let allowed = dispatcher(&["127.0.0.0/8"]);
        assert_eq!(
            one(&allowed, &message(0, 252, IN, None), udp),
            (5, QR, 1, 0)
        );
        assert_eq!(
            one(&allowed, &message(0, 251, IN, None), udp),
            (9, QR, 1, 0)
        );
        assert_eq!(one(&d, &message(0, 251, IN, None), udp), (5, QR, 1, 0));
        // Classes: CH to the chaos answers, others REFUSED.
        let mut version = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        version.extend_from_slice(b"\x07version\x04bind\x00\x00\x10\x00\x03");
        assert_eq!(one(&d, &version, udp), (0, QR | AA, 1, 1));
        assert_eq!(one(&d, &message(0, 16, CH, None), udp), (5, QR, 1, 0));
        assert_eq!(one(&d, &message(0, 1, HS, None), udp), (5, QR, 1, 0));
        assert_eq!(one(&d, &message(0, 1, 255, None), udp), (5, QR, 1, 0));
        // Meta qtypes: OPT is FORMERR; TSIG, TKEY, MAILB, MAILA NOTIMP; ANY answered.
        assert_eq!(one(&d, &message(0, 41, IN, None), udp), (1, QR, 1, 0));
        for qtype in [249, 250, 253, 254] {
            assert_eq!(
                one(&d, &message(0, qtype, IN, None), udp),
                (4, QR, 1, 0),
                "{qtype}"
            );
        }
        // ANY over UDP: one RRset (www's two A records, not its AAAAs too).
        assert_eq!(one(&d, &message(0, 255, IN, None), udp), (0, QR | AA, 1, 2));
        assert_eq!(
            one(&d, &message(0, 255, IN, None), Transport::Tcp),
            (0, QR | AA, 1, 4)
        );
        // Malformed QUERY: FORMERR (two questions: no question echoed).
        let mut two = message(0, 1, IN, None);
        two[5] = 2;
        assert_eq!(one(&d, &two, udp), (1, QR, 0, 0));
    }

    /// Nothing is sent for a response or a runt, over either transport.
    #[test]
    fn responses_and_runts_get_nothing() {
        let d = dispatcher(&["127.0.0.1"]);
        let mut out = Vec::new();
        for transport in [Transport::Udp, Transport::Tcp] {
            let response = message(QR, 1, IN, None);
            assert_eq!(
                d.handle(&response, transport, PEER, &mut out),
                Reply::Nothing
            );
            assert_eq!(
                d.handle(&response[..11], transport, PEER, &mut out),
                Reply::Nothing
            );
            let axfr_response = message(QR, 252, IN, None);
            assert_eq!(
                d.handle(&axfr_response, transport, PEER, &mut out),
                Reply::Nothing
            );
        }
    }

    /// AXFR over TCP goes to the transfer handler, which applies the policy.
    #[test]
    fn transfers_over_tcp_follow_the_policy() {
        let mut axfr = message(0, 252, IN, None);
        // The zone apex as the question.
        axfr.drain(12..16);
        let mut out = Vec::new();
        let refused = dispatcher(&["127.0.0.2"]).handle(&axfr, Transport::Tcp, PEER, &mut out);
        let Reply::Stream(msgs) = refused else {
            panic!("{refused:?}");
        };
        let msgs: Vec<Vec<u8>> = msgs.collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!(summary(&msgs[0]), (5, QR, 1, 0));
        let allowed = dispatcher(&["127.0.0.1"]).handle(&axfr, Transport::Tcp, PEER, &mut out);
        let Reply::Stream(msgs) = allowed else {
            panic!("{allowed:?}");
        };
        let msgs: Vec<Vec<u8>> = msgs.collect();
        let (rcode, flags, qd, an) = summary(&msgs[0]);
        assert_eq!((rcode, flags, qd), (0, QR | AA, 1));
        assert!(an > 2, "the whole zone: {an} RRs");
    }

    /// `msg` signed with `key` at `now` (plus `skew` seconds): the message and
    /// its MAC.
    fn signed(mut msg: Vec<u8>, key: &Key, skew: i64) -> (Vec<u8>, tsig::RequestMac) {
        let at = tsig::now().saturating_add_signed(skew);
        let mac = tsig::sign_request(key, &mut msg, at);
        (msg, mac)
    }

    /// The TSIG record of a reply: (error, MAC length).
    fn tsig_of(reply: &[u8]) -> Option<(TsigError, usize)> {
        let rec = tsig::read_record(reply, tsig::find(reply)?)?;
        Some((rec.error, rec.mac.len()))
    }

    /// A signed request goes through the table and its reply is signed; every
    /// way an attacker can get the TSIG wrong gets its exact answer: unknown
    /// key or algorithm BADKEY, wrong secret BADSIG (both NOTAUTH with an
    /// unsigned TSIG, no answer), skewed clock BADTIME (signed, our time in
    /// Other Data), a MAC cut below the RFC minimum or a TSIG not last or twice
    /// FORMERR without TSIG.
    #[test]
    fn signed_requests_are_verified_and_answered_signed() {
        let d = dispatcher(&[]);
        let [tk, other] = keys();
        let udp = Transport::Udp;
        let mut out = Vec::new();
        // Right key: answered (www has two A records) and signed.
        for key in [&tk, &other] {
            let (msg, mac) = signed(message(RD, 1, IN, None), key, 0);
            assert_eq!(one(&d, &msg, udp), (0, QR | AA | RD, 1, 2), "{}", key.name);
            d.handle(&msg, udp, PEER, &mut out);
            assert_eq!(tsig::verify_reply(key, &mac, &out, tsig::now()), Ok(()));
            assert_eq!(
                tsig_of(&out),
                Some((TsigError::NOERROR, key.algorithm.mac_len()))
            );
        }
        // Unknown key, and a known name with another algorithm: BADKEY.
        let mut unknown = tk.clone();
        unknown.name = "nobody.".parse().expect("name");
        let mut wrong_alg = tk.clone();
        wrong_alg.algorithm = Algorithm::HmacSha512;
        for key in [&unknown, &wrong_alg] {
            let (msg, mac) = signed(message(RD, 1, IN, None), key, 0);
            assert_eq!(one(&d, &msg, udp), (9, QR | RD, 1, 0));
            d.handle(&msg, udp, PEER, &mut out);
            assert_eq!(tsig_of(&out), Some((TsigError::BADKEY, 0)));
            assert_eq!(
                tsig::verify_reply(key, &mac, &out, tsig::now()),
                Err(ReplyProblem::Error(TsigError::BADKEY))
            );
        }
        // Wrong secret: BADSIG, unsigned.
        let mut wrong_secret = tk.clone();
        wrong_secret.secret = Secret::from_base64("AAAAAAAAAAAAAAAAAAAAAA==").expect("b64");
        let (msg, _) = signed(message(RD, 1, IN, None), &wrong_secret, 0);
        assert_eq!(one(&d, &msg, udp), (9, QR | RD, 1, 0));
        d.handle(&msg, udp, PEER, &mut out);
        assert_eq!(tsig_of(&out), Some((TsigError::BADSIG, 0)));
        // A request tampered with after signing: BADSIG.
        let (mut msg, _) = signed(message(RD, 1, IN, None), &tk, 0);
        msg[13] = b'W';
        assert_eq!(one(&d, &msg, udp), (9, QR | RD, 1, 0));
        d.handle(&msg, udp, PEER, &mut out);
        assert_eq!(tsig_of(&out), Some((TsigError::BADSIG, 0)));
        // Clock skew: within the fudge (300 s) fine, beyond it BADTIME, signed
        // with the client's time echoed and ours in Other Data.
        for skew in [-290, 290] {
            let (msg, _) = signed(message(RD, 1, IN, None), &tk, skew);
            assert_eq!(one(&d, &msg, udp).0, 0, "skew {skew}");
        }
        for skew in [-3600, 3600] {
            let (msg, mac) = signed(message(RD, 1, IN, None), &tk, skew);
            assert_eq!(one(&d, &msg, udp), (9, QR | RD, 1, 0), "skew {skew}");
            let before = tsig::now();
            d.handle(&msg, udp, PEER, &mut out);
            assert_eq!(tsig_of(&out), Some((TsigError::BADTIME, 32)));
            let ours = tsig::reply_server_time(&out).expect("server time");
            assert!((before..=tsig::now()).contains(&ours), "{ours}");
            assert_eq!(
                tsig::verify_reply(&tk, &mac, &out, before.saturating_add_signed(skew)),
                Err(ReplyProblem::Error(TsigError::BADTIME))
            );
        }
        // Truncated MACs: 16 of 32 bytes accepted (RFC 8945 §5.2.2.1), the
        // reply carrying a full MAC; 15 FORMERR, as a MAC of 0 bytes.
        for (size, want) in [(16usize, 0u16), (31, 0), (15, 1), (10, 1), (0, 1)] {
            let msg = truncate_mac(&signed(message(RD, 1, IN, None), &tk, 0).0, size);
            let got = one(&d, &msg, udp);
            assert_eq!(got.0, want, "MAC of {size} bytes");
            d.handle(&msg, udp, PEER, &mut out);
            if want == 0 {
                assert_eq!(tsig_of(&out), Some((TsigError::NOERROR, 32)));
            } else {
                assert_eq!((got, tsig_of(&out)), ((1, QR | RD, 1, 0), None));
            }
        }
        // TSIG not last (an OPT after it), or two TSIGs: FORMERR, no TSIG.
        let (msg, _) = signed(message(RD, 1, IN, None), &tk, 0);
        let tsig_rr = msg[message(RD, 1, IN, None).len()..].to_vec();
        let mut not_last = msg.clone();
        not_last.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        not_last[11] = 2;
        let mut twice = msg.clone();
        twice.extend_from_slice(&tsig_rr);
        twice[11] = 2;
        for bad in [not_last, twice] {
            assert_eq!(one(&d, &bad, udp), (1, QR | RD, 1, 0));
            d.handle(&bad, udp, PEER, &mut out);
            assert_eq!(tsig_of(&out), None);
        }
        // Another opcode (NOTIFY for a zone not secondary here), signed:
        // REFUSED, signed; with an unknown key: BADKEY. Unsigned: REFUSED,
        // unsigned.
        let notify = message((4 << 3) | RD, 6, IN, None);
        let (msg, mac) = signed(notify.clone(), &tk, 0);
        assert_eq!(one(&d, &msg, udp), (5, QR | (4 << 3) | RD, 1, 0));
        d.handle(&msg, udp, PEER, &mut out);
        assert_eq!(tsig::verify_reply(&tk, &mac, &out, tsig::now()), Ok(()));
        let (msg, _) = signed(notify.clone(), &unknown, 0);
        assert_eq!(one(&d, &msg, udp), (9, QR | (4 << 3) | RD, 1, 0));
        d.handle(&notify, udp, PEER, &mut out);
        assert_eq!(tsig_of(&out), None);
    }

    /// `msg` (signed) with its MAC cut to `size` bytes (zero-padded when
    /// longer), lengths adjusted.
    fn truncate_mac(msg: &[u8], size: usize) -> Vec<u8> {
        let at = tsig::find(msg).expect("signed");
        let rec = tsig::read_record(msg, at).expect("record");
        let mac_at = msg.len() - 6 - rec.mac.len();
        let mut out = msg[..mac_at - 2].to_vec();
        out.extend_from_slice(&(size as u16).to_be_bytes());
        out.extend((0..size).map(|i| rec.mac.get(i).copied().unwrap_or(0)));
        out.extend_from_slice(&msg[msg.len() - 6..]);
        let rdlen_at = at + rec.key_name.as_wire().len() + 8;
        let rdlen = u16::from_be_bytes([out[rdlen_at], out[rdlen_at + 1]]) as usize;
        let rdlen = rdlen + size - rec.mac.len();
        out[rdlen_at..rdlen_at + 2].copy_from_slice(&(rdlen as u16).to_be_bytes());
        out
    }

    /// A signed reply the TSIG would push past 512 bytes (an apex TXT RRset
    /// of 7 × 50-byte strings, no EDNS: 470 bytes unsigned) is cut to the
    /// question, TC set, NOERROR, and signed (RFC 8945 §5.3); over TCP the
    /// whole answer is signed.
    #[test]
    fn signed_reply_too_big_for_udp_is_truncated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("big.zone");
        let mut zone = String::from("$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
        for i in 0..7 {
            zone.push_str(&format!("@ TXT \"{i}{}\"\n", "x".repeat(49)));
        }
        std::fs::write(&file, zone).expect("write zone");
        let d = dispatcher_for(&file, &[]);
        let [tk, _] = keys();
        let mut apex_any = message(0, 16, IN, None);
        apex_any.drain(12..16);
        let mut out = Vec::new();
        d.handle(&apex_any, Transport::Udp, PEER, &mut out);
        let unsigned = out.len();
        assert_eq!(unsigned, 470);
        let (msg, mac) = signed(apex_any, &tk, 0);
        assert_eq!(one(&d, &msg, Transport::Udp), (0, QR | AA | 0x02, 1, 0));
        d.handle(&msg, Transport::Udp, PEER, &mut out);
        assert!(out.len() <= 512);
        assert_eq!(u16::from_be_bytes([out[10], out[11]]), 1, "the TSIG alone");
        assert_eq!(tsig::verify_reply(&tk, &mac, &out, tsig::now()), Ok(()));
        let (rcode, flags, qd, an) = one(&d, &msg, Transport::Tcp);
        assert_eq!((rcode, flags, qd), (0, QR | AA, 1));
        assert_eq!(an, 7);
        d.handle(&msg, Transport::Tcp, PEER, &mut out);
        assert_eq!(tsig::verify_reply(&tk, &mac, &out, tsig::now()), Ok(()));
    }

    /// The transfer ACL by address, by key and by both, and a per-zone list
    /// replacing the global one; refusals of signed requests are signed; a
    /// request whose TSIG fails never reaches the ACL (BADSIG, not REFUSED).
    #[test]
    fn transfer_acl_by_address_key_and_zone() {
        let [tk, other] = keys();
        let mut axfr = message(0, 252, IN, None);
        axfr.drain(12..16);
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        // (peer, key) → rcode of the first message
        let ask = |d: &Dispatcher, peer: &str, key: Option<&Key>| -> u16 {
            let mut out = Vec::new();
            let (msg, mac) = match key {
                Some(k) => {
                    let (m, mac) = signed(axfr.clone(), k, 0);
                    (m, Some(mac))
                }
                None => (axfr.clone(), None),
            };
            let Reply::Stream(msgs) = d.handle(&msg, Transport::Tcp, ip(peer), &mut out) else {
                panic!("a stream");
            };
            let msgs: Vec<Vec<u8>> = msgs.collect();
            if let (Some(k), Some(mac)) = (key, &mac) {
                assert_eq!(tsig::verify_reply(k, mac, &msgs[0], tsig::now()), Ok(()));
            } else {
                assert_eq!(tsig_of(&msgs[0]), None);
            }
            summary(&msgs[0]).0
        };
        let global = ["192.0.2.0/24", "key tk.", "127.0.0.0/8 key other."];
        let d = dispatcher(&global);
        // example.com. with its own list: only `other.`, from anywhere.
        let mut zoned = dispatcher(&global);
        zoned.transfer.zones = vec![("example.com.".parse().expect("name"), acl(&["key other."]))];
        let cases = [
            // (dispatcher, peer, key, rcode)
            (&d, "192.0.2.7", None, 0),
            (&d, "192.0.2.7", Some(&other), 0),
            (&d, "127.0.0.1", None, 5),
            (&d, "198.51.100.1", Some(&tk), 0),
            (&d, "127.0.0.1", Some(&other), 0),
            (&d, "198.51.100.1", Some(&other), 5),
            (&d, "198.51.100.1", None, 5),
            (&zoned, "192.0.2.7", None, 5),
            (&zoned, "198.51.100.1", Some(&tk), 5),
            (&zoned, "198.51.100.1", Some(&other), 0),
            (&zoned, "127.0.0.1", Some(&other), 0),
        ];
        for (i, (d, peer, key, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                ask(d, peer, key),
                want,
                "case {i}: {peer} {:?}",
                key.map(|k| &k.name)
            );
        }
        // From an allowed address, a wrong secret is still BADSIG.
        let mut wrong = other.clone();
        wrong.secret = Secret::from_base64("AAAA").expect("b64");
        let (msg, _) = signed(axfr.clone(), &wrong, 0);
        let mut out = Vec::new();
        assert_eq!(
            d.handle(&msg, Transport::Tcp, ip("192.0.2.7"), &mut out),
            Reply::Message
        );
        assert_eq!(summary(&out).0, 9);
        assert_eq!(tsig_of(&out), Some((TsigError::BADSIG, 0)));
    }

    /// A signed AXFR too big for one message is signed message by message
    /// (RFC 8945 §5.3.1): each verifies over the previous MAC, none exceeds
    /// 65535 bytes with its TSIG.
    #[test]
    fn signed_transfers_are_signed_message_by_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut zone = String::from(
            "$TTL 300\n@ SOA ns1 hm 7 3600 900 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n",
        );
        for i in 0..1500 {
            zone.push_str(&format!("t{i} TXT \"{}\"\n", "x".repeat(200)));
        }
        let file = dir.path().join("big.zone");
        std::fs::write(&file, zone).expect("write zone");
        let d = dispatcher_for(&file, &["key tk."]);
        let [tk, _] = keys();
        let mut axfr = message(0, 252, IN, None);
        axfr.drain(12..16);
        let (msg, mac) = signed(axfr, &tk, 0);
        let mut out = Vec::new();
        let Reply::Stream(msgs) = d.handle(&msg, Transport::Tcp, PEER, &mut out) else {
            panic!("a stream");
        };
        let msgs: Vec<Vec<u8>> = msgs.collect();
        assert!(msgs.len() >= 5, "{} messages", msgs.len());
        let mut chain = ReplyVerifier::new(&tk, &mac);
        let mut records = 0;
        for (i, m) in msgs.iter().enumerate() {
            assert!(m.len() <= 65535, "message {i}: {} bytes", m.len());
            assert_eq!(chain.verify(m, tsig::now()), Ok(()), "message {i}");
            records += usize::from(summary(m).3);
        }
        assert_eq!(
            records,
            1500 + 3 + 1,
            "SOA, NS, A, the TXTs, the closing SOA"
        );
        // Out of order: the chain breaks at once.
        let mut broken = ReplyVerifier::new(&tk, &mac);
        assert_eq!(broken.verify(&msgs[0], tsig::now()), Ok(()));
        assert_eq!(
            broken.verify(&msgs[2], tsig::now()),
            Err(ReplyProblem::BadMac)
        );
    }

    /// `message(byte2, qtype, IN, Some(0))` with `options` in its OPT.
    fn with_options(byte2: u8, qtype: u16, options: &[u8]) -> Vec<u8> {
        let mut m = message(byte2, qtype, IN, Some(0));
        let at = m.len() - 2;
        m[at..].copy_from_slice(&(options.len() as u16).to_be_bytes());
        m.extend_from_slice(options);
        m
    }

    /// The reply to `msg` over `transport` from `d`.
    fn reply(d: &Dispatcher, msg: &[u8], transport: Transport) -> Vec<u8> {
        let mut out = Vec::new();
        assert_eq!(d.handle(msg, transport, PEER, &mut out), Reply::Message);
        out
    }

    /// The options of the OPT record ending `reply` (checking its RDLENGTH).
    fn options_of(reply: &[u8]) -> &[u8] {
        let at = edns::find_opt(reply).expect("an OPT at the end");
        &reply[at + 11..]
    }

    const NSID: [u8; 4] = [0, 3, 0, 0];
    const KEEPALIVE: [u8; 4] = [0, 11, 0, 0];

    /// NSID to a query asking for it, over UDP and TCP; keepalive over TCP
    /// only; neither unasked or unconfigured; the room they take left free
    /// by rendering (a full UDP reply still fits its limit).
    #[test]
    fn nsid_and_keepalive_are_appended_when_asked() {
        let d = dispatcher(&[])
            .with_nsid(Some(b"ns1"))
            .with_tcp_keepalive(70);
        let nsid = [0, 3, 0, 3, b'n', b's', b'1'];
        let both = [NSID, KEEPALIVE].concat();
        let q = with_options(RD, 1, &both);
        assert_eq!(options_of(&reply(&d, &q, Transport::Udp)), nsid);
        let tcp = reply(&d, &q, Transport::Tcp);
        assert_eq!(
            options_of(&tcp),
            [&nsid[..], &[0, 11, 0, 2, 0, 70]].concat()
        );
        assert_eq!(summary(&tcp), (0, QR | AA | RD, 1, 2));
        let q = with_options(RD, 1, &KEEPALIVE);
        assert!(options_of(&reply(&d, &q, Transport::Udp)).is_empty());
        let plain = message(RD, 1, IN, Some(0));
        assert!(options_of(&reply(&d, &plain, Transport::Tcp)).is_empty());
        let unset = dispatcher(&[]);
        let q = with_options(RD, 1, &NSID);
        assert!(options_of(&reply(&unset, &q, Transport::Udp)).is_empty());
        // The room: a 512-byte UDP limit, filled by an ANY answer over TCP's
        // worth of records, still holds the NSID.
        let d = dispatcher(&[]).with_nsid(Some(&[b'x'; 100]));
        let mut q = with_options(RD, 255, &NSID);
        let payload = q.len() - NSID.len() - 11 + 3;
        q[payload..payload + 2].copy_from_slice(&512u16.to_be_bytes());
        let out = reply(&d, &q, Transport::Udp);
        assert!(out.len() <= 512, "{} bytes", out.len());
        assert_eq!(options_of(&out).len(), 104);
    }

    /// EDEs to EDNS queries, none (and no OPT) without EDNS; the NOTIMP
    /// reply to an unknown opcode keeps RD, not CD.
    #[test]
    fn extended_errors_go_with_edns_only() {
        let d = dispatcher(&[]).with_nsid(Some(b"ns1"));
        let ede = |code: u8| vec![0, 15, 0, 2, 0, code];
        // A name in no zone: REFUSED, 20; with NSID asked, both.
        let mut nowhere = message(RD, 1, IN, Some(0));
        nowhere[17] = b'x'; // www.exaxple.com.
        let out = reply(&d, &nowhere, Transport::Udp);
        assert_eq!((summary(&out).0, options_of(&out)), (5, &ede(20)[..]));
        let mut asked = with_options(RD, 1, &NSID);
        asked[17] = b'x';
        let out = reply(&d, &asked, Transport::Udp);
        assert_eq!(
            options_of(&out),
            [ede(20), vec![0, 3, 0, 3, b'n', b's', b'1']].concat()
        );
        let mut plain = message(RD, 1, IN, None);
        plain[17] = b'x';
        let out = reply(&d, &plain, Transport::Udp);
        assert_eq!((summary(&out).0, &out[10..12]), (5, &[0u8, 0][..]));
        // Meta qtype MAILB: NOTIMP, 21. AXFR over UDP: REFUSED, 21. Class
        // HS: REFUSED, 20.
        let out = reply(&d, &message(RD, 253, IN, Some(0)), Transport::Udp);
        assert_eq!((summary(&out).0, options_of(&out)), (4, &ede(21)[..]));
        let out = reply(&d, &message(0, 252, IN, Some(0)), Transport::Udp);
        assert_eq!((summary(&out).0, options_of(&out)), (5, &ede(21)[..]));
        let out = reply(&d, &message(0, 1, HS, Some(0)), Transport::Udp);
        assert_eq!((summary(&out).0, options_of(&out)), (5, &ede(20)[..]));
        // Opcode 3 with RD and CD: NOTIMP, RD kept, CD not, an OPT with 21.
        let mut odd = message((3 << 3) | RD, 6, IN, Some(0));
        odd[3] |= 0x10;
        let out = reply(&d, &odd, Transport::Udp);
        assert_eq!(summary(&out), (4, QR | (3 << 3) | RD, 0, 0));
        assert_eq!(out[3], 4, "CD cleared, NOTIMP");
        assert_eq!(options_of(&out), ede(21));
        // A refused NOTIFY: 18.
        let out = reply(&d, &message(4 << 3, 6, IN, Some(0)), Transport::Udp);
        assert_eq!((summary(&out).0, options_of(&out)), (5, &ede(18)[..]));
        // A malformed COOKIE: FORMERR with an option-less OPT.
        let out = reply(
            &d,
            &with_options(RD, 1, &[0, 10, 0, 2, 1, 2]),
            Transport::Udp,
        );
        assert_eq!(summary(&out).0, 1);
        assert!(options_of(&out).is_empty());
    }

    /// A chain longer than the old cut (8) is followed whole; one that loops
    /// back after more links than are compared one by one ends at its first
    /// repeat; over UDP, what does not fit sets TC.
    #[test]
    fn cname_chains_are_followed_until_a_loop_or_the_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut zone = String::from("$TTL 300\n@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n");
        for i in 0..100 {
            zone.push_str(&format!("c{i} CNAME c{}\n", i + 1));
        }
        zone.push_str("c100 A 192.0.2.100\n");
        for i in 0..40 {
            zone.push_str(&format!("r{i} CNAME r{}\n", i + 1));
        }
        zone.push_str("r40 CNAME r20\n");
        let file = dir.path().join("chain.zone");
        std::fs::write(&file, zone).expect("write zone");
        let d = dispatcher_for(&file, &[]);
        let ask = |name: &[u8], transport| {
            let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            m.push(name.len() as u8);
            m.extend_from_slice(name);
            m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
            one(&d, &m, transport)
        };
        assert_eq!(ask(b"c88", Transport::Udp), (0, QR | AA, 1, 13));
        assert_eq!(ask(b"c0", Transport::Tcp), (0, QR | AA, 1, 101));
        assert_eq!(ask(b"r0", Transport::Tcp), (0, QR | AA, 1, 41));
        let (rcode, flags, _, an) = ask(b"c0", Transport::Udp);
        assert_eq!((rcode, flags), (0, QR | AA | 0x02), "TC");
        assert!(an < 101, "{an} records");
    }
}
