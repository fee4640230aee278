//! Automatic key rollovers as a pure plan over a zone's keys: which key
//! changes state now, and when the next step falls due. The storage applies
//! the plan in the transaction that re-signs the zone, so every step is
//! signed before it is served, and the state lives with the keys (a restart
//! resumes where it was).
//!
//! - ZSK by pre-publication (RFC 6781 §4.1.1.1): a new ZSK is published;
//!   after the DNSKEY TTL plus the propagation delay it signs and the old
//!   one is retired; after the zone's largest TTL plus the delay (its
//!   signatures gone from caches) the old DNSKEY is removed.
//! - KSK or CSK by double-DS (RFC 6781 §4.1.2) with CDS/CDNSKEY (RFC 7344,
//!   RFC 8078): the new key is published and signs beside the old one, the
//!   CDS/CDNSKEY RRsets naming both, so the parent holds both DS; once the
//!   new DS is seen at the parent (`parent_agents`) or confirmed by the
//!   operator, and its TTL plus the delay has passed, the old key is
//!   retired (CDS/CDNSKEY then name the new key only) and later removed.

use super::policy::{KeyLayout, Policy};

/// A key's role in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Signs the zone's data (`ksk+zsk`).
    Zsk,
    /// Signs the DNSKEY RRset: a KSK, or a CSK signing everything.
    Sep,
}

/// A key's state (RFC 6781 §4.1: published before it signs, retired
/// before it is removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// In the DNSKEY RRset, not signing.
    Published,
    /// Published and signing.
    Active,
    /// Published, no longer signing.
    Retired,
    /// Out of the zone; kept for the record.
    Removed,
}

impl State {
    /// `published`, `active`, `retired`, `removed` (the stored form).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Published => "published",
            State::Active => "active",
            State::Retired => "retired",
            State::Removed => "removed",
        }
    }

    /// The state named by [`State::as_str`]'s text.
    pub fn parse(s: &str) -> Option<State> {
        match s {
            "published" => Some(State::Published),
            "active" => Some(State::Active),
            "retired" => Some(State::Retired),
            "removed" => Some(State::Removed),
            _ => None,
        }
    }
}

/// One key as the plan sees it. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    /// The storage's id; later keys have larger ids.
    pub id: i64,
    /// Its role.
    pub role: Role,
    /// Its state.
    pub state: State,
    /// When it entered `state`.
    pub changed: u64,
    /// When its DS was seen at the parent (or confirmed), and the DS TTL
    /// (seconds); `None`: not yet.
    pub ds_seen: Option<(u64, u32)>,
}

/// One change the plan makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make a new key of this role in this state.
    Create(Role, State),
    /// Move key `id` to a state.
    Set(i64, State),
}

/// What the plan decided at one time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The changes due now, in order.
    pub steps: Vec<Step>,
    /// When the next timed step falls due (Unix seconds); `None`: nothing
    /// is timed (no rollover under way and no lifetime set).
    pub next: Option<u64>,
    /// A KSK/CSK rollover waits for the DS of key `id` at the parent.
    pub awaiting_ds: Option<i64>,
}

/// Why an operator's request cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The zone has no key of that role (a CSK zone has no ZSK).
    #[error("the zone's keys are {0}; it has no ZSK to roll (roll the CSK with `ksk`)")]
    NoSuchRole(&'static str),
    /// A rollover of that role is under way.
    #[error("a {0} rollover is under way already")]
    Busy(&'static str),
    /// `ds-published` with no KSK/CSK rollover waiting for its DS.
    #[error("no KSK/CSK rollover is waiting for its DS")]
    NotAwaitingDs,
}

fn role_name(role: Role, layout: KeyLayout) -> &'static str {
    match (role, layout) {
        (Role::Zsk, _) => "ZSK",
        (Role::Sep, KeyLayout::Csk) => "CSK",
        (Role::Sep, KeyLayout::KskZsk) => "KSK",
    }
}

/// True when a rollover of `role` is under way: a key published and not yet
/// active, two keys of the role active, or one retired and not removed.
fn rolling(keys: &[KeyView], role: Role) -> bool {
    let of = |s: State| {
        keys.iter()
            .filter(|k| k.role == role && k.state == s)
            .count()
    };
    of(State::Published) > 0 || of(State::Active) > 1 || of(State::Retired) > 0
}

/// The step an operator's `rollover` asks for: a new key of `role` now.
///
/// Errors: [`RequestError::NoSuchRole`] (a ZSK in a CSK zone),
/// [`RequestError::Busy`].
pub fn request_rollover(
    keys: &[KeyView],
    role: Role,
    policy: &Policy,
) -> Result<Step, RequestError> {
    if role == Role::Zsk && policy.keys == KeyLayout::Csk {
        return Err(RequestError::NoSuchRole("a CSK"));
    }
    if rolling(keys, role) {
        return Err(RequestError::Busy(role_name(role, policy.keys)));
    }
    Ok(match role {
        Role::Zsk => Step::Create(Role::Zsk, State::Published),
        Role::Sep => Step::Create(Role::Sep, State::Active),
    })
}

/// The key whose DS a KSK/CSK rollover waits for: the newest active SEP
/// key while an older one is active too.
pub fn incoming_sep(keys: &[KeyView]) -> Option<&KeyView> {
    let active: Vec<&KeyView> = keys
        .iter()
        .filter(|k| k.role == Role::Sep && k.state == State::Active)
        .collect();
    if active.len() < 2 {
        return None;
    }
    active.into_iter().max_by_key(|k| k.id)
}

/// The plan for `keys` under `policy` at `now`, the zone's largest TTL
/// being `max_ttl` (seconds). Keys made by a step count from `now`.
pub fn plan(keys: &[KeyView], policy: &Policy, max_ttl: u32, now: u64) -> Plan {
    let delay = u64::from(policy.propagation_delay);
    let dnskey = u64::from(policy.dnskey_ttl);
    let mut p = Plan::default();
    let at = |p: &mut Plan, t: u64, step: Vec<Step>| {
        if t <= now {
            p.steps.extend(step);
        } else {
            p.next = Some(p.next.map_or(t, |n: u64| n.min(t)));
        }
    };
    let of = |role: Role, s: State| -> Vec<&KeyView> {
        keys.iter()
            .filter(|k| k.role == role && k.state == s)
            .collect()
    };

    // ZSK: published → active (the old ones retired) → removed.
    let published = of(Role::Zsk, State::Published);
    if let Some(new) = published.iter().max_by_key(|k| k.id) {
        let mut steps = vec![Step::Set(new.id, State::Active)];
        steps.extend(
            of(Role::Zsk, State::Active)
                .iter()
                .map(|k| Step::Set(k.id, State::Retired)),
        );
        at(&mut p, new.changed + dnskey + delay, steps);
    }
    for k in of(Role::Zsk, State::Retired) {
        at(
            &mut p,
            k.changed + u64::from(max_ttl) + delay,
            vec![Step::Set(k.id, State::Removed)],
        );
    }
    if policy.keys == KeyLayout::KskZsk
        && policy.zsk_lifetime > 0
        && !rolling(keys, Role::Zsk)
        && let Some(cur) = of(Role::Zsk, State::Active).first()
    {
        at(
            &mut p,
            cur.changed + u64::from(policy.zsk_lifetime),
            vec![Step::Create(Role::Zsk, State::Published)],
        );
    }

    // KSK/CSK: the new key signs beside the old until its DS is at the
    // parent, then the old is retired, then removed.
    if let Some(new) = incoming_sep(keys) {
        match new.ds_seen {
            Some((seen, ds_ttl)) => {
                let steps = of(Role::Sep, State::Active)
                    .iter()
                    .filter(|k| k.id != new.id)
                    .map(|k| Step::Set(k.id, State::Retired))
                    .collect();
                let t = (new.changed + dnskey).max(seen + u64::from(ds_ttl)) + delay;
                at(&mut p, t, steps);
            }
            None => p.awaiting_ds = Some(new.id),
        }
    }
    // A retired CSK's signatures of the zone's data must leave caches
    // first; a KSK's only of the DNSKEY RRset.
    let sep_wait = match policy.keys {
        KeyLayout::Csk => u64::from(max_ttl).max(dnskey),
        KeyLayout::KskZsk => dnskey,
    };
    for k in of(Role::Sep, State::Retired) {
        at(
            &mut p,
            k.changed + sep_wait + delay,
            vec![Step::Set(k.id, State::Removed)],
        );
    }
    if policy.ksk_lifetime > 0
        && !rolling(keys, Role::Sep)
        && let Some(cur) = of(Role::Sep, State::Active).first()
    {
        at(
            &mut p,
            cur.changed + u64::from(policy.ksk_lifetime),
            vec![Step::Create(Role::Sep, State::Active)],
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(keys: KeyLayout) -> Policy {
        Policy {
            keys,
            dnskey_ttl: 10,
            propagation_delay: 2,
            zsk_lifetime: 100,
            ksk_lifetime: 0,
            ..Policy::default()
        }
    }

    fn key(id: i64, role: Role, state: State, changed: u64) -> KeyView {
        KeyView {
            id,
            role,
            state,
            changed,
            ds_seen: None,
        }
    }

    #[test]
    fn a_zsk_rolls_by_pre_publication() {
        let p = policy(KeyLayout::KskZsk);
        let mut keys = vec![
            key(1, Role::Sep, State::Active, 0),
            key(2, Role::Zsk, State::Active, 0),
        ];
        // Before its lifetime: the next event is the lifetime's end.
        let plan0 = plan(&keys, &p, 300, 50);
        assert_eq!(plan0.steps, vec![]);
        assert_eq!(plan0.next, Some(100));
        let plan1 = plan(&keys, &p, 300, 100);
        assert_eq!(plan1.steps, vec![Step::Create(Role::Zsk, State::Published)]);
        keys.push(key(3, Role::Zsk, State::Published, 100));
        // Published for the DNSKEY TTL plus the delay: 112.
        assert_eq!(plan(&keys, &p, 300, 111).next, Some(112));
        assert_eq!(
            plan(&keys, &p, 300, 112).steps,
            vec![Step::Set(3, State::Active), Step::Set(2, State::Retired)]
        );
        keys[1].state = State::Retired;
        keys[1].changed = 112;
        keys[2].state = State::Active;
        keys[2].changed = 112;
        // Retired for the zone's largest TTL plus the delay: 414.
        let plan2 = plan(&keys, &p, 300, 200);
        assert_eq!((plan2.steps.len(), plan2.next), (0, Some(414)));
        assert_eq!(
            plan(&keys, &p, 300, 414).steps,
            vec![Step::Set(2, State::Removed)]
        );
        keys[1].state = State::Removed;
        // The next rollover counts from the new key's activation.
        assert_eq!(plan(&keys, &p, 300, 150).next, Some(212));
    }

    #[test]
    fn a_csk_waits_for_its_ds_at_the_parent() {
        let p = Policy {
            ksk_lifetime: 50,
            ..policy(KeyLayout::Csk)
        };
        let mut keys = vec![key(1, Role::Sep, State::Active, 0)];
        // A CSK zone has no ZSK to roll.
        assert_eq!(
            request_rollover(&keys, Role::Zsk, &p),
            Err(RequestError::NoSuchRole("a CSK"))
        );
        assert_eq!(
            plan(&keys, &p, 30, 50).steps,
            vec![Step::Create(Role::Sep, State::Active)]
        );
        keys.push(key(2, Role::Sep, State::Active, 50));
        assert_eq!(
            request_rollover(&keys, Role::Sep, &p),
            Err(RequestError::Busy("CSK"))
        );
        // No DS seen: nothing timed, however long it waits.
        let waiting = plan(&keys, &p, 30, 10_000);
        assert_eq!(
            (waiting.steps.len(), waiting.next, waiting.awaiting_ds),
            (0, None, Some(2))
        );
        // DS seen at 70 with TTL 20: retire at max(50+10, 70+20) + 2 = 92.
        keys[1].ds_seen = Some((70, 20));
        assert_eq!(plan(&keys, &p, 30, 91).next, Some(92));
        assert_eq!(
            plan(&keys, &p, 30, 92).steps,
            vec![Step::Set(1, State::Retired)]
        );
        keys[0].state = State::Retired;
        keys[0].changed = 92;
        // A CSK's data signatures: the zone's largest TTL (30) + 2.
        assert_eq!(plan(&keys, &p, 30, 93).next, Some(124));
        assert_eq!(
            plan(&keys, &p, 30, 124).steps,
            vec![Step::Set(1, State::Removed)]
        );
    }
}
