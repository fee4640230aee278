//! End to end: authd as a catalog zone consumer (RFC 9432 §5,
//! auth/src/catalog/consumer.rs) of another authd serving hand-written
//! catalog zones from an sqlite3 DB, over real sockets on 127.0.0.1.
//!
//! - members are served as secondary zones; a member removed stops being
//!   served (REFUSED) and its data is deleted from the DB; a new label
//!   resets the member (a new AXFR); a `group` maps a member to a
//!   `[[catalog.group]]` with its own DB; a restart serves the members at
//!   once without transferring them again;
//! - broken catalogs (another version, two PTRs at one label) are not
//!   processed and the members keep serving, each problem logged once; a
//!   member also configured locally and a PTR to the root are ignored;
//! - a zone listed by a second catalog moves only when the first names it
//!   in a `coo` property (§5.6).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use authd_tests::hickory_proto::op::Message;
use authd_tests::hickory_proto::rr::RData;
use authd_tests::{
    AuthdProcess, QueryBuilder, binary, eventually, free_port, load_zone_text, parse_reply,
    tempdir, try_query_udp, write_file,
};

/// A member zone whose www address ends in `n`, SOA REFRESH an hour (so a
/// restart does not refresh it).
fn member(n: u8) -> String {
    format!(
        "$TTL 300\n@ SOA ns1 hostmaster {n} 3600 1 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
         www A 192.0.2.{n}\n"
    )
}

/// A catalog zone at `serial` with `body` (member and property RRs).
fn catalog(serial: u32, body: &str) -> String {
    format!(
        "@ 0 SOA invalid. invalid. {serial} 3600 600 2419200 0\n@ 0 NS invalid.\n\
         version 0 TXT \"2\"\n{body}"
    )
}

fn start(dir: &Path, name: &str, text: &str, port: u16) -> AuthdProcess {
    let config = write_file(dir, name, text);
    let mut cmd = Command::new(binary("authd"));
    cmd.arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    AuthdProcess::start_command(cmd, 1)
}

/// The primary: every zone of `db`, transfers from loopback, NOTIFY to
/// `notify`.
fn primary(dir: &Path, db: &Path, port: u16, notify: u16) -> AuthdProcess {
    let text = format!(
        "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[transfer]\nallow = [\"127.0.0.1\"]\n\
         [notify]\ntargets = [\"127.0.0.1:{notify}\"]\n",
        db.display()
    );
    start(dir, "primary.toml", &text, port)
}

fn ask(addr: SocketAddr, qname: &str, qtype: &str) -> Option<Message> {
    let wire = QueryBuilder::new(qname, qtype).wire();
    try_query_udp(addr, &wire, 3).map(|r| parse_reply(&r))
}

/// www.ZONE's address as served at `addr`, or the rcode when there is none.
fn www(addr: SocketAddr, zone: &str) -> String {
    let Some(reply) = ask(addr, &format!("www.{zone}"), "A") else {
        return "no answer".into();
    };
    reply
        .answers
        .iter()
        .find_map(|r| match &r.data {
            RData::A(a) if reply.authoritative => Some(a.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| format!("{:?}", reply.response_code))
}

fn serves(s: &AuthdProcess, zone: &str, want: &str) {
    assert!(
        eventually(10, || www(s.addr(), zone) == want),
        "www.{zone} is {} not {want}:\n{}",
        www(s.addr(), zone),
        s.stderr()
    );
}

/// The zone names stored in `db`.
fn zones_in(db: &Path) -> Vec<String> {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg("SELECT name FROM zones ORDER BY name")
        .output()
        .expect("sqlite3");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn count(s: &AuthdProcess, needle: &str) -> usize {
    s.stderr().matches(needle).count()
}

#[test]
fn members_are_added_removed_reset_grouped_and_survive_a_restart() {
    let dir = tempdir();
    let (pport, cport) = (free_port(), free_port());
    let pdb = dir.path().join("primary.sqlite3");
    for (z, n) in [("a.example.", 1), ("b.example.", 2), ("c.example.", 3)] {
        load_zone_text(&pdb, z, &member(n));
    }
    load_zone_text(
        &pdb,
        "catalog.example.",
        &catalog(1, "m1.zones 0 PTR a.example.\nm2.zones 0 PTR b.example.\n"),
    );
    let _p = primary(dir.path(), &pdb, pport, cport);
    let members = dir.path().join("members.sqlite3");
    let grouped = dir.path().join("grouped.sqlite3");
    let text = format!(
        "[[secondary]]\nzone = \"catalog.example.\"\ncatalog = true\n\
         primaries = [\"127.0.0.1:{pport}\"]\nfile = \"{}\"\nmin_refresh = 1\n\
         [[catalog.group]]\nname = \"special\"\nfile = \"{}\"\n",
        members.display(),
        grouped.display()
    );
    let mut c = start(dir.path(), "consumer.toml", &text, cport);
    serves(&c, "a.example.", "192.0.2.1");
    serves(&c, "b.example.", "192.0.2.2");
    assert_eq!(www(c.addr(), "c.example."), "Refused");
    assert_eq!(
        zones_in(&members),
        ["a.example.", "b.example.", "catalog.example."]
    );

    // b removed, a relabelled (reset), c added in group "special".
    load_zone_text(
        &pdb,
        "catalog.example.",
        &catalog(
            2,
            "m1new.zones 0 PTR a.example.\nm3.zones 0 PTR c.example.\n\
             group.m3.zones 0 TXT \"special\"\n",
        ),
    );
    serves(&c, "c.example.", "192.0.2.3");
    serves(&c, "b.example.", "Refused");
    assert!(c.wait_for_log(
        "member a.example.: label m1 -> m1new: resetting it (RFC 9432 §5.5)",
        Duration::from_secs(5)
    ));
    assert!(c.wait_for_log(
        "catalog member b.example.: data deleted",
        Duration::from_secs(5)
    ));
    assert!(eventually(5, || count(
        &c,
        "secondary zone a.example.: AXFR from"
    ) == 2));
    serves(&c, "a.example.", "192.0.2.1");
    assert_eq!(zones_in(&members), ["a.example.", "catalog.example."]);
    assert_eq!(zones_in(&grouped), ["c.example."]);

    // A restart serves the members at once, without new transfers.
    c.terminate();
    let c = start(dir.path(), "consumer.toml", &text, cport);
    assert_eq!(www(c.addr(), "a.example."), "192.0.2.1");
    assert_eq!(www(c.addr(), "c.example."), "192.0.2.3");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(count(&c, "AXFR from"), 0, "{}", c.stderr());
    assert_eq!(count(&c, "catalog members:"), 1, "{}", c.stderr());
}

#[test]
fn broken_catalogs_and_bad_members_leave_the_served_members_alone() {
    let dir = tempdir();
    let (pport, cport, lport) = (free_port(), free_port(), free_port());
    let pdb = dir.path().join("primary.sqlite3");
    for (z, n) in [("a.example.", 1), ("b.example.", 2), ("l.example.", 9)] {
        load_zone_text(&pdb, z, &member(n));
    }
    let good = "m1.zones 0 PTR a.example.\n";
    load_zone_text(&pdb, "catalog.example.", &catalog(1, good));
    let _p = primary(dir.path(), &pdb, pport, cport);
    // l.example. is configured locally, from another primary.
    let ldb = dir.path().join("local-primary.sqlite3");
    load_zone_text(&ldb, "l.example.", &member(10));
    let _lp = {
        let text = format!(
            "[[datasource]]\ntype = \"sqlite3\"\nfile = \"{}\"\n[transfer]\nallow = [\"127.0.0.1\"]\n",
            ldb.display()
        );
        start(dir.path(), "local.toml", &text, lport)
    };
    let text = format!(
        "[[secondary]]\nzone = \"catalog.example.\"\ncatalog = true\n\
         primaries = [\"127.0.0.1:{pport}\"]\nfile = \"{}\"\nmin_refresh = 1\n\
         [[secondary]]\nzone = \"l.example.\"\nprimaries = [\"127.0.0.1:{lport}\"]\n\
         file = \"{}\"\n",
        dir.path().join("members.sqlite3").display(),
        dir.path().join("local.sqlite3").display()
    );
    let c = start(dir.path(), "consumer.toml", &text, cport);
    serves(&c, "a.example.", "192.0.2.1");

    // Another version: not processed; a stays, b is not added.
    let v1 = "@ 0 SOA invalid. invalid. 2 3600 600 2419200 0\n@ 0 NS invalid.\n\
              version 0 TXT \"1\"\nm2.zones 0 PTR b.example.\n";
    load_zone_text(&pdb, "catalog.example.", v1);
    let broken = "catalog zone catalog.example.: broken: version.catalog.example. TXT is \
                  [\"1\"], not \"2\" (RFC 9432 §4.2); not processed, its 1 member(s) keep \
                  serving as they were";
    assert!(
        c.wait_for_log(broken, Duration::from_secs(10)),
        "{}",
        c.stderr()
    );
    assert_eq!(www(c.addr(), "a.example."), "192.0.2.1");
    assert_eq!(www(c.addr(), "b.example."), "Refused");

    // Two PTRs at one label: not processed either.
    load_zone_text(
        &pdb,
        "catalog.example.",
        &catalog(3, "m1.zones 0 PTR a.example.\nm1.zones 0 PTR b.example.\n"),
    );
    let two = "catalog zone catalog.example.: broken: member label m1 has 2 PTR records \
               (RFC 9432 §4.3.1 allows one); not processed, its 1 member(s) keep serving";
    assert!(
        c.wait_for_log(two, Duration::from_secs(10)),
        "{}",
        c.stderr()
    );
    assert_eq!(www(c.addr(), "a.example."), "192.0.2.1");

    // Good again, with a member configured locally and one at the root.
    load_zone_text(
        &pdb,
        "catalog.example.",
        &catalog(
            4,
            "m1.zones 0 PTR a.example.\nm2.zones 0 PTR b.example.\n\
             m3.zones 0 PTR l.example.\nm4.zones 0 PTR .\n",
        ),
    );
    serves(&c, "b.example.", "192.0.2.2");
    let local = "catalog zone catalog.example.: member label m3: zone l.example. is also \
                 configured locally; the local configuration wins";
    let root = "catalog zone catalog.example.: member label m4: member . cannot be a zone of \
                its own (the root, or inside the catalog); ignored";
    assert!(
        c.wait_for_log(local, Duration::from_secs(5)),
        "{}",
        c.stderr()
    );
    assert!(
        c.wait_for_log(root, Duration::from_secs(5)),
        "{}",
        c.stderr()
    );
    assert_eq!(www(c.addr(), "l.example."), "192.0.2.10");
    assert_eq!(www(c.addr(), "a.example."), "192.0.2.1");

    // Logged once each, though the catalog is read again.
    load_zone_text(
        &pdb,
        "catalog.example.",
        &catalog(
            5,
            "m1.zones 0 PTR a.example.\nm2.zones 0 PTR b.example.\n\
             m3.zones 0 PTR l.example.\nm4.zones 0 PTR .\nm5.zones 0 PTR a.example.\n",
        ),
    );
    let dup = "catalog zone catalog.example.: member label m5: zone a.example. is listed \
               under another label too; ignored";
    assert!(
        c.wait_for_log(dup, Duration::from_secs(10)),
        "{}",
        c.stderr()
    );
    assert_eq!(count(&c, local), 1);
    assert_eq!(count(&c, root), 1);
    assert_eq!(count(&c, "label m1 -> m5"), 0);
    assert_eq!(www(c.addr(), "a.example."), "192.0.2.1");
}

#[test]
fn a_member_moves_to_another_catalog_only_with_a_coo_property() {
    let dir = tempdir();
    let (pport, cport) = (free_port(), free_port());
    let pdb = dir.path().join("primary.sqlite3");
    load_zone_text(&pdb, "x.example.", &member(7));
    load_zone_text(
        &pdb,
        "one.catalog.",
        &catalog(1, "m1.zones 0 PTR x.example.\n"),
    );
    load_zone_text(&pdb, "two.catalog.", &catalog(1, ""));
    let _p = primary(dir.path(), &pdb, pport, cport);
    let members = dir.path().join("members.sqlite3");
    let text = format!(
        "[[secondary]]\nzone = \"one.catalog.\"\ncatalog = true\n\
         primaries = [\"127.0.0.1:{pport}\"]\nfile = \"{m}\"\nmin_refresh = 1\n\
         [[secondary]]\nzone = \"two.catalog.\"\ncatalog = true\n\
         primaries = [\"127.0.0.1:{pport}\"]\nfile = \"{m}\"\nmin_refresh = 1\n",
        m = members.display()
    );
    let c = start(dir.path(), "consumer.toml", &text, cport);
    serves(&c, "x.example.", "192.0.2.7");

    // Listed by two.catalog. too, without coo: stays with one.catalog.
    load_zone_text(
        &pdb,
        "two.catalog.",
        &catalog(2, "m9.zones 0 PTR x.example.\n"),
    );
    let refused = "catalog zone two.catalog.: member label m9: zone x.example. belongs to \
                   catalog one.catalog. (no coo property naming two.catalog.); ignored";
    assert!(
        c.wait_for_log(refused, Duration::from_secs(10)),
        "{}",
        c.stderr()
    );

    // one.catalog. hands it over: moved, and reset (another label).
    load_zone_text(
        &pdb,
        "one.catalog.",
        &catalog(
            2,
            "m1.zones 0 PTR x.example.\ncoo.m1.zones 0 PTR two.catalog.\n",
        ),
    );
    let moved = "catalog zone two.catalog.: member x.example.: moved from catalog one.catalog.";
    assert!(
        c.wait_for_log(moved, Duration::from_secs(10)),
        "{}",
        c.stderr()
    );
    assert!(eventually(5, || count(
        &c,
        "secondary zone x.example.: AXFR from"
    ) == 2));
    serves(&c, "x.example.", "192.0.2.7");
    let out = Command::new("sqlite3")
        .arg(&members)
        .arg("SELECT zone, catalog, label FROM authd_catalog_member")
        .output()
        .expect("sqlite3");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "x.example.|two.catalog.|m9\n"
    );
}
