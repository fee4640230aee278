//! The EDNS options of replies (RFC 6891 §6.1.2) other than what rendering
//! writes itself: Extended DNS Errors (RFC 8914), the name server identifier
//! (NSID, RFC 5001), the TCP idle timeout (edns-tcp-keepalive, RFC 7828) and
//! the server cookie (RFC 7873, made by [`crate::cookies`]).
//!
//! An EDE is chosen by the handler that writes the error, and written with
//! the reply's OPT record ([`crate::wire::MessageWriter::push_opt`]); the
//! others are the dispatcher's (step 4 of [`crate::dispatch`]): appended by
//! [`append`] to the OPT record that ends every reply rendered here to a
//! query with EDNS, only when the query asked for them (NSID, keepalive) or
//! brought a client cookie. Rendering leaves them room: [`Edns::option_room`]
//! (set by the dispatcher) and the cookie's [`COOKIE_OPTION_LEN`].
//!
//! [`Edns::option_room`]: crate::wire::Edns::option_room

// The EDNS vocabulary the wire reader and writer need lives in `wire`
// (which this module builds on); re-exported here, where it is about.
pub use crate::wire::{
    Ede, KEEPALIVE_OPTION_LEN, MAX_NSID_LEN, OPTION_EDE, OPTION_NSID, OPTION_TCP_KEEPALIVE,
    find_opt,
};
use crate::wire::{OPT_LEN, OPTION_COOKIE};

/// The options [`append`] adds to a reply, each `None` when not sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended<'a> {
    /// The COOKIE option's data (client and server cookie).
    pub cookie: Option<&'a [u8; 24]>,
    /// The NSID payload (`[server] nsid`), to a query that sent NSID.
    pub nsid: Option<&'a [u8]>,
    /// The TCP idle timeout in units of 100 ms, to a TCP query that sent
    /// edns-tcp-keepalive (RFC 7828 §3.3.2: never over UDP).
    pub keepalive: Option<u16>,
}

/// Appends the options of `add` to the OPT record that ends `msg` (as every
/// reply rendered here to a query with EDNS ends), in the order cookie,
/// NSID, keepalive; one that would take the message past `limit` bytes is
/// left out (the cookie and keepalive have room reserved, see the module
/// documentation; an NSID is sent only where it fits). Returns false,
/// changing nothing, when `msg` does not end with an OPT record.
pub fn append(msg: &mut Vec<u8>, add: &Appended<'_>, limit: usize) -> bool {
    let Some(at) = find_opt(msg) else {
        return false;
    };
    if let Some(data) = add.cookie {
        msg.extend_from_slice(&OPTION_COOKIE.to_be_bytes());
        msg.extend_from_slice(&24u16.to_be_bytes());
        msg.extend_from_slice(data);
    }
    if let Some(nsid) = add.nsid
        && msg.len() + 4 + nsid.len() <= limit
    {
        msg.extend_from_slice(&OPTION_NSID.to_be_bytes());
        msg.extend_from_slice(&(nsid.len() as u16).to_be_bytes());
        msg.extend_from_slice(nsid);
    }
    if let Some(timeout) = add.keepalive
        && msg.len() + KEEPALIVE_OPTION_LEN <= limit
    {
        msg.extend_from_slice(&OPTION_TCP_KEEPALIVE.to_be_bytes());
        msg.extend_from_slice(&2u16.to_be_bytes());
        msg.extend_from_slice(&timeout.to_be_bytes());
    }
    let rdlen = (msg.len() - at - OPT_LEN) as u16;
    msg[at + 9..at + 11].copy_from_slice(&rdlen.to_be_bytes());
    true
}

/// The edns-tcp-keepalive TIMEOUT for an idle timeout of `secs` seconds:
/// units of 100 ms (RFC 7828 §3.1), at most 65535 (6553.5 s).
pub fn keepalive_units(secs: u64) -> u16 {
    u16::try_from(secs.saturating_mul(10)).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header, a question for `.` and an OPT with `options`.
    fn reply(options: &[u8]) -> Vec<u8> {
        let mut m = vec![0, 1, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1];
        m.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
        m.extend_from_slice(&(options.len() as u16).to_be_bytes());
        m.extend_from_slice(options);
        m
    }

    #[test]
    fn finds_the_opt_with_and_without_options() {
        assert_eq!(find_opt(&reply(&[])), Some(17));
        let mut ede = Vec::new();
        Ede::ZONE_EXPIRED.write(&mut ede);
        assert_eq!(find_opt(&reply(&ede)), Some(17));
        // No OPT at the end: a header and question only.
        assert_eq!(find_opt(&reply(&[])[..17]), None);
        let mut cut = reply(&ede);
        cut.pop();
        assert_eq!(find_opt(&cut), None);
    }

    /// Cookie, NSID and keepalive after an EDE already there, RDLENGTH
    /// covering them all; an NSID that does not fit is left out.
    #[test]
    fn appends_after_existing_options() {
        let mut ede = Vec::new();
        Ede::NOT_AUTHORITATIVE.write(&mut ede);
        assert_eq!(ede, [0, 15, 0, 2, 0, 20]);
        let mut m = reply(&ede);
        let cookie = [7u8; 24];
        let add = Appended {
            cookie: Some(&cookie),
            nsid: Some(b"ns1"),
            keepalive: Some(100),
        };
        assert!(append(&mut m, &add, 512));
        let opt = &m[17..];
        assert_eq!(
            u16::from_be_bytes([opt[9], opt[10]]) as usize,
            opt.len() - 11
        );
        let options = &opt[11..];
        assert_eq!(&options[..6], &ede[..]);
        assert_eq!(&options[6..10], &[0, 10, 0, 24]);
        assert_eq!(&options[34..41], &[0, 3, 0, 3, b'n', b's', b'1']);
        assert_eq!(&options[41..], &[0, 11, 0, 2, 0, 100]);
        assert_eq!(find_opt(&m), Some(17));
        // Too little room for the NSID: only the keepalive goes.
        let mut m = reply(&[]);
        let limit = m.len() + 6;
        let add = Appended {
            nsid: Some(b"ns1"),
            keepalive: Some(1),
            ..Appended::default()
        };
        assert!(append(&mut m, &add, limit));
        assert_eq!(&m[28..], &[0, 11, 0, 2, 0, 1]);
        // No OPT: nothing.
        let mut bare = reply(&[])[..17].to_vec();
        assert!(!append(&mut bare, &add, 512));
        assert_eq!(bare.len(), 17);
    }

    /// The extended rcode is read behind options in an error reply (no
    /// answer or authority records), and from an option-less OPT always.
    #[test]
    fn reply_rcode_reads_the_opt_behind_options() {
        use crate::wire::{Rcode, reply_rcode};
        let mut badvers = reply(&[0, 3, 0, 3, b'n', b's', b'1']);
        badvers[17 + 5] = 1;
        assert_eq!(reply_rcode(&badvers), Rcode::BADVERS);
        let mut plain = reply(&[]);
        plain[17 + 5] = 1;
        plain[7] = 1; // ANCOUNT 1: still found without options
        assert_eq!(reply_rcode(&plain), Rcode::BADVERS);
        badvers[7] = 1;
        assert_eq!(reply_rcode(&badvers), Rcode::NOERROR);
    }

    #[test]
    fn keepalive_is_in_units_of_100_ms() {
        assert_eq!(keepalive_units(10), 100);
        assert_eq!(keepalive_units(6553), 65530);
        assert_eq!(keepalive_units(86_400), 65535);
    }
}
