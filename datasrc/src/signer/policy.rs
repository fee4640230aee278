//! A zone's signing policy: the `[signing]` settings (algorithm, key layout,
//! denial of existence, signature and key timings), validated, with the text
//! form kept in the zone DB so every writer of the file signs alike.

use super::keys::Algorithm;

/// Which keys sign a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLayout {
    /// One combined signing key (flags 257) signs every RRset.
    Csk,
    /// A KSK (flags 257) signs the DNSKEY RRset, a ZSK (flags 256) the rest
    /// (RFC 6781 §3.1).
    KskZsk,
}

/// How the zone proves non-existence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// NSEC (RFC 4034 §4).
    Nsec,
    /// NSEC3 with SHA-1, no extra iterations and no salt (RFC 5155, RFC 9276
    /// §3.1); `opt_out` leaves insecure delegations out of the chain (RFC
    /// 5155 §6).
    Nsec3 {
        /// The opt-out flag.
        opt_out: bool,
    },
}

/// A signing policy. Times are seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The algorithm of every key.
    pub algorithm: Algorithm,
    /// CSK, or KSK + ZSK.
    pub keys: KeyLayout,
    /// NSEC or NSEC3.
    pub denial: Denial,
    /// How long a new signature is valid (expiration − inception, less the
    /// inception backdating of one hour).
    pub signature_validity: u32,
    /// Re-sign when less validity than this is left.
    pub signature_refresh: u32,
    /// TTL of the DNSKEY (and CDS/CDNSKEY) RRset.
    pub dnskey_ttl: u32,
    /// ZSK lifetime; 0 = never roll.
    pub zsk_lifetime: u32,
    /// KSK or CSK lifetime; 0 = never roll.
    pub ksk_lifetime: u32,
    /// Added to the TTLs involved before each rollover step.
    pub propagation_delay: u32,
    /// `ADDR[:PORT]` servers of the parent zone asked for the DS before a
    /// KSK/CSK is retired.
    pub parent_agents: Vec<String>,
}

impl Default for Policy {
    /// The defaults: ECDSA P-256 CSK, NSEC3 without opt-out, 14 days
    /// of validity refreshed with 5 days left.
    fn default() -> Policy {
        Policy {
            algorithm: Algorithm::EcdsaP256Sha256,
            keys: KeyLayout::Csk,
            denial: Denial::Nsec3 { opt_out: false },
            signature_validity: 1_209_600,
            signature_refresh: 432_000,
            dnskey_ttl: 3600,
            zsk_lifetime: 7_776_000,
            ksk_lifetime: 0,
            propagation_delay: 3600,
            parent_agents: Vec::new(),
        }
    }
}

/// A policy setting that is out of range or unknown: the `[signing]` key
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signing.{key}: {reason}")]
pub struct PolicyError {
    /// The key (`algorithm`, `signature_refresh`, ...).
    pub key: String,
    /// What is wrong with its value.
    pub reason: String,
}

fn bad(key: &str, reason: impl Into<String>) -> PolicyError {
    PolicyError {
        key: key.to_string(),
        reason: reason.into(),
    }
}

impl Policy {
    /// Sets `key` (a `[signing]` key name) from its text `value`, as the
    /// configuration and the stored form spell it.
    ///
    /// Errors: an unknown key, an unknown algorithm, layout or denial, a
    /// number that does not parse.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PolicyError> {
        let number = |v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| bad(key, format!("{v:?} is not a whole number of seconds")))
        };
        match key {
            "algorithm" => {
                self.algorithm = Algorithm::from_name(value.trim()).ok_or_else(|| {
                    bad(
                        "algorithm",
                        format!(
                            "unknown algorithm {value:?} \
                             (known: ecdsap256sha256, ed25519, rsasha256)"
                        ),
                    )
                })?
            }
            "keys" => {
                self.keys = match value.trim().to_ascii_lowercase().as_str() {
                    "csk" => KeyLayout::Csk,
                    "ksk+zsk" => KeyLayout::KskZsk,
                    _ => {
                        return Err(bad(
                            "keys",
                            format!("{value:?} is neither \"csk\" nor \"ksk+zsk\""),
                        ));
                    }
                }
            }
            "denial" => {
                let opt_out = match self.denial {
                    Denial::Nsec3 { opt_out } => opt_out,
                    Denial::Nsec => false,
                };
                self.denial = match value.trim().to_ascii_lowercase().as_str() {
                    "nsec" => Denial::Nsec,
                    "nsec3" => Denial::Nsec3 { opt_out },
                    _ => {
                        return Err(bad(
                            "denial",
                            format!("{value:?} is neither \"nsec\" nor \"nsec3\""),
                        ));
                    }
                }
            }
            "nsec3_opt_out" => {
                let on = match value.trim() {
                    "true" => true,
                    "false" => false,
                    v => {
                        return Err(bad(
                            "nsec3_opt_out",
                            format!("{v:?} is neither true nor false"),
                        ));
                    }
                };
                if let Denial::Nsec3 { opt_out } = &mut self.denial {
                    *opt_out = on;
                } else if on {
                    return Err(bad("nsec3_opt_out", "true needs denial = \"nsec3\""));
                }
            }
            "signature_validity" => self.signature_validity = number(value)?,
            "signature_refresh" => self.signature_refresh = number(value)?,
            "dnskey_ttl" => self.dnskey_ttl = number(value)?,
            "zsk_lifetime" => self.zsk_lifetime = number(value)?,
            "ksk_lifetime" => self.ksk_lifetime = number(value)?,
            "propagation_delay" => self.propagation_delay = number(value)?,
            "parent_agents" => {
                self.parent_agents = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            }
            _ => return Err(bad(key, "unknown setting")),
        }
        Ok(())
    }

    /// Checks the timings against each other.
    ///
    /// Errors: validity under one hour or over ten years, refresh not below
    /// validity, a TTL over RFC 2181 §8's maximum.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(3600..=315_360_000).contains(&self.signature_validity) {
            return Err(bad(
                "signature_validity",
                format!(
                    "{} is out of range: 3600 to 315360000 seconds",
                    self.signature_validity
                ),
            ));
        }
        if self.signature_refresh >= self.signature_validity {
            return Err(bad(
                "signature_refresh",
                format!(
                    "{} must be less than signature_validity ({})",
                    self.signature_refresh, self.signature_validity
                ),
            ));
        }
        if self.dnskey_ttl > i32::MAX as u32 {
            return Err(bad(
                "dnskey_ttl",
                format!("{} is over 2147483647 (RFC 2181 §8)", self.dnskey_ttl),
            ));
        }
        Ok(())
    }

    /// The stored form: one `key = value` line per setting, in a fixed
    /// order; [`Policy::from_text`] reads it back.
    pub fn to_text(&self) -> String {
        let (denial, opt_out) = match self.denial {
            Denial::Nsec => ("nsec", false),
            Denial::Nsec3 { opt_out } => ("nsec3", opt_out),
        };
        let keys = match self.keys {
            KeyLayout::Csk => "csk",
            KeyLayout::KskZsk => "ksk+zsk",
        };
        format!(
            "algorithm = {}\nkeys = {keys}\ndenial = {denial}\nnsec3_opt_out = {opt_out}\n\
             signature_validity = {}\nsignature_refresh = {}\ndnskey_ttl = {}\n\
             zsk_lifetime = {}\nksk_lifetime = {}\npropagation_delay = {}\nparent_agents = {}\n",
            self.algorithm.name(),
            self.signature_validity,
            self.signature_refresh,
            self.dnskey_ttl,
            self.zsk_lifetime,
            self.ksk_lifetime,
            self.propagation_delay,
            self.parent_agents.join(",")
        )
    }

    /// Reads [`Policy::to_text`]'s form (unknown lines are errors).
    ///
    /// Errors: as [`Policy::set`] and [`Policy::validate`].
    pub fn from_text(text: &str) -> Result<Policy, PolicyError> {
        let mut p = Policy::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some((k, v)) = line.split_once('=') else {
                return Err(bad("(stored)", format!("line {line:?} is not key = value")));
            };
            p.set(k.trim(), v.trim())?;
        }
        p.validate()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_reads_back() {
        let mut p = Policy::default();
        p.set("algorithm", "Ed25519").expect("algorithm");
        p.set("keys", "ksk+zsk").expect("keys");
        p.set("nsec3_opt_out", "true").expect("opt-out");
        p.set("parent_agents", "127.0.0.1:5300, [::1]:53")
            .expect("agents");
        let back = Policy::from_text(&p.to_text()).expect("reads back");
        assert_eq!(back, p);
        assert_eq!(back.denial, Denial::Nsec3 { opt_out: true });
        assert_eq!(back.parent_agents, ["127.0.0.1:5300", "[::1]:53"]);
    }

    #[test]
    fn bad_settings_are_named() {
        let mut p = Policy::default();
        let e = p.set("algorithm", "dsa").expect_err("unknown");
        assert_eq!(e.key, "algorithm");
        assert!(
            e.to_string()
                .starts_with("signing.algorithm: unknown algorithm \"dsa\""),
            "{e}"
        );
        let e = p.set("keys", "two").expect_err("layout");
        assert_eq!(e.key, "keys");
        let e = p.set("dnskey_ttl", "-1").expect_err("number");
        assert_eq!(
            e.to_string(),
            "signing.dnskey_ttl: \"-1\" is not a whole number of seconds"
        );
        let e = p.set("colour", "red").expect_err("unknown key");
        assert_eq!(e.to_string(), "signing.colour: unknown setting");
        p.signature_refresh = p.signature_validity;
        assert!(p.validate().is_err());
        p.set("denial", "nsec").expect("nsec");
        assert!(p.set("nsec3_opt_out", "true").is_err());
    }
}
