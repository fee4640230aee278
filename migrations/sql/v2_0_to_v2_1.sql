-- Upgrade step 2.0 -> 2.1 (research/bind10.md a.2): index for NSEC3 lookups by hash and type.
CREATE INDEX nsec3_byhash_and_rdtype ON nsec3 (hash, rdtype);
DELETE FROM schema_version;
INSERT INTO schema_version (version, minor) VALUES (2, 1);
