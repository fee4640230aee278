//! Online signing of sqlite3 zones: the policy and keys kept in the zone DB
//! (`authd_signing`, `authd_dnssec_key`), and the signing step every writer
//! of a zone under a policy runs inside its own transaction, so the signed
//! difference commits (and is journaled, RFC 1995) with the change.
//!
//! Plain SQL edits of `records` are logged by triggers
//! (`authd_signing_log`); [`sign_pending`] signs them, moves the serial and
//! journals the edits with their signatures, as a server polling
//! [`zones_with_edits`] does within a second.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::name::Name;
use crate::rr::{RType, Record};
use crate::signer::keys::{self, KeyPair};
use crate::signer::policy::{Denial, KeyLayout, Policy};
use crate::signer::zone::{Dirty, SignedChange, SigningKey, is_signer_type, resign};
use crate::sqlite_admin::{self, CANON, StoredRecord, canon_key};
use crate::write::{SerialPolicy, UpdateReport, WriteError, serial_gt};

/// How many signatures that are only due for refresh one write re-makes
/// (the rest wait for the next write or refresh pass): an UPDATE into a
/// large zone is never held up by a zone-wide re-sign.
pub const REFRESH_BUDGET: usize = 2000;

/// How far back (seconds) the clock may appear to go from the last signing
/// before signing is refused (RFC 4035 §5.3.1 validity is absolute time).
pub const CLOCK_SLACK: u64 = 300;

pub(crate) fn sql(action: &'static str) -> impl Fn(rusqlite::Error) -> WriteError {
    move |source| WriteError::Sqlite { action, source }
}

/// The current Unix time, seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A key's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRole {
    /// Combined signing key: signs everything.
    Csk,
    /// Key signing key: signs the DNSKEY RRset.
    Ksk,
    /// Zone signing key: signs every other RRset.
    Zsk,
}

impl KeyRole {
    /// `csk`, `ksk`, `zsk`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyRole::Csk => "csk",
            KeyRole::Ksk => "ksk",
            KeyRole::Zsk => "zsk",
        }
    }

    fn parse(s: &str) -> Option<KeyRole> {
        match s {
            "csk" => Some(KeyRole::Csk),
            "ksk" => Some(KeyRole::Ksk),
            "zsk" => Some(KeyRole::Zsk),
            _ => None,
        }
    }
}

/// A key's state, as stored (`authd_dnssec_key.state`).
pub use crate::signer::rollover::State as KeyState;

/// One stored key of a zone.
#[derive(Debug, Clone)]
pub struct StoredKey {
    /// `authd_dnssec_key.id`.
    pub id: i64,
    /// Its role.
    pub role: KeyRole,
    /// Its state.
    pub state: KeyState,
    /// The key pair.
    pub pair: Arc<KeyPair>,
    /// When it was made or imported (Unix seconds).
    pub created: u64,
    /// When it entered its state (Unix seconds).
    pub changed: u64,
    /// When its DS was seen at the parent or confirmed by the operator, and
    /// the DS TTL (seconds) (`authd_dnssec_ds`).
    pub ds_seen: Option<(u64, u32)>,
}

impl StoredKey {
    pub(crate) fn signing(&self) -> SigningKey {
        let live = self.state == KeyState::Active;
        SigningKey {
            pair: self.pair.clone(),
            published: self.state != KeyState::Removed,
            signs_keys: live && self.role != KeyRole::Zsk,
            signs_zone: live && self.role != KeyRole::Ksk,
            cds: live && self.role != KeyRole::Zsk,
        }
    }
}

pub(crate) fn has_table(conn: &Connection, name: &str) -> Result<bool, WriteError> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1")
        .and_then(|mut s| s.exists([name]))
        .map_err(sql("reading the schema"))
}

pub(crate) fn zone_key(origin: &Name) -> String {
    origin.to_lowercase().to_string()
}

/// Puts zone `origin` under `policy` (creating authd's signing tables and
/// triggers with the DB's first policy). The zone is signed at its next
/// write, or by [`sign_pending`]. Returns whether the stored policy changed.
///
/// Errors: storage.
pub fn set_policy(conn: &Connection, origin: &Name, policy: &Policy) -> Result<bool, WriteError> {
    let text = policy.to_text();
    // A DB whose policy an older authd set gets the later columns and the
    // indexes at its next start.
    authd_migrations::ensure_authd_table(conn, "authd_signing")
        .map_err(sql("creating the signing tables"))?;
    authd_migrations::ensure_signing_indexes(conn).map_err(sql("creating the signing indexes"))?;
    if policy_text(conn, origin)?.as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    conn.execute(
        "INSERT INTO authd_signing (zone, policy) VALUES (?1, ?2) \
         ON CONFLICT(zone) DO UPDATE SET policy=excluded.policy",
        params![zone_key(origin), text],
    )
    .map_err(sql("storing the signing policy"))?;
    Ok(true)
}

/// Takes zone `origin` out of signing (its keys and signatures stay; the
/// zone is no longer re-signed). Returns whether it had a policy.
///
/// Errors: storage.
pub fn clear_policy(conn: &Connection, origin: &Name) -> Result<bool, WriteError> {
    if !has_table(conn, "authd_signing")? {
        return Ok(false);
    }
    let n = conn
        .execute(
            "DELETE FROM authd_signing WHERE zone=?1",
            [zone_key(origin)],
        )
        .map_err(sql("removing the signing policy"))?;
    Ok(n > 0)
}

fn policy_text(conn: &Connection, origin: &Name) -> Result<Option<String>, WriteError> {
    if !has_table(conn, "authd_signing")? {
        return Ok(None);
    }
    conn.query_row(
        "SELECT policy FROM authd_signing WHERE zone=?1",
        [zone_key(origin)],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .map_err(sql("reading the signing policy"))
}

/// The stored policy of zone `origin`, `None` when it is not signed online.
///
/// Errors: storage; [`WriteError::Signing`] for a stored policy that does
/// not read back.
pub fn policy_of(conn: &Connection, origin: &Name) -> Result<Option<Policy>, WriteError> {
    policy_text(conn, origin)?
        .map(|t| {
            Policy::from_text(&t)
                .map_err(|e| WriteError::Signing(format!("zone {origin}: stored policy: {e}")))
        })
        .transpose()
}

/// The SOA serial of the unsigned version zone `origin` was last written
/// from whole or by differences (`authd_signing.input_serial`): the serial
/// its primary knows it by, which the signed zone's own may have passed.
/// `None`: not signed online, or nothing recorded (a DB an older authd
/// signed).
///
/// Errors: storage.
pub fn input_serial(conn: &Connection, origin: &Name) -> Result<Option<u32>, WriteError> {
    let recorded = conn
        .prepare_cached(
            "SELECT 1 FROM pragma_table_info('authd_signing') WHERE name='input_serial'",
        )
        .and_then(|mut s| s.exists([]))
        .map_err(sql("reading the schema"))?;
    if !recorded {
        return Ok(None);
    }
    let serial: Option<Option<i64>> = conn
        .query_row(
            "SELECT input_serial FROM authd_signing WHERE zone=?1",
            [zone_key(origin)],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql("reading the input serial"))?;
    Ok(serial.flatten().and_then(|s| u32::try_from(s).ok()))
}

/// Records `serial` as zone `origin`'s [`input_serial`], in `tx`.
///
/// Errors: storage.
pub(crate) fn record_input_serial(
    tx: &Connection,
    origin: &Name,
    serial: u32,
) -> Result<(), WriteError> {
    authd_migrations::ensure_authd_table(tx, "authd_signing")
        .map_err(sql("creating the signing tables"))?;
    tx.execute(
        "UPDATE authd_signing SET input_serial=?2 WHERE zone=?1",
        params![zone_key(origin), serial],
    )
    .map_err(sql("recording the input serial"))?;
    Ok(())
}

/// The serial of a signed zone's next version made from an input with
/// serial `input`, the stored version having serial `stored` (`None`: a new
/// zone): the input's while it is ahead, else one past the stored one when
/// the content changed (RFC 1982): re-signing moves a signed zone's serial
/// past its primary's, and a version must never go back, for IXFR.
pub(crate) fn output_serial(input: u32, stored: Option<u32>, changed: bool) -> u32 {
    match stored {
        Some(s) if !serial_gt(input, s) => {
            if changed {
                s.wrapping_add(1)
            } else {
                s
            }
        }
        _ => input,
    }
}

/// The zones of the DB under a policy.
///
/// Errors: storage, a stored zone name that does not parse.
pub fn signed_zones(conn: &Connection) -> Result<Vec<Name>, WriteError> {
    if !has_table(conn, "authd_signing")? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare("SELECT zone FROM authd_signing ORDER BY zone")
        .map_err(sql("listing signed zones"))?;
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(sql("listing signed zones"))?;
    names
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|e| WriteError::Signing(format!("authd_signing zone {n:?}: {e}")))
        })
        .collect()
}

/// The keys stored for zone `origin`, oldest first.
///
/// Errors: storage; [`WriteError::Signing`] naming the row of a corrupt key.
pub fn keys_of(conn: &Connection, origin: &Name) -> Result<Vec<StoredKey>, WriteError> {
    if !has_table(conn, "authd_dnssec_key")? {
        return Ok(Vec::new());
    }
    // authd_dnssec_ds came after the first signed files.
    let query = if has_table(conn, "authd_dnssec_ds")? {
        "SELECT k.id, k.role, k.state, k.flags, k.algorithm, k.tag, k.private, k.created, \
         k.changed, d.seen, d.ttl FROM authd_dnssec_key k \
         LEFT JOIN authd_dnssec_ds d ON d.key_id = k.id WHERE k.zone=?1 ORDER BY k.id"
    } else {
        "SELECT id, role, state, flags, algorithm, tag, private, created, changed, NULL, NULL \
         FROM authd_dnssec_key WHERE zone=?1 ORDER BY id"
    };
    let mut stmt = conn
        .prepare_cached(query)
        .map_err(sql("reading the keys"))?;
    type Row = (
        (i64, String, String, i64, i64, i64, String),
        (i64, i64, Option<i64>, Option<i64>),
    );
    let rows: Vec<Row> = stmt
        .query_map([zone_key(origin)], |r| {
            Ok((
                (
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ),
                (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?),
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(sql("reading the keys"))?;
    rows.into_iter()
        .map(
            |((id, role, state, flags, alg, tag, private), (created, changed, seen, ds_ttl))| {
                let bad = |why: String| {
                    WriteError::Signing(format!(
                        "zone {origin}: authd_dnssec_key row {id} (key tag {tag}): {why}"
                    ))
                };
                let role = KeyRole::parse(&role).ok_or_else(|| bad(format!("role {role:?}")))?;
                let state =
                    KeyState::parse(&state).ok_or_else(|| bad(format!("state {state:?}")))?;
                let flags = u16::try_from(flags).map_err(|_| bad(format!("flags {flags}")))?;
                let pair =
                    parsed_key(flags, private).map_err(|e| bad(format!("private key: {e}")))?;
                if i64::from(pair.algorithm().number()) != alg || i64::from(pair.key_tag()) != tag {
                    return Err(bad(format!(
                        "the private key is algorithm {} tag {}, not the row's",
                        pair.algorithm().number(),
                        pair.key_tag()
                    )));
                }
                Ok(StoredKey {
                    id,
                    role,
                    state,
                    pair,
                    created: u64::try_from(created).unwrap_or(0),
                    changed: u64::try_from(changed).unwrap_or(0),
                    ds_seen: seen.zip(ds_ttl).map(|(s, t)| {
                        (
                            u64::try_from(s).unwrap_or(0),
                            u32::try_from(t).unwrap_or(u32::MAX),
                        )
                    }),
                })
            },
        )
        .collect()
}

/// The key of a stored row, parsed once per process: every signed write
/// reads its zone's keys, and an ECDSA key's public point costs a scalar
/// multiplication to derive. Keyed by the row's text, so a changed row is
/// parsed again; at most [`KEY_CACHE`] keys are kept.
fn parsed_key(flags: u16, private: String) -> Result<Arc<KeyPair>, keys::KeyError> {
    use std::sync::{Mutex, OnceLock};
    type Parsed = HashMap<(u16, String), Arc<KeyPair>>;
    static CACHE: OnceLock<Mutex<Parsed>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (flags, private);
    if let Some(pair) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(pair);
    }
    let pair = Arc::new(KeyPair::from_private_text(flags, &key.1)?);
    if let Ok(mut c) = cache.lock() {
        if c.len() >= KEY_CACHE {
            c.clear();
        }
        c.insert(key, Arc::clone(&pair));
    }
    Ok(pair)
}

/// Most keys [`parsed_key`] keeps.
const KEY_CACHE: usize = 256;

pub(crate) fn store_key(
    conn: &Connection,
    origin: &Name,
    role: KeyRole,
    state: KeyState,
    pair: &KeyPair,
    now: u64,
) -> Result<(), WriteError> {
    authd_migrations::ensure_authd_table(conn, "authd_signing")
        .map_err(sql("creating the signing tables"))?;
    conn.execute(
        "INSERT INTO authd_dnssec_key (zone, role, state, flags, algorithm, tag, private, \
         created, changed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
        params![
            zone_key(origin),
            role.as_str(),
            state.as_str(),
            pair.flags(),
            pair.algorithm().number(),
            pair.key_tag(),
            pair.private_text(),
            i64::try_from(now).unwrap_or(i64::MAX),
        ],
    )
    .map_err(sql("storing a key"))?;
    Ok(())
}

/// Imports a key from BIND 9's key files (the `K*.key` and `K*.private`
/// texts) as an active key of zone `origin`, so a zone signed by BIND moves
/// without a rollover. The role is `role`, or by the key's flags: SEP (257)
/// → KSK, else ZSK. Returns the key tag.
///
/// Errors: [`WriteError::Signing`] for key files that do not parse or do not
/// match, a key for another zone, a key already stored; storage.
pub fn import_bind_key(
    conn: &Connection,
    origin: &Name,
    key_text: &str,
    private_text: &str,
    role: Option<KeyRole>,
) -> Result<u16, WriteError> {
    let (pair, owner) = KeyPair::from_bind(key_text, private_text)
        .map_err(|e| WriteError::Signing(format!("importing a key for {origin}: {e}")))?;
    let owner: Name = owner
        .parse()
        .map_err(|e| WriteError::Signing(format!("the key's owner {owner:?}: {e}")))?;
    if owner != *origin {
        return Err(WriteError::Signing(format!(
            "the key is for {owner}, not {origin}"
        )));
    }
    let tag = pair.key_tag();
    if keys_of(conn, origin)?
        .iter()
        .any(|k| k.pair.key_tag() == tag && k.pair.public_key() == pair.public_key())
    {
        return Err(WriteError::Signing(format!(
            "zone {origin}: key {tag} is already stored"
        )));
    }
    let role = role.unwrap_or(if pair.flags() & 1 == 1 {
        KeyRole::Ksk
    } else {
        KeyRole::Zsk
    });
    store_key(conn, origin, role, KeyState::Active, &pair, unix_now())?;
    Ok(tag)
}

/// The DS RRs (SHA-256, RFC 4509) of zone `origin`'s SEP keys in use (two
/// during a KSK/CSK rollover; a retired key's DS is for the parent to
/// drop), in master-file form with TTL `ttl`, for the parent zone.
///
/// Errors: storage, a corrupt key row.
pub fn ds_records(conn: &Connection, origin: &Name, ttl: u32) -> Result<Vec<String>, WriteError> {
    let owner = origin.to_lowercase();
    Ok(keys_of(conn, origin)?
        .iter()
        .filter(|k| k.role != KeyRole::Zsk && k.state == KeyState::Active)
        .map(|k| ds_text(&owner, ttl, &k.pair))
        .collect())
}

/// A zone's policy and the keys it signs with, for one write.
pub(crate) struct Signing {
    pub(crate) policy: Policy,
    pub(crate) keys: Vec<SigningKey>,
}

/// The signing of zone `origin` under `policy` (the one its DB holds, read
/// by the caller) inside transaction `tx`. At the first signing, makes the
/// policy's keys (a CSK, or a KSK and a ZSK).
///
/// Errors: [`WriteError::Signing`] when `stored` (the zone's records, or
/// those about to be loaded) has DNSKEYs whose keys are not stored (they
/// must be imported: their tags are named), when the clock is more than
/// [`CLOCK_SLACK`] behind the last signing, or for a corrupt key row;
/// storage.
pub(crate) fn signing_for<'a>(
    tx: &Connection,
    origin: &Name,
    policy: Policy,
    stored: impl IntoIterator<Item = &'a Record>,
    now: u64,
) -> Result<Signing, WriteError> {
    let last: Option<i64> = tx
        .query_row(
            "SELECT signed FROM authd_signing WHERE zone=?1",
            [zone_key(origin)],
            |r| r.get(0),
        )
        .map_err(sql("reading the signing time"))?;
    if let Some(last) = last.and_then(|l| u64::try_from(l).ok())
        && now + CLOCK_SLACK < last
    {
        return Err(WriteError::Signing(format!(
            "zone {origin}: the clock ({now}) is {} s behind the last signing ({last}); \
             not signing until it is past it",
            last - now
        )));
    }
    // This transaction signs its own changes: the triggers need not log
    // them (the row is deleted before the commit, by clear_log). The table
    // came with the policy's (one DDL).
    tx.execute("INSERT INTO authd_signing_quiet (writer) VALUES (1)", [])
        .map_err(sql("marking the transaction"))?;
    let mut stored_keys = keys_of(tx, origin)?;
    let known: HashSet<u16> = stored_keys.iter().map(|k| k.pair.key_tag()).collect();
    let mut foreign: Vec<u16> = stored
        .into_iter()
        .filter(|r| r.rtype == RType::DNSKEY && r.owner == *origin)
        .map(|r| keys::key_tag_of(r.rdata.as_wire()))
        .filter(|t| !known.contains(t))
        .collect();
    foreign.sort_unstable();
    foreign.dedup();
    if !foreign.is_empty() {
        let tags: Vec<String> = foreign.iter().map(u16::to_string).collect();
        return Err(WriteError::Signing(format!(
            "zone {origin} carries DNSKEYs with key tags {} that are not in authd's key store; \
             import their K*.key/K*.private files first (zone key-import), or delete them \
             from the zone",
            tags.join(", ")
        )));
    }
    let live = |role: KeyRole| {
        stored_keys
            .iter()
            .any(|k| k.role == role && k.state == KeyState::Active)
    };
    let need: Vec<(KeyRole, u16)> = match policy.keys {
        // A CSK, unless one (or a KSK and a ZSK, from an import) signs.
        KeyLayout::Csk if !(live(KeyRole::Csk) || live(KeyRole::Ksk) && live(KeyRole::Zsk)) => {
            vec![(KeyRole::Csk, 257)]
        }
        KeyLayout::KskZsk => {
            let mut v = Vec::new();
            if !live(KeyRole::Ksk) && !live(KeyRole::Csk) {
                v.push((KeyRole::Ksk, 257));
            }
            if !live(KeyRole::Zsk) && !live(KeyRole::Csk) {
                v.push((KeyRole::Zsk, 256));
            }
            v
        }
        KeyLayout::Csk => Vec::new(),
    };
    if !need.is_empty() {
        for (role, flags) in need {
            let pair = KeyPair::generate(policy.algorithm, flags)
                .map_err(|e| WriteError::Signing(format!("zone {origin}: making a key: {e}")))?;
            store_key(tx, origin, role, KeyState::Active, &pair, now)?;
        }
        stored_keys = keys_of(tx, origin)?;
    }
    Ok(Signing {
        policy,
        keys: stored_keys
            .iter()
            .filter(|k| k.state != KeyState::Removed)
            .map(StoredKey::signing)
            .collect(),
    })
}

/// Refuses a change that adds signer records (the signer makes them) and
/// drops deletions of them (the signer removes what no longer applies).
///
/// Errors: [`WriteError::Update`] naming the record.
pub(crate) fn unsigned_change(
    origin: &Name,
    add: &[Record],
    delete: &mut Vec<Record>,
) -> Result<(), WriteError> {
    if let Some(r) = add.iter().find(|r| is_signer_type(r.rtype)) {
        return Err(WriteError::Update(format!(
            "{} {}: zone {origin} is signed by authd; its {} records are made by the signer",
            r.owner, r.rtype, r.rtype
        )));
    }
    delete.retain(|r| !is_signer_type(r.rtype));
    Ok(())
}

/// Signs zone `origin` (`zone_id`) whose current rows are `rows`, the
/// changed data RRsets being `dirty`; writes the signed difference into
/// `tx` and returns it.
///
/// Errors: [`WriteError::Signing`]; storage.
pub(crate) fn sign_in_tx(
    tx: &Connection,
    origin: &Name,
    zone_id: i64,
    rows: &[StoredRecord],
    signing: &Signing,
    dirty: &Dirty,
    now: u64,
) -> Result<SignedChange, WriteError> {
    let records: Vec<&Record> = rows.iter().map(|r| &r.record).collect();
    let change = resign(
        origin,
        &records,
        dirty,
        &signing.keys,
        &signing.policy,
        now,
        REFRESH_BUDGET,
    )
    .map_err(|e| WriteError::Signing(e.to_string()))?;
    write_change(tx, zone_id, rows, &change)?;
    finish(tx, origin, zone_id, now)?;
    Ok(change)
}

/// Signs the change whose data RRsets are `dirty` in zone `origin`
/// (`zone_id`, the change already written in `tx`) reading only the rows
/// around it: the dirty names and their ancestors, and their neighbours in
/// the NSEC chain (RFC 4034 §4.1.1, by name) or the NSEC3 chain (RFC 5155
/// §7.1, by hash: [`splice_nsec3`]), so an UPDATE costs the same in a zone
/// of ten names or a million. `known` is the rows (as they now are) at
/// some names and those names, read already by the caller; every other
/// name is read here. `None` (nothing written) where the chain cannot be
/// followed that way and the whole zone must be signed: NSEC3 opt-out
/// (whether an empty non-terminal is hashed depends on every delegation
/// below it), a zone cut or DNAME added or removed (names below it change
/// state), the apex's types changed in an NSEC3 zone (its NSEC3 lists the
/// signer's types too), a name with an escape (`\`) in an NSEC zone (its
/// `rname` does not sort canonically). The caller leaves a replaced SOA
/// (every NSEC's TTL may change) to the whole zone too.
///
/// Errors: [`WriteError::Signing`]; storage.
pub(crate) fn sign_names_in_tx<'a>(
    tx: &Connection,
    origin: &Name,
    zone_id: i64,
    signing: &Signing,
    dirty: &HashSet<(Name, RType)>,
    known: (&[StoredRecord], impl Iterator<Item = &'a Name>),
    now: u64,
) -> Result<Option<SignedChange>, WriteError> {
    let action = "reading the names around an update";
    let nsec3 = match signing.policy.denial {
        Denial::Nsec => false,
        Denial::Nsec3 { opt_out: false } => true,
        // Whether an empty non-terminal is hashed depends on every
        // delegation below it.
        Denial::Nsec3 { opt_out: true } => return Ok(None),
    };
    let cuts_change = dirty
        .iter()
        .any(|(n, t)| *n != *origin && matches!(*t, RType::NS | RType::DNAME));
    // The apex's NSEC3 lists the signer's types too (left to the whole zone).
    let apex_types = nsec3 && dirty.iter().any(|(n, t)| n == origin && *t != RType::SOA);
    if cuts_change || apex_types {
        return Ok(None);
    }
    let escaped: bool = !nsec3
        && tx
            .prepare_cached(
                "SELECT 1 FROM records WHERE zone_id=?1 AND instr(rname, '\\') > 0 LIMIT 1",
            )
            .and_then(|mut s| s.exists([zone_id]))
            .map_err(sql(action))?;
    if escaped {
        return Ok(None);
    }
    let first_name = |cond: &str, order: &str, key: &str| -> Result<Option<Name>, WriteError> {
        // Rows of data only: the signer rows of names this change emptied
        // are still there (write_change deletes them).
        let query = format!(
            "SELECT name FROM records WHERE zone_id=?1 AND {CANON} {cond} ?2 \
             AND rdtype NOT IN ('RRSIG', 'NSEC') ORDER BY {CANON} {order} LIMIT 1"
        );
        let mut stmt = tx.prepare_cached(&query).map_err(sql(action))?;
        let found: Option<String> = stmt
            .query_row(params![zone_id, key], |r| r.get(0))
            .optional()
            .map_err(sql(action))?;
        found
            .map(|t| {
                Name::parse(&t, Some(origin)).map_err(|e| {
                    WriteError::Signing(format!("zone {origin}: stored name {t:?}: {e}"))
                })
            })
            .transpose()
    };
    let is_cut = |n: &Name| -> Result<bool, WriteError> {
        if n == origin {
            return Ok(false);
        }
        tx.prepare_cached(&format!(
            "SELECT 1 FROM records WHERE zone_id=?1 AND {CANON} = ?2 \
             AND rdtype IN ('NS', 'DNAME') LIMIT 1"
        ))
        .and_then(|mut s| s.exists(params![zone_id, canon_key(n)]))
        .map_err(sql(action))
    };
    // The topmost zone cut or DNAME strictly above `n` (below the apex):
    // RFC 4035 §2.2, the names below it are not in the chain.
    let top_cut = |n: &Name| -> Result<Option<Name>, WriteError> {
        let mut above: Vec<Name> = Vec::new();
        let mut up = n.parent();
        while let Some(p) = up {
            if p == *origin || !p.is_subdomain_of(origin) {
                break;
            }
            up = p.parent();
            above.push(p);
        }
        for a in above.into_iter().rev() {
            if is_cut(&a)? {
                return Ok(Some(a));
            }
        }
        Ok(None)
    };
    let mut names: Vec<Name> = vec![origin.clone()];
    let mut chain_owners: HashSet<Name> = HashSet::new();
    let owners: HashSet<&Name> = dirty.iter().map(|(n, _)| n).collect();
    for d in owners {
        names.push(d.clone());
        if nsec3 {
            continue; // its chain neighbours are found by hash, below
        }
        if top_cut(d)?.is_some() {
            continue; // occluded: not in the chain, nor are its neighbours' links changed
        }
        let key = canon_key(d);
        // The authoritative name before `d` (the apex's is the zone's last).
        let before = if d == origin {
            first_name(">", "DESC", &key)?
        } else {
            first_name("<", "DESC", &key)?
        };
        let pred = match before {
            Some(c) => match top_cut(&c)? {
                Some(cut) => cut,
                None => c,
            },
            None => origin.clone(),
        };
        // The name after `d`, past the names below it when it is a cut.
        let after = if is_cut(d)? {
            first_name(">", "ASC", &format!("{key}\u{7f}"))?
        } else {
            first_name(">", "ASC", &key)?
        };
        names.push(pred.clone());
        names.extend(after);
        chain_owners.insert(pred);
        chain_owners.insert(d.clone());
    }
    // Every ancestor of these, so that zone cuts above them are seen.
    for i in 0..names.len() {
        let mut up = names[i].parent();
        while let Some(p) = up {
            if p == *origin || !p.is_subdomain_of(origin) {
                break;
            }
            up = p.parent();
            names.push(p);
        }
    }
    names.sort();
    names.dedup();
    let (known_rows, known_names) = known;
    let known_names: HashSet<&Name> = known_names.collect();
    let affected: Vec<Name> = names.iter().filter(|n| *n != origin).cloned().collect();
    names.retain(|n| !known_names.contains(n));
    let mut rows = sqlite_admin::records_at(tx, origin, zone_id, &names)?;
    rows.extend(known_rows.iter().cloned());
    let records: Vec<&Record> = rows.iter().map(|r| &r.record).collect();
    let mut change = crate::signer::zone::resign_around(
        origin,
        &records,
        &Dirty::Rrsets(dirty.clone()),
        &chain_owners,
        &signing.keys,
        &signing.policy,
        now,
    )
    .map_err(|e| WriteError::Signing(e.to_string()))?;
    if nsec3 {
        // Each affected name's place in the hash chain (RFC 5155 §7.1): an
        // authoritative name with data, an empty non-terminal (a name below
        // it exists), or none; then the records whose next-hash changes.
        let mut state: Vec<(Vec<u8>, Option<Vec<RType>>)> = Vec::new();
        let params = crate::dnssec::Nsec3Params {
            algorithm: 1,
            iterations: 0,
            salt: Vec::new(),
        };
        for a in &affected {
            let types: Vec<RType> = records
                .iter()
                .filter(|r| r.owner == *a && !is_signer_type(r.rtype))
                .map(|r| r.rtype)
                .collect();
            let hashed = if top_cut(a)?.is_some() {
                None
            } else if !types.is_empty() {
                let delegation = types.contains(&RType::NS);
                Some(crate::signer::zone::nsec3_types(types, delegation))
            } else if first_name(">", "ASC", &canon_key(a))?.is_some_and(|n| n.is_subdomain_of(a)) {
                Some(Vec::new())
            } else {
                None
            };
            state.push((params.hash(a), hashed));
        }
        let splice = splice_nsec3(tx, origin, zone_id, &state, &records)?;
        let made = crate::signer::zone::sign_singletons(
            origin,
            &splice.add,
            &signing.keys,
            &signing.policy,
            now,
        )
        .map_err(|e| WriteError::Signing(e.to_string()))?;
        change.signatures += made.len();
        change.add.extend(splice.add);
        change.add.extend(made);
        change
            .delete
            .extend(splice.delete.iter().map(|r| r.record.clone()));
        rows.extend(splice.delete);
    }
    write_change(tx, zone_id, &rows, &change)?;
    finish(tx, origin, zone_id, now)?;
    Ok(Some(change))
}

/// The NSEC3 rows to replace, from [`splice_nsec3`]: `delete` the stored
/// rows (NSEC3 and their RRSIGs), add `add` (NSEC3 only, to be signed).
struct Splice {
    delete: Vec<StoredRecord>,
    add: Vec<Record>,
}

/// The NSEC3 chain of zone `origin` (`zone_id`, no opt-out) after some
/// hashed owner labels (`state`: label, and the types of its NSEC3, `None`
/// when it is no longer hashed) changed: their records made anew, and the
/// stored record before each (in hash order, wrapping round) given its new
/// next-hash. `records` holds the apex SOA (the NSEC3 TTL, RFC 5155 §3:
/// the SOA's minimum, at most its TTL).
///
/// Errors: storage; a stored NSEC3 RDATA too short to hold its hash.
fn splice_nsec3(
    tx: &Connection,
    origin: &Name,
    zone_id: i64,
    state: &[(Vec<u8>, Option<Vec<RType>>)],
    records: &[&Record],
) -> Result<Splice, WriteError> {
    use std::collections::BTreeMap;
    let action = "reading the NSEC3 chain around an update";
    let ttl = records
        .iter()
        .find(|r| r.rtype == RType::SOA && r.owner == *origin)
        .map(|soa| soa.rdata.soa_minimum().unwrap_or(soa.ttl).min(soa.ttl))
        .ok_or_else(|| WriteError::Check(format!("zone {origin} has no SOA")))?;
    let lower = |t: String| t.to_ascii_lowercase().into_bytes();
    let present: BTreeMap<Vec<u8>, &Vec<RType>> = state
        .iter()
        .filter_map(|(h, t)| t.as_ref().map(|t| (h.clone(), t)))
        .collect();
    let gone: HashSet<&Vec<u8>> = state
        .iter()
        .filter(|(_, t)| t.is_none())
        .map(|(h, _)| h)
        .collect();
    // The chain's label after (or before) `h`, wrapping round: the nearest
    // of the labels now hashed and the stored ones not gone.
    let neighbour = |h: &[u8], after: bool| -> Result<Option<Vec<u8>>, WriteError> {
        let (cond, order) = if after { (">", "ASC") } else { ("<", "DESC") };
        let query = format!(
            "SELECT DISTINCT hash FROM nsec3 WHERE +zone_id=?1 AND hash {cond} ?2 \
             ORDER BY hash {order} LIMIT 16"
        );
        let mut stmt = tx.prepare_cached(&query).map_err(sql(action))?;
        let mut from_db = |bound: &[u8]| -> Result<Option<Vec<u8>>, WriteError> {
            let mut bound = bound.to_vec();
            loop {
                let text = String::from_utf8_lossy(&bound).into_owned();
                let got: Vec<String> = stmt
                    .query_map(params![zone_id, text], |r| r.get(0))
                    .and_then(|rows| rows.collect())
                    .map_err(sql(action))?;
                let Some(last) = got.last() else {
                    return Ok(None);
                };
                if let Some(h) = got
                    .iter()
                    .map(|g| lower(g.clone()))
                    .find(|g| !gone.contains(g))
                {
                    return Ok(Some(h));
                }
                bound = lower(last.clone());
            }
        };
        let mem = |bound: &[u8]| {
            if after {
                present
                    .range::<[u8], _>((
                        std::ops::Bound::Excluded(bound),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                    .map(|(k, _)| k.clone())
            } else {
                present
                    .range::<[u8], _>((
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Excluded(bound),
                    ))
                    .next_back()
                    .map(|(k, _)| k.clone())
            }
        };
        let pick = |a: Option<Vec<u8>>, b: Option<Vec<u8>>| match (a, b) {
            (Some(a), Some(b)) => Some(if (a < b) == after { a } else { b }),
            (a, b) => a.or(b),
        };
        if let Some(n) = pick(from_db(h)?, mem(h)) {
            return Ok(Some(n));
        }
        // Wrap round: the first (or last) label of the chain.
        let edge: &[u8] = if after { b"" } else { b"\x7f" };
        Ok(pick(from_db(edge)?, mem(edge)))
    };
    let stored_at = |h: &[u8]| -> Result<Vec<StoredRecord>, WriteError> {
        let mut out = Vec::new();
        sqlite_admin::read_rows(
            tx,
            origin,
            "nsec3",
            "SELECT id, owner, rdtype, ttl, rdata FROM nsec3 WHERE +zone_id=?1 AND hash=?2",
            params![zone_id, String::from_utf8_lossy(h).into_owned()],
            &mut out,
        )?;
        Ok(out)
    };
    // Labels whose record is to be made, with its types (`None`: the
    // stored one's, only its next-hash changes).
    let mut targets: BTreeMap<Vec<u8>, Option<Vec<RType>>> = BTreeMap::new();
    for (h, types) in state {
        if let Some(t) = types {
            targets.insert(h.clone(), Some(t.clone()));
        }
        if let Some(p) = neighbour(h, false)? {
            targets.entry(p).or_insert(None);
        }
    }
    let mut splice = Splice {
        delete: Vec::new(),
        add: Vec::new(),
    };
    let mut done: HashSet<Vec<u8>> = HashSet::new();
    for (h, types) in &targets {
        let stored = stored_at(h)?;
        let old = stored.iter().find(|r| r.record.rtype == RType::NSEC3);
        let next = neighbour(h, true)?.unwrap_or_else(|| h.clone());
        let Some(mut rdata) =
            crate::signer::zone::nsec3_rdata(false, &next, types.as_deref().unwrap_or(&[]))
        else {
            continue;
        };
        if types.is_none() {
            // The stored record's type bit maps, after its next-hash.
            let Some(old) = old else { continue };
            let w = old.record.rdata.as_wire();
            let bitmap_at = w
                .get(4)
                .map(|salt| 5 + usize::from(*salt))
                .and_then(|i| w.get(i).map(|len| i + 1 + usize::from(*len)))
                .filter(|i| *i <= w.len())
                .ok_or_else(|| {
                    WriteError::Signing(format!(
                        "zone {origin}: the stored NSEC3 at {} is malformed",
                        old.record.owner
                    ))
                })?;
            rdata.extend_from_slice(&w[bitmap_at..]);
        }
        let Ok(owner) = origin.prepend_label(h) else {
            continue;
        };
        let record = Record {
            owner,
            rtype: RType::NSEC3,
            class: crate::rr::Class::IN,
            ttl,
            rdata: crate::rr::Rdata::from_wire(&rdata),
        };
        if old.is_some_and(|o| o.record == record && o.record.ttl == ttl) && stored.len() > 1 {
            done.insert(h.clone());
            continue; // unchanged, its RRSIGs kept
        }
        splice.delete.extend(stored);
        splice.add.push(record);
        done.insert(h.clone());
    }
    for (h, _) in state.iter().filter(|(_, t)| t.is_none()) {
        if !done.contains(h) {
            splice.delete.extend(stored_at(h)?);
        }
    }
    Ok(splice)
}

/// Where a row is: (table, id).
type RowAt = (&'static str, i64);

fn in_nsec3_table(r: &Record) -> bool {
    r.rtype == RType::NSEC3
        || (r.rtype == RType::RRSIG && r.rdata.rrsig_type_covered() == Some(RType::NSEC3))
}

/// Writes `change` (signer records) into zone `zone_id`, whose rows are
/// `rows`: NSEC3 records and their RRSIGs in `nsec3`, the rest in `records`.
fn write_change(
    tx: &Connection,
    zone_id: i64,
    rows: &[StoredRecord],
    change: &SignedChange,
) -> Result<(), WriteError> {
    let action = "writing signatures";
    {
        let mut del_records = tx
            .prepare_cached("DELETE FROM records WHERE id=?1")
            .map_err(sql(action))?;
        let mut del_nsec3 = tx
            .prepare_cached("DELETE FROM nsec3 WHERE id=?1")
            .map_err(sql(action))?;
        // The stored signer rows, by RR: a deletion finds its row at once.
        let mut by_rr: HashMap<(&Name, RType, &[u8]), Vec<RowAt>> = HashMap::new();
        for s in rows.iter().filter(|s| is_signer_type(s.record.rtype)) {
            by_rr
                .entry((&s.record.owner, s.record.rtype, s.record.rdata.as_wire()))
                .or_default()
                .push((s.table, s.id));
        }
        for d in &change.delete {
            let row = by_rr
                .get_mut(&(&d.owner, d.rtype, d.rdata.as_wire()))
                .and_then(Vec::pop);
            if let Some((table, id)) = row {
                if table == "nsec3" {
                    del_nsec3.execute([id]).map_err(sql(action))?;
                } else {
                    del_records.execute([id]).map_err(sql(action))?;
                }
            }
        }
    }
    let (nsec3, plain): (Vec<Record>, Vec<Record>) =
        change.add.iter().cloned().partition(in_nsec3_table);
    sqlite_admin::insert_records(tx, zone_id, &plain)?;
    let mut ins = tx
        .prepare_cached(
            "INSERT INTO nsec3 (zone_id, hash, owner, ttl, rdtype, rdata) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(sql(action))?;
    for r in &nsec3 {
        ins.execute(params![
            zone_id,
            crate::sqlite_load::first_label(&r.owner),
            r.owner.to_string(),
            r.ttl,
            r.rtype.to_string(),
            sqlite_admin::rdata_text(r)?
        ])
        .map_err(sql(action))?;
    }
    Ok(())
}

/// Records the signing time and deletes the zone's log rows (this
/// transaction's own changes, now signed).
fn finish(tx: &Connection, origin: &Name, zone_id: i64, now: u64) -> Result<(), WriteError> {
    tx.execute(
        "UPDATE authd_signing SET signed=?2 WHERE zone=?1",
        params![zone_key(origin), i64::try_from(now).unwrap_or(i64::MAX)],
    )
    .map_err(sql("recording the signing time"))?;
    clear_log(tx, zone_id)
}

/// True when zone `zone_id` has plain SQL edits not signed yet (rows in
/// `authd_signing_log`).
///
/// Errors: storage.
pub(crate) fn has_edits(tx: &Connection, zone_id: i64) -> Result<bool, WriteError> {
    if !has_table(tx, "authd_signing_log")? {
        return Ok(false);
    }
    tx.prepare_cached("SELECT 1 FROM authd_signing_log WHERE zone_id=?1 LIMIT 1")
        .and_then(|mut s| s.exists([zone_id]))
        .map_err(sql("reading the signing log"))
}

/// Deletes the log rows of zone `zone_id` (the edits this transaction
/// signed) and the transaction's mark.
pub(crate) fn clear_log(tx: &Connection, zone_id: i64) -> Result<(), WriteError> {
    if has_table(tx, "authd_signing_log")? {
        tx.execute("DELETE FROM authd_signing_log WHERE zone_id=?1", [zone_id])
            .map_err(sql("clearing the signing log"))?;
        tx.execute("DELETE FROM authd_signing_quiet", [])
            .map_err(sql("clearing the signing log"))?;
    }
    Ok(())
}

/// The zones under a policy that have SQL edits not yet signed.
///
/// Errors: storage, a zone name that does not parse.
pub fn zones_with_edits(conn: &Connection) -> Result<Vec<Name>, WriteError> {
    if !has_table(conn, "authd_signing_log")? {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT z.name FROM authd_signing_log l JOIN zones z ON z.id = l.zone_id",
        )
        .map_err(sql("reading the signing log"))?;
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(sql("reading the signing log"))?;
    names
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|e| WriteError::Signing(format!("zones.name {n:?}: {e}")))
        })
        .collect()
}

/// Signs what zone `origin` needs now: the plain SQL edits logged since the
/// last signing (their RRSIGs and the NSEC/NSEC3 records around them) and
/// up to [`REFRESH_BUDGET`] signatures due for refresh; moves the serial
/// per `serial` (unless the edits already moved it) and journals the edits
/// with the signatures as one difference, in one transaction. `None` when
/// the zone has no policy or nothing needed signing.
///
/// Errors: [`WriteError::NoZone`], [`WriteError::Signing`], a row that does
/// not parse, storage; nothing is written then.
pub fn sign_pending(
    conn: &mut Connection,
    origin: &Name,
    serial: SerialPolicy,
    now: u64,
) -> Result<Option<UpdateReport>, WriteError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let report = sign_pending_in(&tx, origin, serial, now)?;
    tx.commit().map_err(sql("committing"))?;
    Ok(report)
}

/// [`sign_pending`] inside transaction `tx` (not committed), the key
/// rollover steps due at `now` applied first
/// ([`crate::sqlite_rollover::step_keys`]).
pub(crate) fn sign_pending_in(
    tx: &Connection,
    origin: &Name,
    serial: SerialPolicy,
    now: u64,
) -> Result<Option<UpdateReport>, WriteError> {
    let Some(policy) = policy_of(tx, origin)? else {
        return Ok(None);
    };
    let Some(zone_id) = sqlite_admin::find_zone_id(tx, origin)? else {
        return Err(WriteError::NoZone(origin.to_string()));
    };
    // A zone written before its policy was stored (a transfer, a load) is
    // made from the version stored now.
    if input_serial(tx, origin)?.is_none() {
        let apex = sqlite_admin::records_at(tx, origin, zone_id, std::slice::from_ref(origin))?;
        if let Some(s) = apex
            .iter()
            .find(|r| r.record.rtype == RType::SOA)
            .and_then(|r| r.record.rdata.soa_serial())
        {
            record_input_serial(tx, origin, s)?;
        }
    }
    // The edits, netted: an add then a delete of one RR cancel.
    let mut added: Vec<Record> = Vec::new();
    let mut deleted: Vec<Record> = Vec::new();
    if has_table(tx, "authd_signing_log")? {
        let mut stmt = tx
            .prepare_cached(
                "SELECT id, op, name, rdtype, ttl, rdata FROM authd_signing_log \
                 WHERE zone_id=?1 ORDER BY id",
            )
            .map_err(sql("reading the signing log"))?;
        let rows: Vec<(i64, i64, String, String, i64, String)> = stmt
            .query_map([zone_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(sql("reading the signing log"))?;
        for (id, op, name, rdtype, ttl, rdata) in rows {
            let rec = sqlite_admin::parse_row(
                "authd_signing_log",
                id,
                origin,
                &name,
                &rdtype,
                ttl,
                &rdata,
            )?;
            let same = |r: &Record| {
                r.owner == rec.owner
                    && r.rtype == rec.rtype
                    && r.rdata == rec.rdata
                    && r.ttl == rec.ttl
            };
            if op == 0 {
                match deleted.iter().position(same) {
                    Some(i) => {
                        deleted.remove(i);
                    }
                    None => added.push(rec),
                }
            } else {
                match added.iter().position(same) {
                    Some(i) => {
                        added.remove(i);
                    }
                    None => deleted.push(rec),
                }
            }
        }
    }
    let rows = sqlite_admin::zone_rows(tx, origin, zone_id)?;
    let Some(soa_row) = rows
        .iter()
        .find(|r| r.record.rtype == RType::SOA && r.record.owner == *origin)
        .cloned()
    else {
        return Err(WriteError::Check(format!("zone {origin} has no SOA")));
    };
    let mut signing = signing_for(tx, origin, policy, rows.iter().map(|r| &r.record), now)?;
    let max_ttl = rows.iter().map(|r| r.record.ttl).max().unwrap_or(0);
    if let Some(keys) =
        crate::sqlite_rollover::step_keys(tx, origin, &signing.policy, max_ttl, now)?
    {
        signing.keys = keys;
    }
    // A SOA edited by SQL: the journal starts at the old one.
    let current_soa = soa_row.record.clone();
    let old_soa = deleted
        .iter()
        .find(|r| r.rtype == RType::SOA && r.owner == *origin)
        .cloned()
        .unwrap_or_else(|| current_soa.clone());
    added.retain(|r| !(r.rtype == RType::SOA && r.owner == *origin));
    deleted.retain(|r| !(r.rtype == RType::SOA && r.owner == *origin));
    let mut dirty = Dirty::of(added.iter().chain(&deleted));
    if let Dirty::Rrsets(s) = &mut dirty {
        s.insert((origin.clone(), RType::SOA));
    }
    let old_serial = old_soa
        .rdata
        .soa_serial()
        .ok_or_else(|| WriteError::Check(format!("zone {origin}: unreadable SOA")))?;
    let current_serial = current_soa.rdata.soa_serial().unwrap_or(old_serial);
    // The serial moves, unless the edits moved it already.
    let new_soa = if serial_gt(current_serial, old_serial) {
        current_soa.clone()
    } else {
        let rdata = sqlite_admin::with_serial(&current_soa.rdata, serial.next(old_serial, now))
            .ok_or_else(|| WriteError::Check(format!("zone {origin}: unreadable SOA")))?;
        Record {
            rdata,
            ..current_soa.clone()
        }
    };
    let mut rows = rows;
    if let Some(r) = rows
        .iter_mut()
        .find(|r| r.id == soa_row.id && r.table == "records")
    {
        r.record = new_soa.clone();
    }
    let records: Vec<&Record> = rows.iter().map(|r| &r.record).collect();
    let change = resign(
        origin,
        &records,
        &dirty,
        &signing.keys,
        &signing.policy,
        now,
        REFRESH_BUDGET,
    )
    .map_err(|e| WriteError::Signing(e.to_string()))?;
    drop(records);
    // Only the new SOA's own signature: nothing needed signing, nothing is
    // written (the log rows that netted to nothing are cleared).
    let only_soa = change.add.iter().chain(&change.delete).all(|r| {
        r.rtype == RType::RRSIG
            && r.owner == *origin
            && r.rdata.rrsig_type_covered() == Some(RType::SOA)
    });
    if only_soa && added.is_empty() && deleted.is_empty() && current_soa.rdata == old_soa.rdata {
        clear_log(tx, zone_id)?;
        return Ok(None);
    }
    if new_soa.rdata != current_soa.rdata {
        tx.execute(
            "UPDATE records SET rdata=?2 WHERE id=?1",
            params![soa_row.id, sqlite_admin::rdata_text(&new_soa)?],
        )
        .map_err(sql("moving the serial"))?;
    }
    write_change(tx, zone_id, &rows, &change)?;
    finish(tx, origin, zone_id, now)?;
    let new_serial = new_soa.rdata.soa_serial().unwrap_or(old_serial);
    let (n_add, n_del) = (added.len(), deleted.len());
    deleted.extend(change.delete);
    added.extend(change.add);
    let journal_rows =
        sqlite_admin::journal(tx, zone_id, (&old_soa, &deleted), (&new_soa, &added))?;
    Ok(Some(UpdateReport {
        old_serial,
        new_serial,
        added: n_add,
        deleted: n_del,
        journal_rows,
    }))
}

/// The records a whole-zone load of zone `origin` under `policy` (the one
/// its DB holds, read by the caller) writes: `records` without the signer
/// records they carry, with the signatures of `old` (the zone's stored
/// rows, when it existed) kept for the RRsets that did not change, and the
/// rest signed. The SOA serial is the input's while that is ahead of the
/// stored version's, else one past it ([`output_serial`]); the input's is
/// recorded as the zone's [`input_serial`].
///
/// Errors: as [`signing_for`]; [`WriteError::Signing`].
pub(crate) fn signed_load(
    tx: &Connection,
    origin: &Name,
    policy: Policy,
    records: &[crate::zonefile::SourcedRecord],
    old: Option<&[StoredRecord]>,
    now: u64,
) -> Result<Vec<crate::zonefile::SourcedRecord>, WriteError> {
    let signing = signing_for(tx, origin, policy, records.iter().map(|s| &s.record), now)?;
    let apex_serial = |r: &Record| {
        (r.rtype == RType::SOA && r.owner == *origin)
            .then(|| r.rdata.soa_serial())
            .flatten()
    };
    let input = records
        .iter()
        .find_map(|s| apex_serial(&s.record))
        .ok_or_else(|| WriteError::Signing(format!("zone {origin}: no readable apex SOA")))?;
    let old_records: Vec<Record> = old
        .unwrap_or(&[])
        .iter()
        .map(|s| s.record.clone())
        .collect();
    let stored_serial = old_records.iter().find_map(apex_serial);
    // Data RRsets compared without the SOA serial, which the signer picks.
    let key = |r: &Record| {
        let rdata = match r.rtype {
            RType::SOA => sqlite_admin::with_serial(&r.rdata, 0).unwrap_or_else(|| r.rdata.clone()),
            _ => r.rdata.clone(),
        };
        (r.owner.to_lowercase(), r.rtype, rdata, r.ttl)
    };
    let changed_rrsets: Option<HashSet<(Name, RType)>> = old.map(|_| {
        let old_set: HashSet<_> = old_records
            .iter()
            .filter(|r| !is_signer_type(r.rtype))
            .map(key)
            .collect();
        let new_set: HashSet<_> = records
            .iter()
            .filter(|s| !is_signer_type(s.record.rtype))
            .map(|s| key(&s.record))
            .collect();
        old_set
            .symmetric_difference(&new_set)
            .map(|(o, t, _, _)| (o.clone(), *t))
            .collect()
    });
    let changed = changed_rrsets.as_ref().is_none_or(|c| !c.is_empty());
    let serial = output_serial(input, stored_serial, changed);
    let mut data: Vec<crate::zonefile::SourcedRecord> = records
        .iter()
        .filter(|s| !is_signer_type(s.record.rtype))
        .cloned()
        .collect();
    if serial != input {
        for s in data.iter_mut().filter(|s| apex_serial(&s.record).is_some()) {
            if let Some(rdata) = sqlite_admin::with_serial(&s.record.rdata, serial) {
                s.record.rdata = rdata;
            }
        }
    }
    let dirty = match changed_rrsets {
        None => Dirty::All,
        Some(mut rrsets) => {
            if stored_serial != Some(serial) {
                rrsets.insert((origin.to_lowercase(), RType::SOA));
            }
            Dirty::Rrsets(rrsets)
        }
    };
    let stored: Vec<&Record> = data
        .iter()
        .map(|s| &s.record)
        .chain(old_records.iter().filter(|r| is_signer_type(r.rtype)))
        .collect();
    let change = resign(
        origin,
        &stored,
        &dirty,
        &signing.keys,
        &signing.policy,
        now,
        REFRESH_BUDGET,
    )
    .map_err(|e| WriteError::Signing(e.to_string()))?;
    let mut kept: Vec<Record> = old_records
        .into_iter()
        .filter(|r| is_signer_type(r.rtype))
        .collect();
    for d in &change.delete {
        if let Some(i) = kept.iter().position(|r| r == d) {
            kept.remove(i);
        }
    }
    let file = Arc::new(std::path::PathBuf::from("(signer)"));
    let mut out = data;
    out.extend(
        kept.into_iter()
            .chain(change.add)
            .map(|record| crate::zonefile::SourcedRecord {
                record,
                file: file.clone(),
                line: 0,
            }),
    );
    tx.execute(
        "UPDATE authd_signing SET signed=?2 WHERE zone=?1",
        params![zone_key(origin), i64::try_from(now).unwrap_or(i64::MAX)],
    )
    .map_err(sql("recording the signing time"))?;
    record_input_serial(tx, origin, input)?;
    Ok(out)
}

/// [`signed_load`] with the zone's stored rows read from `tx`.
///
/// Errors: as [`signed_load`].
pub(crate) fn signed_records(
    tx: &Connection,
    origin: &Name,
    records: &[crate::zonefile::SourcedRecord],
) -> Result<Option<Vec<crate::zonefile::SourcedRecord>>, WriteError> {
    let Some(policy) = policy_of(tx, origin)? else {
        return Ok(None);
    };
    let old = match sqlite_admin::find_zone_id(tx, origin)? {
        Some(id) => Some(sqlite_admin::zone_rows(tx, origin, id)?),
        None => None,
    };
    signed_load(tx, origin, policy, records, old.as_deref(), unix_now()).map(Some)
}

/// Every zone of the DB under a policy: whether SQL edits wait to be
/// signed, and when it was last signed.
///
/// Errors: storage, a stored zone name that does not parse.
pub fn zone_states(conn: &Connection) -> Result<Vec<crate::write::SignedZone>, WriteError> {
    if !has_table(conn, "authd_signing")? {
        return Ok(Vec::new());
    }
    let edits = zones_with_edits(conn)?;
    let mut stmt = conn
        .prepare("SELECT zone, signed, policy FROM authd_signing ORDER BY zone")
        .map_err(sql("listing signed zones"))?;
    let rows: Vec<(String, Option<i64>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .and_then(|rows| rows.collect())
        .map_err(sql("listing signed zones"))?;
    rows.into_iter()
        .map(|(zone, signed, policy)| {
            let origin: Name = zone
                .parse()
                .map_err(|e| WriteError::Signing(format!("authd_signing zone {zone:?}: {e}")))?;
            let policy = Policy::from_text(&policy)
                .map_err(|e| WriteError::Signing(format!("zone {origin}: stored policy: {e}")))?;
            let (next_key_event, awaiting_ds) =
                crate::sqlite_rollover::state_of(conn, &origin, &policy, unix_now())?;
            Ok(crate::write::SignedZone {
                edits: edits.contains(&origin),
                signed: signed.and_then(|s| u64::try_from(s).ok()),
                next_key_event,
                awaiting_ds,
                origin,
            })
        })
        .collect()
}

/// The keys of zone `origin` without their private material, with the DS
/// (SHA-256) of each KSK or CSK at the policy's DNSKEY TTL.
///
/// Errors: storage, a corrupt key row.
pub fn key_statuses(
    conn: &Connection,
    origin: &Name,
) -> Result<Vec<crate::write::KeyStatus>, WriteError> {
    let ttl = policy_of(conn, origin)?
        .map(|p| p.dnskey_ttl)
        .unwrap_or(3600);
    let owner = origin.to_lowercase();
    Ok(keys_of(conn, origin)?
        .iter()
        .map(|k| crate::write::KeyStatus {
            role: k.role.as_str(),
            state: k.state.as_str(),
            algorithm: k.pair.algorithm().number(),
            tag: k.pair.key_tag(),
            flags: k.pair.flags(),
            created: k.created,
            changed: k.changed,
            ds: (k.role != KeyRole::Zsk).then(|| ds_text(&owner, ttl, &k.pair)),
        })
        .collect())
}

fn ds_text(owner: &Name, ttl: u32, pair: &KeyPair) -> String {
    let ds = pair.ds_rdata(owner.as_wire());
    format!(
        "{owner} {ttl} IN DS {} {} 2 {}",
        pair.key_tag(),
        pair.algorithm().number(),
        data_encoding::HEXUPPER.encode(&ds[4..])
    )
}
