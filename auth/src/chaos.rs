//! CH-class TXT answers (`version.bind`, `hostname.bind`): the settings the
//! query processor answers them from.
//!
//! A leaf module (std only), so the configuration builds these settings
//! without depending on query processing.

/// Answers for CH-class TXT `version.bind` / `hostname.bind` (None: REFUSED).
#[derive(Clone, Debug, Default)]
pub struct ChaosOptions {
    /// Text for `version.bind` (and `version.server`), or `None` to refuse the query.
    pub version: Option<String>,
    /// Text for `hostname.bind` (and `id.server`), or `None` to refuse the query.
    pub hostname: Option<String>,
}
