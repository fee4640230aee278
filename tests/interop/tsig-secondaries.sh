#!/usr/bin/env bash
# Interop: Knot DNS and BIND 9 follow zones from authd under TSIG (RFC 8945).
#
#   1. authd serves example.org and example.net from an sqlite3 DB; transfers
#      are allowed only with the key xfr-key. (`[transfer] allow = ["key
#      xfr-key."]`); NOTIFY for example.org goes to both secondaries, signed;
#   2. Knot and named are secondaries of example.org with the key (their SOA
#      queries and transfers signed) and of example.net without it;
#   3. both transfer example.org by AXFR, signed, and are refused example.net
#      (authd logs the refusal of an unsigned AXFR; neither has the zone);
#   4. a `zone update` bumps example.org; authd sends both a signed NOTIFY, and
#      verifies their signed replies; both catch up by IXFR and answer the
#      changed name exactly as authd does.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT, KNOT_PORT,
# NAMED_PORT) and a temporary folder; processes are stopped by PID; every
# wait is bounded. Installs knot, bind9, dnsutils and sqlite3 with apt-get
# when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25310}"
KNOT_PORT="${KNOT_PORT:-25363}"
NAMED_PORT="${NAMED_PORT:-25364}"

need=()
command -v knotd >/dev/null 2>&1 || need+=(knot)
command -v named >/dev/null 2>&1 || need+=(bind9)
command -v dig >/dev/null 2>&1 || need+=(dnsutils)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
NAMED="$(command -v named)"

cargo build --quiet -p authd --bins
BIN="${CARGO_TARGET_DIR:-target}/debug"
BIN="$(cd "$BIN" && pwd)"

TMP="$(mktemp -d)"
AUTHD_PID=""
KNOT_PID=""
NAMED_PID=""
stop() { # PID
  [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
}
cleanup() {
  stop "$NAMED_PID"
  stop "$KNOT_PID"
  stop "$AUTHD_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- authd log" >&2; cat "$TMP/authd.log" >&2 || true
  echo "--- knot log" >&2; cat "$TMP/knot.log" >&2 || true
  echo "--- named log" >&2; cat "$TMP/named.log" "$TMP/named.out" >&2 || true
  exit 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local secs="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -ge "$deadline" ] && fail "$what (waited ${secs} s)"
    sleep 0.2
  done
}

serial_at() { # PORT ZONE
  dig +short +norec +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" SOA | awk '{print $3}'
}
has_serial() { # PORT ZONE SERIAL
  [ "$(serial_at "$1" "$2")" = "$3" ]
}

# 1. The key, the zones and authd.
"$BIN/authd" keygen xfr-key. > "$TMP/key.toml"
SECRET="$(sed -n 's/^secret = "\(.*\)"$/\1/p' "$TMP/key.toml")"
[ -n "$SECRET" ] || fail "authd keygen printed no secret"
DB="$TMP/zones.sqlite3"
for zone in example.org example.net; do
  "$BIN/zone" create --db "$DB" "$zone" --ns "ns1.$zone." --serial 1
  "$BIN/zone" update --db "$DB" "$zone" --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.1"
done
echo "listen = [\"127.0.0.1:$AUTHD_PORT\"]" > "$TMP/authd.toml"
cat "$TMP/key.toml" >> "$TMP/authd.toml"
cat >> "$TMP/authd.toml" <<EOF
[[datasource]]
type = "sqlite3"
file = "$DB"
[transfer]
allow = ["key xfr-key."]
[[notify.zone]]
origin = "example.org."
targets = ["127.0.0.1:$KNOT_PORT key xfr-key.", "127.0.0.1:$NAMED_PORT key xfr-key."]
EOF
"$BIN/authd" --config "$TMP/authd.toml" >"$TMP/authd.log" 2>&1 &
AUTHD_PID=$!
wait_for 30 "authd listening" grep -q "listening on" "$TMP/authd.log"

# 2. Knot: example.org from authd with the key, example.net without.
mkdir -p "$TMP/knot/run" "$TMP/knot/db" "$TMP/knot/zones"
cat > "$TMP/knot.conf" <<EOF
server:
    rundir: "$TMP/knot/run"
    listen: 127.0.0.1@$KNOT_PORT
log:
  - target: "$TMP/knot.log"
    any: info
database:
    storage: "$TMP/knot/db"
key:
  - id: xfr-key.
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: authd_signed
    address: 127.0.0.1@$AUTHD_PORT
    key: xfr-key.
  - id: authd_unsigned
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: notify_from_authd
    address: 127.0.0.1
    key: xfr-key.
    action: notify
template:
  - id: default
    storage: "$TMP/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
zone:
  - domain: example.org
    master: authd_signed
    acl: notify_from_authd
  - domain: example.net
    master: authd_unsigned
EOF
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
KNOT_PID=$!

# BIND 9: the same two zones.
mkdir -p "$TMP/named"
cat > "$TMP/named.conf" <<EOF
options {
    directory "$TMP/named";
    pid-file "$TMP/named/named.pid";
    session-keyfile "$TMP/named/session.key";
    managed-keys-directory "$TMP/named";
    listen-on port $NAMED_PORT { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    notify no;
    dnssec-validation no;
};
controls { };
logging {
    channel to_file { file "$TMP/named.log"; severity info; print-category yes; };
    category default { to_file; };
    category xfer-in { to_file; };
    category notify { to_file; };
};
key "xfr-key." { algorithm hmac-sha256; secret "$SECRET"; };
zone "example.org" {
    type secondary;
    file "example.org.db";
    primaries { 127.0.0.1 port $AUTHD_PORT key "xfr-key."; };
    allow-notify { key "xfr-key."; };
};
zone "example.net" {
    type secondary;
    file "example.net.db";
    primaries { 127.0.0.1 port $AUTHD_PORT; };
};
EOF
"$NAMED" -f -n 1 -c "$TMP/named.conf" >"$TMP/named.out" 2>&1 &
NAMED_PID=$!

# 3. Both transfer example.org (AXFR, signed) and are refused example.net.
wait_for 30 "Knot has example.org serial 2" has_serial "$KNOT_PORT" example.org 2
wait_for 30 "named has example.org serial 2" has_serial "$NAMED_PORT" example.org 2
wait_for 10 "Knot logs the AXFR" grep -q "example.org.*AXFR, incoming.*finished" "$TMP/knot.log"
wait_for 10 "named logs the signed AXFR" grep -q "example.org/IN.*transferred serial 2: TSIG 'xfr-key'" "$TMP/named.log"
wait_for 20 "authd refuses an unsigned AXFR of example.net" \
  grep -q "AXFR of example.net. refused for 127.0.0.1, unsigned" "$TMP/authd.log"
wait_for 20 "Knot logs the refusal" grep -qi "example.net.*AXFR, incoming.*\(refused\|failed\)" "$TMP/knot.log"
wait_for 20 "named logs the refusal" grep -q "example.net/IN.*REFUSED" "$TMP/named.log"
for port in "$KNOT_PORT" "$NAMED_PORT"; do
  [ -z "$(serial_at "$port" example.net)" ] || fail "the secondary on $port serves example.net without the key"
done
grep -q "TSIG: request from" "$TMP/authd.log" && fail "authd rejected a TSIG the secondaries signed"

compare() { # PORT NAME TYPE
  local a s
  a="$(dig +noall +answer +norec @127.0.0.1 -p "$AUTHD_PORT" "$2" "$3" | sort)"
  s="$(dig +noall +answer +norec @127.0.0.1 -p "$1" "$2" "$3" | sort)"
  echo "authd:      ${a:-<empty>}"
  echo "port $1: ${s:-<empty>}"
  [ -n "$a" ] && [ "$a" = "$s" ] || fail "authd and the secondary on port $1 differ for $2 $3"
}
compare "$KNOT_PORT" www.example.org A
compare "$NAMED_PORT" www.example.org A

# 4. A change: www A 192.0.2.1 -> 192.0.2.2, serial 2 -> 3; signed NOTIFY, IXFR.
"$BIN/zone" update --db "$DB" example.org --delete "www A 192.0.2.1" --add "www 300 A 192.0.2.2"
for port in "$KNOT_PORT" "$NAMED_PORT"; do
  wait_for 10 "authd's signed NOTIFY to $port answered and verified" grep -q \
    "NOTIFY of example.org. serial 3 to 127.0.0.1:$port: answered (rcode 0, try [0-9], signed with key xfr-key.)" \
    "$TMP/authd.log"
  wait_for 20 "the secondary on $port has serial 3" has_serial "$port" example.org 3
done
wait_for 10 "Knot logs an IXFR" grep -q "example.org.*IXFR, incoming.*finished" "$TMP/knot.log"
wait_for 10 "named logs the signed IXFR" grep -q "example.org/IN.*transferred serial 3: TSIG 'xfr-key'" "$TMP/named.log"
grep -q "received notify for zone 'example.org': TSIG 'xfr-key'" "$TMP/named.log" ||
  fail "named did not log the NOTIFY as signed"
[ "$(grep -c "IXFR of example.org. for 127.0.0.1: serial 2 -> 3" "$TMP/authd.log")" -ge 2 ] ||
  fail "authd did not serve both secondaries IXFR 2 -> 3"
compare "$KNOT_PORT" www.example.org A
compare "$NAMED_PORT" www.example.org A

echo "--- Knot log (transfers, NOTIFY)"
grep -E "AXFR|IXFR|notify|NOTIFY" "$TMP/knot.log"
echo "--- named log (transfers, NOTIFY)"
grep -E "transfer|notify|Transfer|REFUSED" "$TMP/named.log"
echo "--- authd log (transfers, NOTIFY)"
grep -E "xfr|notify|NOTIFY|TSIG" "$TMP/authd.log"
echo "OK: Knot and BIND transferred example.org with TSIG (AXFR, then IXFR after a signed NOTIFY) and were refused example.net without the key"
