//! Key rollovers of sqlite3 zones signed online: the plan of
//! [`crate::signer::rollover`] applied to the keys in `authd_dnssec_key`
//! inside the transaction that re-signs the zone, so each step is signed
//! and journaled with the change it makes (the DNSKEY, CDS/CDNSKEY and
//! RRSIG records), and the state stays with the keys across restarts.

use rusqlite::{Connection, TransactionBehavior, params};

use crate::name::Name;
use crate::signer::keys::KeyPair;
use crate::signer::policy::{KeyLayout, Policy};
use crate::signer::rollover::{self, KeyView, Role, State, Step};
use crate::signer::zone::SigningKey;
use crate::sqlite_signing::{
    KeyRole, StoredKey, keys_of, policy_of, sign_pending_in, sql, store_key,
};
use crate::write::{KeyEvent, SerialPolicy, WriteError};

fn view(k: &StoredKey) -> KeyView {
    KeyView {
        id: k.id,
        role: match k.role {
            KeyRole::Zsk => Role::Zsk,
            KeyRole::Ksk | KeyRole::Csk => Role::Sep,
        },
        state: k.state,
        changed: k.changed,
        ds_seen: k.ds_seen,
    }
}

/// Applies `step` to zone `origin`'s keys; returns what it did, for the log.
fn apply(
    tx: &Connection,
    origin: &Name,
    policy: &Policy,
    keys: &[StoredKey],
    step: &Step,
    now: u64,
) -> Result<String, WriteError> {
    match *step {
        Step::Create(role, state) => {
            let (role, flags) = match (role, policy.keys) {
                (Role::Zsk, _) => (KeyRole::Zsk, 256),
                (Role::Sep, KeyLayout::Csk) => (KeyRole::Csk, 257),
                (Role::Sep, KeyLayout::KskZsk) => (KeyRole::Ksk, 257),
            };
            let pair = KeyPair::generate(policy.algorithm, flags)
                .map_err(|e| WriteError::Signing(format!("zone {origin}: making a key: {e}")))?;
            store_key(tx, origin, role, state, &pair, now)?;
            // What the operator has to do next, said where they see it.
            let next = if role == KeyRole::Zsk {
                String::new()
            } else {
                format!(
                    " (the old key stays until the new DS is at the parent: give it \
                     `authc dnssec ds {origin}`; {})",
                    if policy.parent_agents.is_empty() {
                        "then run `authc dnssec ds-published`"
                    } else {
                        "parent_agents are asked for it"
                    }
                )
            };
            Ok(format!(
                "new {} {} {}{next}",
                role.as_str(),
                pair.key_tag(),
                state.as_str()
            ))
        }
        Step::Set(id, state) => {
            tx.execute(
                "UPDATE authd_dnssec_key SET state=?2, changed=?3 WHERE id=?1",
                params![id, state.as_str(), i64::try_from(now).unwrap_or(i64::MAX)],
            )
            .map_err(sql("changing a key's state"))?;
            let tag = keys
                .iter()
                .find(|k| k.id == id)
                .map_or(0, |k| k.pair.key_tag());
            Ok(format!("key {tag} {}", state.as_str()))
        }
    }
}

fn signing_keys(keys: &[StoredKey]) -> Vec<SigningKey> {
    keys.iter()
        .filter(|k| k.state != State::Removed)
        .map(StoredKey::signing)
        .collect()
}

/// Applies the rollover steps due at `now` to zone `origin`'s keys in `tx`,
/// `max_ttl` being the zone's largest TTL (seconds). Returns the keys to
/// sign with when a step was taken, `None` when none was due.
///
/// Errors: storage, a corrupt key row, a key that cannot be made.
pub(crate) fn step_keys(
    tx: &Connection,
    origin: &Name,
    policy: &Policy,
    max_ttl: u32,
    now: u64,
) -> Result<Option<Vec<SigningKey>>, WriteError> {
    let keys = keys_of(tx, origin)?;
    let views: Vec<KeyView> = keys.iter().map(view).collect();
    let plan = rollover::plan(&views, policy, max_ttl, now);
    if plan.steps.is_empty() {
        return Ok(None);
    }
    for step in &plan.steps {
        let done = apply(tx, origin, policy, &keys, step, now)?;
        tracing::info!("signing {origin}: rollover: {done}");
    }
    Ok(Some(signing_keys(&keys_of(tx, origin)?)))
}

/// Where zone `origin`'s rollovers stand under `policy`: when the next timed step falls
/// due (Unix seconds) and the DS RDATA (wire form, SHA-256) a KSK/CSK
/// rollover waits to see at the parent. Reads the zone's largest TTL only
/// while a key is retired (only removals wait on it).
///
/// Errors: storage, a corrupt key row.
pub(crate) fn state_of(
    conn: &Connection,
    origin: &Name,
    policy: &Policy,
    now: u64,
) -> Result<(Option<u64>, Option<Vec<u8>>), WriteError> {
    let keys = keys_of(conn, origin)?;
    let views: Vec<KeyView> = keys.iter().map(view).collect();
    let max_ttl = if views.iter().any(|k| k.state == State::Retired) {
        match crate::sqlite_admin::find_zone_id(conn, origin)? {
            Some(id) => conn
                .query_row(
                    "SELECT coalesce(max(ttl), 0) FROM records WHERE zone_id = ?1",
                    [id],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(sql("reading the zone's largest TTL"))?,
            None => 0,
        }
    } else {
        0
    };
    let plan = rollover::plan(
        &views,
        policy,
        u32::try_from(max_ttl).unwrap_or(u32::MAX),
        now,
    );
    // A step already due counts as due now.
    let next = if plan.steps.is_empty() {
        plan.next
    } else {
        Some(now)
    };
    let ds = plan
        .awaiting_ds
        .and_then(|id| keys.iter().find(|k| k.id == id))
        .map(|k| k.pair.ds_rdata(origin.to_lowercase().as_wire()));
    Ok((next, ds))
}

/// An operator's (or the parent check's) key event for zone `origin`:
/// applied, and the zone re-signed and journaled with it, in one
/// transaction. Returns what was done.
///
/// Errors: [`WriteError::Signing`] when the zone is not signed online or
/// the event cannot apply now (a rollover under way, a ZSK asked of a CSK
/// zone, no rollover waiting for its DS); storage.
pub fn key_event(
    conn: &mut Connection,
    origin: &Name,
    event: KeyEvent,
    serial: SerialPolicy,
    now: u64,
) -> Result<String, WriteError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql("starting the transaction"))?;
    let Some(policy) = policy_of(&tx, origin)? else {
        return Err(WriteError::Signing(format!(
            "zone {origin} is not signed online (no [[signing.zone]])"
        )));
    };
    let keys = keys_of(&tx, origin)?;
    let views: Vec<KeyView> = keys.iter().map(view).collect();
    let bad = |e: rollover::RequestError| WriteError::Signing(format!("zone {origin}: {e}"));
    let done = match event {
        KeyEvent::Rollover { zsk } => {
            let role = if zsk { Role::Zsk } else { Role::Sep };
            let step = rollover::request_rollover(&views, role, &policy).map_err(bad)?;
            apply(&tx, origin, &policy, &keys, &step, now)?
        }
        KeyEvent::DsPublished { ttl } => {
            let Some(new) = rollover::incoming_sep(&views) else {
                return Err(bad(rollover::RequestError::NotAwaitingDs));
            };
            authd_migrations::ensure_authd_table(&tx, "authd_signing")
                .map_err(sql("creating the signing tables"))?;
            tx.execute(
                "INSERT OR REPLACE INTO authd_dnssec_ds (key_id, seen, ttl) VALUES (?1, ?2, ?3)",
                params![new.id, i64::try_from(now).unwrap_or(i64::MAX), ttl],
            )
            .map_err(sql("recording the DS"))?;
            let tag = keys
                .iter()
                .find(|k| k.id == new.id)
                .map_or(0, |k| k.pair.key_tag());
            format!("DS of key {tag} at the parent (TTL {ttl})")
        }
    };
    tracing::info!("signing {origin}: {done}");
    let report = sign_pending_in(&tx, origin, serial, now)?;
    tx.commit().map_err(sql("committing"))?;
    Ok(match report {
        Some(r) => format!("{done}; serial {} -> {}", r.old_serial, r.new_serial),
        None => done,
    })
}
