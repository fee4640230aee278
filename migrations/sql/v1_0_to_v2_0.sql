-- Upgrade step 1.0 -> 2.0, as b10-dbutil does it (research/bind10.md a.2).
-- Runs inside the caller's transaction; any failing statement aborts the whole upgrade.
--
-- "Old V1" files have no diffs table: first bring them to "new V1".
CREATE TABLE IF NOT EXISTS diffs (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL,
    version INTEGER NOT NULL, operation INTEGER NOT NULL, name STRING NOT NULL COLLATE NOCASE,
    rrtype STRING NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL, rdata STRING NOT NULL);

-- SQLite cannot change a column's type, so every table is rebuilt: rename the
-- old one, create it anew with TEXT instead of STRING, copy the rows, drop the old.

-- zones
DROP INDEX zones_byname;
ALTER TABLE zones RENAME TO old_zones;
CREATE TABLE zones (id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
    rdclass TEXT NOT NULL COLLATE NOCASE DEFAULT 'IN', dnssec BOOLEAN NOT NULL DEFAULT 0);
INSERT INTO zones (id, name, rdclass, dnssec)
    SELECT id, name, rdclass, dnssec FROM old_zones;
CREATE INDEX zones_byname ON zones (name);
DROP TABLE old_zones;

-- records
DROP INDEX records_byname;
DROP INDEX records_byrname;
ALTER TABLE records RENAME TO old_records;
CREATE TABLE records (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, name TEXT NOT NULL COLLATE NOCASE,
    rname TEXT NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL, rdtype TEXT NOT NULL COLLATE NOCASE,
    sigtype TEXT COLLATE NOCASE, rdata TEXT NOT NULL);
INSERT INTO records (id, zone_id, name, rname, ttl, rdtype, sigtype, rdata)
    SELECT id, zone_id, name, rname, ttl, rdtype, sigtype, rdata FROM old_records;
CREATE INDEX records_byname ON records (name);
CREATE INDEX records_byrname ON records (rname);
CREATE INDEX records_bytype_and_rname ON records (rdtype, rname);
DROP TABLE old_records;

-- nsec3
DROP INDEX nsec3_byhash;
ALTER TABLE nsec3 RENAME TO old_nsec3;
CREATE TABLE nsec3 (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, hash TEXT NOT NULL COLLATE NOCASE,
    owner TEXT NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL, rdtype TEXT NOT NULL COLLATE NOCASE,
    rdata TEXT NOT NULL);
INSERT INTO nsec3 (id, zone_id, hash, owner, ttl, rdtype, rdata)
    SELECT id, zone_id, hash, owner, ttl, rdtype, rdata FROM old_nsec3;
CREATE INDEX nsec3_byhash ON nsec3 (hash);
DROP TABLE old_nsec3;

-- diffs
ALTER TABLE diffs RENAME TO old_diffs;
CREATE TABLE diffs (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, version INTEGER NOT NULL,
    operation INTEGER NOT NULL, name TEXT NOT NULL COLLATE NOCASE, rrtype TEXT NOT NULL COLLATE NOCASE,
    ttl INTEGER NOT NULL, rdata TEXT NOT NULL);
INSERT INTO diffs (id, zone_id, version, operation, name, rrtype, ttl, rdata)
    SELECT id, zone_id, version, operation, name, rrtype, ttl, rdata FROM old_diffs;
DROP TABLE old_diffs;

-- schema_version gains the minor column; the major stays in the column named "version".
ALTER TABLE schema_version ADD COLUMN minor INTEGER NOT NULL DEFAULT 0;
DELETE FROM schema_version;
INSERT INTO schema_version (version, minor) VALUES (2, 0);
