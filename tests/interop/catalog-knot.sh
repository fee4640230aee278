#!/usr/bin/env bash
# Interop: Knot DNS 3.2 produces a catalog zone (RFC 9432, `catalog-role:
# generate`) and authd consumes it (`[[secondary]]` with `catalog = true`):
# each member Knot lists becomes a secondary zone of authd.
#
#   1. Knot serves catalog.example. (generated from the zones with
#      `catalog-role: member`) and three member zones, NOTIFY to authd;
#      authd transfers the catalog and then each member (SOA: exact serial,
#      AA flag);
#   2. a member with `catalog-group: signed` (Knot writes the group property)
#      lands in authd's `[[catalog.group]]` "signed", written to that group's
#      own DB, not the catalog's;
#   3. 1,000 members added in one Knot configuration transaction (one
#      catalog change): the time from the commit until authd answers all of
#      them is printed (a measurement; the step fails only at the timeout);
#   4. members removed (one, then 100 in one change): REFUSED at authd, and
#      their rows gone from the members' DB;
#   5. authd stopped; in Knot a member removed and added again, which gives
#      it a new unique label; authd started (and Knot's NOTIFY of the catalog
#      sent again, `knotc zone-notify`): the others are answered at once from
#      its DB with no new AXFR, and the re-added one is reset (its label
#      changed: deleted and transferred again by AXFR);
#   6. the remaining 900 bulk members removed in one change.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT)
# and a temporary folder; processes are stopped by PID; every wait is bounded
# (tests/interop/common.sh). Installs knot, dnsutils, sqlite3 and python3
# with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25500}"
KNOT_PORT="${KNOT_PORT:-25553}"
CATZ=catalog.example.
SERIAL=2024010101
BULK=1000

. tests/interop/common.sh
install_missing knotd=knot knotc=knot dig=dnsutils sqlite3=sqlite3 python3=python3
POLL="$PWD/tests/interop/soa-poll.py"

KNOTC=(knotc -s "$TMP/knot/run/knot.sock" -t 60)
ZONES="$TMP/knot/zones"
mkdir -p "$TMP/knot/run" "$TMP/knot/db" "$ZONES"

# member_file NAME: the zone file of member NAME (serial SERIAL).
member_file() {
  printf '$ORIGIN %s\n$TTL 300\n@ SOA ns1 hostmaster %s 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n' \
    "$1" "$SERIAL" > "$ZONES/$1zone"
}

# knot_tx COMMAND...: one Knot configuration transaction (conf-begin, the
# commands, conf-commit), read by one knotc from its standard input.
knot_tx() {
  local out
  out="$(printf '%s\n' conf-begin "$@" conf-commit | "${KNOTC[@]}" 2>&1)" ||
    fail "knotc transaction failed: $out"
  local bad
  bad="$(grep -iv '^OK$' <<<"$out" || true)"
  [ -z "$bad" ] || fail "knotc transaction: $(sed -n 1,5p <<<"$bad")"
}

# knot_labels: "label zone" for each member of Knot's catalog, by zone.
knot_labels() {
  dig +noall +answer +time=2 +tries=1 @127.0.0.1 -p "$KNOT_PORT" "$CATZ" AXFR |
    awk -v s=".zones.$CATZ" '$4 == "PTR" && index($1, s) { sub(s, "", $1); print $1, $5 }' | sort -k2
}
label_of() { # ZONE
  knot_labels | awk -v z="$1" '$2 == z { print $1 }'
}
# The conditions polled by wait_for (evaluated at each try).
knot_count() { [ "$(knot_labels | wc -l)" -eq "$1" ]; }    # N
knot_lists() { [ -n "$(label_of "$1")" ]; }               # ZONE
knot_group() { # ZONE GROUP: Knot's catalog has ZONE's group property GROUP
  local label
  label="$(label_of "$1")"
  [ -n "$label" ] &&
    [ "$(dig +tcp +short @127.0.0.1 -p "$KNOT_PORT" "group.$label.zones.$CATZ" TXT)" = "\"$2\"" ]
}

# served ZONE: authd answers ZONE's SOA authoritatively with serial SERIAL.
served() {
  local a
  a="$(dig +norec +time=2 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" "$1" SOA)"
  echo "$a" | grep -q "status: NOERROR" &&
    echo "$a" | grep -q "^;; flags: qr aa" &&
    [ "$(echo "$a" | awk '$4 == "SOA" { print $7 }')" = "$SERIAL" ]
}
refused() { # ZONE
  dig +norec +time=2 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" "$1" SOA | grep -q "status: REFUSED"
}
db_zones() { # DB: the zones in DB, one a line, sorted
  sqlite3 "$1" "select name from zones order by name"
}
db_count() { [ "$(db_zones "$1" | wc -l)" -eq "$2" ]; }   # DB N
db_is() { [ "$(db_zones "$1" | tr '\n' ' ')" = "$2 " ]; }   # DB LIST (space separated, sorted)
check_db() { # DB LIST
  db_is "$1" "$2" || fail "$(basename "$1") has zones '$(db_zones "$1" | tr '\n' ' ')', expected '$2 '"
}
not() { ! "$@"; }

# 1. Knot: the generated catalog and three members.
for z in m1.example. m2.example. m3.example. g1.example.; do member_file "$z"; done
cat > "$TMP/knot.conf" <<EOF
server:
    rundir: "$TMP/knot/run"
    listen: 127.0.0.1@$KNOT_PORT
log:
  - target: "$TMP/knot.log"
    any: info
database:
    storage: "$TMP/knot/db"
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: transfer_to_authd
    address: 127.0.0.1
    action: transfer
template:
  - id: default
    storage: "$ZONES"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
  - id: member
    storage: "$ZONES"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: changes
    acl: transfer_to_authd
    catalog-role: member
    catalog-zone: $CATZ
zone:
  - domain: $CATZ
    catalog-role: generate
    acl: transfer_to_authd
    notify: authd
  - domain: m1.example.
    template: member
  - domain: m2.example.
    template: member
  - domain: m3.example.
    template: member
EOF
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)
wait_for 20 "Knot's catalog lists 3 members" knot_count 3
# Knot answers queries for a catalog zone over TCP only (REFUSED over UDP).
CAT_SERIAL="$(dig +tcp +short +norec +time=2 +tries=1 @127.0.0.1 -p "$KNOT_PORT" "$CATZ" SOA | awk '{print $3}')"
[ -n "$CAT_SERIAL" ] || fail "no SOA serial for $CATZ from Knot"
echo "Knot's catalog, serial $CAT_SERIAL:"
knot_labels

cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[secondary]]
zone = "$CATZ"
catalog = true
primaries = ["127.0.0.1:$KNOT_PORT"]
file = "$TMP/members.sqlite3"
min_refresh = 1
[[catalog.group]]
name = "signed"
file = "$TMP/signed.sqlite3"
# Every query comes from 127.0.0.1, 1,000 at a time while the members are
# still REFUSED: rate limiting would drop later answers for up to a window.
[rrl]
enabled = false
EOF
start_authd
wait_for 20 "authd has the catalog, serial $CAT_SERIAL" has_serial "$AUTHD_PORT" "$CATZ" "$CAT_SERIAL"
for z in m1.example. m2.example. m3.example.; do
  wait_for 20 "authd serves $z serial $SERIAL with AA" served "$z"
done
grep -q "catalog members: 3 added, 0 removed, 0 reset, 0 moved, 0 regrouped; serving $CATZ 3" "$TMP/authd.log" ||
  fail "authd did not log the 3 members added"
check_db "$TMP/members.sqlite3" "$CATZ m1.example. m2.example. m3.example."
echo "ok: authd serves the 3 members of Knot's catalog"

# 2. A member of group "signed": written to the group's DB.
knot_tx "conf-set zone[g1.example.]" "conf-set zone[g1.example.].template member" \
  "conf-set zone[g1.example.].catalog-group signed"
wait_for 20 "Knot's catalog has g1.example. with group \"signed\"" knot_group g1.example. signed
wait_for 20 "authd serves g1.example. serial $SERIAL with AA" served g1.example.
check_db "$TMP/signed.sqlite3" "g1.example."
check_db "$TMP/members.sqlite3" "$CATZ m1.example. m2.example. m3.example."
echo "ok: g1.example. (group \"signed\") is served from the group's own DB"

# 3. 1,000 members in one change.
: > "$TMP/bulk.names"
cmds=()
for i in $(seq -w 1 "$BULK"); do
  z="b$i.example."
  member_file "$z"
  echo "$z" >> "$TMP/bulk.names"
  cmds+=("conf-set zone[$z]" "conf-set zone[$z].template member")
done
# The sets, then the commit alone: the clock starts at the commit.
out="$(printf '%s\n' conf-begin "${cmds[@]}" | "${KNOTC[@]}" 2>&1)" || fail "knotc: $out"
start="$(date +%s.%N)"
"${KNOTC[@]}" conf-commit >/dev/null || fail "knotc conf-commit of $BULK zones failed"
elapsed="$(python3 "$POLL" "$AUTHD_PORT" "$SERIAL" "$TMP/bulk.names" 120 "$start")" ||
  fail "authd did not serve all $BULK new members within 120 s: $elapsed"
echo "catalog: $BULK members served by authd in $elapsed s"
grep -E "catalog members: $BULK added" "$TMP/authd.log" || fail "authd did not log $BULK members added"
[ "$(knot_labels | wc -l)" -eq $((BULK + 4)) ] || fail "Knot's catalog does not list $((BULK + 4)) members"
[ "$(db_zones "$TMP/members.sqlite3" | wc -l)" -eq $((BULK + 4)) ] ||
  fail "members.sqlite3 does not hold the catalog and $((BULK + 3)) members"

# 4. Removals: m3, then b0001..b0100 in one change.
knot_tx "conf-unset zone[m3.example.]"
wait_for 20 "authd refuses m3.example." refused m3.example.
wait_for 10 "authd logs m3.example.'s data deleted" grep -q "catalog member m3.example.: data deleted" "$TMP/authd.log"
grep -qx m3.example. <<<"$(db_zones "$TMP/members.sqlite3")" && fail "members.sqlite3 still has m3.example."
served m1.example. || fail "m1.example. not served after m3's removal"
cmds=()
for i in $(seq -w 1 100); do cmds+=("conf-unset zone[b0$i.example.]"); done
knot_tx "${cmds[@]}"
wait_for 20 "authd refuses b0100.example." refused b0100.example.
for z in b0001.example. b0050.example. b0100.example.; do
  refused "$z" || fail "$z is not REFUSED: $(dig +norec @127.0.0.1 -p "$AUTHD_PORT" "$z" SOA)"
done
served b0101.example. || fail "b0101.example. not served after the removals"
grep -q "catalog members: 0 added, 100 removed, 0 reset, 0 moved, 0 regrouped; serving $CATZ $((BULK + 3 - 100))" "$TMP/authd.log" ||
  fail "authd did not log the 100 members removed"
wait_for 10 "members.sqlite3 lost the 100 removed members" db_count "$TMP/members.sqlite3" $((BULK + 3 - 100))
grep -qx 'b00[0-9][0-9]\.example\.\|b0100\.example\.' <<<"$(db_zones "$TMP/members.sqlite3")" &&
  fail "members.sqlite3 still has one of b0001..b0100"
echo "ok: removed members are REFUSED and their data deleted"

# 5. authd stopped; m1 removed and added again in Knot (a new label); authd
#    started again.
old_label="$(label_of m1.example.)"
kill "${PIDS[-1]}" && wait "${PIDS[-1]}" 2>/dev/null || true
unset 'PIDS[-1]'
mv "$TMP/authd.log" "$TMP/authd-before-restart.log"
knot_tx "conf-unset zone[m1.example.]"
wait_for 10 "Knot's catalog drops m1.example." not knot_lists m1.example.
knot_tx "conf-set zone[m1.example.]" "conf-set zone[m1.example.].template member"
wait_for 10 "Knot's catalog lists m1.example. again" knot_lists m1.example.
new_label="$(label_of m1.example.)"
[ "$new_label" != "$old_label" ] || fail "Knot kept m1.example.'s label $old_label"
echo "Knot: m1.example. label $old_label -> $new_label"
start_authd
# Served at once, from the DB (no wait_for).
for z in m2.example. g1.example. b0101.example. "b$BULK.example."; do
  served "$z" || fail "$z not served right after the restart"
done
# Knot's NOTIFY of the change found authd stopped, and the catalog's SOA
# refresh is an hour: Knot notifies again, as an operator would.
"${KNOTC[@]}" zone-notify "$CATZ" >/dev/null || fail "knotc zone-notify $CATZ failed"
wait_for 20 "authd resets m1.example." grep -q \
  "catalog zone $CATZ: member m1.example.: label $old_label -> $new_label: resetting it" "$TMP/authd.log"
wait_for 20 "authd transfers m1.example. again by AXFR" grep -q \
  "secondary zone m1.example.: AXFR from 127.0.0.1:$KNOT_PORT: serial none -> $SERIAL" "$TMP/authd.log"
wait_for 10 "authd serves m1.example." served m1.example.
python3 "$POLL" "$AUTHD_PORT" "$SERIAL" <(sed -n '101,$p' "$TMP/bulk.names") 10 >/dev/null ||
  fail "not every remaining bulk member is served after the restart"
others="$(grep "AXFR from" "$TMP/authd.log" | grep -v "secondary zone \(m1.example.\|$CATZ\):" || true)"
[ -z "$others" ] || fail "AXFRs after the restart besides m1.example.: $others"
echo "ok: after the restart the members were served from the DB without AXFR, m1.example. was reset"

# 6. The remaining bulk members removed in one change.
cmds=()
for i in $(seq 101 "$BULK"); do cmds+=("conf-unset zone[b$(printf '%04d' "$i").example.]"); done
knot_tx "${cmds[@]}"
wait_for 30 "authd refuses b$BULK.example." refused "b$BULK.example."
wait_for 30 "members.sqlite3 holds the catalog, m1 and m2" \
  db_is "$TMP/members.sqlite3" "$CATZ m1.example. m2.example."
refused b0101.example. || fail "b0101.example. is not REFUSED"
for z in m1.example. m2.example. g1.example.; do served "$z" || fail "$z not served at the end"; done
check_db "$TMP/signed.sqlite3" "g1.example."
echo "ok: the other 900 bulk members removed in one change"

echo "--- authd log (catalog)"
grep -h "catalog" "$TMP/authd-before-restart.log" "$TMP/authd.log" |
  grep -v "removed; its data will be deleted\|data deleted\|reload: serving" | cut -c1-300
echo "OK: authd consumed Knot's catalog: members added (1 group member, $BULK in one change in $elapsed s), removed, reset on a new label, served across a restart"
