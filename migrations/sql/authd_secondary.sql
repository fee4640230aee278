-- authd's own table beside BIND 10's schema (BIND 10 and authd's schema
-- checks ignore it): the secondary role's state per zone, so that its timers
-- survive a restart (RFC 1035 section 4.3.5). Created when first written.
--   zone     the zone apex, absolute, as in zones.name
--   last_ok  Unix time (seconds) of the last successful refresh, or NULL
--   expired  1 when the copy expired (no primary answered for SOA EXPIRE)
--   pending  1 while a transfer is under way (retried at start when set)
CREATE TABLE IF NOT EXISTS authd_secondary (
    zone TEXT PRIMARY KEY,
    last_ok INTEGER,
    expired INTEGER NOT NULL DEFAULT 0,
    pending INTEGER NOT NULL DEFAULT 0
);
