-- BIND 10 sqlite3 zone DB, schema 2.2: the full DDL as SQLite3Accessor creates it
-- in BIND 10 1.2 (research/bind10.md a.1). Applied inside one transaction.
CREATE TABLE schema_version (version INTEGER NOT NULL, minor INTEGER NOT NULL DEFAULT 0);
INSERT INTO schema_version VALUES (2, 2);
CREATE TABLE zones (id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
    rdclass TEXT NOT NULL COLLATE NOCASE DEFAULT 'IN', dnssec BOOLEAN NOT NULL DEFAULT 0);
CREATE INDEX zones_byname ON zones (name);
CREATE TABLE records (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, name TEXT NOT NULL COLLATE NOCASE,
    rname TEXT NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL, rdtype TEXT NOT NULL COLLATE NOCASE,
    sigtype TEXT COLLATE NOCASE, rdata TEXT NOT NULL);
CREATE INDEX records_byname ON records (name);
CREATE INDEX records_byrname ON records (rname);
CREATE INDEX records_bytype_and_rname ON records (rdtype, rname);
CREATE INDEX records_byrname_and_rdtype ON records (rname, rdtype);
CREATE TABLE nsec3 (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, hash TEXT NOT NULL COLLATE NOCASE,
    owner TEXT NOT NULL COLLATE NOCASE, ttl INTEGER NOT NULL, rdtype TEXT NOT NULL COLLATE NOCASE,
    rdata TEXT NOT NULL);
CREATE INDEX nsec3_byhash ON nsec3 (hash);
CREATE INDEX nsec3_byhash_and_rdtype ON nsec3 (hash, rdtype);
CREATE TABLE diffs (id INTEGER PRIMARY KEY, zone_id INTEGER NOT NULL, version INTEGER NOT NULL,
    operation INTEGER NOT NULL, name TEXT NOT NULL COLLATE NOCASE, rrtype TEXT NOT NULL COLLATE NOCASE,
    ttl INTEGER NOT NULL, rdata TEXT NOT NULL);
