#!/usr/bin/env bash
# Interop: the real root zone (tests/data/root.zone, 21,591 RRs, DNSSEC-signed)
# transferred from Knot DNS into an authd secondary by AXFR; prints the
# transfer's time (authd's log line) and authd's peak memory (VmHWM), and
# checks that authd answers a sample of names as Knot does.
#
# Everything runs on 127.0.0.1 with unprivileged ports (AUTHD_PORT,
# KNOT_PORT) and a temporary folder; processes are stopped by PID; every wait
# is bounded (tests/interop/common.sh). Installs knot and dnsutils with
# apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25330}"
KNOT_PORT="${KNOT_PORT:-25383}"

. tests/interop/common.sh
install_missing knotd=knot dig=dnsutils

knot_conf_head "$KNOT_PORT" > "$TMP/knot.conf"
cat >> "$TMP/knot.conf" <<EOF
acl:
  - id: transfer_to_authd
    address: 127.0.0.1
    action: transfer
zone:
  - domain: .
    file: "$PWD/tests/data/root.zone"
    zonefile-load: whole
    acl: transfer_to_authd
EOF
knotd -c "$TMP/knot.conf" >"$TMP/knotd.out" 2>&1 &
PIDS+=($!)
SERIAL="$(awk '$4 == "SOA" { print $7; exit }' tests/data/root.zone)"
wait_for 60 "Knot serves the root zone" has_serial "$KNOT_PORT" . "$SERIAL"

cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[[secondary]]
zone = "."
primaries = ["127.0.0.1:$KNOT_PORT"]
file = "$TMP/root.sqlite3"
EOF
start_authd
AUTHD_PID="${PIDS[-1]}"
wait_for 120 "authd has the root zone" has_serial "$AUTHD_PORT" . "$SERIAL"
line="$(grep "secondary zone .: AXFR from" "$TMP/authd.log")"
echo "$line"
echo "authd peak memory: $(awk '/VmHWM/ { print $2, $3 }' "/proc/$AUTHD_PID/status")"
[[ "$line" == *"21591 RRs"* ]] || fail "not 21,591 RRs"
for q in ". NS" ". DNSKEY" "com DS" "org DS" ". SOA" "nl DS"; do
  # shellcheck disable=SC2086
  compare "$KNOT_PORT" $q
done
echo "OK: the root zone came from Knot in one AXFR and authd answers as Knot does"
