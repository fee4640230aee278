//! Catalog zones (RFC 9432, schema version 2): what a catalog zone says
//! ([`parse`]), the `[[catalog]]` section, and the two roles: a producer
//! ([`producer`]) that keeps a catalog of the zones of a DB, and a consumer
//! ([`consumer`]) that serves the members of a `[[secondary]]` with
//! `catalog = true` as secondary zones.
//!
//! A catalog zone `$CATZ` holds, besides its SOA and NS:
//! ```text
//! version.$CATZ              TXT "2"              ; §4.2, exactly one RR
//! <label>.zones.$CATZ        PTR example.com.     ; §4.3.1, one member, one RR
//! group.<label>.zones.$CATZ  TXT "signed"         ; §4.4.2, optional
//! coo.<label>.zones.$CATZ    PTR other-catalog.   ; §4.4.1, optional, one RR
//! ```
//! A zone that breaks a MUST of the RFC (no or another version, two PTRs at
//! one member node, two coo PTRs, a class other than IN) is *broken*: it is
//! not processed at all, so the members served from its last good version
//! keep serving ([`Broken`]). A member whose PTR names something that cannot
//! be a zone is left out with a [`MemberProblem`]; the rest is processed.

pub mod config;
pub mod consumer;
pub mod producer;

use authd_datasrc::{Class, Name, RType, Rdata, Record};

/// The schema version authd reads and writes (RFC 9432 §4.2).
pub const VERSION: &str = "2";

/// One member zone of a catalog (RFC 9432 §4.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's unique label (the `<unique-N>` of §4.3.1), in
    /// presentation form, lower case.
    pub label: String,
    /// The member zone's apex (the PTR target).
    pub zone: Name,
    /// The `group` property's values (§4.4.2), in RDATA order.
    pub groups: Vec<String>,
    /// The `coo` property (§4.4.1): the catalog the member moves to.
    pub coo: Option<Name>,
}

/// A catalog zone that must not be processed (RFC 9432 §4.2, §4.3.1,
/// §4.4.1, §3: "broken").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    /// No `version.$CATZ TXT` RRset.
    #[error("no version.{0} TXT record (RFC 9432 §4.2 asks for \"2\")")]
    NoVersion(Name),
    /// A version other than `"2"`, or more than one version RR.
    #[error("version.{catalog} TXT is {found}, not \"2\" (RFC 9432 §4.2)")]
    WrongVersion {
        /// The catalog zone.
        catalog: Name,
        /// The version RRset as found.
        found: String,
    },
    /// A member node with more than one PTR (two members with one label).
    #[error("member label {label} has {count} PTR records (RFC 9432 §4.3.1 allows one)")]
    TwoMembers {
        /// The label.
        label: String,
        /// The number of PTRs.
        count: usize,
    },
    /// A `coo` property with more than one PTR.
    #[error("coo property of member label {0} has more than one PTR (RFC 9432 §4.4.1)")]
    TwoCoo(String),
    /// An RR of another class than IN.
    #[error("{0} is of class {1}, not IN (RFC 9432 §3)")]
    NotIn(Name, u16),
}

/// A member left out of an otherwise good catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberProblem {
    /// The member's label.
    pub label: String,
    /// What is wrong.
    pub reason: String,
}

/// A catalog zone as parsed: its members (in label order) and the members
/// left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The members, by label.
    pub members: Vec<Member>,
    /// Members left out, each with why.
    pub problems: Vec<MemberProblem>,
}

impl Catalog {
    /// The member with unique label `label`.
    pub fn by_label(&self, label: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.label == label)
    }

    /// The member serving zone `zone`.
    pub fn by_zone(&self, zone: &Name) -> Option<&Member> {
        self.members.iter().find(|m| m.zone == *zone)
    }
}

/// The presentation form of a single label, lower case.
pub fn label_text(label: &[u8]) -> String {
    authd_datasrc::name::label_text(&label.to_ascii_lowercase())
}

/// `zones.$CATZ`.
pub fn zones_name(catalog: &Name) -> Option<Name> {
    catalog.prepend_label(b"zones").ok()
}

/// The name `<label>.zones.$CATZ` of a member.
pub fn member_name(catalog: &Name, label: &str) -> Option<Name> {
    Name::parse(label, zones_name(catalog).as_ref()).ok()
}

/// The text strings of TXT RDATA (RFC 1035 §3.3.14), lossily decoded.
fn txt_strings(rdata: &Rdata) -> Vec<String> {
    let mut out = Vec::new();
    let mut d = rdata.as_wire();
    while let Some((&len, rest)) = d.split_first() {
        let n = usize::from(len).min(rest.len());
        out.push(String::from_utf8_lossy(&rest[..n]).into_owned());
        d = &rest[n..];
    }
    out
}

/// A member node as read: its PTR targets, group values and coo targets.
type Node = (Vec<Name>, Vec<String>, Vec<Name>);

/// What catalog zone `catalog`'s RRs `records` say (RFC 9432 §4).
///
/// A member whose PTR names the root, the catalog zone itself or a name in
/// it cannot be a zone of its own: it is left out with a problem. Names the
/// schema does not define (custom properties, `ext.`) are ignored (§3).
///
/// Errors: [`Broken`] when the catalog must not be processed at all.
pub fn parse(catalog: &Name, records: &[Record]) -> Result<Catalog, Broken> {
    let version_name = catalog.prepend_label(b"version").ok();
    let zones = zones_name(catalog);
    let zones_labels = catalog.label_count() + 1;
    let mut version: Vec<String> = Vec::new();
    let mut nodes: std::collections::BTreeMap<String, Node> = std::collections::BTreeMap::new();
    for r in records {
        if r.class != Class::IN {
            return Err(Broken::NotIn(r.owner.clone(), r.class.0));
        }
        if Some(&r.owner) == version_name.as_ref() {
            if r.rtype == RType::TXT {
                version.push(txt_strings(&r.rdata).join(""));
            }
            continue;
        }
        let Some(zones) = &zones else { continue };
        if !r.owner.is_subdomain_of(zones) || r.owner == *zones {
            continue;
        }
        let depth = r.owner.label_count() - zones_labels;
        let labels: Vec<&[u8]> = r.owner.labels().collect();
        match depth {
            1 if r.rtype == RType::PTR => {
                let node = nodes.entry(label_text(labels[0])).or_default();
                if let Some(target) = r.rdata.target_name() {
                    node.0.push(target);
                }
            }
            2 => {
                let property = label_text(labels[0]);
                let node = || label_text(labels[1]);
                match (property.as_str(), r.rtype) {
                    ("group", RType::TXT) => {
                        nodes
                            .entry(node())
                            .or_default()
                            .1
                            .push(txt_strings(&r.rdata).join(""));
                    }
                    ("coo", RType::PTR) => {
                        if let Some(target) = r.rdata.target_name() {
                            nodes.entry(node()).or_default().2.push(target);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    match version.as_slice() {
        [] => return Err(Broken::NoVersion(catalog.clone())),
        [v] if v == VERSION => {}
        found => {
            return Err(Broken::WrongVersion {
                catalog: catalog.clone(),
                found: format!("{found:?}"),
            });
        }
    }
    let mut out = Catalog::default();
    for (label, (ptrs, groups, coos)) in nodes {
        if coos.len() > 1 {
            return Err(Broken::TwoCoo(label));
        }
        let zone = match ptrs.as_slice() {
            // Properties of no member: nothing to apply them to.
            [] => continue,
            [zone] => zone.clone(),
            more => {
                return Err(Broken::TwoMembers {
                    label,
                    count: more.len(),
                });
            }
        };
        if zone.is_root() || zone.is_subdomain_of(catalog) {
            out.problems.push(MemberProblem {
                label,
                reason: format!(
                    "member {zone} cannot be a zone of its own (the root, or inside the catalog)"
                ),
            });
            continue;
        }
        out.members.push(Member {
            label,
            zone: zone.to_lowercase(),
            groups,
            coo: coos.into_iter().next().map(|c| c.to_lowercase()),
        });
    }
    Ok(out)
}

/// The RRs of a member (`<label>.zones.$CATZ PTR zone`), TTL 0 as the RFC's
/// examples, class IN.
pub fn member_record(catalog: &Name, label: &str, zone: &Name) -> Option<Record> {
    Some(Record {
        owner: member_name(catalog, label)?,
        rtype: RType::PTR,
        class: Class::IN,
        ttl: 0,
        rdata: Rdata::from_wire(zone.as_wire()),
    })
}

/// A new catalog zone's RRs (§4.1, §4.2): SOA, NS `invalid.` and the
/// version, with serial `serial`.
pub fn skeleton(catalog: &Name, serial: u32) -> Vec<Record> {
    let invalid = Name::parse("invalid.", None).unwrap_or_else(|_| Name::root());
    let mut soa = Vec::new();
    soa.extend_from_slice(invalid.as_wire());
    soa.extend_from_slice(invalid.as_wire());
    for v in [serial, 3600, 600, 2_419_200, 0] {
        soa.extend_from_slice(&v.to_be_bytes());
    }
    let mut version = vec![1u8];
    version.extend_from_slice(VERSION.as_bytes());
    let rr = |owner: Name, rtype: RType, ttl: u32, rdata: Vec<u8>| Record {
        owner,
        rtype,
        class: Class::IN,
        ttl,
        rdata: Rdata::from_wire(&rdata),
    };
    let mut out = vec![
        rr(catalog.clone(), RType::SOA, 0, soa),
        rr(catalog.clone(), RType::NS, 0, invalid.as_wire().to_vec()),
    ];
    if let Ok(v) = catalog.prepend_label(b"version") {
        out.push(rr(v, RType::TXT, 0, version));
    }
    out
}

/// A stable unique label for member `zone` (§4.3.1 leaves the form to the
/// producer): 16 hex digits of the SHA-256 of its lower-case wire name, so
/// a catalog rebuilt from scratch gives each zone the label it had.
pub fn stable_label(zone: &Name) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(zone.to_lowercase().as_wire());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::parse(s, None).expect("test value")
    }

    fn records(text: &str) -> Vec<Record> {
        let origin = n("catalog.example.");
        authd_datasrc::zonefile::parse_master_text(text, std::path::Path::new("t"), &origin)
            .expect("test value")
            .into_iter()
            .map(|r| r.record)
            .collect()
    }

    const HEAD: &str = "@ 0 SOA invalid. invalid. 1 3600 600 2419200 0\n@ 0 NS invalid.\n";

    #[test]
    fn a_catalog_lists_its_members_with_their_properties() {
        let text = format!(
            "{HEAD}version 0 TXT \"2\"\n\
             a1.zones 0 PTR example.com.\n\
             group.a1.zones 0 TXT \"signed\"\n\
             b2.zones 0 PTR Example.ORG.\n\
             coo.b2.zones 0 PTR other.catalog.\n\
             ext.zones 0 TXT \"ignored\"\n\
             x.ext 0 TXT \"ignored\"\n"
        );
        let cat = parse(&n("catalog.example."), &records(&text)).expect("test value");
        assert_eq!(
            cat.members,
            vec![
                Member {
                    label: "a1".into(),
                    zone: n("example.com."),
                    groups: vec!["signed".into()],
                    coo: None,
                },
                Member {
                    label: "b2".into(),
                    zone: n("example.org."),
                    groups: vec![],
                    coo: Some(n("other.catalog.")),
                },
            ]
        );
        assert!(cat.problems.is_empty());
    }

    #[test]
    fn a_broken_catalog_is_not_processed() {
        let cat = n("catalog.example.");
        let none = format!("{HEAD}a1.zones 0 PTR example.com.\n");
        assert_eq!(
            parse(&cat, &records(&none)),
            Err(Broken::NoVersion(cat.clone()))
        );
        let v1 = format!("{HEAD}version 0 TXT \"1\"\na1.zones 0 PTR example.com.\n");
        assert!(matches!(
            parse(&cat, &records(&v1)),
            Err(Broken::WrongVersion { .. })
        ));
        let two_versions = format!("{HEAD}version 0 TXT \"2\"\nversion 0 TXT \"1\"\n");
        assert!(matches!(
            parse(&cat, &records(&two_versions)),
            Err(Broken::WrongVersion { .. })
        ));
        let two = format!(
            "{HEAD}version 0 TXT \"2\"\na1.zones 0 PTR example.com.\na1.zones 0 PTR example.net.\n"
        );
        assert_eq!(
            parse(&cat, &records(&two)),
            Err(Broken::TwoMembers {
                label: "a1".into(),
                count: 2
            })
        );
        let coo = format!(
            "{HEAD}version 0 TXT \"2\"\na1.zones 0 PTR example.com.\n\
             coo.a1.zones 0 PTR x.\ncoo.a1.zones 0 PTR y.\n"
        );
        assert_eq!(
            parse(&cat, &records(&coo)),
            Err(Broken::TwoCoo("a1".into()))
        );
    }

    #[test]
    fn a_member_that_cannot_be_a_zone_is_left_out() {
        let text = format!(
            "{HEAD}version 0 TXT \"2\"\na1.zones 0 PTR .\na2.zones 0 PTR sub.catalog.example.\n\
             a3.zones 0 PTR example.com.\n"
        );
        let cat = parse(&n("catalog.example."), &records(&text)).expect("test value");
        assert_eq!(cat.members.len(), 1);
        assert_eq!(cat.members[0].zone, n("example.com."));
        let labels: Vec<&str> = cat.problems.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["a1", "a2"]);
    }

    #[test]
    fn the_skeleton_is_a_good_empty_catalog_and_labels_are_stable() {
        let cat = n("catalog.example.");
        let parsed = parse(&cat, &skeleton(&cat, 7)).expect("test value");
        assert_eq!(parsed, Catalog::default());
        assert_eq!(skeleton(&cat, 7)[0].rdata.soa_serial(), Some(7));
        let a = stable_label(&n("Example.COM."));
        assert_eq!(a, stable_label(&n("example.com.")));
        assert_eq!(a.len(), 16);
        assert_ne!(a, stable_label(&n("example.net.")));
        let mut with = skeleton(&cat, 8);
        with.push(member_record(&cat, &a, &n("example.com.")).expect("test value"));
        let parsed = parse(&cat, &with).expect("test value");
        assert_eq!(
            parsed
                .by_zone(&n("example.com."))
                .expect("test value")
                .label,
            a
        );
    }
}
