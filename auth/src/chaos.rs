//! CH-class queries (the `version.bind` convention of BIND, also answered by
//! NSD and Knot DNS): the server's version and host name, when configured.

use std::sync::Arc;

use authd_datasrc::{Class, RRset, RType, Rdata};
use serde::Deserialize;

use crate::query::{Answer, Placed};
use crate::settings::{Context, Invalid, Kind, Schema, Section};
use crate::wire::{Rcode, Request};

/// Answers for CH-class TXT `version.bind` / `hostname.bind` (None: REFUSED).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChaosOptions {
    /// Text for `version.bind` (and `version.server`), or `None` to refuse the query.
    pub version: Option<String>,
    /// Text for `hostname.bind` (and `id.server`), or `None` to refuse the query.
    pub hostname: Option<String>,
}

/// Answers to CH-class TXT queries (`[chaos]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaosConfig {
    /// Text for `version.bind`, or `None` to refuse it.
    pub version: Option<String>,
    /// Text for `hostname.bind`, or `None` to refuse it.
    pub hostname: Option<String>,
}

impl Default for ChaosConfig {
    /// `version.bind` = `"authd <version>"`, `hostname.bind` refused.
    fn default() -> Self {
        ChaosConfig {
            version: Some(default_version()),
            hostname: None,
        }
    }
}

impl ChaosConfig {
    /// The query processor's form of these settings.
    pub fn options(&self) -> ChaosOptions {
        ChaosOptions {
            version: self.version.clone(),
            hostname: self.hostname.clone(),
        }
    }
}

/// The default `version.bind` text: `authd <crate version>`.
pub fn default_version() -> String {
    format!("authd {}", env!("CARGO_PKG_VERSION"))
}

/// `[chaos]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChaos {
    version: Option<String>,
    hostname: Option<String>,
}

impl Section for RawChaos {
    type Value = ChaosConfig;

    const SCHEMA: Schema = &[(
        "chaos",
        &[("version", Kind::Text), ("hostname", Kind::Text)],
    )];

    /// `""` refuses the query; a text must fit one TXT string.
    fn check(self, _: &Context<'_>) -> Result<ChaosConfig, Invalid> {
        Ok(ChaosConfig {
            version: match self.version {
                None => ChaosConfig::default().version,
                Some(v) if v.is_empty() => None,
                Some(v) => Some(check_txt("chaos.version", v)?),
            },
            hostname: match self.hostname {
                Some(h) if !h.is_empty() => Some(check_txt("chaos.hostname", h)?),
                _ => None,
            },
        })
    }
}

/// A CH TXT string must fit one character-string (RFC 1035 §3.3: 255 octets).
fn check_txt(key: &str, value: String) -> Result<String, Invalid> {
    if value.len() > 255 {
        return Err(Invalid::new(
            key,
            format!(
                "{} bytes, longer than a TXT string may be (255)",
                value.len()
            ),
        ));
    }
    Ok(value)
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
