//! Online signing of an sqlite3 zone on each write path (first signing,
//! `update`, a plain SQL edit, a whole-zone replace), checked after each
//! step by BIND 9's `dnssec-verify` and ldns' `ldns-verify-zone` on a dump
//! of the zone, and the journal checked to chain through every step.

use std::path::Path;
use std::process::Command;

use authd_datasrc::Name;
use authd_datasrc::rr::RType;
use authd_datasrc::signer::policy::{Denial, KeyLayout, Policy};
use authd_datasrc::sqlite_admin::{self, DumpStyle, SerialPolicy};
use authd_datasrc::sqlite_signing::{self, KeyRole};
use authd_datasrc::zonefile::{SourcedRecord, parse_master_text};
use rusqlite::Connection;

const ZONE: &str = "$TTL 300
@ SOA ns1 hostmaster 1 3600 900 1209600 300
@ NS ns1
@ NS ns2.other.net.
@ MX 10 mail
ns1 A 192.0.2.1
mail A 192.0.2.2
www A 192.0.2.3
www AAAA 2001:db8::3
*.wild TXT \"wildcard\"
a.b.c TXT \"deep\"
sub NS ns.sub
ns.sub A 192.0.2.53
secure NS ns.other.net.
secure DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
";

fn origin() -> Name {
    "example.org.".parse().expect("origin")
}

fn records(text: &str) -> Vec<SourcedRecord> {
    let text = if text.starts_with("$TTL") {
        text.to_string()
    } else {
        format!("$TTL 300\n{text}")
    };
    parse_master_text(&text, Path::new("zone"), &origin()).expect("parses")
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-h")
        .output()
        .map(|_| true)
        .unwrap_or(false)
}

fn serial(conn: &Connection) -> u32 {
    let soa = sqlite_admin::zone_records(conn, &origin())
        .expect("records")
        .into_iter()
        .find(|r| r.record.rtype == RType::SOA)
        .expect("SOA");
    soa.record.rdata.soa_serial().expect("serial")
}

fn count(conn: &Connection, t: RType) -> usize {
    sqlite_admin::zone_records(conn, &origin())
        .expect("records")
        .iter()
        .filter(|r| r.record.rtype == t)
        .count()
}

/// Dumps the zone and runs both validators on it; panics with their output
/// when one fails. Skipped (with a note) when the tools are not installed.
fn verify(conn: &Connection, dir: &Path, step: &str, csk: bool) {
    let file = dir.join(format!("{step}.zone"));
    let mut out = Vec::new();
    sqlite_admin::dump_zone(conn, &origin(), &mut out, DumpStyle::Bind).expect("dumps");
    std::fs::write(&file, &out).expect("writes");
    if have("dnssec-verify") {
        let o = Command::new("dnssec-verify")
            .args(["-q", "-o", "example.org."])
            .args(if csk { &["-z"][..] } else { &[][..] })
            .arg(&file)
            .output()
            .expect("runs");
        assert!(
            o.status.success(),
            "{step}: dnssec-verify: {}{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&out)
        );
    } else {
        eprintln!("dnssec-verify not installed: {step} not checked by BIND");
    }
    if have("ldns-verify-zone") {
        let o = Command::new("ldns-verify-zone")
            .arg(&file)
            .output()
            .expect("runs");
        assert!(
            o.status.success(),
            "{step}: ldns-verify-zone: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    } else {
        eprintln!("ldns-verify-zone not installed: {step} not checked by ldns");
    }
}

fn journal_chains(conn: &Connection, from: u32, to: u32) -> usize {
    let id = sqlite_admin::find_zone_id(conn, &origin())
        .expect("id")
        .expect("zone");
    sqlite_admin::read_journal(conn, id, &origin(), from, to)
        .expect("reads")
        .unwrap_or_else(|| panic!("journal {from} to {to}"))
        .len()
}

fn every_write_path(policy: Policy, nsec3_expected: usize, nsec_expected: usize) {
    let csk = policy.keys == KeyLayout::Csk;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(ZONE), |_, _| {})
        .expect("loads");
    assert!(sqlite_signing::set_policy(&conn, &origin(), &policy).expect("policy"));
    assert!(!sqlite_signing::set_policy(&conn, &origin(), &policy).expect("same"));

    // First signing.
    let now = sqlite_signing::unix_now();
    let r = sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now)
        .expect("signs")
        .expect("something to sign");
    assert_eq!((r.old_serial, r.new_serial), (1, 2));
    let keys = sqlite_signing::keys_of(&conn, &origin()).expect("keys");
    let roles: Vec<KeyRole> = keys.iter().map(|k| k.role).collect();
    match policy.keys {
        KeyLayout::Csk => assert_eq!(roles, [KeyRole::Csk]),
        KeyLayout::KskZsk => assert_eq!(roles, [KeyRole::Ksk, KeyRole::Zsk]),
    }
    assert_eq!(count(&conn, RType::DNSKEY), keys.len());
    assert_eq!(count(&conn, RType::NSEC3), nsec3_expected);
    assert_eq!(count(&conn, RType::NSEC), nsec_expected);
    verify(&conn, dir.path(), "first", csk);
    // Nothing more to do.
    assert_eq!(
        sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now + 1)
            .expect("second pass"),
        None
    );
    assert_eq!(serial(&conn), 2);

    // An update: one name added, one RR deleted.
    let add = records("new A 192.0.2.99\n");
    let del = records("www AAAA 2001:db8::3\n");
    let change = sqlite_admin::Change {
        add: vec![add[0].record.clone()],
        delete: vec![del[0].record.clone()],
        soa: None,
    };
    let touched = [add[0].record.owner.clone(), del[0].record.owner.clone()];
    let r = sqlite_admin::update_zone_with(
        &mut conn,
        &origin(),
        sqlite_admin::Scope::Names(&touched),
        SerialPolicy::Increment,
        now + 2,
        |_| Ok::<_, ()>(change),
    )
    .expect("updates")
    .expect("planned");
    assert_eq!((r.old_serial, r.new_serial), (2, 3));
    verify(&conn, dir.path(), "update", csk);
    // Adding a signer record by update is refused; nothing changes.
    let nsec = records("x NSEC y.example.org. A\n");
    let e = sqlite_admin::update_zone(&mut conn, &origin(), &[nsec[0].record.clone()], &[])
        .expect_err("refused");
    assert!(e.to_string().contains("made by the signer"), "{e}");
    assert_eq!(serial(&conn), 3);

    // A plain SQL edit: an insert and a delete, signed by sign_pending.
    let zone_id = sqlite_admin::find_zone_id(&conn, &origin())
        .expect("id")
        .expect("zone");
    conn.execute(
        "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
         VALUES (?1, 'sql.example.org.', 'org.example.sql.', 300, 'TXT', NULL, '\"by sql\"')",
        [zone_id],
    )
    .expect("insert");
    conn.execute(
        "DELETE FROM records WHERE zone_id=?1 AND name='mail.example.org.' AND rdtype='A'",
        [zone_id],
    )
    .expect("delete");
    assert_eq!(
        sqlite_signing::zones_with_edits(&conn).expect("edits"),
        [origin()]
    );
    let r = sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now + 3)
        .expect("signs the edit")
        .expect("edits");
    assert_eq!(
        (r.old_serial, r.new_serial, r.added, r.deleted),
        (3, 4, 1, 1)
    );
    assert!(
        sqlite_signing::zones_with_edits(&conn)
            .expect("edits")
            .is_empty()
    );
    verify(&conn, dir.path(), "sql", csk);

    // A whole-zone replace at serial 10 keeps the unchanged RRsets' RRSIGs.
    let mx_sig = |conn: &Connection| {
        sqlite_admin::zone_records(conn, &origin())
            .expect("records")
            .into_iter()
            .find(|r| {
                r.record.rtype == RType::RRSIG
                    && r.record.rdata.rrsig_type_covered() == Some(RType::MX)
            })
            .map(|r| r.record.rdata)
            .expect("MX RRSIG")
    };
    let before = mx_sig(&conn);
    let v10 = ZONE.replace(" 1 3600 900", " 10 3600 900") + "extra A 192.0.2.100\n";
    sqlite_admin::replace_zone_journaled(&mut conn, &origin(), &records(&v10), &mut |_, _| {})
        .expect("replaces");
    assert_eq!(serial(&conn), 10);
    assert_eq!(mx_sig(&conn), before, "the MX RRSIG is kept byte for byte");
    verify(&conn, dir.path(), "replace", csk);

    // The journal chains from the first signing through every step.
    assert!(journal_chains(&conn, 1, 4) > 0);
    assert!(journal_chains(&conn, 4, 10) > 0);
}

#[test]
fn nsec3_with_a_csk_through_every_write_path() {
    // apex, ns1, mail, www, wild + *.wild, a.b.c + b.c + c, secure, sub: 11
    every_write_path(Policy::default(), 11, 0);
}

#[test]
fn nsec3_opt_out_with_a_ksk_and_zsk_through_every_write_path() {
    let p = Policy {
        keys: KeyLayout::KskZsk,
        denial: Denial::Nsec3 { opt_out: true },
        ..Policy::default()
    };
    every_write_path(p, 10, 0);
}

#[test]
fn nsec_with_ed25519_through_every_write_path() {
    let mut p = Policy {
        denial: Denial::Nsec,
        ..Policy::default()
    };
    p.set("algorithm", "ed25519").expect("ed25519");
    // apex, ns1, mail, www, *.wild, a.b.c, sub, secure: 8
    every_write_path(p, 0, 8);
}

#[test]
fn foreign_keys_and_a_clock_gone_back_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    let with_key = format!(
        "{ZONE}@ 3600 DNSKEY 257 3 13 \
         mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\n"
    );
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(&with_key), |_, _| {})
        .expect("loads");
    sqlite_signing::set_policy(&conn, &origin(), &Policy::default()).expect("policy");
    let now = sqlite_signing::unix_now();
    let e = sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now)
        .expect_err("a foreign key");
    let msg = e.to_string();
    assert!(
        msg.contains("key tags 2371") && msg.contains("import"),
        "{msg}"
    );
    assert!(
        sqlite_signing::keys_of(&conn, &origin())
            .expect("keys")
            .is_empty()
    );
    assert_eq!(serial(&conn), 1);

    // Loading it again with the key is refused too, naming the tag.
    let e =
        authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(&with_key), |_, _| {})
            .expect_err("a foreign key in a load");
    assert!(e.to_string().contains("key tags 2371"), "{e}");
    // Without it, the load itself signs; a clock a day back is refused.
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(ZONE), |_, _| {})
        .expect("reloads");
    assert_eq!(count(&conn, RType::DNSKEY), 1);
    assert_eq!(count(&conn, RType::NSEC3PARAM), 1);
    verify(&conn, dir.path(), "load", true);
    let e =
        sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now - 86_400)
            .expect_err("clock");
    assert!(e.to_string().contains("behind the last signing"), "{e}");
}

/// A zone signed by BIND 9 moves with its keys: refused until they are
/// imported, then signed with them (no new key, so the parent's DS stays).
#[test]
fn a_zone_moves_from_bind_with_its_keys() {
    let keys = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dnssec-keys");
    let read = |name: &str| std::fs::read_to_string(keys.join(name)).expect("key file");
    let (ksk, zsk) = ("Kexample.com.+013+40835", "Kexample.com.+013+46664");
    let com: Name = "example.com.".parse().expect("origin");
    let dnskeys: String = [ksk, zsk]
        .iter()
        .map(|k| read(&format!("{k}.key")))
        .flat_map(|t| {
            t.lines()
                .filter(|l| !l.starts_with(';') && l.contains("DNSKEY"))
                .map(|l| format!("{l}\n"))
                .collect::<Vec<_>>()
        })
        .collect();
    let text = format!("{ZONE}{dnskeys}");
    let recs = parse_master_text(&text, Path::new("zone"), &com).expect("parses");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    authd_datasrc::sqlite_load::load_zone(&mut conn, &com, &recs, |_, _| {}).expect("loads");
    let policy = Policy {
        keys: KeyLayout::KskZsk,
        ..Policy::default()
    };
    sqlite_signing::set_policy(&conn, &com, &policy).expect("policy");
    let now = sqlite_signing::unix_now();
    let e = sqlite_signing::sign_pending(&mut conn, &com, SerialPolicy::Increment, now)
        .expect_err("keys not imported");
    assert!(e.to_string().contains("key tags 40835, 46664"), "{e}");

    let import = |conn: &Connection, k: &str| {
        sqlite_signing::import_bind_key(
            conn,
            &com,
            &read(&format!("{k}.key")),
            &read(&format!("{k}.private")),
            None,
        )
    };
    assert_eq!(import(&conn, ksk).expect("KSK"), 40835);
    assert_eq!(import(&conn, zsk).expect("ZSK"), 46664);
    let again = import(&conn, ksk).expect_err("twice");
    assert!(again.to_string().contains("already stored"), "{again}");
    let other = sqlite_signing::import_bind_key(
        &conn,
        &origin(),
        &read(&format!("{ksk}.key")),
        &read(&format!("{ksk}.private")),
        None,
    )
    .expect_err("another zone's key");
    assert!(
        other
            .to_string()
            .contains("is for example.com., not example.org."),
        "{other}"
    );

    let r = sqlite_signing::sign_pending(&mut conn, &com, SerialPolicy::Increment, now)
        .expect("signs")
        .expect("signed");
    assert_eq!((r.old_serial, r.new_serial), (1, 2));
    let stored = sqlite_signing::keys_of(&conn, &com).expect("keys");
    let tags: Vec<(u16, KeyRole)> = stored.iter().map(|k| (k.pair.key_tag(), k.role)).collect();
    assert_eq!(
        tags,
        [(40835, KeyRole::Ksk), (46664, KeyRole::Zsk)],
        "no key made"
    );
    // The DS the parent has is still right: as BIND computes it.
    let ds = sqlite_signing::ds_records(&conn, &com, 3600).expect("ds");
    assert_eq!(ds.len(), 1);
    if have("dnssec-dsfromkey") {
        let o = Command::new("dnssec-dsfromkey")
            .args(["-2"])
            .arg(keys.join(format!("{ksk}.key")))
            .output()
            .expect("runs");
        let bind = String::from_utf8_lossy(&o.stdout);
        let rdata = |l: &str| l.split(" DS ").nth(1).map(str::trim).map(str::to_string);
        assert_eq!(
            rdata(&ds[0]),
            rdata(bind.trim()),
            "ours {ds:?}, BIND's {bind}"
        );
    }
    let mut out = Vec::new();
    sqlite_admin::dump_zone(&conn, &com, &mut out, DumpStyle::Bind).expect("dumps");
    let file = dir.path().join("moved.zone");
    std::fs::write(&file, &out).expect("writes");
    if have("dnssec-verify") {
        let o = Command::new("dnssec-verify")
            .args(["-q", "-o", "example.com."])
            .arg(&file)
            .output()
            .expect("runs");
        assert!(
            o.status.success(),
            "dnssec-verify: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The states of the zone's keys, oldest first, as (role, state) pairs.
fn states(conn: &Connection) -> Vec<(&'static str, &'static str)> {
    sqlite_signing::keys_of(conn, &origin())
        .expect("keys")
        .iter()
        .map(|k| (k.role.as_str(), k.state.as_str()))
        .collect()
}

/// Signers (key tags) of the zone's RRSIGs covering `t`.
fn signers(conn: &Connection, t: RType) -> Vec<u16> {
    let mut v: Vec<u16> = sqlite_admin::zone_records(conn, &origin())
        .expect("records")
        .iter()
        .filter(|r| {
            r.record.rtype == RType::RRSIG && r.record.rdata.rrsig_type_covered() == Some(t)
        })
        .map(|r| u16::from_be_bytes([r.record.rdata.as_wire()[16], r.record.rdata.as_wire()[17]]))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A ZSK rollover by pre-publication driven by the signer's passes over
/// time (lifetime 100 s, DNSKEY TTL 10 s, propagation delay 2 s, largest
/// TTL in the zone 300 s), the zone valid to both validators at each step
/// and the journal chaining through them; then a KSK rollover asked by the
/// operator, waiting for the DS until it is confirmed.
#[test]
fn keys_roll_over_by_their_timings() {
    let policy = Policy {
        keys: KeyLayout::KskZsk,
        denial: Denial::Nsec,
        dnskey_ttl: 10,
        propagation_delay: 2,
        zsk_lifetime: 100,
        ..Policy::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(ZONE), |_, _| {})
        .expect("loads");
    sqlite_signing::set_policy(&conn, &origin(), &policy).expect("policy");
    let t0 = sqlite_signing::unix_now();
    let pass = |conn: &mut Connection, t: u64| {
        sqlite_signing::sign_pending(conn, &origin(), SerialPolicy::Increment, t).expect("signs")
    };
    pass(&mut conn, t0).expect("first signing");
    let keys = sqlite_signing::keys_of(&conn, &origin()).expect("keys");
    let (ksk, zsk1) = (keys[0].pair.key_tag(), keys[1].pair.key_tag());
    assert_eq!(signers(&conn, RType::A), [zsk1]);
    assert_eq!(count(&conn, RType::CDS), 1);
    let next =
        |conn: &Connection| sqlite_signing::zone_states(conn).expect("states")[0].next_key_event;
    assert_eq!(next(&conn), Some(t0 + 100));
    // Before the lifetime ends nothing moves.
    assert_eq!(pass(&mut conn, t0 + 99), None);

    // The new ZSK is published, not signing.
    pass(&mut conn, t0 + 100).expect("published");
    assert_eq!(
        states(&conn),
        [("ksk", "active"), ("zsk", "active"), ("zsk", "published")]
    );
    assert_eq!(count(&conn, RType::DNSKEY), 3);
    assert_eq!(signers(&conn, RType::A), [zsk1]);
    verify(&conn, dir.path(), "zsk-published", false);
    assert_eq!(next(&conn), Some(t0 + 112));

    // After the DNSKEY TTL and the delay it signs; the old one is retired.
    assert_eq!(pass(&mut conn, t0 + 111), None);
    pass(&mut conn, t0 + 112).expect("active");
    let zsk2 = sqlite_signing::keys_of(&conn, &origin()).expect("keys")[2]
        .pair
        .key_tag();
    assert_eq!(
        states(&conn),
        [("ksk", "active"), ("zsk", "retired"), ("zsk", "active")]
    );
    assert_eq!(signers(&conn, RType::A), [zsk2]);
    assert_eq!(signers(&conn, RType::DNSKEY), [ksk]);
    assert_eq!(count(&conn, RType::DNSKEY), 3);
    verify(&conn, dir.path(), "zsk-active", false);
    // Removed after the largest TTL (300 s) and the delay.
    assert_eq!(next(&conn), Some(t0 + 112 + 302));
    pass(&mut conn, t0 + 414).expect("removed");
    assert_eq!(
        states(&conn),
        [("ksk", "active"), ("zsk", "removed"), ("zsk", "active")]
    );
    assert_eq!(count(&conn, RType::DNSKEY), 2);
    verify(&conn, dir.path(), "zsk-removed", false);
    // The next ZSK rollover counts from the new key's activation.
    assert_eq!(next(&conn), Some(t0 + 212));
    // Every step was journaled: IXFR from the first signing's serial.
    assert!(journal_chains(&conn, 2, serial(&conn)) > 0);

    // A KSK rollover asked by the operator (no lifetime): both KSKs sign
    // the DNSKEY RRset and the CDS names both until the DS is confirmed.
    let roll = |conn: &mut Connection, e: authd_datasrc::write::KeyEvent, t: u64| {
        authd_datasrc::sqlite_rollover::key_event(conn, &origin(), e, SerialPolicy::Increment, t)
    };
    use authd_datasrc::write::KeyEvent;
    let e = roll(&mut conn, KeyEvent::DsPublished { ttl: 10 }, t0 + 150).expect_err("no roll");
    assert!(
        e.to_string().contains("no KSK/CSK rollover is waiting"),
        "{e}"
    );
    roll(&mut conn, KeyEvent::Rollover { zsk: false }, t0 + 150).expect("starts");
    let e = roll(&mut conn, KeyEvent::Rollover { zsk: false }, t0 + 151).expect_err("busy");
    assert!(e.to_string().contains("KSK rollover is under way"), "{e}");
    let ksk2 = sqlite_signing::keys_of(&conn, &origin()).expect("keys")[3]
        .pair
        .key_tag();
    let mut both = vec![ksk, ksk2];
    both.sort_unstable();
    assert_eq!(signers(&conn, RType::DNSKEY), both);
    assert_eq!(count(&conn, RType::CDS), 2);
    verify(&conn, dir.path(), "ksk-double", false);
    let st = &sqlite_signing::zone_states(&conn).expect("states")[0];
    assert!(st.awaiting_ds.is_some());
    // However long it waits, the old KSK stays until the DS is seen.
    assert_eq!(pass(&mut conn, t0 + 200), None);
    assert_eq!(states(&conn)[0], ("ksk", "active"));
    roll(&mut conn, KeyEvent::DsPublished { ttl: 20 }, t0 + 200).expect("confirmed");
    // The ZSK's lifetime (from 112) ends first, at 212; the old KSK is
    // retired at max(150 + 10, 200 + 20) + 2 = 222: one pass takes both.
    assert_eq!(next(&conn), Some(t0 + 212));
    assert_eq!(
        pass(&mut conn, t0 + 221).map(|_| states(&conn)[0]),
        Some(("ksk", "active"))
    );
    assert_eq!(states(&conn)[4], ("zsk", "published"));
    pass(&mut conn, t0 + 222).expect("retired");
    assert_eq!(states(&conn)[0], ("ksk", "retired"));
    assert_eq!(states(&conn)[3], ("ksk", "active"));
    assert_eq!(signers(&conn, RType::DNSKEY), [ksk2]);
    assert_eq!(count(&conn, RType::CDS), 1);
    verify(&conn, dir.path(), "ksk-retired", false);
    // A KSK signs only the DNSKEY RRset: removed after its TTL + delay.
    assert_eq!(next(&conn), Some(t0 + 233));
    pass(&mut conn, t0 + 234).expect("removed");
    assert_eq!(
        states(&conn),
        [
            ("ksk", "removed"),
            ("zsk", "removed"),
            ("zsk", "retired"),
            ("ksk", "active"),
            ("zsk", "active")
        ]
    );
    assert_eq!(count(&conn, RType::DNSKEY), 3);
    verify(&conn, dir.path(), "ksk-removed", false);
}

/// The NSEC (RFC 4034 §4.1, RFC 4035 §2.3) or NSEC3 (RFC 5155 §7.1, no
/// opt-out) chain the zone must carry, worked out here from its data
/// alone: every authoritative name (not below a zone cut or DNAME; for
/// NSEC3 also every empty non-terminal above one, hashed) in order, each
/// pointing at the next (the last at the first) and listing its types (at
/// a delegation only NS and DS) with NSEC and RRSIG (NSEC3: RRSIG but at an
/// insecure delegation). Compared with the stored chain exactly.
fn check_chain(conn: &Connection, step: &str, nsec3: bool) {
    use std::collections::BTreeMap;
    let rows = sqlite_admin::zone_records(conn, &origin()).expect("records");
    let chain_type = if nsec3 { RType::NSEC3 } else { RType::NSEC };
    let mut data: BTreeMap<Name, Vec<RType>> = BTreeMap::new();
    let mut stored: BTreeMap<Name, Vec<u8>> = BTreeMap::new();
    for r in &rows {
        let rec = &r.record;
        match rec.rtype {
            RType::NSEC | RType::NSEC3 => {
                assert_eq!(
                    rec.rtype, chain_type,
                    "{step}: {} at {}",
                    rec.rtype, rec.owner
                );
                assert!(
                    stored
                        .insert(rec.owner.clone(), rec.rdata.as_wire().to_vec())
                        .is_none(),
                    "{step}: two {} RRs at {}",
                    rec.rtype,
                    rec.owner
                );
            }
            RType::RRSIG => {}
            t => data.entry(rec.owner.clone()).or_default().push(t),
        }
    }
    let mut auth: Vec<(Name, Vec<RType>)> = Vec::new();
    let mut cut: Option<Name> = None;
    for (name, mut types) in data {
        if let Some(c) = &cut {
            if name.is_subdomain_of(c) && name != *c {
                continue;
            }
            cut = None;
        }
        let delegation = name != origin() && types.contains(&RType::NS);
        if delegation || types.contains(&RType::DNAME) {
            cut = Some(name.clone());
        }
        if delegation {
            types.retain(|t| *t == RType::NS || *t == RType::DS);
        }
        if !nsec3 {
            types.push(RType::NSEC);
        }
        if !nsec3 || !delegation || types.contains(&RType::DS) {
            types.push(RType::RRSIG);
        }
        types.sort();
        types.dedup();
        auth.push((name, types));
    }
    let mut want: BTreeMap<Name, Vec<u8>> = BTreeMap::new();
    if nsec3 {
        let params = authd_datasrc::dnssec::Nsec3Params {
            algorithm: 1,
            iterations: 0,
            salt: Vec::new(),
        };
        let mut hashed: BTreeMap<Vec<u8>, Vec<RType>> = BTreeMap::new();
        let names: std::collections::HashSet<Name> = auth.iter().map(|(n, _)| n.clone()).collect();
        for (name, types) in &auth {
            hashed.insert(params.hash(name), types.clone());
            let mut up = name.parent();
            while let Some(p) = up {
                if !p.is_subdomain_of(&origin()) || p == origin() {
                    break;
                }
                if !names.contains(&p) {
                    hashed.entry(params.hash(&p)).or_default();
                }
                up = p.parent();
            }
        }
        let labels: Vec<&Vec<u8>> = hashed.keys().collect();
        for (i, (label, types)) in hashed.iter().enumerate() {
            let next = labels[(i + 1) % labels.len()];
            let rdata =
                authd_datasrc::signer::zone::nsec3_rdata(false, next, types).expect("base32hex");
            want.insert(origin().prepend_label(label).expect("owner"), rdata);
        }
    } else {
        for (i, (name, types)) in auth.iter().enumerate() {
            let next = &auth[(i + 1) % auth.len()].0;
            let mut rdata = next.to_lowercase().as_wire().to_vec();
            rdata.extend(authd_datasrc::signer::zone::type_bitmap(types));
            want.insert(name.clone(), rdata);
        }
    }
    for (name, rdata) in &want {
        assert_eq!(
            stored.get(name),
            Some(rdata),
            "{step}: the {chain_type} at {name}"
        );
    }
    let extra: Vec<&Name> = stored.keys().filter(|n| !want.contains_key(*n)).collect();
    assert!(extra.is_empty(), "{step}: {chain_type} RRs at {extra:?}");
}

/// UPDATEs into an NSEC zone are signed from the rows around the changed
/// names only (sign_names_in_tx): 300 random changes over names whose
/// `rname` order is not their canonical order (`a-b` sorts before `x.a` by
/// text, after it canonically), names below a delegation and a DNAME
/// (occluded: not in the chain), a secure delegation's DS, empty
/// non-terminals made and unmade, the apex's types, and now and then a
/// delegation added or removed (the whole-zone signing). After each the
/// stored NSEC chain is exactly the one the data gives; every 50 and at the
/// end dnssec-verify and ldns-verify-zone pass.
#[test]
fn updates_of_an_nsec_zone_keep_the_chain_exact() {
    random_updates(Denial::Nsec);
}

/// The same for an NSEC3 zone (no opt-out): the affected names' hashes and
/// the records before them in hash order are spliced into the chain.
#[test]
fn updates_of_an_nsec3_zone_keep_the_chain_exact() {
    random_updates(Denial::Nsec3 { opt_out: false });
}

fn random_updates(denial: Denial) {
    let nsec3 = denial != Denial::Nsec;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    authd_migrations::ensure_authd_indexes(&conn).expect("indexes");
    let zone = format!("{ZONE}dn DNAME other.net.\nx.a A 192.0.2.7\n");
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(&zone), |_, _| {})
        .expect("loads");
    let policy = Policy {
        denial,
        ..Policy::default()
    };
    sqlite_signing::set_policy(&conn, &origin(), &policy).expect("policy");
    let mut now = sqlite_signing::unix_now();
    sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now)
        .expect("signs")
        .expect("first signing");
    check_chain(&conn, "first", nsec3);

    // The neighbour queries use the canonical index.
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT name FROM records WHERE zone_id=1 AND \
             replace(lower(rname), '.', char(1)) < 'x' \
             ORDER BY replace(lower(rname), '.', char(1)) DESC LIMIT 1",
        )
        .expect("plan")
        .query_map([], |r| r.get::<_, String>(3))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("plan rows");
    assert!(
        plan.iter().any(|p| p.contains("authd_records_canonical")),
        "{plan:?}"
    );

    let pool = [
        "a", "a-b", "x.a", "a.a-b", "b", "*", "*.b", "c.d.e", "d.e", "z", "zz-top", "ns.sub",
        "y.dn", "y.ns.sub", "mail", "secure", "q.r.s.t",
    ];
    let mut seed: u64 = 0x00c0_ffee;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let ds = "DS 54321 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF";
    for i in 0..300u32 {
        let rows = sqlite_admin::zone_records(&conn, &origin()).expect("records");
        let pick = pool[next(pool.len() as u64) as usize];
        let owner: Name = format!("{pick}.example.org.").parse().expect("name");
        let at: Vec<_> = rows
            .iter()
            .filter(|r| {
                r.record.owner == owner
                    && !authd_datasrc::signer::zone::is_signer_type(r.record.rtype)
            })
            .map(|r| r.record.clone())
            .collect();
        let rr = |text: String| -> Vec<authd_datasrc::rr::Record> {
            records(&text).into_iter().map(|s| s.record).collect()
        };
        let (add, delete) = match next(10) {
            0..=2 => (
                rr(format!("{pick} A 192.0.2.{}\n", i % 250 + 1)),
                Vec::new(),
            ),
            3 => (rr(format!("{pick} TXT \"t{i}\"\n")), Vec::new()),
            4 | 5 => (
                Vec::new(),
                at.iter()
                    .filter(|r| !matches!(r.rtype, RType::NS | RType::DNAME))
                    .cloned()
                    .collect(),
            ),
            // Two names emptied and one added at once: neighbours of one
            // another in the chain, maybe.
            9 => {
                let other = pool[next(pool.len() as u64) as usize];
                let other: Name = format!("{other}.example.org.").parse().expect("name");
                let emptied = rows
                    .iter()
                    .filter(|r| {
                        (r.record.owner == owner || r.record.owner == other)
                            && !authd_datasrc::signer::zone::is_signer_type(r.record.rtype)
                            && !matches!(r.record.rtype, RType::NS | RType::DNAME | RType::DS)
                    })
                    .map(|r| r.record.clone())
                    .collect();
                (rr(format!("n{i}.{pick} TXT \"new {i}\"\n")), emptied)
            }
            // The apex's MX RRset: its RRSIG changes, its NSEC not.
            6 => (rr(format!("@ MX {} mail\n", 20 + i)), Vec::new()),
            7 => {
                let have_ds = rows.iter().any(|r| {
                    r.record.rtype == RType::DS && r.record.rdata.as_wire()[..2] == [0xd4, 0x31]
                });
                if have_ds {
                    (Vec::new(), rr(format!("secure {ds}\n")))
                } else {
                    (rr(format!("secure {ds}\n")), Vec::new())
                }
            }
            _ => {
                let has_ns = rows
                    .iter()
                    .any(|r| r.record.owner == owner && r.record.rtype == RType::NS);
                // (No NS at a wildcard: BIND refuses to load that, RFC 4592 §4.2.)
                if pick == "secure"
                    || pick == "ns.sub"
                    || pick.ends_with("dn")
                    || pick.starts_with('*')
                {
                    continue;
                } else if has_ns {
                    (Vec::new(), rr(format!("{pick} NS ns.other.net.\n")))
                } else {
                    (rr(format!("{pick} NS ns.other.net.\n")), Vec::new())
                }
            }
        };
        let present = |r: &authd_datasrc::rr::Record| {
            rows.iter().any(|s| {
                s.record.owner == r.owner && s.record.rtype == r.rtype && s.record.rdata == r.rdata
            })
        };
        if add.iter().any(present) || (add.is_empty() && delete.is_empty()) {
            continue;
        }
        let names: Vec<Name> = add.iter().chain(&delete).map(|r| r.owner.clone()).collect();
        now += 1;
        let change = sqlite_admin::Change {
            add,
            delete,
            soa: None,
        };
        let step = format!("update {i} ({pick}: {change:?})");
        sqlite_admin::update_zone_with(
            &mut conn,
            &origin(),
            sqlite_admin::Scope::Names(&names),
            SerialPolicy::Increment,
            now,
            |_| Ok::<_, ()>(change),
        )
        .unwrap_or_else(|e| panic!("{step}: {e}"))
        .expect("planned");
        check_chain(&conn, &step, nsec3);
        if i % 50 == 49 {
            verify(&conn, dir.path(), &format!("update-{i}"), true);
        }
    }
    verify(&conn, dir.path(), "updates", true);
}

/// An UPDATE that commits before the signer has reached a plain SQL edit
/// (its log rows) signs that edit first, in its own transaction and as its
/// own journaled version: the edit's new name is in the NSEC chain and its
/// changed RRset re-signed (without it, the UPDATE cleared the log and the
/// edit stayed unsigned, its old RRSIG over data it no longer matched).
#[test]
fn an_update_signs_the_sql_edits_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("zone.sqlite3");
    let mut conn = authd_migrations::open_or_create(&path).expect("creates");
    authd_migrations::ensure_authd_indexes(&conn).expect("indexes");
    authd_datasrc::sqlite_load::load_zone(&mut conn, &origin(), &records(ZONE), |_, _| {})
        .expect("loads");
    let policy = Policy {
        denial: Denial::Nsec,
        ..Policy::default()
    };
    sqlite_signing::set_policy(&conn, &origin(), &policy).expect("policy");
    let now = sqlite_signing::unix_now();
    sqlite_signing::sign_pending(&mut conn, &origin(), SerialPolicy::Increment, now)
        .expect("signs")
        .expect("first signing");
    assert_eq!(serial(&conn), 2);
    conn.execute_batch(
        "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
         VALUES (1, 'sql.example.org.', 'org.example.sql.', 300, 'TXT', NULL, '\"by sql\"'); \
         UPDATE records SET rdata='192.0.2.33' WHERE name='mail.example.org.' AND rdtype='A';",
    )
    .expect("edits");
    let add = records("new A 192.0.2.99\n");
    let names = [add[0].record.owner.clone()];
    let change = sqlite_admin::Change {
        add: vec![add[0].record.clone()],
        delete: Vec::new(),
        soa: None,
    };
    let r = sqlite_admin::update_zone_with(
        &mut conn,
        &origin(),
        sqlite_admin::Scope::Names(&names),
        SerialPolicy::Increment,
        now + 1,
        |_| Ok::<_, ()>(change),
    )
    .expect("updates")
    .expect("planned");
    // 2 → 3 the SQL edit, 3 → 4 the update.
    assert_eq!((r.old_serial, r.new_serial), (3, 4));
    assert!(
        sqlite_signing::zones_with_edits(&conn)
            .expect("edits")
            .is_empty()
    );
    check_chain(&conn, "update after sql", false);
    verify(&conn, dir.path(), "update-after-sql", true);
    assert!(journal_chains(&conn, 2, 3) > 0);
    assert!(journal_chains(&conn, 3, 4) > 0);
}

/// A bump-in-the-wire signer: a `[[secondary]]` zone under a policy, written
/// through the write side as transfers write it. The served SOA serial is
/// the primary's while that is ahead, else one past the stored one; the
/// primary's serial is kept apart (`input_serial`), so IXFR asks from it
/// after re-signing moved the served one; every version is journaled as a
/// signed difference chaining from the first transfer, AXFR-in included.
#[test]
fn a_signed_secondary_keeps_its_primarys_serial_apart() {
    use authd_datasrc::ZoneWriter;
    use authd_datasrc::rr::Record;
    use authd_datasrc::sqlite::SqliteWriter;
    use authd_datasrc::write::{Difference, JournalPolicy};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secondary.sqlite3");
    let writer = SqliteWriter::create(&path).expect("creates");
    let policy = Policy::default();
    assert!(
        writer
            .set_signing(&origin(), Some(&policy))
            .expect("policy")
    );
    let conn = || authd_migrations::open_or_create(&path).expect("opens");
    let soa = |n: u32| -> Record {
        records(&format!("@ SOA ns1 hostmaster {n} 3600 900 1209600 300\n"))[0]
            .record
            .clone()
    };
    let rr = |text: &str| -> Record { records(text)[0].record.clone() };
    let diff = |from: u32, to: u32, deleted: &[&str], added: &[&str]| Difference {
        old_soa: soa(from),
        deleted: deleted.iter().map(|t| rr(t)).collect(),
        new_soa: soa(to),
        added: added.iter().map(|t| rr(t)).collect(),
    };
    let axfr = |text: &str| {
        writer
            .replace_zone(
                &origin(),
                &records(text),
                JournalPolicy::Clear,
                &mut |_, _| {},
            )
            .expect("AXFR in")
    };
    let state = || {
        let c = conn();
        (serial(&c), writer.input_serial(&origin()).expect("input"))
    };

    // The first AXFR is signed with the primary's serial.
    axfr(ZONE);
    assert_eq!(state(), (1, Some(1)));
    assert!(count(&conn(), RType::RRSIG) > 0);
    check_chain(&conn(), "axfr", true);

    // IXFR 1 -> 2: the primary's serial is ahead, so it is served.
    writer
        .apply_differences(
            &origin(),
            &[diff(1, 2, &["www AAAA 2001:db8::3"], &["new A 192.0.2.99"])],
        )
        .expect("IXFR 1 -> 2");
    assert_eq!(state(), (2, Some(2)));
    check_chain(&conn(), "ixfr 2", true);

    // Re-signing (a plain SQL edit here) moves the served serial to 3.
    conn()
        .execute(
            "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) \
             SELECT id, 'sql.example.org.', 'org.example.sql.', 300, 'TXT', NULL, '\"sql\"' \
             FROM zones WHERE name='example.org.'",
            [],
        )
        .expect("SQL edit");
    let now = sqlite_signing::unix_now();
    writer
        .sign_pending(&origin(), SerialPolicy::Increment, now)
        .expect("signs")
        .expect("the edit");
    assert_eq!(state(), (3, Some(2)));

    // IXFR 2 -> 3 asks from the primary's 2; its 3 is not ahead of ours, so 4.
    writer
        .apply_differences(&origin(), &[diff(2, 3, &[], &["x TXT \"three\""])])
        .expect("IXFR 2 -> 3");
    assert_eq!(state(), (4, Some(3)));
    check_chain(&conn(), "ixfr 3", true);

    // A difference from a serial we do not hold is refused; nothing changes.
    let e = writer
        .apply_differences(&origin(), &[diff(2, 3, &[], &["y TXT \"y\""])])
        .expect_err("not from our primary serial");
    assert!(e.to_string().contains("does not apply to serial 3"), "{e}");
    // So is a signed zone from the primary.
    let e = writer
        .apply_differences(
            &origin(),
            &[diff(3, 4, &[], &["y NSEC z.example.org. TXT"])],
        )
        .expect_err("signer records from the primary");
    assert!(e.to_string().contains("must serve it unsigned"), "{e}");
    assert_eq!(state(), (4, Some(3)));

    // Two differences netted: y added then deleted, new's TTL changed.
    writer
        .apply_differences(
            &origin(),
            &[
                diff(3, 4, &["new A 192.0.2.99"], &["y TXT \"y\""]),
                diff(4, 5, &["y TXT \"y\""], &["new 600 A 192.0.2.99"]),
            ],
        )
        .expect("IXFR 3 -> 5");
    assert_eq!(state(), (5, Some(5)));
    let rows = sqlite_admin::zone_records(&conn(), &origin()).expect("rows");
    assert!(
        !rows
            .iter()
            .any(|r| r.record.owner == rr("y TXT \"\"").owner)
    );
    let new_a: Vec<u32> = rows
        .iter()
        .filter(|r| r.record.rtype == RType::A && r.record.owner == rr("new A 192.0.2.1").owner)
        .map(|r| r.record.ttl)
        .collect();
    assert_eq!(new_a, [600]);
    check_chain(&conn(), "ixfr 5", true);

    // An AXFR of the primary's 6 after re-signing moved ours to 6: served
    // as 7, and journaled (not cleared), so IXFR out chains from 1.
    writer
        .key_event(
            &origin(),
            authd_datasrc::write::KeyEvent::Rollover { zsk: false },
            SerialPolicy::Increment,
            now + 1,
        )
        .expect("rollover");
    assert_eq!(state(), (6, Some(5)));
    let v6 = ZONE.replace(" 1 3600 900", " 6 3600 900") + "six A 192.0.2.6\n";
    axfr(&v6);
    assert_eq!(state(), (7, Some(6)));
    check_chain(&conn(), "axfr 6", true);
    assert!(journal_chains(&conn(), 1, 7) > 0);
    // The same version again changes nothing and keeps the journal.
    axfr(&v6);
    assert_eq!(state(), (7, Some(6)));
    assert!(journal_chains(&conn(), 1, 7) > 0);
    verify(&conn(), dir.path(), "secondary", true);
}

/// A zone written before its policy was stored (a secondary zone's first
/// transfer racing the signer) is first signed by `sign_pending`, which
/// records the stored version's serial as the primary's.
#[test]
fn a_zone_signed_after_it_was_written_records_its_input_serial() {
    use authd_datasrc::ZoneWriter;
    use authd_datasrc::sqlite::SqliteWriter;
    use authd_datasrc::write::JournalPolicy;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secondary.sqlite3");
    let writer = SqliteWriter::create(&path).expect("creates");
    writer
        .replace_zone(
            &origin(),
            &records(ZONE),
            JournalPolicy::Clear,
            &mut |_, _| {},
        )
        .expect("AXFR in");
    assert_eq!(writer.input_serial(&origin()).expect("input"), None);
    writer
        .set_signing(&origin(), Some(&Policy::default()))
        .expect("policy");
    let now = sqlite_signing::unix_now();
    let r = writer
        .sign_pending(&origin(), SerialPolicy::Increment, now)
        .expect("signs")
        .expect("first signing");
    assert_eq!((r.old_serial, r.new_serial), (1, 2));
    assert_eq!(writer.input_serial(&origin()).expect("input"), Some(1));
}
