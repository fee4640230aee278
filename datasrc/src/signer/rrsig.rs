//! RRSIG records (RFC 4034 §3): the canonical form of an RRset (§6.2, §6.3)
//! and the signature over it (§3.1.8.1), made and checked.

use std::borrow::Cow;

use super::keys::{self, Algorithm, KeyError, KeyPair};
use crate::name::{Name, wire_len};
use crate::rr::{Class, RType, Rdata};

/// How long before "now" a new signature's inception lies (seconds): a
/// validator whose clock is a little behind still accepts it.
pub const INCEPTION_BACKDATE: u32 = 3600;

/// The byte ranges of the domain names in `rdata` of type `rtype` that RFC
/// 4034 §6.2 (item 3) lower-cases in the canonical form.
fn name_ranges(rtype: RType, rdata: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let at = |off: usize, out: &mut Vec<(usize, usize)>| -> Option<usize> {
        let len = wire_len(rdata.get(off..)?)?;
        out.push((off, len));
        Some(off + len)
    };
    match rtype.0 {
        // NS, MD, MF, CNAME, MB, MG, MR, PTR, DNAME
        2..=5 | 7..=9 | 12 | 39 => {
            at(0, &mut out);
        }
        // SOA, MINFO, RP: two names
        6 | 14 | 17 => {
            if let Some(next) = at(0, &mut out) {
                at(next, &mut out);
            }
        }
        // MX, AFSDB, RT, KX: preference then a name
        15 | 18 | 21 | 36 => {
            at(2, &mut out);
        }
        // PX: preference then two names
        26 => {
            if let Some(next) = at(2, &mut out) {
                at(next, &mut out);
            }
        }
        // SRV: priority, weight, port, target
        33 => {
            at(6, &mut out);
        }
        // NAPTR: order, preference, three character-strings, replacement
        35 => {
            let mut p = 4usize;
            for _ in 0..3 {
                match rdata.get(p) {
                    Some(&l) => p += 1 + usize::from(l),
                    None => return out,
                }
            }
            at(p, &mut out);
        }
        _ => {}
    }
    out
}

/// The canonical RDATA of RFC 4034 §6.2: names lower-cased for the types
/// listed there; other RDATA as it is.
pub fn canonical_rdata(rtype: RType, rdata: &[u8]) -> Cow<'_, [u8]> {
    let ranges = name_ranges(rtype, rdata);
    if ranges
        .iter()
        .all(|&(o, l)| !rdata[o..o + l].iter().any(u8::is_ascii_uppercase))
    {
        return Cow::Borrowed(rdata);
    }
    let mut v = rdata.to_vec();
    for (o, l) in ranges {
        v[o..o + l].make_ascii_lowercase();
    }
    Cow::Owned(v)
}

/// The RRSIG "labels" field (RFC 4034 §3.1.3): the owner's labels without the
/// root and without a leading `*`.
pub fn rrsig_labels(owner: &Name) -> u8 {
    let n = owner.label_count() - usize::from(owner.is_wildcard());
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// The fields of an RRSIG other than the signature (RFC 4034 §3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigFields {
    /// The type covered.
    pub covered: RType,
    /// The signing key's algorithm.
    pub algorithm: u8,
    /// Owner labels ([`rrsig_labels`]).
    pub labels: u8,
    /// The RRset's TTL, seconds.
    pub original_ttl: u32,
    /// Expiration, seconds since 1970 (RFC 1982 arithmetic on the wire).
    pub expiration: u32,
    /// Inception, seconds since 1970.
    pub inception: u32,
    /// The signing key's tag.
    pub key_tag: u16,
    /// The zone apex, lower-cased.
    pub signer: Name,
}

impl SigFields {
    /// Reads the fixed fields of RRSIG RDATA (wire); `None` when malformed.
    pub fn parse(rdata: &[u8]) -> Option<(SigFields, &[u8])> {
        let fixed = rdata.get(..18)?;
        let u32_at =
            |i: usize| u32::from_be_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let name_len = wire_len(rdata.get(18..)?)?;
        let signer = Name::from_wire(&rdata[18..18 + name_len]).ok()?;
        Some((
            SigFields {
                covered: RType(u16::from_be_bytes([fixed[0], fixed[1]])),
                algorithm: fixed[2],
                labels: fixed[3],
                original_ttl: u32_at(4),
                expiration: u32_at(8),
                inception: u32_at(12),
                key_tag: u16::from_be_bytes([fixed[16], fixed[17]]),
                signer,
            },
            &rdata[18 + name_len..],
        ))
    }

    fn wire(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(18 + self.signer.as_wire().len() + 64);
        v.extend_from_slice(&self.covered.0.to_be_bytes());
        v.push(self.algorithm);
        v.push(self.labels);
        v.extend_from_slice(&self.original_ttl.to_be_bytes());
        v.extend_from_slice(&self.expiration.to_be_bytes());
        v.extend_from_slice(&self.inception.to_be_bytes());
        v.extend_from_slice(&self.key_tag.to_be_bytes());
        v.extend_from_slice(self.signer.to_lowercase().as_wire());
        v
    }
}

/// The data an RRSIG signs (RFC 4034 §3.1.8.1): the RRSIG RDATA without its
/// signature, then each RR of the set in canonical form (owner lower-cased,
/// the original TTL, canonical RDATA), the RDATA in canonical order (§6.3)
/// with duplicates removed.
pub fn signed_data(fields: &SigFields, owner: &Name, class: Class, rdatas: &[&Rdata]) -> Vec<u8> {
    let owner = owner.to_lowercase();
    let mut canon: Vec<Cow<'_, [u8]>> = rdatas
        .iter()
        .map(|r| canonical_rdata(fields.covered, r.as_wire()))
        .collect();
    canon.sort();
    canon.dedup();
    let mut v = fields.wire();
    for rd in &canon {
        v.extend_from_slice(owner.as_wire());
        v.extend_from_slice(&fields.covered.0.to_be_bytes());
        v.extend_from_slice(&class.0.to_be_bytes());
        v.extend_from_slice(&fields.original_ttl.to_be_bytes());
        v.extend_from_slice(&u16::try_from(rd.len()).unwrap_or(u16::MAX).to_be_bytes());
        v.extend_from_slice(rd);
    }
    v
}

/// Signs the RRset (`owner`, `rtype`, class IN, `ttl`, `rdatas`) with `key`,
/// valid from `inception` to `expiration` (`validity`, seconds since 1970),
/// signer name `apex`. Returns the RRSIG RDATA (wire).
///
/// Errors: the key's signing failed ([`KeyError`]).
pub fn sign_rrset(
    key: &KeyPair,
    apex: &Name,
    owner: &Name,
    rtype: RType,
    ttl: u32,
    rdatas: &[&Rdata],
    (inception, expiration): (u32, u32),
) -> Result<Rdata, KeyError> {
    let fields = SigFields {
        covered: rtype,
        algorithm: key.algorithm().number(),
        labels: rrsig_labels(owner),
        original_ttl: ttl,
        expiration,
        inception,
        key_tag: key.key_tag(),
        signer: apex.to_lowercase(),
    };
    let data = signed_data(&fields, owner, Class::IN, rdatas);
    let sig = key.sign(&data)?;
    let mut wire = fields.wire();
    wire.extend_from_slice(&sig);
    Ok(Rdata::from_wire(&wire))
}

/// Checks RRSIG RDATA `rrsig` over the RRset (`owner`, class IN, `rdatas`)
/// against DNSKEY RDATA `dnskey` (RFC 4035 §5.3.3: the signature only, not
/// the validity period). False for any mismatch.
pub fn verify_rrset(rrsig: &[u8], dnskey: &[u8], owner: &Name, rdatas: &[&Rdata]) -> bool {
    let Some((fields, signature)) = SigFields::parse(rrsig) else {
        return false;
    };
    let Some(algorithm) = dnskey.get(3).copied().and_then(Algorithm::from_number) else {
        return false;
    };
    if algorithm.number() != fields.algorithm || keys::key_tag_of(dnskey) != fields.key_tag {
        return false;
    }
    let data = signed_data(&fields, owner, Class::IN, rdatas);
    keys::verify(algorithm, &dnskey[4..], &data, signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rdata(rtype: RType, text: &str, origin: &Name) -> Rdata {
        Rdata::from_text(rtype, text, origin).expect("rdata")
    }

    #[test]
    fn canonical_rdata_lowercases_the_listed_types_only() {
        let o: Name = "Example.ORG.".parse().expect("origin");
        let mx = rdata(RType::MX, "10 Mail.Example.ORG.", &o);
        assert_eq!(
            &canonical_rdata(RType::MX, mx.as_wire())[..],
            rdata(RType::MX, "10 mail.example.org.", &o).as_wire()
        );
        let srv = rdata(RType::SRV, "0 5 5060 SIP.Example.ORG.", &o);
        assert_eq!(
            &canonical_rdata(RType::SRV, srv.as_wire())[..],
            rdata(RType::SRV, "0 5 5060 sip.example.org.", &o).as_wire()
        );
        let txt = rdata(RType::TXT, "\"Mixed Case\"", &o);
        assert!(matches!(
            canonical_rdata(RType::TXT, txt.as_wire()),
            Cow::Borrowed(_)
        ));
        let w: Name = "*.Example.ORG.".parse().expect("wildcard");
        assert_eq!(rrsig_labels(&w), 2);
        assert_eq!(rrsig_labels(&o), 2);
        assert_eq!(rrsig_labels(&Name::root()), 0);
    }

    #[test]
    fn a_signature_verifies_and_a_changed_rrset_does_not() {
        let apex: Name = "example.org.".parse().expect("apex");
        let owner: Name = "WWW.example.org.".parse().expect("owner");
        for alg in [Algorithm::EcdsaP256Sha256, Algorithm::Ed25519] {
            let key = KeyPair::generate(alg, 256).expect("key");
            let a1 = rdata(RType::A, "192.0.2.1", &apex);
            let a2 = rdata(RType::A, "192.0.2.2", &apex);
            let sig = sign_rrset(
                &key,
                &apex,
                &owner,
                RType::A,
                300,
                &[&a2, &a1, &a1],
                (10, 20),
            )
            .expect("signs");
            let dnskey = key.dnskey_rdata();
            // Order, duplicates and owner case do not matter (RFC 4034 §6).
            let lower = owner.to_lowercase();
            assert!(verify_rrset(sig.as_wire(), &dnskey, &lower, &[&a1, &a2]));
            assert!(!verify_rrset(sig.as_wire(), &dnskey, &lower, &[&a1]));
            let (f, _) = SigFields::parse(sig.as_wire()).expect("parses");
            assert_eq!(
                (
                    f.covered,
                    f.labels,
                    f.original_ttl,
                    f.inception,
                    f.expiration
                ),
                (RType::A, 3, 300, 10, 20)
            );
            assert_eq!(f.key_tag, key.key_tag());
        }
    }
}
