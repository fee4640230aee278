-- Upgrade step 2.1 -> 2.2 (research/bind10.md a.2, BIND ticket #1756): index for
-- record lookups by reversed name and type.
CREATE INDEX records_byrname_and_rdtype ON records (rname, rdtype);
DELETE FROM schema_version;
INSERT INTO schema_version (version, minor) VALUES (2, 2);
