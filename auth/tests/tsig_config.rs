//! Configuration of TSIG (RFC 8945): `[[key]]` blocks, ACL entries by key in
//! `[transfer] allow` and `[[transfer.zone]]`, keyed NOTIFY targets; every
//! bad value is an error naming the file and key, and no message or debug
//! print shows a secret.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use authd::config::{Config, ConfigError};
use authd::keys::Algorithm;
use authd_datasrc::Name;

const SECRET: &str = "8SAbJ0JpR9OwJgRTLHX8YMi1jUUT/gzPPRd6Wp44Dg4=";

fn load(text: &str, dir: &Path) -> Result<Config, ConfigError> {
    Config::from_parts(Some((text, &dir.join("authd.toml"))), Some(HashMap::new()))
}

fn name(s: &str) -> Name {
    s.parse().expect("name")
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn keys_acls_and_notify_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("other.key"), "c2VjcmV0\nIQ==\n").expect("write");
    let text = format!(
        r#"
        [[key]]
        name = "transfer-key"
        algorithm = "hmac-sha256"
        secret = "{SECRET}"
        [[key]]
        name = "Other.Key."
        algorithm = "HMAC-MD5.SIG-ALG.REG.INT"
        secret_file = "other.key"
        [transfer]
        allow = ["192.0.2.0/24", "key transfer-key.", "10.0.0.0/8 key other.key"]
        [[transfer.zone]]
        origin = "example.org"
        allow = ["key other.key."]
        [[transfer.zone]]
        origin = "closed.example."
        allow = []
        [notify]
        targets = ["192.0.2.2 key transfer-key.", "192.0.2.3:5353"]
        "#
    );
    let c = load(&text, dir.path()).expect("valid");
    assert_eq!(c.keys.len(), 2);
    assert_eq!(c.keys[0].name, name("transfer-key."));
    assert_eq!(c.keys[0].algorithm, Algorithm::HmacSha256);
    assert_eq!(c.keys[0].secret.len(), 32);
    assert_eq!(c.keys[1].algorithm, Algorithm::HmacMd5);
    assert_eq!(
        c.keys[1].secret.len(),
        7,
        "read from the file, line break ignored"
    );
    let ring = c.key_ring();
    assert!(ring.get(&name("OTHER.key.")).is_some());
    // The ACLs as the transfer handler sees them.
    let p = c.transfer_policy();
    let tk = name("transfer-key.");
    let other = name("other.key.");
    let com = name("example.com.");
    assert!(p.allows(&com, ip("192.0.2.1"), None, false));
    assert!(p.allows(&com, ip("203.0.113.1"), Some(&tk), false));
    assert!(!p.allows(&com, ip("203.0.113.1"), Some(&other), false));
    assert!(p.allows(&com, ip("10.1.1.1"), Some(&other), false));
    assert!(!p.allows(&com, ip("10.1.1.1"), None, false));
    let org = name("example.org.");
    assert!(
        !p.allows(&org, ip("192.0.2.1"), None, false),
        "the zone's list replaces the global one"
    );
    assert!(!p.allows(&org, ip("192.0.2.1"), Some(&tk), false));
    assert!(p.allows(&org, ip("203.0.113.1"), Some(&other), false));
    assert!(!p.allows(&name("closed.example."), ip("192.0.2.1"), Some(&tk), false));
    let targets: Vec<String> = c
        .notify
        .targets_for(&org)
        .iter()
        .map(|t| t.to_string())
        .collect();
    assert_eq!(
        targets,
        ["192.0.2.2:53 key transfer-key.", "192.0.2.3:5353"]
    );
    // Nothing prints a secret.
    let debug = format!("{c:?}");
    assert!(
        !debug.contains(SECRET) && !debug.contains("c2VjcmV0"),
        "{debug}"
    );
    assert!(debug.contains("Secret(<32 bytes, not shown>)"), "{debug}");
}

/// Each mistake is named by key; none of the messages holds the secret.
#[test]
fn bad_keys_and_references_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = |body: &str| format!("[[key]]\n{body}\n");
    let good = format!("name = \"tk.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"");
    let cases = [
        (
            key(&format!("algorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"")),
            "key[0].name: missing",
        ),
        (
            key(&format!("name = \"a..b\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"")),
            "key[0].name: bad key name \"a..b\"",
        ),
        (
            key(&format!("name = \"tk.\"\nsecret = \"{SECRET}\"")),
            "key[0].algorithm: missing (e.g. algorithm = \"hmac-sha256\")",
        ),
        (
            key(&format!("name = \"tk.\"\nalgorithm = \"hmac-sha3\"\nsecret = \"{SECRET}\"")),
            "key[0].algorithm: unknown algorithm \"hmac-sha3\" (known: hmac-sha256, hmac-sha224, hmac-sha384, hmac-sha512, hmac-sha1, hmac-md5)",
        ),
        (
            key("name = \"tk.\"\nalgorithm = \"hmac-sha256\""),
            "key[0].secret: missing (give secret = \"base64\" or secret_file = \"path\")",
        ),
        (
            key(&format!("{good}\nsecret_file = \"k\"")),
            "key[0].secret: give secret or secret_file, not both",
        ),
        (
            key("name = \"tk.\"\nalgorithm = \"hmac-sha256\"\nsecret = \"8SAbJ0JpR9OwJgRT*HX8YMi1jUUT\""),
            "key[0].secret: the secret is not base64 (at character 16)",
        ),
        (
            key("name = \"tk.\"\nalgorithm = \"hmac-sha256\"\nsecret_file = \"missing.key\""),
            "key[0].secret_file: cannot read ",
        ),
        (
            format!("{}{}", key(&good), key(&good.replace("tk.", "TK"))),
            "key[1].name: key TK. is already defined by key[0]",
        ),
        (
            format!("{}[transfer]\nallow = [\"key nobody.\"]\n", key(&good)),
            "transfer.allow[0]: no [[key]] named nobody. is defined",
        ),
        (
            "[transfer]\nallow = [\"192.0.2.0/24 tsig tk.\"]\n".to_string(),
            "transfer.allow[0]: \"192.0.2.0/24 tsig tk.\" is not an ACL entry",
        ),
        (
            format!("{}[[transfer.zone]]\norigin = \"example.org.\"\nallow = [\"key x.\"]\n", key(&good)),
            "transfer.zone[0].allow[0]: no [[key]] named x. is defined",
        ),
        (
            "[[transfer.zone]]\norigin = \"example.org.\"\n".to_string(),
            "transfer.zone[0].allow: missing (an empty list [] refuses every transfer of the zone)",
        ),
        (
            "[[transfer.zone]]\norigin = \"a.\"\nallow = []\n[[transfer.zone]]\norigin = \"A\"\nallow = []\n"
                .to_string(),
            "transfer.zone[1].origin: zone A. is listed twice in [[transfer.zone]]",
        ),
        (
            "[notify]\ntargets = [\"192.0.2.2 key tk.\"]\n".to_string(),
            "notify.targets[0]: no [[key]] named tk. is defined",
        ),
        (
            "[notify]\ntargets = [\"192.0.2.2 tk.\"]\n".to_string(),
            "notify.targets[0]: \"192.0.2.2 tk.\" is not ADDR[:PORT] or \"ADDR[:PORT] key NAME\"",
        ),
        (
            format!("{}\nsecret = \"{SECRET}", key("name = \"tk.\"")),
            "<secret not shown>",
        ),
        (
            key(&format!("{good}\nsecret_hint = \"x\"")),
            "unknown field `secret_hint`",
        ),
    ];
    for (text, want) in cases {
        let e = load(&text, dir.path()).expect_err(&text).to_string();
        assert!(e.contains(want), "{text}\n  got:  {e}\n  want: {want}");
        assert!(e.contains("authd.toml"), "names the file: {e}");
        assert!(
            !e.contains(SECRET) && !e.contains("8SAbJ0JpR9OwJgRT"),
            "leaks the secret: {e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
    }
}
