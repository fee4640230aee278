-- authd's own table beside BIND 10's schema (BIND 10 and authd's schema
-- checks ignore it): the member zones a catalog consumer provisioned from
-- each catalog zone (RFC 9432), so that a member whose unique label changed
-- while authd was down is still reset (section 5.5), and one removed is
-- still deleted. Created when first written.
--   zone     the member zone apex, absolute, as in zones.name
--   catalog  the catalog zone apex it belongs to
--   label    its unique label in that catalog (the <unique-N> of section 4.3.1)
--   groups   its group property's values (section 4.4.2), one per line
CREATE TABLE IF NOT EXISTS authd_catalog_member (
    zone TEXT PRIMARY KEY,
    catalog TEXT NOT NULL,
    label TEXT NOT NULL,
    groups TEXT NOT NULL DEFAULT ''
);
