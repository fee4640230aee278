//! Reply templates: a rendered reply kept per thread and re-based onto each
//! query that places the same immutable RRsets (see docs/ARCHITECTURE.md).

use std::sync::Arc;

use authd_datasrc::{RRset, RType};

use super::render::{render_impl, reply_limit};
use super::{Answer, Transport};
use crate::wire::{Flags, HEADER_LEN, Header, Rcode, Request};

/// A rendered reply (everything after the question), reusable for every query
/// that produces the same placed RRsets: it was rendered with an *anchor* name
/// as the question — the qname itself for answers, the zone cut for referrals,
/// the zone apex for negative answers — which is a suffix of every qname that
/// leads to it. So each compression pointer it holds points at the anchor's
/// labels or later, and moves by the same amount when the real question takes
/// the anchor's place (NSD and Knot DNS pre-compute answers in the same spirit).
struct Template {
    /// Keeps the placed RRsets (and so their addresses, the key) alive.
    _keep: Vec<Arc<RRset>>,
    /// Bytes after the question.
    body: Box<[u8]>,
    /// Offsets in `body` of the compression pointers.
    pointers: Box<[u16]>,
    /// ANCOUNT, NSCOUNT, ARCOUNT as on the wire.
    counts: [u8; 6],
    /// The header's flag byte 2 and 3 bits that depend on the reply (AA, TC, rcode).
    aa: bool,
    truncated: bool,
    rcode: Rcode,
    /// Length of the question the template was rendered with, bytes.
    question_len: usize,
}

/// Most RRsets in the answer and authority sections of a templated reply.
const TEMPLATE_SETS: usize = 6;

/// (addresses of the answer and authority RRsets, how many of them are in the
/// answer section and in all — the apex SOA is the answer to `SOA` and the
/// authority of a NODATA —, rcode and AA, question length (UDP only: what fits
/// depends on it), size limit, EDNS, DO, processor id). Not the qtype: the body
/// does not depend on it once the placed RRsets are the same (it is in the
/// question only).
type TemplateKey = (
    [usize; TEMPLATE_SETS],
    (usize, usize),
    (Rcode, bool),
    usize,
    usize,
    bool,
    bool,
    u64,
);

/// Most templates in one generation of a thread's store ([`Templates`]).
const MAX_TEMPLATES: usize = 32_768;

/// Most bytes of templates in one generation of a thread's store (bodies,
/// pointer lists and an estimate of the rest): a thread keeps at most twice
/// this. Without a byte bound, DNSSEC replies to many distinct names (each
/// NSEC span × question length its own ~1 KiB template) grew authd serving
/// the root zone from 21 to 97 MiB RSS. The root real mix needs ~6.7 MB.
const MAX_TEMPLATE_BYTES: usize = 8 << 20;

type TemplateMap =
    std::collections::HashMap<TemplateKey, std::rc::Rc<Template>, foldhash::fast::RandomState>;

/// A thread's templates in two generations: when the current one is full it
/// becomes the old one (the previous old one is dropped), and a template found
/// in the old one moves back to the current one, so the templates in use
/// survive while the rest age out. Emptied when a newer processor renders (a
/// reload: old templates would keep the old zone data alive). foldhash: the
/// key is ~100 bytes hashed per query, several times faster than SipHash.
#[derive(Default)]
struct Templates {
    current: TemplateMap,
    old: TemplateMap,
    /// Estimated bytes in `current`.
    bytes: usize,
    processor: u64,
    /// Admission doorkeeper: a fingerprint of the last key missed at each of
    /// [`SEEN_SLOTS`] slots (allocated on the first miss). A template is built
    /// only for a key missed before: where replies rarely repeat (referrals
    /// spread over a TLD's delegations) building one per query cost more than
    /// the rendering it saves, and evicted the templates that did repeat.
    seen: Option<Box<[u32]>>,
    /// Lookups and hits in the current measuring window ([`WINDOW`]).
    window: (u32, u32),
    /// Replies still to render without templates: set when a window's hit
    /// rate shows they cost more than they save (see [`Templates::pays`]).
    bypass: u32,
    /// Build a template only on a reply's second sighting ([`Templates::admit`]):
    /// set while a window's hit rate is under [`EAGER_HIT_PERCENT`].
    wary: bool,
}

/// Template lookups per measuring window.
const WINDOW: u32 = 4096;

/// Replies rendered without templates after a window whose hit rate was
/// below [`MIN_HIT_PERCENT`]; then templates are measured again.
const BYPASS: u32 = 65_536;

/// The hit rate below which templates cost more than they save, percent:
/// a miss probes the store and the doorkeeper (cold lines when replies are
/// spread over a large zone) and renders anyway, a hit only saves the
/// rendering. Measured with query-bench on a 300,000-delegation zone:
/// without templates, uniform referrals (hit rate under 10%) are 6% faster
/// and Zipf ones (about 30%) 12%; the root zone's mixes (over 80%) are
/// 1.35x-2.6x faster with them.
const MIN_HIT_PERCENT: u32 = 50;

/// The hit rate from which a template is built on a reply's first sighting,
/// percent. Below it most replies are seen once or twice, and a template
/// built on the first sighting would mostly be wasted (Zipf referrals over a
/// TLD: 15% slower without the doorkeeper); above it (the root zone's real
/// mix) the second rendering the doorkeeper costs every reply is the waste
/// (12% slower with it).
const EAGER_HIT_PERCENT: u32 = 75;

/// Slots of the admission doorkeeper (4 bytes each): twice
/// [`MAX_TEMPLATES`], so the keys of a full store rarely collide.
const SEEN_SLOTS: usize = 1 << 16;

impl Templates {
    /// Whether to use templates for this reply: false while a bypass runs.
    fn pays(&mut self) -> bool {
        if self.bypass > 0 {
            self.bypass -= 1;
            return false;
        }
        true
    }

    /// Counts a lookup (and whether it hit); at the end of a window, starts
    /// a bypass when the hit rate was too low for templates to pay.
    fn count(&mut self, hit: bool) {
        self.window.0 += 1;
        self.window.1 += u32::from(hit);
        if self.window.0 == WINDOW {
            if self.window.1 * 100 < MIN_HIT_PERCENT * WINDOW {
                self.bypass = BYPASS;
            }
            self.wary = self.window.1 * 100 < EAGER_HIT_PERCENT * WINDOW;
            self.window = (0, 0);
        }
    }

    fn get(&mut self, key: &TemplateKey) -> Option<std::rc::Rc<Template>> {
        if let Some(t) = self.current.get(key) {
            return Some(t.clone());
        }
        let t = self.old.remove(key)?;
        self.insert(*key, t.clone());
        Some(t)
    }

    /// After a miss on `key`: true when the same key was missed before (since
    /// another key took its slot), so a template for it is worth building.
    fn admit(&mut self, key: &TemplateKey) -> bool {
        let (slot, fingerprint) = doorkeeper_slot(key);
        let seen = self
            .seen
            .get_or_insert_with(|| vec![0; SEEN_SLOTS].into_boxed_slice());
        if seen[slot] == fingerprint {
            return true;
        }
        seen[slot] = fingerprint;
        false
    }

    fn insert(&mut self, key: TemplateKey, t: std::rc::Rc<Template>) {
        // The key's last field is the processor id. Ids only grow: a newer
        // processor is a reload (an older one, still answering in-flight
        // queries or in a test, just adds its own).
        let processor = key.7;
        if processor > self.processor {
            self.current.clear();
            self.old.clear();
            self.bytes = 0;
            self.processor = processor;
        }
        // The heap blocks (Rc'd template, body, pointers, kept RRset list,
        // each rounded up by the allocator) and the map slot (key and Rc at
        // a load factor of 7/8, plus its control byte).
        let size = t.body.len()
            + 2 * t.pointers.len()
            + 8 * t._keep.len()
            + std::mem::size_of::<Template>()
            + 16
            + 4 * 16
            + (std::mem::size_of::<TemplateKey>() + 8) * 8 / 7
            + 1;
        if self.current.len() >= MAX_TEMPLATES || self.bytes + size > MAX_TEMPLATE_BYTES {
            self.old = std::mem::take(&mut self.current);
            self.bytes = 0;
        }
        self.bytes += size;
        self.current.insert(key, t);
    }
}

/// `key`'s slot in the doorkeeper and its fingerprint there (never 0, so an
/// empty slot matches no key).
fn doorkeeper_slot(key: &TemplateKey) -> (usize, u32) {
    use std::hash::BuildHasher;
    let hash = foldhash::fast::FixedState::with_seed(0x5eed).hash_one(key);
    (hash as usize & (SEEN_SLOTS - 1), (hash >> 32) as u32 | 1)
}

thread_local! {
    static TEMPLATES: std::cell::RefCell<Templates> = std::cell::RefCell::new(Templates::default());
}

/// Renders `ans` from a template (building it on first use) when every placed
/// RRset comes from an immutable snapshot. Returns false when it does not
/// apply; the caller renders normally.
pub(super) fn render_templated(
    processor: u64,
    req: &Request<'_>,
    ans: &mut Answer,
    transport: Transport,
    out: &mut Vec<u8>,
) -> bool {
    if !ans.templatable || ans.synthesized || req.question.len() < 4 {
        return false;
    }
    if !TEMPLATES.with(|t| t.borrow_mut().pays()) {
        return false;
    }
    let placed = ans.answer.iter().chain(&ans.authority);
    let mut sets = [0usize; TEMPLATE_SETS];
    let mut n = 0;
    for p in placed {
        if p.owner.is_some() || n == TEMPLATE_SETS {
            return false; // wildcard synthesis, or too many sets
        }
        // Held by this reply alone: no source keeps it (the hot-spot cache
        // passes on what it does not admit), so no later lookup returns this
        // address and a template keyed by it would never be found.
        if Arc::strong_count(&p.rrset) == 1 {
            return false;
        }
        sets[n] = Arc::as_ptr(&p.rrset) as usize;
        n += 1;
    }
    // The anchor: a suffix of the qname every reply with these RRsets shares.
    let anchor = match (ans.answer.first(), ans.authority.first()) {
        (Some(a), _) if a.rrset.owner == req.qname => &a.rrset.owner,
        (Some(_), _) => return false,
        (None, Some(ns)) if ns.rrset.rtype == RType::NS && !ans.aa => &ns.rrset.owner,
        (None, Some(soa)) if soa.rrset.rtype == RType::SOA => &soa.rrset.owner,
        _ => return false,
    };
    if !req.qname.is_subdomain_of(anchor) {
        return false;
    }
    let limit = reply_limit(req, transport);
    let dnssec = req.edns.is_some_and(|e| e.dnssec_ok);
    let qlen = match transport {
        Transport::Udp => req.question.len(),
        Transport::Tcp | Transport::Tls => 0,
    };
    let key: TemplateKey = (
        sets,
        (ans.answer.len(), n),
        (ans.rcode, ans.aa),
        qlen,
        limit,
        req.edns.is_some(),
        dnssec,
        processor,
    );
    let found = TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        let found = t.get(&key);
        t.count(found.is_some());
        match found {
            Some(found) => Ok(found),
            None => Err(!t.wary || t.admit(&key)),
        }
    });
    let template = match found {
        Ok(t) => t,
        Err(false) => return false,
        Err(true) => {
            let anchor = anchor.clone();
            ans.place_deferred();
            let mut question = Vec::with_capacity(anchor.as_wire().len() + 4);
            question.extend_from_slice(anchor.as_wire());
            question.extend_from_slice(&req.question[req.question.len() - 4..]);
            let at_anchor = Request {
                question: &question,
                qname: anchor.clone(),
                ..req.clone()
            };
            let mut buf = Vec::with_capacity(1024);
            // Leave room for the real question, as a direct rendering would.
            let shrink = qlen.saturating_sub(question.len());
            let pointers = render_impl(&at_anchor, ans, transport, &mut buf, true, shrink);
            let start = HEADER_LEN + question.len();
            let t = std::rc::Rc::new(Template {
                _keep: ans
                    .answer
                    .iter()
                    .chain(&ans.authority)
                    .map(|p| p.rrset.clone())
                    .collect(),
                body: buf[start..].into(),
                pointers: pointers
                    .iter()
                    .map(|&p| (usize::from(p) - start) as u16)
                    .collect(),
                counts: [buf[6], buf[7], buf[8], buf[9], buf[10], buf[11]],
                aa: Flags::from_word(u16::from_be_bytes([buf[2], buf[3]])).contains(Flags::AA),
                truncated: Flags::from_word(u16::from_be_bytes([buf[2], buf[3]]))
                    .contains(Flags::TC),
                rcode: ans.rcode,
                question_len: question.len(),
            });
            TEMPLATES.with(|m| m.borrow_mut().insert(key, t.clone()));
            t
        }
    };
    let Some(delta) = req.question.len().checked_sub(template.question_len) else {
        return false;
    };
    if HEADER_LEN + req.question.len() + template.body.len() > limit {
        return false;
    }
    let mut flags = Flags::QR;
    if template.aa {
        flags |= Flags::AA;
    }
    if template.truncated {
        flags |= Flags::TC;
    }
    let header = Header::reply_to(req, flags, template.rcode);
    out.clear();
    out.extend_from_slice(&req.id.to_be_bytes());
    out.extend_from_slice(&header.word().to_be_bytes());
    out.extend_from_slice(&[0, 1]);
    out.extend_from_slice(&template.counts);
    out.extend_from_slice(req.question);
    let base = out.len();
    out.extend_from_slice(&template.body);
    for &p in template.pointers.iter() {
        let at = base + usize::from(p);
        let target = (u16::from_be_bytes([out[at], out[at + 1]]) & 0x3FFF) as usize + delta;
        if target > 0x3FFF {
            return false;
        }
        out[at..at + 2].copy_from_slice(&(0xC000 | target as u16).to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{
        BYPASS, EAGER_HIT_PERCENT, MAX_TEMPLATE_BYTES, MIN_HIT_PERCENT, Template, TemplateKey,
        Templates, WINDOW, doorkeeper_slot,
    };
    use crate::wire::Rcode;
    use std::rc::Rc;

    fn key(n: usize, processor: u64) -> TemplateKey {
        (
            [n, 0, 0, 0, 0, 0],
            (1, 1),
            (Rcode::NOERROR, true),
            40,
            512,
            false,
            false,
            processor,
        )
    }

    fn template(body: usize) -> Rc<Template> {
        Rc::new(Template {
            _keep: Vec::new(),
            body: vec![0; body].into(),
            pointers: Box::new([]),
            counts: [0; 6],
            aa: true,
            truncated: false,
            rcode: Rcode::NOERROR,
            question_len: 20,
        })
    }

    /// A window with too few hits starts a bypass of [`BYPASS`] replies,
    /// then templates are measured again; a window with enough hits does not.
    #[test]
    fn templates_are_bypassed_while_they_do_not_pay() {
        let mut t = Templates::default();
        let enough = MIN_HIT_PERCENT * WINDOW / 100;
        for i in 0..WINDOW {
            assert!(t.pays());
            t.count(i < enough);
        }
        assert_eq!(t.bypass, 0, "exactly {MIN_HIT_PERCENT}% hits: still used");
        for i in 0..WINDOW {
            assert!(t.pays());
            t.count(i < enough - 1);
        }
        assert_eq!(t.bypass, BYPASS, "one hit fewer: bypassed");
        for _ in 0..BYPASS {
            assert!(!t.pays());
        }
        assert!(t.pays(), "measured again after the bypass");
        assert_eq!(t.window, (0, 0));
    }

    /// Templates are built on a reply's first sighting until a window's hit
    /// rate falls under [`EAGER_HIT_PERCENT`], then on its second.
    #[test]
    fn a_low_hit_rate_makes_templates_wait_for_a_second_sighting() {
        let mut t = Templates::default();
        assert!(!t.wary);
        let eager = EAGER_HIT_PERCENT * WINDOW / 100;
        for i in 0..WINDOW {
            t.count(i < eager);
        }
        assert!(!t.wary, "exactly {EAGER_HIT_PERCENT}% hits");
        for i in 0..WINDOW {
            t.count(i < eager - 1);
        }
        assert!(t.wary, "one hit fewer");
        assert_eq!(t.bypass, 0, "still above {MIN_HIT_PERCENT}%");
    }

    /// A template is admitted on its key's second miss; a key that lost its
    /// doorkeeper slot to another starts over; a new store admits nothing.
    #[test]
    fn admission_wants_a_second_miss() {
        let mut t = Templates::default();
        assert!(!t.admit(&key(1, 1)), "first miss");
        assert!(t.admit(&key(1, 1)), "second miss");
        assert!(t.admit(&key(1, 1)), "still seen");
        assert!(!t.admit(&key(2, 1)), "another key, first miss");
        assert!(
            !t.admit(&key(1, 2)),
            "the same RRsets for a newer processor"
        );
        // A key that shares key(1, 1)'s slot evicts its fingerprint.
        let slot = doorkeeper_slot(&key(1, 1)).0;
        let rival = (3..)
            .map(|n| key(n, 1))
            .find(|k| doorkeeper_slot(k).0 == slot)
            .expect("a colliding key exists");
        assert!(!t.admit(&rival));
        assert!(
            !t.admit(&key(1, 1)),
            "its slot was taken: a first miss again"
        );
        assert!(t.admit(&key(1, 1)));
    }

    /// Past the byte bound the current generation becomes the old one; a hit
    /// there moves the template back; the generation before is dropped; a
    /// newer processor empties the store, an older one does not.
    #[test]
    fn generations_bound_the_bytes_and_keep_what_is_used() {
        let mut t = Templates::default();
        let per = 64 * 1024;
        let fit = MAX_TEMPLATE_BYTES / per; // templates of `per` bytes in one generation, at most
        for n in 0..fit {
            t.insert(key(n, 1), template(per));
        }
        // Each costs a little more than `per`: one rotation, nothing dropped yet.
        assert!(!t.old.is_empty());
        assert_eq!(t.old.len() + t.current.len(), fit);
        assert!(t.bytes <= MAX_TEMPLATE_BYTES);
        for n in fit..3 * fit {
            t.insert(key(n, 1), template(per));
        }
        // Never more than two generations' worth.
        assert!(
            t.old.len() + t.current.len() <= 2 * fit,
            "{} + {}",
            t.old.len(),
            t.current.len()
        );
        assert!(
            t.get(&key(0, 1)).is_none(),
            "the first generation was dropped"
        );
        assert!(t.bytes <= MAX_TEMPLATE_BYTES);
        let in_old = *t.old.keys().next().expect("old entry");
        assert!(t.get(&in_old).is_some());
        assert!(t.current.contains_key(&in_old) && !t.old.contains_key(&in_old));
        assert!(t.get(&key(usize::MAX, 1)).is_none());
        // An older processor adds alongside; a newer one empties everything.
        t.insert(key(0, 0), template(10));
        assert!(t.get(&key(0, 0)).is_some());
        t.insert(key(1, 2), template(10));
        assert_eq!((t.current.len(), t.old.len()), (1, 0));
    }
}
