//! CH-class queries (the `version.bind` convention of BIND, also answered by
//! NSD and Knot DNS): the server's version and host name, when configured.

use std::sync::Arc;

use authd_datasrc::{Class, RRset, RType, Rdata};

use crate::query::{Answer, Placed};
use crate::wire::{Rcode, Request};

/// Answers for CH-class TXT `version.bind` / `hostname.bind` (None: REFUSED).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChaosOptions {
    /// Text for `version.bind` (and `version.server`), or `None` to refuse the query.
    pub version: Option<String>,
    /// Text for `hostname.bind` (and `id.server`), or `None` to refuse the query.
    pub hostname: Option<String>,
}

/// The answer to a CH-class query: TXT `version.bind`/`version.server` and
/// `hostname.bind`/`id.server` when configured in `options`; REFUSED otherwise.
pub fn answer(options: &ChaosOptions, req: &Request<'_>) -> Answer {
    let name = req.qname.to_lowercase().to_string();
    let text = match name.as_str() {
        "version.bind." | "version.server." => options.version.as_deref(),
        "hostname.bind." | "id.server." => options.hostname.as_deref(),
        _ => None,
    };
    let Some(text) = text else {
        return Answer::new(Rcode::REFUSED, false);
    };
    let mut ans = Answer::new(Rcode::NOERROR, true);
    if req.qtype == RType::TXT || req.qtype == RType::ANY {
        let mut rdata = Vec::with_capacity(text.len() + 1);
        for chunk in text.as_bytes().chunks(255) {
            rdata.push(chunk.len() as u8);
            rdata.extend_from_slice(chunk);
        }
        let mut set = RRset::new(req.qname.clone(), RType::TXT, Class::CH, 0);
        set.rdatas.push(Rdata::from_wire(&rdata));
        ans.answer.push(Placed::plain(Arc::new(set)));
    }
    ans
}
