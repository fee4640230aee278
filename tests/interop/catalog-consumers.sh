#!/usr/bin/env bash
# Interop: authd PRODUCES a catalog zone (RFC 9432, `[[catalog]]`) and Knot
# DNS 3.2 (`catalog-role: interpret`) and BIND 9.18 (`catalog-zones`) consume
# it: each serves every zone of authd's DB without being told its name.
#
#   1. authd serves catalog.example. (made at start) and m1, m2, m3.example.
#      from one sqlite3 DB; Knot and named follow the catalog and transfer
#      every member (SOA at each: NOERROR, AA, serial 2);
#   2. `zone create` of m4.example. at authd: the catalog moves (NOTIFY), both
#      serve m4;
#   3. `zone delete` of m2.example.: both answer REFUSED for it (Knot logs
#      "zone purged", named "catz: deleting zone 'm2.example'");
#   4. a `group` property "signed" added to m1.example.'s label by nsupdate:
#      Knot 3.2 maps it to its catalog template "signed" (a forced flush
#      writes m1's zone file into that template's own folder, m3's into the
#      other); BIND 9.18 has no group property and logs the TXT "invalid
#      record in catalog zone ... - ignoring", serving m1 as before;
#   5. authd restarted: the catalog's labels are unchanged, and after the next
#      catalog change (m5.example. created) neither consumer removes or
#      resets a member (their logs name only m5 added), and authd transfers
#      nothing but the catalog and m5;
#   6. 1,000 zones inserted into authd's DB in one sqlite3 transaction (the
#      BIND 10 schema, migrations/sql/create_2_2.sql): one catalog change;
#      the time until Knot and named serve all of them is printed (a
#      measurement; the step fails only at the 180 s timeout). named is left
#      at its defaults: its first SOA query of each new member is held to
#      `serial-query-rate` (20 a second), so 1,000 members take it about
#      50 s (4.4 s with `serial-query-rate 1000`); Knot takes 2.5-5 s.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT,
# KNOT_PORT, NAMED_PORT) and a temporary folder; processes are stopped by
# PID; every wait is bounded (tests/interop/common.sh). Installs knot, bind9,
# dnsutils, sqlite3 and python3 with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25520}"
KNOT_PORT="${KNOT_PORT:-25521}"
NAMED_PORT="${NAMED_PORT:-25522}"
CATZ=catalog.example.
SERIAL=2   # every member's serial: created with 1, `zone update` moves it to 2
BULK=1000
BULK_TIMEOUT=180

. tests/interop/common.sh
install_missing knotd=knot named=bind9 dig=dnsutils nsupdate=dnsutils sqlite3=sqlite3 python3=python3
NAMED="$(command -v named)"
POLL="$PWD/tests/interop/soa-poll.py"
KNOTC=(knotc -s "$TMP/knot/run/knot.sock" -t 30)
DB="$TMP/zones.sqlite3"

# new_zone NAME: NAME created in authd's DB (NS, A records; serial SERIAL).
new_zone() {
  "$BIN/zone" create --db "$DB" "$1" --ns "ns1.$1" --serial 1 >/dev/null
  "$BIN/zone" update --db "$DB" "$1" --add "ns1 300 A 192.0.2.1" --add "www 300 A 192.0.2.80" >/dev/null
}

# soa_at PORT ZONE: the full dig answer of ZONE's SOA at PORT.
soa_at() { dig +norec +time=2 +tries=1 @127.0.0.1 -p "$1" "$2" SOA; }
# served PORT ZONE: ZONE's SOA answered NOERROR, with AA, serial SERIAL.
served() {
  local a
  a="$(soa_at "$1" "$2")"
  grep -q "status: NOERROR" <<<"$a" && grep -q "^;; flags: qr aa" <<<"$a" &&
    [ "$(awk '$4 == "SOA" { print $7 }' <<<"$a")" = "$SERIAL" ]
}
rcode_is() { # PORT ZONE RCODE
  soa_at "$1" "$2" | grep -q "status: $3,"
}
check_served() { # ZONE: served by both consumers
  served "$KNOT_PORT" "$1" || fail "Knot does not serve $1: $(soa_at "$KNOT_PORT" "$1")"
  served "$NAMED_PORT" "$1" || fail "named does not serve $1: $(soa_at "$NAMED_PORT" "$1")"
}
# labels PORT: "label zone" of each member of the catalog at PORT, by zone.
labels() {
  dig +noall +answer +time=2 +tries=1 @127.0.0.1 -p "$1" "$CATZ" AXFR |
    awk -v s=".zones.$CATZ" '$4 == "PTR" && index($1, s) { sub(s, "", $1); print $1, $5 }' | sort -k2
}
cat_serial() { dig +tcp +short +norec +time=2 +tries=1 @127.0.0.1 -p "$1" "$CATZ" SOA | awk '{print $3}'; }
knot_updates_past() { # N: Knot has logged more than N catalog updates
  [ "$(grep -c "catalog, updating" "$TMP/knot.log")" -gt "$1" ]
}

# 1. authd: the catalog and three members.
for z in m1.example. m2.example. m3.example.; do new_zone "$z"; done
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[datasource]]
type = "sqlite3"
file = "$DB"
[[catalog]]
origin = "$CATZ"
file = "$DB"
[transfer]
allow = ["127.0.0.1"]
[update]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$KNOT_PORT", "127.0.0.1:$NAMED_PORT"]
# Every query comes from 127.0.0.1, 1,000 at a time: no rate limiting.
[rrl]
enabled = false
EOF
start_authd
wait_for 10 "authd serves $CATZ" has_serial "$AUTHD_PORT" "$CATZ" "$(cat_serial "$AUTHD_PORT")"
CAT_SERIAL="$(cat_serial "$AUTHD_PORT")"
[ -n "$CAT_SERIAL" ] || fail "no SOA serial for $CATZ from authd"
[ "$(labels "$AUTHD_PORT" | awk '{print $2}' | tr '\n' ' ')" = "m1.example. m2.example. m3.example. " ] ||
  fail "authd's catalog does not list m1, m2, m3: $(labels "$AUTHD_PORT")"
echo "authd's catalog, serial $CAT_SERIAL:"
labels "$AUTHD_PORT"

# Knot: the catalog interpreted; members from the template "member", or
# "signed" for group "signed" (zone files synced into knot/signed).
mkdir -p "$TMP/knot/signed"
{
  knot_conf_head "$KNOT_PORT" | sed -n '/^template:/q;p'
  cat <<KNOT
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: notify_from_authd
    address: 127.0.0.1
    action: notify
template:
  - id: default
    storage: "$TMP/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
  - id: member
    storage: "$TMP/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
    master: authd
    acl: notify_from_authd
  - id: signed
    storage: "$TMP/knot/signed"
    file: "%s.zone"
    zonefile-sync: 0
    zonefile-load: none
    journal-content: all
    master: authd
    acl: notify_from_authd
zone:
  - domain: $CATZ
    master: authd
    acl: notify_from_authd
    catalog-role: interpret
    catalog-template: [ member, signed ]
KNOT
} > "$TMP/knot.conf"
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)

# named: the catalog as a secondary zone, listed in catalog-zones.
mkdir -p "$TMP/named/catz"
named_conf_head "$NAMED_PORT" xfer-in > "$TMP/named.conf"
sed -i "s|^    notify no;|&\n    allow-new-zones yes;\n    catalog-zones { zone \"$CATZ\" default-primaries { 127.0.0.1 port $AUTHD_PORT; } zone-directory \"$TMP/named/catz\" min-update-interval 1; };|" \
  "$TMP/named.conf"
cat >> "$TMP/named.conf" <<EOF
zone "$CATZ" {
    type secondary;
    file "catalog.db";
    primaries { 127.0.0.1 port $AUTHD_PORT; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
PIDS+=($!)

for z in m1.example. m2.example. m3.example.; do
  wait_for 30 "Knot serves $z serial $SERIAL with AA" served "$KNOT_PORT" "$z"
  wait_for 30 "named serves $z serial $SERIAL with AA" served "$NAMED_PORT" "$z"
done
echo "ok: Knot and named serve the 3 members of authd's catalog"

# 2. A member created at authd.
new_zone m4.example.
wait_for 10 "authd logs m4.example. added" grep -q "added m4.example. (label" "$TMP/authd.log"
wait_for 20 "Knot serves m4.example." served "$KNOT_PORT" m4.example.
wait_for 20 "named serves m4.example." served "$NAMED_PORT" m4.example.
echo "ok: m4.example., created at authd, is served by both"

# 3. A member deleted at authd.
"$BIN/zone" delete --db "$DB" m2.example. >/dev/null
wait_for 10 "authd logs m2.example. removed" grep -q "removed m2.example." "$TMP/authd.log"
wait_for 20 "Knot answers REFUSED for m2.example." rcode_is "$KNOT_PORT" m2.example. REFUSED
wait_for 20 "named answers REFUSED for m2.example." rcode_is "$NAMED_PORT" m2.example. REFUSED
for z in m1.example. m3.example. m4.example.; do check_served "$z"; done
wait_for 10 "Knot logs m2.example. purged" grep -q "notice: \[m2.example.\] zone purged" "$TMP/knot.log"
wait_for 10 "named logs m2.example deleted" \
  grep -q "catz: deleting zone 'm2.example' from catalog 'catalog.example' - success" "$TMP/named.log"
echo "ok: m2.example., deleted at authd, is REFUSED by both"

# 4. A group property by UPDATE.
M1_LABEL="$(labels "$AUTHD_PORT" | awk '$2 == "m1.example." { print $1 }')"
knot_updates="$(grep -c "catalog, updating" "$TMP/knot.log")"
nsupdate <<EOF || fail "nsupdate of the group property failed"
server 127.0.0.1 $AUTHD_PORT
zone $CATZ
update add group.$M1_LABEL.zones.$CATZ 0 TXT "signed"
send
EOF
wait_for 10 "named logs the group property ignored" grep -q \
  "catz: invalid record in catalog zone - group.$M1_LABEL.zones.${CATZ%.} IN TXT (failure) - ignoring" "$TMP/named.log"
# Knot: "catalog, updating, 1 changes" (the group), and m1 then has the
# template "signed": a flush writes its zone file into knot/signed, where
# m3's (template "member") is not written.
wait_for 10 "Knot applies the catalog change of the group" knot_updates_past "$knot_updates"
"${KNOTC[@]}" -f zone-flush m1.example. m3.example. >/dev/null || fail "knotc zone-flush failed"
wait_for 10 "Knot writes m1.example. with template \"signed\"" test -s "$TMP/knot/signed/m1.example.zone"
wait_for 10 "Knot writes m3.example. with template \"member\"" test -s "$TMP/knot/zones/m3.example.zone"
[ ! -e "$TMP/knot/signed/m3.example.zone" ] || fail "Knot wrote m3.example. with template \"signed\""
served "$KNOT_PORT" m1.example. || fail "Knot does not serve m1.example. after its group change"
check_served m1.example.
echo "ok: group \"signed\" set by nsupdate maps m1.example. to Knot's template \"signed\""

# 5. authd restarted: labels kept, no member reset.
before="$(labels "$AUTHD_PORT")"
kill "${PIDS[0]}" && wait "${PIDS[0]}" 2>/dev/null || true
mv "$TMP/authd.log" "$TMP/authd-before-restart.log"
start_authd
PIDS[0]="${PIDS[-1]}"
unset 'PIDS[-1]'
after="$(labels "$AUTHD_PORT")"
[ "$before" = "$after" ] || fail "the catalog's labels changed across the restart: $before / $after"
knot_lines="$(wc -l < "$TMP/knot.log")"
named_lines="$(wc -l < "$TMP/named.log")"
new_zone m5.example.
wait_for 20 "Knot serves m5.example." served "$KNOT_PORT" m5.example.
wait_for 20 "named serves m5.example." served "$NAMED_PORT" m5.example.
for z in m1.example. m3.example. m4.example.; do check_served "$z"; done
# Since the restart: each consumer added m5 and changed no other member
# (no removal, no reset), and nothing but the catalog and m5 was transferred.
knot_since="$(tail -n +"$((knot_lines + 1))" "$TMP/knot.log")"
named_since="$(tail -n +"$((named_lines + 1))" "$TMP/named.log")"
echo "--- Knot and named after the restart"
grep -i "catalog" <<<"$knot_since" || true
grep "catz" <<<"$named_since" || true
got="$(grep -E "from catalog|zone purged" <<<"$knot_since" | sed 's/^.*info: //')"
[ "$got" = "[m5.example.] zone added from catalog" ] ||
  fail "Knot's member changes after authd's restart: '$got', expected only m5.example. added"
got="$(grep -E "catz: (adding|deleting|modifying) zone|unique label" <<<"$named_since" | sed 's/^.*catz: //')"
[ "$got" = "adding zone 'm5.example' from catalog 'catalog.example' - success" ] ||
  fail "named's member changes after authd's restart: '$got', expected only m5.example added"
got="$(grep -oE "(AXFR|IXFR) of [^ ]+" "$TMP/authd.log" | sort -u | tr '\n' ' ')"
case "$got" in
  "AXFR of m5.example. IXFR of catalog.example. " | "AXFR of catalog.example. AXFR of m5.example. IXFR of catalog.example. ") ;;
  *) fail "transfers from authd after its restart: '$got', expected the catalog's and m5.example.'s only" ;;
esac
echo "ok: after authd's restart the labels are unchanged and no member was reset"

# 6. 1,000 zones in one sqlite3 transaction.
: > "$TMP/bulk.names"
{
  echo "BEGIN;"
  for i in $(seq -w 1 "$BULK"); do
    z="b$i.example."
    echo "$z" >> "$TMP/bulk.names"
    echo "INSERT INTO zones (name, rdclass, dnssec) VALUES ('$z', 'IN', 0);"
    echo "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) VALUES
  (last_insert_rowid(), '$z', 'example.b$i.', 300, 'SOA', NULL, 'ns1.$z hostmaster.$z $SERIAL 3600 600 86400 60');"
    echo "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) SELECT id, '$z', 'example.b$i.', 300, 'NS', NULL, 'ns1.$z' FROM zones WHERE name = '$z';"
    echo "INSERT INTO records (zone_id, name, rname, ttl, rdtype, sigtype, rdata) SELECT id, 'ns1.$z', 'example.b$i.ns1.', 300, 'A', NULL, '192.0.2.1' FROM zones WHERE name = '$z';"
  done
  echo "COMMIT;"
} > "$TMP/bulk.sql"
start="$(date +%s.%N)"
sqlite3 "$DB" < "$TMP/bulk.sql" || fail "the bulk insert failed"
python3 "$POLL" "$KNOT_PORT" "$SERIAL" "$TMP/bulk.names" "$BULK_TIMEOUT" "$start" > "$TMP/poll-knot.txt" &
knot_poll=$!
PIDS+=($knot_poll)
python3 "$POLL" "$NAMED_PORT" "$SERIAL" "$TMP/bulk.names" "$BULK_TIMEOUT" "$start" > "$TMP/poll-named.txt" &
named_poll=$!
PIDS+=($named_poll)
wait "$knot_poll" || fail "Knot did not serve all $BULK new members within $BULK_TIMEOUT s: $(cat "$TMP/poll-knot.txt")"
wait "$named_poll" || fail "named did not serve all $BULK new members within $BULK_TIMEOUT s: $(cat "$TMP/poll-named.txt")"
grep "catalog $CATZ: serial .*, added b0001.example. (label" "$TMP/authd.log" | grep -q "b$BULK.example. (label" ||
  fail "authd did not log the $BULK members added in one catalog change"
echo "catalog: $BULK members served by knot in $(cat "$TMP/poll-knot.txt") s, by bind in $(cat "$TMP/poll-named.txt") s"
[ "$(labels "$AUTHD_PORT" | wc -l)" -eq $((BULK + 4)) ] || fail "authd's catalog does not list $((BULK + 4)) members"
for z in m1.example. m3.example. m4.example. m5.example.; do check_served "$z"; done

echo "--- authd log (catalog)"
grep -h "catalog::producer" "$TMP/authd-before-restart.log" "$TMP/authd.log" | cut -c1-300
echo "OK: Knot and named consumed authd's catalog: members served, one created and one deleted (REFUSED), a group mapped by Knot, labels kept across a restart, $BULK added in one transaction"
