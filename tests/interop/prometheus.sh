#!/usr/bin/env bash
# Interop: a real Prometheus server scrapes authd's /metrics.
#
#   1. authd serves example.org from an sqlite3 DB, `[metrics] listen` on
#      127.0.0.1:METRICS_PORT;
#   2. Prometheus (scrape_interval 1s, storage in the temporary folder, its
#      web API on 127.0.0.1:PROM_PORT) scrapes it as job "authd";
#   3. its HTTP API says `up{job="authd"}` is 1;
#   4. after a few dig queries, `authd_queries_total` is in Prometheus with
#      the number of queries sent (or more).
#
# Everything runs on 127.0.0.1 with unprivileged ports and a temporary
# folder; processes are stopped by PID; every wait is bounded
# (tests/interop/common.sh). Installs prometheus, dnsutils and curl with
# apt-get when missing. About 8 s once built.
set -euo pipefail
cd "$(dirname "$0")/../.."

AUTHD_PORT="${AUTHD_PORT:-25300}"
METRICS_PORT="${METRICS_PORT:-25390}"
PROM_PORT="${PROM_PORT:-25391}"
ZONE=example.org
QUERIES=5

. tests/interop/common.sh
install_missing prometheus=prometheus dig=dnsutils curl=curl python3=python3

# 1. The zone and authd.
DB="$TMP/zones.sqlite3"
"$BIN/zone" create --db "$DB" "$ZONE" --ns ns1.example.org. --serial 1
"$BIN/zone" update --db "$DB" "$ZONE" --add "ns1 3600 A 192.0.2.1" --add "www 300 A 192.0.2.80"
cat > "$TMP/authd.toml" <<EOF
listen = ["127.0.0.1:$AUTHD_PORT"]
[metrics]
listen = "127.0.0.1:$METRICS_PORT"
[[datasource]]
type = "sqlite3"
file = "$DB"
EOF
start_authd
wait_for 10 "authd serving /metrics" grep -q "metrics on http://127.0.0.1:$METRICS_PORT/metrics" "$TMP/authd.log"

# 2. Prometheus, scraping authd every second.
mkdir -p "$TMP/prometheus"
cat > "$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: authd
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
EOF
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prometheus" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)

# query EXPR: the value of Prometheus's first result for EXPR, or nothing.
query() {
  curl -sf --max-time 2 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")'
}
# query_is EXPR VALUE: Prometheus gives VALUE for EXPR.
query_is() { [ "$(query "$1")" = "$2" ]; }
# query_at_least EXPR N: Prometheus gives a value >= N for EXPR.
query_at_least() {
  local v
  v="$(query "$1")"
  [ -n "$v" ] && python3 -c "import sys; sys.exit(0 if float('$v') >= $2 else 1)"
}

# 3. The target is up.
wait_for 30 'Prometheus reporting up{job="authd"} = 1' query_is 'up{job="authd"}' 1
echo "up{job=\"authd\"}: $(query 'up{job="authd"}')"

# 4. Queries show up in authd_queries_total.
for _ in $(seq "$QUERIES"); do
  dig +short +norec +time=1 +tries=1 @127.0.0.1 -p "$AUTHD_PORT" "www.$ZONE" A >/dev/null
done
EXPR='sum(authd_queries_total{job="authd",opcode="QUERY",qtype="A"})'
wait_for 15 "authd_queries_total >= $QUERIES in Prometheus" query_at_least "$EXPR" "$QUERIES"
echo "$EXPR: $(query "$EXPR")"
echo "OK: Prometheus scraped authd"
