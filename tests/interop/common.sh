# Shared by the interop scripts (sourced from the repository root, under
# `set -euo pipefail`): installing what is missing, building authd, a
# temporary folder whose processes are stopped by PID on exit, bounded waits,
# and the parts of a Knot DNS configuration every script has.

# install_missing COMMAND=PACKAGE...: apt-get installs the packages whose
# command is not on PATH.
install_missing() {
  local need=() pair
  for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null 2>&1 || need+=("${pair#*=}")
  done
  if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}

# Builds the binaries (the debug profile, or the release one with
# INTEROP_PROFILE=release, for measurements); BIN is their folder.
INTEROP_PROFILE="${INTEROP_PROFILE:-debug}"
if [ "$INTEROP_PROFILE" = release ]; then
  cargo build --quiet --release -p authd --bins
else
  cargo build --quiet -p authd --bins
fi
BIN="${CARGO_TARGET_DIR:-target}/$INTEROP_PROFILE"
BIN="$(cd "$BIN" && pwd)"

# TMP holds every file; PIDS the processes started (stopped in reverse order).
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null && wait "${PIDS[i]}" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

# fail MESSAGE: prints it and every log in TMP, exits 1.
fail() {
  echo "FAIL: $*" >&2
  local log
  for log in "$TMP"/*.log "$TMP"/*.out; do
    [ -e "$log" ] || continue
    echo "--- $(basename "$log")" >&2
    cat "$log" >&2
  done
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

# compare PORT NAME TYPE: authd (AUTHD_PORT) and the server on PORT answer
# NAME TYPE alike, and not with nothing.
compare() {
  local a s
  a="$(dig +noall +answer +norec @127.0.0.1 -p "$AUTHD_PORT" "$2" "$3" | sort)"
  s="$(dig +noall +answer +norec @127.0.0.1 -p "$1" "$2" "$3" | sort)"
  echo "authd:      ${a:-<empty>}"
  echo "port $1: ${s:-<empty>}"
  [ -n "$a" ] && [ "$a" = "$s" ] || fail "authd and the server on port $1 differ for $2 $3"
}

# start_authd: runs authd with TMP/authd.toml, logging to TMP/authd.log, and
# waits for it to listen.
start_authd() {
  "$BIN/authd" --config "$TMP/authd.toml" >"$TMP/authd.log" 2>&1 &
  PIDS+=($!)
  wait_for 30 "authd listening" grep -q "listening on" "$TMP/authd.log"
}

# knot_conf_head PORT: the server, log and database sections of a Knot
# configuration listening on PORT, its files under TMP/knot, logging to
# TMP/knot.log; the caller appends keys, remotes, ACLs and zones.
knot_conf_head() {
  mkdir -p "$TMP/knot/run" "$TMP/knot/db" "$TMP/knot/zones"
  cat <<KNOT
server:
    rundir: "$TMP/knot/run"
    listen: 127.0.0.1@$1
log:
  - target: "$TMP/knot.log"
    any: info
database:
    storage: "$TMP/knot/db"
template:
  - id: default
    storage: "$TMP/knot/zones"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
KNOT
}

# knot_secondary_of_authd ZONE...: the remote, ACL and zones of a Knot
# configuration following authd (AUTHD_PORT) for each ZONE, NOTIFY taken
# from 127.0.0.1; appended after knot_conf_head.
knot_secondary_of_authd() {
  local zone
  cat <<KNOT
remote:
  - id: authd
    address: 127.0.0.1@$AUTHD_PORT
acl:
  - id: notify_from_authd
    address: 127.0.0.1
    action: notify
zone:
KNOT
  for zone in "$@"; do
    cat <<KNOT
  - domain: $zone
    master: authd
    acl: notify_from_authd
KNOT
  done
}

# named_conf_head PORT CATEGORY...: the options, controls and logging of a BIND 9
# configuration listening on PORT, its files under TMP/named (created), logging
# the default, notify and the given categories to TMP/named.log; NOTIFY is off
# unless a zone turns it on. The caller appends keys and zones.
named_conf_head() {
  local port="$1" category
  shift
  mkdir -p "$TMP/named"
  cat <<NAMED
options {
    directory "$TMP/named";
    pid-file "$TMP/named/named.pid";
    session-keyfile "$TMP/named/session.key";
    managed-keys-directory "$TMP/named";
    listen-on port $port { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    notify no;
    dnssec-validation no;
};
controls { };
logging {
    channel to_file { file "$TMP/named.log"; severity info; print-category yes; };
    category default { to_file; };
    category notify { to_file; };
NAMED
  for category in "$@"; do
    echo "    category $category { to_file; };"
  done
  echo "};"
}

# nsd_conf_head PORT: the server section of an NSD configuration listening
# on 127.0.0.1 PORT, its files under TMP/nsd (created), logging to
# TMP/nsd.log; the caller appends server options, keys and zones.
nsd_conf_head() {
  mkdir -p "$TMP/nsd"
  cat <<NSD
server:
    ip-address: 127.0.0.1@$1
    port: $1
    username: ""
    chroot: ""
    zonesdir: "$TMP/nsd"
    database: ""
    zonelistfile: "$TMP/nsd/zone.list"
    pidfile: "$TMP/nsd/nsd.pid"
    xfrdfile: "$TMP/nsd/xfrd.state"
    logfile: "$TMP/nsd.log"
    verbosity: 2
NSD
}

# tsig_key NAME: a fresh `[[key]]` block from `authd keygen` in TMP/key.toml,
# its base64 secret in SECRET (for Knot, named and nsupdate).
tsig_key() {
  "$BIN/authd" keygen "$1" > "$TMP/key.toml"
  SECRET="$(sed -n 's/^secret = "\(.*\)"$/\1/p' "$TMP/key.toml")"
  [ -n "$SECRET" ] || fail "authd keygen printed no secret"
}
