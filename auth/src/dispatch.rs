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
//! malformed QUERY gets FORMERR ([`crate::wire::parse_query`]).
//!
//! A [`Dispatcher`] is an immutable snapshot of everything a reload replaces
//! — the sources (through the query processor), the CH answers, the transfer
//! policy — swapped whole by [`crate::server::DispatcherHandle::store`], so a
//! message is handled entirely under the old configuration or entirely under
//! the new one. Later policy (keys, update grants, rate limits) joins it here.

use std::net::IpAddr;

use authd_datasrc::{Class, RType, SourceList};

use crate::chaos::{self, ChaosOptions};
use crate::query::{Answer, QueryProcessor, Transport, render};
use crate::wire::{self, Header, Opcode, ParseError, Rcode, Request};
use crate::xfr::{self, TransferPolicy};

/// What [`Dispatcher::handle`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Send nothing (a response, or less than a header).
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
}

impl Dispatcher {
    /// A dispatcher answering from `sources`, with no CH answers (REFUSED)
    /// and no transfers allowed.
    pub fn new(sources: SourceList) -> Dispatcher {
        Dispatcher {
            query: QueryProcessor::new(sources),
            chaos: ChaosOptions::default(),
            transfer: TransferPolicy::default(),
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

    /// The data sources answered from.
    pub fn sources(&self) -> &SourceList {
        self.query.sources()
    }

    /// The transfer policy in force.
    pub fn transfer_policy(&self) -> &TransferPolicy {
        &self.transfer
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
        let Some(head) = wire::peek_head(msg) else {
            return Reply::Nothing;
        };
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
            return Reply::Message;
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
                return Reply::Message;
            }
        };
        if req.edns.is_some_and(|e| e.version > 0) {
            return error(&req, Rcode::BADVERS, transport, out);
        }
        match (req.qtype, transport) {
            (RType::AXFR | RType::IXFR, Transport::Tcp) => {
                return Reply::Stream(xfr::transfer(
                    self.sources(),
                    &self.transfer,
                    msg,
                    &req,
                    peer,
                ));
            }
            (RType::AXFR | RType::IXFR, Transport::Udp) => {
                return error(&req, Rcode::REFUSED, transport, out);
            }
            _ => {}
        }
        match req.qclass {
            Class::IN => {}
            Class::CH => {
                render(&req, &chaos::answer(&self.chaos, &req), transport, out);
                return Reply::Message;
            }
            _ => return error(&req, Rcode::REFUSED, transport, out),
        }
        match req.qtype {
            RType::OPT => error(&req, Rcode::FORMERR, transport, out),
            t if t.is_meta() && t != RType::ANY => error(&req, Rcode::NOTIMP, transport, out),
            _ => {
                self.query.respond(&req, transport, out);
                Reply::Message
            }
        }
    }
}

/// A reply to `req` with `rcode` and nothing but the question (and an OPT
/// when the query had one).
fn error(req: &Request<'_>, rcode: Rcode, transport: Transport, out: &mut Vec<u8>) -> Reply {
    render(req, &Answer::new(rcode, false), transport, out);
    Reply::Message
}
