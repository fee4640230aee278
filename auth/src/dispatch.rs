//! The dispatcher: one place that decides what a message is and which handler
//! answers it, before any handler looks at it. The server hands it every
//! message ([`Dispatcher::handle`]); sockets, framing and limits stay in
//! [`crate::server`], DNS semantics in the handlers.
//!
//! | opcode | class | qtype | handler |
//! |---|---|---|---|
//! | any | any | any, EDNS version > 0 | BADVERS (RFC 6891 §6.1.3) |
//! | QUERY | any | AXFR, IXFR over TCP | [`crate::xfr::transfer`] (`[transfer] allow`) |
//! | QUERY | any | AXFR, IXFR over UDP | REFUSED (RFC 1995 §2, RFC 5936 §4.2) |
//! | QUERY | IN | OPT | FORMERR (RFC 6891 §6.1.1) |
//! | QUERY | IN | other meta types (TSIG, TKEY, MAILA, MAILB) | NOTIMP |
//! | QUERY | IN | ANY and data types | [`crate::query::QueryProcessor`] |
//! | QUERY | CH | any | [`crate::chaos`] (`version.bind`, `hostname.bind`) |
//! | QUERY | other | any | REFUSED |
//! | NOTIFY | | | NOTIMP (the secondary role will answer it) |
//! | UPDATE | | | NOTIMP (dynamic update will answer it) |
//! | others | | | NOTIMP |
//!
//! A message shorter than a header, or a response (QR=1), gets nothing; a
//! malformed QUERY gets FORMERR ([`crate::wire::parse_query`]). Over UDP an
//! ANY query is answered with one RRset (RFC 8482 §4.1).
//!
//! Around the table, for every reply: DNS cookies ([`crate::cookies`]; the
//! server cookie is checked before the table, the reply's COOKIE option
//! appended after it), then response rate limiting over UDP
//! ([`crate::rrl`]; never for a valid server cookie): send, slip (a minimal
//! TC=1 reply, or BADCOOKIE to a client that sent a client cookie) or drop.
//!
//! A [`Dispatcher`] is an immutable snapshot of everything a reload replaces
//! — the sources (through the query processor), the CH answers, the transfer
//! policy, the cookie secrets and rate limits — swapped whole by [`crate::server::DispatcherHandle::store`], so a
//! message is handled entirely under the old configuration or entirely under
//! the new one. Later policy (keys, update grants, rate limits) joins it here.

use std::net::IpAddr;
use std::sync::Arc;

use authd_datasrc::{Class, RType, SourceList};

use crate::chaos::{self, ChaosOptions};
use crate::cookies::{Checked, Cookies};
use crate::metrics::{CookieSeen, Limited, Metrics};
use crate::query::{Answer, QueryProcessor, Response, ResponseKind, Transport, render};
use crate::rrl::{Action, RateLimiter};
use crate::wire::{self, Header, Opcode, ParseError, Rcode, Request};
use crate::xfr::{self, TransferPolicy};

/// What [`Dispatcher::handle`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Send nothing (a response, less than a header, or a rate-limited reply
    /// dropped).
    Nothing,
    /// One reply, written into the caller's buffer.
    Message,
    /// Several replies in order, each without a TCP length prefix (a zone
    /// transfer; only over TCP).
    Stream(Vec<Vec<u8>>),
}

/// Routes messages to their handlers under one configuration snapshot.
pub struct Dispatcher {
    query: QueryProcessor,
    chaos: ChaosOptions,
    transfer: TransferPolicy,
    /// DNS cookies (RFC 7873), when on.
    cookies: Option<Cookies>,
    /// Counters, when metrics are on (one set for the process, shared by
    /// every snapshot).
    metrics: Option<Arc<Metrics>>,
    /// UDP response rate limiting, when on (shared with the next snapshot
    /// when a reload leaves its settings alone, so no client is forgiven).
    rrl: Option<Arc<RateLimiter>>,
}

/// What a message was, noted on its way for the metrics.
#[derive(Default)]
struct Seen {
    opcode: Option<Opcode>,
    qtype: Option<RType>,
    kind: Option<ResponseKind>,
    limited: Option<Limited>,
    cookie: Option<CookieSeen>,
}

/// A handled query before the guards after it: one message (of this kind)
/// in the caller's buffer, or a transfer's messages.
enum Handled {
    Message(Response),
    Stream(Vec<Vec<u8>>),
}

impl Dispatcher {
    /// A dispatcher answering from `sources`, with no CH answers (REFUSED),
    /// no transfers allowed, no cookies and no rate limiting.
    pub fn new(sources: SourceList) -> Dispatcher {
        Dispatcher {
            query: QueryProcessor::new(sources),
            chaos: ChaosOptions::default(),
            transfer: TransferPolicy::default(),
            cookies: None,
            rrl: None,
            metrics: None,
        }
    }

    /// The same, answering CH-class queries per `chaos`.
    pub fn with_chaos(self, chaos: ChaosOptions) -> Dispatcher {
        Dispatcher { chaos, ..self }
    }

    /// The same, transferring zones per `transfer`.
    pub fn with_transfer(self, transfer: TransferPolicy) -> Dispatcher {
        Dispatcher { transfer, ..self }
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
        Dispatcher { metrics, ..self }
    }

    /// The counters, if metrics are on.
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    /// The rate limiter in force, if any.
    pub fn rrl(&self) -> Option<&Arc<RateLimiter>> {
        self.rrl.as_ref()
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
        let Some(opcode) = seen.opcode else {
            return reply;
        };
        let rcode = match &reply {
            Reply::Nothing => None,
            Reply::Message => Some(wire::reply_rcode(out)),
            Reply::Stream(messages) => {
                let rcode = messages.first().map(|m| wire::reply_rcode(m));
                let kind = usize::from(seen.qtype == Some(RType::IXFR));
                let result = usize::from(rcode != Some(Rcode::NOERROR));
                metrics.transfers[kind][result].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                rcode
            }
        };
        metrics.worker(|w| {
            w.query(transport, opcode, seen.qtype, rcode);
            if let Some(kind) = seen.kind
                && reply == Reply::Message
            {
                let tc = out.get(2).is_some_and(|b| b & 0x02 != 0);
                w.response(kind, tc);
            }
            if let Some(l) = seen.limited {
                w.limited(l);
            }
            if let Some(c) = seen.cookie {
                w.cookie(c);
            }
        });
        reply
    }

    /// [`Self::handle`], noting what the message was in `seen` (for metrics).
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
        if head.opcode != Opcode::QUERY {
            // NOTIFY (RFC 1996) and UPDATE (RFC 2136) plug in here.
            let header = Header::reply(
                head.id,
                head.opcode,
                head.flags,
                wire::Flags::empty(),
                Rcode::NOTIMP,
            );
            wire::write_error(out, header, None);
            return self.limit(None, transport, peer, ERROR, None, 0, out, seen);
        }
        let req = match wire::parse_query(msg) {
            Ok(req) => req,
            Err(ParseError::Drop) => return Reply::Nothing,
            Err(ParseError::Reject {
                id,
                opcode,
                flags,
                rcode,
                question,
            }) => {
                let header = Header::reply(id, opcode, flags, wire::Flags::empty(), rcode);
                let question = question.and_then(|(start, end)| msg.get(start..end));
                wire::write_error(out, header, question);
                return self.limit(None, transport, peer, ERROR, None, 0, out, seen);
            }
        };
        seen.qtype = Some(req.qtype);
        // One clock read for the guards (cookie timestamps, rate limits).
        let now = if self.cookies.is_some() || self.rrl.is_some() {
            crate::sys::unix_seconds()
        } else {
            0
        };
        // RFC 7873 §5.2: the server cookie is checked, and a new one made,
        // whatever the query is.
        let cookie = match (&self.cookies, req.edns.and_then(|e| e.cookie)) {
            (Some(cookies), Some(cookie)) => Some(cookies.answer(&cookie, peer, now)),
            _ => None,
        };
        seen.cookie = cookie.map(|c| {
            if c.valid {
                CookieSeen::Valid
            } else {
                CookieSeen::New
            }
        });
        match self.route(&req, msg, transport, peer, out) {
            Handled::Stream(messages) => Reply::Stream(messages),
            Handled::Message(response) => {
                seen.kind = Some(response.kind);
                self.limit(
                    Some(&req),
                    transport,
                    peer,
                    response,
                    cookie.as_ref(),
                    now,
                    out,
                    seen,
                )
            }
        }
    }

    /// The table (see the module documentation).
    fn route(
        &self,
        req: &Request<'_>,
        msg: &[u8],
        transport: Transport,
        peer: IpAddr,
        out: &mut Vec<u8>,
    ) -> Handled {
        if req.edns.is_some_and(|e| e.version > 0) {
            return error(req, Rcode::BADVERS, transport, out);
        }
        match (req.qtype, transport) {
            (RType::AXFR | RType::IXFR, Transport::Tcp) => {
                return Handled::Stream(xfr::transfer(
                    self.sources(),
                    &self.transfer,
                    msg,
                    req,
                    peer,
                ));
            }
            (RType::AXFR | RType::IXFR, Transport::Udp) => {
                return error(req, Rcode::REFUSED, transport, out);
            }
            _ => {}
        }
        match req.qclass {
            Class::IN => {}
            Class::CH => {
                let answer = chaos::answer(&self.chaos, req);
                render(req, &answer, transport, out);
                return Handled::Message(answer.summary(req, self.rrl.is_some()));
            }
            _ => return error(req, Rcode::REFUSED, transport, out),
        }
        match req.qtype {
            RType::OPT => error(req, Rcode::FORMERR, transport, out),
            t if t.is_meta() && t != RType::ANY => error(req, Rcode::NOTIMP, transport, out),
            _ => Handled::Message(self.query.respond(req, transport, self.rrl.is_some(), out)),
        }
    }

    /// The guards after a reply is made: rate limiting (UDP only; never for
    /// a client that brought a valid server cookie), then the reply's COOKIE
    /// option. `req` is `None` for a message that did not parse as a query;
    /// `now` is the Unix time in seconds (0: read the clock here).
    #[allow(clippy::too_many_arguments)]
    fn limit(
        &self,
        req: Option<&Request<'_>>,
        transport: Transport,
        peer: IpAddr,
        response: Response,
        cookie: Option<&Checked>,
        now: u64,
        out: &mut Vec<u8>,
        seen: &mut Seen,
    ) -> Reply {
        if transport == Transport::Udp
            && let Some(rrl) = &self.rrl
            && !cookie.is_some_and(|c| c.valid)
        {
            let now = if now == 0 {
                crate::sys::unix_seconds()
            } else {
                now
            };
            match rrl.account(peer, response.kind, response.key, now) {
                Action::Send => {}
                Action::Drop => {
                    seen.limited = Some(Limited::Dropped);
                    return Reply::Nothing;
                }
                Action::Slip => {
                    seen.limited = Some(Limited::Slipped);
                    let Some(req) = req else {
                        return Reply::Nothing;
                    };
                    if let Some(c) = cookie {
                        // RFC 7873 §5.2.3: a client cookie without a valid
                        // server cookie may get BADCOOKIE and a new one, so
                        // a real client retries with it (and is not limited).
                        render(req, &Answer::new(Rcode::BADCOOKIE, false), transport, out);
                        wire::append_cookie(out, &c.reply);
                    } else {
                        // A minimal truncated reply: a real client retries over TCP.
                        render(req, &Answer::new(Rcode::NOERROR, false), transport, out);
                        if let Some(b) = out.get_mut(2) {
                            *b |= (wire::Flags::TC.bits() >> 8) as u8;
                        }
                    }
                    return Reply::Message;
                }
            }
        }
        if let Some(c) = cookie {
            wire::append_cookie(out, &c.reply);
        }
        Reply::Message
    }
}

/// The response summary of an error reply (rate limited per client prefix).
const ERROR: Response = Response {
    kind: ResponseKind::Error,
    key: 0,
};

/// A reply to `req` with `rcode` and nothing but the question (and an OPT
/// when the query had one).
fn error(req: &Request<'_>, rcode: Rcode, transport: Transport, out: &mut Vec<u8>) -> Handled {
    render(req, &Answer::new(rcode, false), transport, out);
    Handled::Message(ERROR)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::sync::Arc;

    use authd_datasrc::memory::{MemorySource, MemoryZone};
    use authd_datasrc::{DataSource, Name};

    use super::*;
    use crate::acl::Cidr;

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn dispatcher(allow: &[&str]) -> Dispatcher {
        let origin: Name = "example.com.".parse().expect("origin");
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/example.com.zone");
        let source = MemorySource::new("test");
        source.insert_zone(MemoryZone::from_master_file(&origin, &file).expect("zone"));
        let source: Arc<dyn DataSource> = Arc::new(source);
        Dispatcher::new(SourceList::new(vec![source]))
            .with_chaos(ChaosOptions {
                version: Some("authd test".into()),
                hostname: None,
            })
            .with_transfer(TransferPolicy {
                allow: allow
                    .iter()
                    .map(|a| a.parse::<Cidr>().expect("cidr"))
                    .collect(),
                journal_dbs: Vec::new(),
            })
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
        // Opcodes other than QUERY: NOTIMP, opcode and RD echoed, no question.
        for opcode in [1u8, 2, 3, 4, 5, 15] {
            let byte2 = (opcode << 3) | RD;
            assert_eq!(
                one(&d, &message(byte2, 6, IN, None), udp),
                (4, QR | byte2, 0, 0),
                "opcode {opcode}"
            );
        }
        // A plain query: NOERROR, AA, the answer (www has two A records).
        assert_eq!(
            one(&d, &message(RD, 1, IN, None), udp),
            (0, QR | AA | RD, 1, 2)
        );
        // EDNS version 1: BADVERS (16: header 0, OPT 1), whatever the rest.
        assert_eq!(one(&d, &message(0, 1, IN, Some(1)), udp), (16, QR, 1, 0));
        assert_eq!(one(&d, &message(0, 252, CH, Some(1)), udp), (16, QR, 1, 0));
        // AXFR and IXFR over UDP: REFUSED, even for an allowed client.
        let allowed = dispatcher(&["127.0.0.0/8"]);
        for qtype in [251, 252] {
            assert_eq!(
                one(&allowed, &message(0, qtype, IN, None), udp),
                (5, QR, 1, 0)
            );
        }
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
        assert_eq!(msgs.len(), 1);
        assert_eq!(summary(&msgs[0]), (5, QR, 1, 0));
        let allowed = dispatcher(&["127.0.0.1"]).handle(&axfr, Transport::Tcp, PEER, &mut out);
        let Reply::Stream(msgs) = allowed else {
            panic!("{allowed:?}");
        };
        let (rcode, flags, qd, an) = summary(&msgs[0]);
        assert_eq!((rcode, flags, qd), (0, QR | AA, 1));
        assert!(an > 2, "the whole zone: {an} RRs");
    }
}
