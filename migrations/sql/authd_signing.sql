-- authd's online signing state beside BIND 10's schema (BIND 10 and authd's
-- schema checks ignore it), created with the first [[signing.zone]] of a DB,
-- so an unsigned DB is never changed.
--
-- authd_signing: the policy per zone.
--   zone     the zone apex, absolute, lower case
--   policy   the policy's stored text (key = value lines)
--   signed   Unix time (seconds) of the last signing, or NULL
--   input_serial  the SOA serial of the unsigned version last written whole
--            or by differences (a loadzone file, a transfer from a primary),
--            which the signed zone's own serial may have passed (re-signing
--            moves it); a secondary asks its primary for changes from it.
--            NULL: none recorded. Added later (authd_migrations' AUTHD_COLUMNS).
CREATE TABLE IF NOT EXISTS authd_signing (
    zone TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    signed INTEGER
);
-- authd_dnssec_key: the zone's keys, private material included (so the DB is
-- one self-contained file and a backup carries the keys).
--   role     'csk', 'ksk' or 'zsk'
--   state    'published' (in the DNSKEY RRset only), 'active' (signing),
--            'retired' (published, not signing), 'removed'
--   flags, algorithm, tag  the DNSKEY's (RFC 4034 section 2.1, appendix B)
--   private  BIND 9's Private-key-format v1.3 text
--   created, changed  Unix times (seconds): made, state last changed
CREATE TABLE IF NOT EXISTS authd_dnssec_key (
    id INTEGER PRIMARY KEY,
    zone TEXT NOT NULL,
    role TEXT NOT NULL,
    state TEXT NOT NULL,
    flags INTEGER NOT NULL,
    algorithm INTEGER NOT NULL,
    tag INTEGER NOT NULL,
    private TEXT NOT NULL,
    created INTEGER NOT NULL,
    changed INTEGER NOT NULL
);
-- authd_dnssec_ds: the DS of a new KSK or CSK seen at the parent (every
-- parent_agents entry) or confirmed by the operator (authc dnssec
-- ds-published), which lets its rollover retire the old key.
--   key_id  authd_dnssec_key.id
--   seen    Unix time (seconds) it was seen or confirmed
--   ttl     the DS RRset's TTL at the parent (seconds)
CREATE TABLE IF NOT EXISTS authd_dnssec_ds (
    key_id INTEGER PRIMARY KEY,
    seen INTEGER NOT NULL,
    ttl INTEGER NOT NULL
);
-- authd_signing_log: changes made to the records of a zone under a policy,
-- written by the triggers below. authd's own writers sign in the same
-- transaction and delete their rows; rows left are plain SQL edits, signed
-- (serial moved, journaled) by the running server within a second.
--   op  0 added, 1 deleted; name, rdtype, ttl, rdata as in records
CREATE TABLE IF NOT EXISTS authd_signing_log (
    id INTEGER PRIMARY KEY,
    zone_id INTEGER NOT NULL,
    op INTEGER NOT NULL,
    name TEXT NOT NULL,
    rdtype TEXT NOT NULL,
    ttl INTEGER NOT NULL,
    rdata TEXT NOT NULL
);
-- authd_signing_quiet: holds a row only inside a transaction of authd's own
-- writers (inserted after BEGIN, deleted before COMMIT, so no other
-- connection ever sees it): their changes are signed in that transaction
-- and need no log.
CREATE TABLE IF NOT EXISTS authd_signing_quiet (
    writer INTEGER
);
CREATE TRIGGER IF NOT EXISTS authd_signing_insert AFTER INSERT ON records
WHEN NOT EXISTS (SELECT 1 FROM authd_signing_quiet)
AND EXISTS (SELECT 1 FROM zones z JOIN authd_signing s ON s.zone = lower(z.name)
             WHERE z.id = NEW.zone_id)
BEGIN
    INSERT INTO authd_signing_log (zone_id, op, name, rdtype, ttl, rdata)
    VALUES (NEW.zone_id, 0, NEW.name, NEW.rdtype, NEW.ttl, NEW.rdata);
END;
CREATE TRIGGER IF NOT EXISTS authd_signing_delete AFTER DELETE ON records
WHEN NOT EXISTS (SELECT 1 FROM authd_signing_quiet)
AND EXISTS (SELECT 1 FROM zones z JOIN authd_signing s ON s.zone = lower(z.name)
             WHERE z.id = OLD.zone_id)
BEGIN
    INSERT INTO authd_signing_log (zone_id, op, name, rdtype, ttl, rdata)
    VALUES (OLD.zone_id, 1, OLD.name, OLD.rdtype, OLD.ttl, OLD.rdata);
END;
CREATE TRIGGER IF NOT EXISTS authd_signing_update AFTER UPDATE ON records
WHEN NOT EXISTS (SELECT 1 FROM authd_signing_quiet)
AND EXISTS (SELECT 1 FROM zones z JOIN authd_signing s ON s.zone = lower(z.name)
             WHERE z.id = OLD.zone_id OR z.id = NEW.zone_id)
BEGIN
    INSERT INTO authd_signing_log (zone_id, op, name, rdtype, ttl, rdata)
    VALUES (OLD.zone_id, 1, OLD.name, OLD.rdtype, OLD.ttl, OLD.rdata);
    INSERT INTO authd_signing_log (zone_id, op, name, rdtype, ttl, rdata)
    VALUES (NEW.zone_id, 0, NEW.name, NEW.rdtype, NEW.ttl, NEW.rdata);
END;
