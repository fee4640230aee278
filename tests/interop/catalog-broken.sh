#!/usr/bin/env bash
# Interop: authd's catalog consumer (RFC 9432) on catalogs no real producer
# writes: an authd primary serves a hand-written catalog zone from a master
# file (SIGHUP after each edit: the new serial, NOTIFY), a second authd
# consumes it (`[[secondary]]` with `catalog = true`).
#
#   1. the catalog lists a.example., b.example., c.example., a member PTR to
#      the root, and local.example., which the consumer also has as its own
#      `[[secondary]]`: a, b, c served; the root one left out ("cannot be a
#      zone of its own"); local.example. served from the local configuration
#      (its own DB), never as a member;
#   2. a.example.'s label changed (a1 -> a2): reset (deleted, AXFR again);
#   3. broken catalogs, each served in turn with b.example. also dropped:
#      version "1", no version, two PTRs at one label: each logged once
#      ("broken: …; not processed, its 3 member(s) keep serving as they
#      were"), and a, b, c keep answering;
#      the consumer restarted after 1. and with the last broken catalog in
#      its DB: the members are answered at once, from its DBs, without AXFR;
#   4. a good catalog without b.example.: b is REFUSED and its data deleted.
#
# Everything runs on 127.0.0.1 with unprivileged ports (PRIMARY_PORT,
# AUTHD_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded (tests/interop/common.sh). Installs dnsutils and sqlite3
# with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

PRIMARY_PORT="${PRIMARY_PORT:-25510}"
AUTHD_PORT="${AUTHD_PORT:-25511}"
CATZ=catalog.example.

. tests/interop/common.sh
install_missing dig=dnsutils sqlite3=sqlite3

# 1. The primary: the catalog and its member zones from master files.
for z in a b c local; do
  printf '$ORIGIN %s.example.\n$TTL 300\n@ SOA ns1 hostmaster 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n' \
    "$z" > "$TMP/$z.zone"
done
CAT_SERIAL=1
# catalog BODY: writes the catalog zone with the next serial and BODY
# (records relative to the catalog's apex), and makes the primary reload it.
catalog() {
  CAT_SERIAL=$((CAT_SERIAL + 1))
  printf '$ORIGIN %s\n$TTL 0\n@ SOA invalid. invalid. %s 3600 600 2419200 0\n@ NS invalid.\n%s\n' \
    "$CATZ" "$CAT_SERIAL" "$1" > "$TMP/catalog.zone"
  if [ -n "${PRIMARY_PID:-}" ]; then
    kill -HUP "$PRIMARY_PID"
    wait_for 10 "the primary serves catalog serial $CAT_SERIAL" has_serial "$PRIMARY_PORT" "$CATZ" "$CAT_SERIAL"
    wait_for 10 "the consumer has catalog serial $CAT_SERIAL" has_serial "$AUTHD_PORT" "$CATZ" "$CAT_SERIAL"
  fi
}
GOOD='version TXT "2"
a1.zones PTR a.example.
b1.zones PTR b.example.
c1.zones PTR c.example.
r1.zones PTR .
l1.zones PTR local.example.'
catalog "$GOOD"
cat > "$TMP/primary.toml" <<EOF
listen = ["127.0.0.1:$PRIMARY_PORT"]
[[datasource]]
type = "memory"
zones = [
  { origin = "$CATZ", file = "$TMP/catalog.zone" },
  { origin = "a.example.", file = "$TMP/a.zone" },
  { origin = "b.example.", file = "$TMP/b.zone" },
  { origin = "c.example.", file = "$TMP/c.zone" },
  { origin = "local.example.", file = "$TMP/local.zone" },
]
[transfer]
allow = ["127.0.0.1"]
[notify]
targets = ["127.0.0.1:$AUTHD_PORT"]
EOF
"$BIN/authd" --config "$TMP/primary.toml" >"$TMP/primary.log" 2>&1 &
PRIMARY_PID=$!
PIDS+=($PRIMARY_PID)
wait_for 30 "the primary listening" grep -q "listening on" "$TMP/primary.log"

# The consumer.
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[secondary]]
zone = "$CATZ"
catalog = true
primaries = ["127.0.0.1:$PRIMARY_PORT"]
file = "$TMP/members.sqlite3"
min_refresh = 1
[[secondary]]
zone = "local.example."
primaries = ["127.0.0.1:$PRIMARY_PORT"]
file = "$TMP/local.sqlite3"
EOF
start_authd

# served ZONE: the consumer answers ZONE's SOA authoritatively, serial 7.
served() {
  local a
  a="$(dig +norec +time=2 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" "$1" SOA)"
  echo "$a" | grep -q "status: NOERROR" && echo "$a" | grep -q "^;; flags: qr aa" &&
    [ "$(echo "$a" | awk '$4 == "SOA" { print $7 }')" = 7 ]
}
refused() { # ZONE
  dig +norec +time=2 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" "$1" SOA | grep -q "status: REFUSED"
}
db_zones() { # DB: its zones, space separated, sorted
  sqlite3 "$1" "select name from zones order by name" | tr '\n' ' '
}
# logged_once TEXT: the consumer's log has TEXT (a fixed string) exactly once.
logged_once() {
  local n
  n="$(grep -cF -- "$1" "$TMP/authd.log" || true)"
  [ "$n" -eq 1 ] || fail "authd logged '$1' $n times, not once"
}

wait_for 20 "the consumer has catalog serial $CAT_SERIAL" has_serial "$AUTHD_PORT" "$CATZ" "$CAT_SERIAL"
for z in a.example. b.example. c.example. local.example.; do
  wait_for 20 "the consumer serves $z" served "$z"
done
logged_once "catalog zone $CATZ: member label r1: member . cannot be a zone of its own (the root, or inside the catalog); ignored"
logged_once "catalog zone $CATZ: member label l1: zone local.example. is also configured locally; the local configuration wins"
logged_once "catalog members: 3 added, 0 removed, 0 reset, 0 moved, 0 regrouped; serving $CATZ 3"
[ "$(db_zones "$TMP/members.sqlite3")" = "a.example. b.example. c.example. $CATZ " ] ||
  fail "members.sqlite3 has $(db_zones "$TMP/members.sqlite3")"
[ "$(db_zones "$TMP/local.sqlite3")" = "local.example. " ] ||
  fail "local.sqlite3 has $(db_zones "$TMP/local.sqlite3")"
echo "ok: a, b, c served as members; the root member left out; local.example. from its own [[secondary]]"

# restart_consumer N: stops the consumer (its log kept as authd-N.log) and
# starts it again; its members must be answered at once, from its DBs.
restart_consumer() {
  kill "${PIDS[-1]}" && wait "${PIDS[-1]}" 2>/dev/null || true
  unset 'PIDS[-1]'
  mv "$TMP/authd.log" "$TMP/authd-$1.log"
  start_authd
  for z in a.example. b.example. c.example. local.example.; do
    served "$z" || fail "$z not served right after the consumer's restart"
  done
  ! grep "AXFR from" "$TMP/authd.log" || fail "the consumer transferred zones again after its restart"
}
restart_consumer 1
echo "ok: after a restart the members are served at once from the DB, without AXFR"

# 2. A new label for a.example.: reset.
catalog "${GOOD/a1.zones/a2.zones}"
wait_for 10 "the consumer resets a.example." grep -qF \
  "catalog zone $CATZ: member a.example.: label a1 -> a2: resetting it (RFC 9432 §5.5)" "$TMP/authd.log"
wait_for 10 "the consumer transfers a.example. again" grep -q \
  "secondary zone a.example.: AXFR from 127.0.0.1:$PRIMARY_PORT: serial none -> 7" "$TMP/authd.log"
wait_for 10 "the consumer serves a.example." served a.example.
logged_once "catalog members: 0 added, 0 removed, 1 reset, 0 moved, 0 regrouped; serving $CATZ 3"
echo "ok: a.example. reset on its new label"
GOOD="${GOOD/a1.zones/a2.zones}"
WITHOUT_B="$(echo "$GOOD" | grep -v '^b1\.zones')"

# 3. Broken catalogs (and b.example. dropped from each): not processed.
keep_serving() {
  for z in a.example. b.example. c.example. local.example.; do
    served "$z" || fail "$z not served with a broken catalog"
  done
}
broken() { # WHAT BODY LOGGED
  catalog "$2"
  wait_for 10 "the consumer logs the broken catalog ($1)" grep -qF "$3" "$TMP/authd.log"
  keep_serving
  # The same catalog once more (a new serial): not logged again.
  catalog "$2"
  sleep 0.5
  logged_once "$3"
  keep_serving
  echo "ok: broken catalog ($1) not processed, members kept"
}
KEPT="not processed, its 3 member(s) keep serving as they were"
broken 'version "1"' "${WITHOUT_B/version TXT \"2\"/version TXT \"1\"}" \
  "catalog zone $CATZ: broken: version.$CATZ TXT is [\"1\"], not \"2\" (RFC 9432 §4.2); $KEPT"
broken 'no version' "$(echo "$WITHOUT_B" | grep -v '^version')" \
  "catalog zone $CATZ: broken: no version.$CATZ TXT record (RFC 9432 §4.2 asks for \"2\"); $KEPT"
broken 'two PTRs at one label' "$WITHOUT_B
c1.zones PTR d.example." \
  "catalog zone $CATZ: broken: member label c1 has 2 PTR records (RFC 9432 §4.3.1 allows one); $KEPT"
grep -q "b.example.: data deleted" "$TMP/authd.log" && fail "b.example.'s data was deleted from a broken catalog"
# A restart with the broken catalog in the DB: the members still serve.
restart_consumer 2
logged_once "catalog zone $CATZ: broken: member label c1 has 2 PTR records (RFC 9432 §4.3.1 allows one); $KEPT"
echo "ok: after a restart with the broken catalog the members still serve"

# 4. A good catalog without b.example.: removed.
catalog "$WITHOUT_B"
wait_for 10 "the consumer refuses b.example." refused b.example.
wait_for 10 "the consumer deletes b.example.'s data" grep -q "catalog member b.example.: data deleted" "$TMP/authd.log"
logged_once "catalog members: 0 added, 1 removed, 0 reset, 0 moved, 0 regrouped; serving $CATZ 2"
[ "$(db_zones "$TMP/members.sqlite3")" = "a.example. c.example. $CATZ " ] ||
  fail "members.sqlite3 has $(db_zones "$TMP/members.sqlite3")"
for z in a.example. c.example. local.example.; do served "$z" || fail "$z not served at the end"; done
echo "ok: b.example. removed once the catalog is good again"

echo "--- consumer log (catalog)"
grep -E "catalog|AXFR" "$TMP/authd.log"
echo "OK: authd's catalog consumer left out a root member and a locally configured one, reset a relabelled member, kept serving through three broken catalogs (each logged once) and removed a member once the catalog was good"
