#!/usr/bin/env bash
# Network throughput of authd against NSD, Knot DNS, BIND 9 and PowerDNS
# (gsqlite3), driven by dnsperf over loopback UDP.
#
# usage: bench/network.sh [--quick] [--workers] [-l SECONDS] [--rounds N] [--edns] [--warm]
#        bench/network.sh --soak [-l SECONDS] [--edns]
#        bench/network.sh --large [--delegations N] [--sign] [-l SECONDS] [--rounds N] [--edns] [--warm] [--restart]
#   (default)  every server x every mix, SECONDS (default 10) per cell:
#              root zone (tests/data/root.zone): queries-real, -nxdomain, -soa, -success
#              small zone (auth/src/default/example.com.zone): success, nxdomain
#              servers: authd memory (--zone), authd sqlite3 + cache (--db, the
#              default), authd sqlite3 without cache (--cache-slots 0), NSD,
#              Knot DNS, BIND 9 (named), PowerDNS gsqlite3 with and without
#              its caches
#   --quick    root real + nxdomain; authd memory, NSD, Knot, BIND; 5 s per cell
#   --workers  instead: authd (root zone) from memory, then from sqlite3 without
#              the cache (CPU-heavy per query, so dnsperf does not saturate
#              first), each with 1 then 2 UDP workers on both cores, dnsperf
#              -c 8 (several source ports, so SO_REUSEPORT spreads them) pinned
#              to core 0, which it then shares with authd
#   --soak     instead: authd (memory, root zone, 1 UDP worker on core 1); its
#              maximum qps on the root real mix in a 5 s run, then dnsperf at
#              80% of it (-Q RATE) for SECONDS (default 60), authd's VmRSS
#              sampled every 5 s and once after the run; prints the rates,
#              dnsperf's sent/completed/lost and the RSS samples, then
#              "soak: PASS" (lost == 0 and last RSS <= 1.05 x first) or
#              "soak: FAIL (reason)" and exit status 1
#   -l SECS    seconds per dnsperf run (dnsperf -l); with --soak, of the soak
#   --rounds N repeat the whole schedule N times, servers interleaved
#              (A B C, A B C, ...); the table shows the run with the median qps
#   --edns     dnsperf -e (EDNS0, 4096-byte buffer) on every query
#   --warm     before each timed run, one untimed pass over the mix (dnsperf
#              -n 1), every server alike: caches (authd's hot-spot cache,
#              PowerDNS's) are measured filled, as after minutes of serving,
#              not while they fill in the first seconds after a start
#   --restart  every mix on a server of its own start (loaded again, caches
#              empty), not all mixes of a zone on one start: what a cache
#              holds after one mix does not carry into the next (the hot-spot
#              cache filled by the uniform mix would otherwise be measured
#              on the Zipf mix); with --warm, each start is warmed on its mix
#   --guards   instead: what the internet-facing guards cost. authd (memory,
#              root zone) with rate limiting and cookies off, then with both
#              on and a limit no query reaches ([rrl] 1,000,000/s); every
#              query carries a client cookie (dnsperf -E 10:…), so the second
#              server checks and makes a server cookie per query; root real
#              + nxdomain, 5 s per cell by default
#   --transports instead: the root real mix over UDP, TCP and DNS over TLS
#              (dnsperf -m udp, tcp, dot; one connection, -q 100 in flight on
#              it) against authd (memory, [tls] with a self-signed ECDSA P-256
#              certificate made by openssl) and NSD (tls-service-key); 5 s
#              per cell by default
#   --metrics  instead: authd (memory, root zone) with metrics off, then on
#              ([metrics] listen on a free port); root real + nxdomain, 5 s
#              per cell by default
#   --large    instead (issue 20): a TLD-like zone "tld." from
#              bench/make_tld.py (N delegations, a third with in-zone glue,
#              the rest with out-of-zone NS, DS on every tenth) and its mixes:
#              uniform (referrals, delegation drawn uniformly), zipf
#              (referrals, Zipf s = 1), nxdomain; servers authd memory, authd
#              sqlite3 + cache (the default 65536 slots), authd sqlite3
#              without cache, NSD, Knot DNS; 10 s per cell by default. The
#              sqlite3 database is made by loadzone first (1M: 1.5-2 minutes
#              on the 2-core test machine; authd memory loads 1M in 35-55 s,
#              NSD and Knot in 12-18 s). Each
#              server gets up to 15 minutes to load (start until the first SOA
#              answer; the times are printed in a table of their own). The
#              answer check also compares, per sampled query, the AA flag and
#              the owner names and types of the authority and additional
#              sections (lowercased, sorted), not only the rcode. A table of
#              authd / NSD and authd / Knot (queries per CPU-second) follows.
#   --delegations N  with --large: zone size (default 1,000,000)
#   --sign     with --large: the zone signed with NSEC3 opt-out
#              (make_tld.py --sign; needs bind9-utils, installed if missing),
#              and every query asks for DNSSEC records (dnsperf -D: EDNS0 with
#              the DO bit; dig +dnssec in the answer check), as validating
#              resolvers do
#
# Every authd runs with rate limiting off (AUTHD_RRL__ENABLED=false) unless
# the mode says otherwise: dnsperf sends everything from one address, which
# the default 200 responses/s per /24 would limit (NSD is set up the same way;
# BIND has no rate-limit block, so none; Knot has no rrl module loaded).
#
# BIND 9 (named, Debian package bind9) gets a named.conf in the work folder:
# the zone from the same master file as NSD and Knot, 127.0.0.1 at the port,
# `named -g -n 1 -U 1` (one worker, so one UDP listener; -U sets only the
# outgoing dispatches, unused here), recursion, NOTIFY, validation, the rndc
# channel and the query log off, minimal-responses no-auth (as authd and Knot
# answer: no apex NS in the authority section of positive answers, which NSD
# adds, but the addresses of MX and SRV targets in the additional section).
# Checked on 200 queries of each mix (dig +noedns, as dnsperf asks): the same
# rcode, AA, answer and authority records as authd's and Knot's; only which
# glue fits in 512 bytes differs, and where the in-domain glue of a referral
# does not fit (net., au.: 13 of 200 in the real mix) authd and Knot set TC,
# BIND does not (RFC 9471 asks for TC there). named also starts a timer thread
# and one idle helper per worker; every thread is pinned like Knot's.
#
# Method (see ../shared/research/bench-pitfalls.md in the project workspace):
# one server at a time on 127.0.0.1 with a free unprivileged port and ONE worker,
# pinned to core 1 with taskset (Knot re-pins its own threads: every thread is
# pinned again after start with taskset -a -p); dnsperf pinned to core 0 with
# `-c 1 -q 100 -b 4096 -l SECS`. Before timing, 20 queries of each mix (spread
# over the file) are asked with dig and their rcodes compared with authd
# memory's. The server's CPU time is utime+stime from /proc/PID/stat (which
# covers every thread of a process, also exited ones) summed over the server's
# process tree, each stat line cut after its last ')' (NSD renames its
# processes "nsd: server 1"); "user / kernel µs per query" splits it into
# utime and stime per completed query (on loopback the kernel part includes
# delivering each reply to dnsperf's socket). "bound" is "server" when the server used at
# least 90% of its core, else "client": dnsperf (or CPU taken by others on a
# shared machine), not the server, was the bottleneck. "rest CPU" is the
# machine's busy CPU (from /proc/stat) minus the server and dnsperf, in % of
# one core: other users of the machine, plus kernel network work (softirq)
# charged to no process.
#
# Environment: CARGO_TARGET_DIR (authd is built there in release);
# BENCH_AUTHD=path uses that authd binary (and loadzone beside it) instead, no
# build; SHARED=path to the shared data (default ../shared/data next to the
# repository; without it the query mixes are made by bench/make_queries.py from
# the repository's zones, identical to the shared ones);
# BENCH_SERVERS="authd-mem nsd bind" (the default mode, --quick, --large):
# only these servers, in this order (ids: authd-mem, authd-sql,
# authd-sql-nocache, authd-mem-public (rate limiting at 1,000,000/s,
# cookies and metrics on), nsd, knot, bind, pdns, pdns-nocache; the answer check
# compares with the first, so keep authd-mem first);
# BENCH_CACHE_SLOTS=N: authd sqlite3 + cache (authd-sql) with N slots
# (--cache-slots N) instead of the default 65536, e.g. enough to hold every
# name the mix asks for;
# BENCH_LARGE_DIR=path (--large): the folder for the generated zone and
# mixes: used as it is when it already holds them (made by an earlier run with
# the same --delegations/--sign, recorded in its make_tld.args; a folder
# without that file, e.g. one made by hand with make_tld.py, is trusted),
# else they are made there (default: the temporary work folder, removed at
# the end). (Not AUTHD_*: authd would take those as configuration keys.)
#
# Everything stays on loopback; every server is stopped by PID at the end.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$(cd "$ROOT/.." && pwd)/shared/data}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

ARGS="$*"
MODE=full
SECS=
ROUNDS=1
DELEGATIONS=1000000
SIGN=()
DIG_DO=+nodnssec # the answer check with --large: +dnssec with --sign
EDNS=()
RATE=() # dnsperf -Q RATE, set by the soak run
WARM=0  # --warm
RESTART=0 # --restart
while [ $# -gt 0 ]; do
    case $1 in
    --quick) MODE=quick ;;
    --workers) MODE=workers ;;
    --soak) MODE=soak ;;
    --guards) MODE=guards ;;
    --metrics) MODE=metrics ;;
    --transports) MODE=transports ;;
    --large) MODE=large ;;
    --warm) WARM=1 ;;
    --restart) RESTART=1 ;;
    --delegations)
        DELEGATIONS=${2:?--delegations needs a count}
        shift
        ;;
    --sign) SIGN=(--sign) ;;
    -l)
        SECS=${2:?-l needs seconds}
        shift
        ;;
    --rounds)
        ROUNDS=${2:?--rounds needs a count}
        shift
        ;;
    --edns) EDNS=(-e) ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "network.sh: unknown argument $1 (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done
if [ -z "$SECS" ]; then
    case $MODE in quick | guards | metrics | transports) SECS=5 ;; soak) SECS=60 ;; *) SECS=10 ;; esac
fi
case $SECS$ROUNDS$DELEGATIONS in *[!0-9]*)
    echo "network.sh: -l, --rounds and --delegations take whole numbers" >&2
    exit 2
    ;;
esac
# Rate limiting off for every authd (servers that want it set it themselves).
export AUTHD_RRL__ENABLED=false
if [ "$(nproc)" -lt 2 ]; then
    echo "network.sh: needs 2 CPUs (server on core 1, dnsperf on core 0)" >&2
    exit 1
fi

# --- tools
need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v dig >/dev/null || need+=(dnsutils)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v python3 >/dev/null || need+=(python3)
[ "$MODE" = transports ] && { command -v openssl >/dev/null || need+=(openssl); }
if [ "$MODE" = large ] && [ ${#SIGN[@]} -gt 0 ]; then
    command -v dnssec-signzone >/dev/null || need+=(bind9-utils)
fi
# (the servers' packages are installed once the server list is known, below)
install_missing() {
    if [ ${#need[@]} -gt 0 ]; then
        echo "installing ${need[*]} with apt-get" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >/dev/null
    fi
    need=()
}
install_missing
if [ -n "${BENCH_AUTHD:-}" ]; then
    AUTHD=$BENCH_AUTHD
    LOADZONE=$(dirname "$AUTHD")/loadzone
    [ -x "$LOADZONE" ] || LOADZONE=$TARGET/release/loadzone
else
    echo "building authd (release) in $TARGET" >&2
    (cd "$ROOT" && cargo build --release -p authd --bin authd --bin loadzone >&2)
    AUTHD=$TARGET/release/authd
    LOADZONE=$TARGET/release/loadzone
fi

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_workdir authd-network
trap 'exit 130' INT TERM
RESULTS=$WORK/results.tsv
: >"$RESULTS"
LOADS=$WORK/loads.tsv # round, zone, server id, name, seconds from start to the first SOA answer
: >"$LOADS"
ROUND=1
HZ=$(getconf CLK_TCK)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# "utime stime" in ticks over the process tree of $1 (each /proc/PID/stat
# covers all threads of that process). The line is cut after the last ')', so
# field 1 is the state, 12 utime, 13 stime.
cpu_ticks() {
    local user=0 sys=0 p line rest
    for p in $(tree "$1"); do
        line=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        rest=${line##*) }
        # shellcheck disable=SC2086
        set -- $rest
        user=$((user + ${12}))
        sys=$((sys + ${13}))
    done
    echo "$user $sys"
}

# Busy ticks of the whole machine (all CPUs) from /proc/stat.
busy_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# --- data
ROOT_ZONE=$ROOT/tests/data/root.zone
SMALL_ZONE=$ROOT/auth/src/default/example.com.zone
# The query mixes: from the shared data, or made from the repository's zones.
query_mixes
for f in "$ROOT_ZONE" "$SMALL_ZONE" "$SHARED/root/queries-real.txt" "$SHARED/smallzone/queries-success.txt"; do
    [ -r "$f" ] || {
        echo "network.sh: missing $f" >&2
        exit 1
    }
done
declare -A ZFILE ZORIGIN MIXES
ZFILE[root]=$ROOT_ZONE
ZORIGIN[root]=.
ZFILE[small]=$SMALL_ZONE
ZORIGIN[small]=example.com.
if [ "$MODE" = quick ]; then
    ZONES=(root)
    MIXES[root]="real nxdomain"
    read -r -a SERVERS <<<"${BENCH_SERVERS:-authd-mem nsd knot bind}"
elif [ "$MODE" = workers ]; then
    ZONES=(root)
    MIXES[root]="real nxdomain"
    SERVERS=(authd-w1 authd-w2 authd-sql-w1 authd-sql-w2)
elif [ "$MODE" = soak ]; then
    ZONES=(root)
    MIXES[root]=real
    SERVERS=(authd-mem)
elif [ "$MODE" = metrics ]; then
    ZONES=(root)
    MIXES[root]="real nxdomain"
    SERVERS=(authd-mem authd-mem-metrics)
elif [ "$MODE" = transports ]; then
    # A mix named MIX-udp, MIX-tcp or MIX-dot: MIX's queries over that transport.
    ZONES=(root)
    MIXES[root]="real-udp real-tcp real-dot"
    read -r -a SERVERS <<<"${BENCH_SERVERS:-authd-mem nsd}"
elif [ "$MODE" = large ]; then
    # The zone and mixes: reused from BENCH_LARGE_DIR, else made there (or in $WORK).
    LARGE_DIR=${BENCH_LARGE_DIR:-$WORK/tld}
    LARGE_ARGS="--delegations $DELEGATIONS ${SIGN[*]}"
    LARGE_ARGS=${LARGE_ARGS% }
    LARGE_HOW=
    if [ -r "$LARGE_DIR/zone" ] && [ -r "$LARGE_DIR/queries-nxdomain.txt" ]; then
        if [ -r "$LARGE_DIR/make_tld.args" ]; then
            if [ "$(cat "$LARGE_DIR/make_tld.args")" != "$LARGE_ARGS" ]; then
                echo "network.sh: $LARGE_DIR holds a zone made with '$(cat "$LARGE_DIR/make_tld.args")', not '$LARGE_ARGS'" >&2
                exit 1
            fi
            LARGE_HOW="reused, made with make_tld.py $LARGE_ARGS"
        else
            LARGE_HOW="reused as given (no make_tld.args: its size is not checked)"
        fi
    else
        mkdir -p "$LARGE_DIR"
        echo "network.sh: bench/make_tld.py $LARGE_ARGS $LARGE_DIR" >&2
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        python3 "$ROOT/bench/make_tld.py" $LARGE_ARGS "$LARGE_DIR" >&2
        echo "$LARGE_ARGS" >"$LARGE_DIR/make_tld.args"
        LARGE_HOW="made with make_tld.py $LARGE_ARGS in $(printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)") s"
    fi
    ZFILE[large]=$LARGE_DIR/zone
    ZORIGIN[large]=tld.
    ZONES=(large)
    MIXES[large]="uniform zipf nxdomain"
    # BENCH_SERVERS="authd-mem nsd knot" runs only those (a quick before/after).
    read -r -a SERVERS <<<"${BENCH_SERVERS:-authd-mem authd-sql authd-sql-nocache nsd knot}"
    if [ ${#SIGN[@]} -gt 0 ]; then
        EDNS+=(-D)
        DIG_DO=+dnssec
    fi
elif [ "$MODE" = guards ]; then
    ZONES=(root)
    MIXES[root]="real nxdomain"
    SERVERS=(authd-mem authd-mem-guarded)
    # A client cookie on every query (RFC 7873 §4: 8 bytes).
    EDNS=(-E 10:0123456789abcdef)
else
    ZONES=(root small)
    MIXES[root]="real nxdomain soa success"
    MIXES[small]="success nxdomain"
    read -r -a SERVERS <<<"${BENCH_SERVERS:-authd-mem authd-sql authd-sql-nocache nsd knot bind pdns pdns-nocache}"
fi
# The servers' packages, when missing.
for s in "${SERVERS[@]}"; do
    case $s in
    authd*) ;;
    nsd) command -v nsd >/dev/null || need+=(nsd) ;;
    knot) command -v knotd >/dev/null || need+=(knot) ;;
    bind) command -v named >/dev/null || need+=(bind9) ;;
    pdns | pdns-nocache)
        command -v pdns_server >/dev/null || need+=(pdns-server)
        [ -e /usr/lib/x86_64-linux-gnu/pdns/libgsqlite3backend.so ] ||
            ls /usr/lib/*/pdns/libgsqlite3backend.so >/dev/null 2>&1 || need+=(pdns-backend-sqlite3)
        ;;
    *)
        echo "network.sh: unknown server $s (BENCH_SERVERS)" >&2
        exit 2
        ;;
    esac
done
# shellcheck disable=SC2207
need=($(printf '%s\n' "${need[@]}" | sort -u))
install_missing
mixfile() { # zone mix (a transports mix MIX-udp/-tcp/-dot: MIX's queries)
    local mix=${2%-udp}
    mix=${mix%-tcp}
    mix=${mix%-dot}
    if [ "$1" = large ]; then
        echo "$LARGE_DIR/queries-$mix.txt"
    elif [ "$1" = root ]; then echo "$SHARED/root/queries-$mix.txt"; else echo "$SHARED/smallzone/queries-$mix.txt"; fi
}

# --transports: a self-signed certificate for both servers' TLS, and the
# port each server's TLS listener takes (set by start_server).
TLS_PORT=
if [ "$MODE" = transports ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$WORK/tls.key" -out "$WORK/tls.crt" -subj "/CN=bench.invalid" \
        -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null ||
        { echo "network.sh: openssl could not make a certificate" >&2; exit 1; }
fi

needs_sqlite() { [[ " ${SERVERS[*]} " == *" authd-sql"* ]]; }
needs_pdns() { [[ " ${SERVERS[*]} " == *" pdns"* ]]; }
for z in "${ZONES[@]}"; do
    if needs_sqlite; then
        "$LOADZONE" --db "$WORK/$z.sqlite3" "${ZORIGIN[$z]}" "${ZFILE[$z]}" >"$WORK/loadzone-$z.log" 2>&1 ||
            { cat "$WORK/loadzone-$z.log" >&2; exit 1; }
        cat "$WORK/loadzone-$z.log" >&2
    fi
    if needs_pdns; then
        mkdir -p "$WORK/pdns-$z"
        sqlite3 "$WORK/pdns-$z/pdns.sqlite3" </usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql
        zone2sql --gsqlite --transactions --zone="${ZFILE[$z]}" --zone-name="${ZORIGIN[$z]}" 2>/dev/null |
            sqlite3 "$WORK/pdns-$z/pdns.sqlite3"
        cat >"$WORK/pdns-$z/pdns.conf" <<EOF
launch=gsqlite3
gsqlite3-database=$WORK/pdns-$z/pdns.sqlite3
gsqlite3-dnssec=yes
security-poll-suffix=
local-address=127.0.0.1
socket-dir=$WORK/pdns-$z
daemon=no
guardian=no
disable-syslog=yes
loglevel=3
receiver-threads=1
distributor-threads=1
reuseport=no
webserver=no
api=no
EOF
        # A signed zone is served as it is (PRESIGNED: PowerDNS refuses to
        # rectify it); an unsigned one is rectified (ordername, auth flags).
        if grep -q 'RRSIG' "${ZFILE[$z]}"; then
            pdnsutil --config-dir="$WORK/pdns-$z" set-presigned "${ZORIGIN[$z]}" >"$WORK/pdnsutil.log" 2>&1 ||
                { cat "$WORK/pdnsutil.log" >&2; exit 1; }
        else
            pdnsutil --config-dir="$WORK/pdns-$z" rectify-zone "${ZORIGIN[$z]}" >"$WORK/pdnsutil.log" 2>&1 ||
                { cat "$WORK/pdnsutil.log" >&2; exit 1; }
        fi
    fi
done

# --- servers
SERVER_PID=
SERVER_NAME=

# Waits until "ORIGIN SOA" is answered with an SOA record on $2 (60 s at
# most; 15 minutes with --large, where loading takes a while).
READY_TRIES=600
[ "$MODE" = large ] && READY_TRIES=9000
wait_ready() {
    local pid=$1 port=$2 origin=$3 _
    for _ in $(seq "$READY_TRIES"); do
        kill -0 "$pid" 2>/dev/null || return 1
        if dig @127.0.0.1 -p "$port" "$origin" SOA +norec +tries=1 +time=1 +noall +answer 2>/dev/null |
            grep -qP '\tIN\tSOA\t'; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# start SERVER ZONE PORT: starts it pinned to core 1 (both cores in workers mode).
start_server() {
    local s=$1 z=$2 port=$3 cpus=1 log=$WORK/$1-$2.log origin=${ZORIGIN[$2]}
    local zf=${ZFILE[$2]} t_start
    t_start=$(date +%s.%N)
    if [ "$MODE" = transports ]; then
        TLS_PORT=$(free_port)
        export AUTHD_TLS__CERTIFICATE=$WORK/tls.crt AUTHD_TLS__KEY=$WORK/tls.key \
            AUTHD_TLS__LISTEN=127.0.0.1:$TLS_PORT
    fi
    case $s in
    authd-mem)
        SERVER_NAME="authd $("$AUTHD" --version | awk '{print $2}') (memory)"
        [ "$MODE" = guards ] && SERVER_NAME="authd (memory), RRL and cookies off"
        [ "$MODE" = metrics ] && SERVER_NAME="authd (memory), metrics off"
        AUTHD_COOKIES__ENABLED=$([ "$MODE" = guards ] && echo false || echo true) \
            taskset -c $cpus "$AUTHD" --zone "$origin=$zf" --listen "127.0.0.1:$port" \
            --udp-workers 1 --log-level warn >"$log" 2>&1 &
        ;;
    authd-mem-metrics)
        SERVER_NAME="authd (memory), metrics on"
        AUTHD_METRICS__LISTEN=127.0.0.1:0 \
            taskset -c $cpus "$AUTHD" --zone "$origin=$zf" --listen "127.0.0.1:$port" \
            --udp-workers 1 --log-level warn >"$log" 2>&1 &
        ;;
    authd-mem-guarded)
        SERVER_NAME="authd (memory), RRL (1,000,000/s) and cookies on"
        AUTHD_RRL__ENABLED=true AUTHD_RRL__RESPONSES_PER_SECOND=1000000 AUTHD_COOKIES__ENABLED=true \
            taskset -c $cpus "$AUTHD" --zone "$origin=$zf" --listen "127.0.0.1:$port" \
            --udp-workers 1 --log-level warn >"$log" 2>&1 &
        ;;
    authd-mem-public)
        # As on a public address: every guard on, a limit no query reaches.
        SERVER_NAME="authd (memory), RRL (1,000,000/s), cookies and metrics on"
        AUTHD_RRL__ENABLED=true AUTHD_RRL__RESPONSES_PER_SECOND=1000000 AUTHD_COOKIES__ENABLED=true \
            AUTHD_METRICS__LISTEN=127.0.0.1:0 \
            taskset -c $cpus "$AUTHD" --zone "$origin=$zf" --listen "127.0.0.1:$port" \
            --udp-workers 1 --log-level warn >"$log" 2>&1 &
        ;;
    authd-w1 | authd-w2)
        cpus=0,1
        SERVER_NAME="authd (memory), ${s#authd-w} UDP worker(s)"
        taskset -c $cpus "$AUTHD" --zone "$origin=$zf" --listen "127.0.0.1:$port" \
            --udp-workers "${s#authd-w}" --log-level warn >"$log" 2>&1 &
        ;;
    authd-sql-w1 | authd-sql-w2)
        cpus=0,1
        SERVER_NAME="authd (sqlite3, no cache), ${s#authd-sql-w} UDP worker(s)"
        taskset -c $cpus "$AUTHD" --db "$WORK/$z.sqlite3" --listen "127.0.0.1:$port" \
            --udp-workers "${s#authd-sql-w}" --cache-slots 0 --log-level warn >"$log" 2>&1 &
        ;;
    authd-sql)
        SERVER_NAME="authd (sqlite3 + cache)"
        local slots=()
        if [ -n "${BENCH_CACHE_SLOTS:-}" ]; then
            SERVER_NAME="authd (sqlite3 + cache, $BENCH_CACHE_SLOTS slots)"
            slots=(--cache-slots "$BENCH_CACHE_SLOTS")
        fi
        taskset -c $cpus "$AUTHD" --db "$WORK/$z.sqlite3" --listen "127.0.0.1:$port" \
            --udp-workers 1 "${slots[@]}" --log-level warn >"$log" 2>&1 &
        ;;
    authd-sql-nocache)
        SERVER_NAME="authd (sqlite3, no cache)"
        taskset -c $cpus "$AUTHD" --db "$WORK/$z.sqlite3" --listen "127.0.0.1:$port" \
            --udp-workers 1 --cache-slots 0 --log-level warn >"$log" 2>&1 &
        ;;
    nsd)
        SERVER_NAME="NSD $(nsd -v 2>&1 | awk 'NR==1 {print $3}')"
        mkdir -p "$WORK/nsd-$z"
        cat >"$WORK/nsd-$z/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1
    port: $port
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "$WORK/nsd-$z"
    database: ""
    zonelistfile: "$WORK/nsd-$z/zone.list"
    xfrdfile: "$WORK/nsd-$z/xfrd.state"
    xfrdir: "$WORK/nsd-$z"
    pidfile: "$WORK/nsd-$z/nsd.pid"
    logfile: "$WORK/nsd-$z/nsd.log"
    server-count: 1
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
EOF
        if [ -n "$TLS_PORT" ]; then
            cat >>"$WORK/nsd-$z/nsd.conf" <<EOF
    ip-address: 127.0.0.1@$TLS_PORT
    tls-port: $TLS_PORT
    tls-service-key: "$WORK/tls.key"
    tls-service-pem: "$WORK/tls.crt"
EOF
        fi
        cat >>"$WORK/nsd-$z/nsd.conf" <<EOF
remote-control:
    control-enable: no
zone:
    name: "$origin"
    zonefile: "$zf"
EOF
        taskset -c $cpus nsd -d -c "$WORK/nsd-$z/nsd.conf" >"$log" 2>&1 &
        ;;
    knot)
        SERVER_NAME="Knot DNS $(knotd -V | awk '{print $NF}')"
        mkdir -p "$WORK/knot-$z"
        cat >"$WORK/knot-$z/knot.conf" <<EOF
server:
    rundir: "$WORK/knot-$z"
    listen: 127.0.0.1@$port
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "$WORK/knot-$z"
zone:
  - domain: "$origin"
    file: "$zf"
    storage: "$WORK/knot-$z"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
EOF
        taskset -c $cpus knotd -c "$WORK/knot-$z/knot.conf" >"$log" 2>&1 &
        ;;
    bind)
        SERVER_NAME="BIND $(named -v | sed -n 's/^BIND \([0-9.]*\).*/\1/p')"
        mkdir -p "$WORK/bind-$z"
        # No rate-limit block: BIND's response rate limiting is off. -g logs
        # to stderr (the log file) at info: loading and warnings only, never a
        # query (querylog no).
        cat >"$WORK/bind-$z/named.conf" <<EOF
options {
    directory "$WORK/bind-$z";
    pid-file "$WORK/bind-$z/named.pid";
    session-keyfile none;
    managed-keys-directory "$WORK/bind-$z";
    listen-on port $port { 127.0.0.1; };
    listen-on-v6 { none; };
    automatic-interface-scan no;
    recursion no;
    allow-query { any; };
    dnssec-validation no;
    notify no;
    querylog no;
    minimal-responses no-auth;
};
controls { };
zone "$origin" {
    type primary;
    file "$zf";
};
EOF
        taskset -c $cpus named -g -n 1 -U 1 -c "$WORK/bind-$z/named.conf" >"$log" 2>&1 &
        ;;
    pdns | pdns-nocache)
        local caches=()
        SERVER_NAME="PowerDNS $(pdns_server --version 2>&1 | sed -n "s/.*Authoritative Server \([0-9.]*\).*/\1/p" | head -1) gsqlite3"
        if [ "$s" = pdns-nocache ]; then
            SERVER_NAME="$SERVER_NAME, no caches"
            caches=(--cache-ttl=0 --query-cache-ttl=0 --negquery-cache-ttl=0 --zone-cache-refresh-interval=0)
        else
            SERVER_NAME="$SERVER_NAME + caches"
        fi
        taskset -c $cpus pdns_server --config-dir="$WORK/pdns-$z" --local-port="$port" \
            "${caches[@]}" >"$log" 2>&1 &
        ;;
    esac
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    if ! wait_ready "$SERVER_PID" "$port" "$origin"; then
        echo "network.sh: $SERVER_NAME did not start on port $port; its log:" >&2
        tail -20 "$log" >&2
        printf '%s\t%s\t%s\t%s\tfailed\n' "$ROUND" "$z" "$s" "$SERVER_NAME" >>"$LOADS"
        return 1
    fi
    printf '%s\t%s\t%s\t%s\t%.2f\n' "$ROUND" "$z" "$s" "$SERVER_NAME" \
        "$(echo "$(date +%s.%N) - $t_start" | bc)" >>"$LOADS"
    # Knot (and any server) may have set its own thread affinity: pin every
    # thread of every process again, and check.
    local p want=${cpus/0,1/0-1}
    for p in $(tree "$SERVER_PID"); do
        taskset -a -p -c $cpus "$p" >/dev/null
        if grep -h Cpus_allowed_list /proc/"$p"/task/*/status | grep -qv -P "\t$want\$"; then
            echo "network.sh: $SERVER_NAME: a thread is not pinned to $cpus" >&2
        fi
    done
}

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

# 20 queries spread over the mix, as "name type" lines.
sample() {
    local n
    n=$(wc -l <"$1")
    awk -v step=$((n / 20 > 0 ? n / 20 : 1)) '(NR - 1) % step == 0' "$1" | head -20
}

# check ZONE MIX PORT: the rcodes of the sample; compared with authd memory's
# (the first server), a mismatch is reported.
check_answers() {
    local z=$1 mix=$2 port=$3 ref=$WORK/ref-$1-$2 got=$WORK/got name type rc
    : >"$got"
    while read -r name type; do
        if [ "$MODE" = large ]; then
            # rcode, AA, and "owner/TYPE" of the authority and additional sections.
            rc=$(dig @127.0.0.1 -p "$port" "$name" "$type" +norec +tries=2 +time=2 +noall +comments \
                +authority +additional "$DIG_DO" 2>/dev/null | awk '
                /status:/ { sub(/.*status: /, ""); sub(/,.*/, ""); rc = $0 }
                /;; flags:/ { aa = ($0 ~ /flags:[^;]* aa[ ;]/) ? "aa" : "-" }
                /^[^;]/ && NF >= 4 { n[tolower($1) "/" $4]++ }
                END { s = ""; for (k in n) s = s " " k; print rc, aa, s }' |
                { read -r rc aa rest; echo "$rc $aa $(tr ' ' '\n' <<<"$rest" | sed '/^$/d' | sort | paste -sd,)"; })
            [ "${rc%% *}" = "" ] && rc=
        else
            rc=$(dig @127.0.0.1 -p "$port" "$name" "$type" +norec +tries=2 +time=2 +noall +comments 2>/dev/null |
                sed -n 's/.*status: \([A-Z]*\),.*/\1/p')
        fi
        echo "$name $type ${rc:-TIMEOUT}" >>"$got"
    done < <(sample "$(mixfile "$z" "$mix")")
    if [ ! -e "$ref" ]; then
        cp "$got" "$ref"
        CHECK="ref ($(awk '{print $3}' "$got" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $2; sep=", "}'))"
    elif diff -q "$ref" "$got" >/dev/null; then
        CHECK="same"
    else
        CHECK="DIFFERS: $(diff "$ref" "$got" | grep -c '^>') of 20"
        echo "network.sh: $SERVER_NAME, $z $mix: rcodes differ from authd memory's:" >&2
        diff "$ref" "$got" | grep '^[<>]' | head -6 >&2
    fi
}

# warm_up ZONE MIX PORT: one untimed pass over the mix (--warm).
warm_up() {
    timeout 120 taskset -c 0 dnsperf -s 127.0.0.1 -p "$3" -d "$(mixfile "$1" "$2")" -n 1 \
        -c 1 -q 100 -b 4096 "${EDNS[@]}" >/dev/null 2>&1 ||
        echo "network.sh: warm-up against $SERVER_NAME failed" >&2
}

# run ROUND ZONE SERVER MIX PORT: one timed dnsperf run.
run_dnsperf() {
    local round=$1 z=$2 s=$3 mix=$4 port=$5 out=$WORK/dnsperf.out
    local c0 c1 u0 u1 b0 b1 t0 t1 clients=(-c 1) pin=0 transport=()
    [ "$MODE" = workers ] && clients=(-c 8)
    case $mix in
    *-tcp) transport=(-m tcp) ;;
    *-dot) transport=(-m dot) port=$TLS_PORT ;;
    esac
    read -r u0 c0 < <(cpu_ticks "$SERVER_PID")
    b0=$(busy_ticks)
    t0=$(date +%s.%N)
    TIMEFORMAT='%U %S'
    {
        time timeout $((SECS + 30)) taskset -c $pin dnsperf -s 127.0.0.1 -p "$port" \
            -d "$(mixfile "$z" "$mix")" -l "$SECS" "${clients[@]}" "${transport[@]}" -q 100 -b 4096 "${EDNS[@]}" "${RATE[@]}" \
            >"$out" 2>&1
    } 2>"$WORK/time.out" || {
        echo "network.sh: dnsperf failed against $SERVER_NAME:" >&2
        tail -5 "$out" >&2
    }
    t1=$(date +%s.%N)
    read -r u1 c1 < <(cpu_ticks "$SERVER_PID")
    b1=$(busy_ticks)
    python3 - "$out" "$WORK/time.out" "$round" "$z" "$s" "$SERVER_NAME" "$mix" \
        "$(echo "$t1 - $t0" | bc)" "$((u1 - u0))" "$((c1 - c0))" "$((b1 - b0))" "$HZ" "$CHECK" >>"$RESULTS" <<'EOF'
import re, sys
out, timef, rnd, zone, sid, name, mix, wall, user, sys_, busy, hz, check = sys.argv[1:]
cpu = int(user) + int(sys_)
text = open(out).read()
def num(pat, default="0"):
    m = re.search(pat, text)
    return m.group(1) if m else default
completed = num(r"Queries completed:\s+(\d+)")
lost = num(r"Queries lost:\s+(\d+)")
qps = num(r"Queries per second:\s+([\d.]+)")
lat = num(r"Average Latency \(s\):\s+([\d.]+)")
resp = num(r"Average packet size:.*response (\d+)", "")
runtime = num(r"Run time \(s\):\s+([\d.]+)", wall)
try:
    u, s = open(timef).read().split()[:2]
    client = float(u) + float(s)
except ValueError:
    client = 0.0
hz = float(hz)
server_cpu = int(cpu) / hz
other = max(0.0, int(busy) / hz - server_cpu - client)
print("\t".join(str(x) for x in [rnd, zone, sid, name, mix, qps, lat, lost, completed,
      f"{server_cpu:.2f}", runtime, f"{other:.2f}", resp, check,
      f"{int(user) / hz:.2f}", f"{int(sys_) / hz:.2f}"]))
EOF
}

# --- soak: no query lost at 80% of the maximum rate, RSS stable
if [ "$MODE" = soak ]; then
    # rss_sampler PID SECONDS FILE: VmRSS (KiB) of PID at 0, 5, 10, ... s (< SECONDS).
    rss_sampler() {
        local t=0
        while [ "$t" -lt "$2" ]; do
            awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" >>"$3" 2>/dev/null || break
            t=$((t + 5))
            if [ "$t" -lt "$2" ]; then sleep 5; fi
        done
        return 0
    }
    # dnsperf_num LABEL: the number after "LABEL:" in the last dnsperf summary.
    dnsperf_num() {
        sed -n "s/^ *$1: *\([0-9.]*\).*/\1/p" "$WORK/dnsperf.out" | head -1
    }
    if [ "$SECS" -lt 1 ]; then
        echo "network.sh: --soak needs -l of at least 1 s" >&2
        exit 2
    fi
    echo "network.sh: soak, 5 s maximum run then $SECS s at 80%; load average $LOAD_START" >&2
    CHECK=-
    port=$(free_port)
    start_server authd-mem root "$port"
    SOAK_SECS=$SECS
    SECS=5
    run_dnsperf 1 root authd-mem real "$port"
    echo "  max: $(tail -1 "$RESULTS" | cut -f2,4,5,6,10,11 | tr '\t' ' ')" >&2
    MAX_QPS=$(dnsperf_num 'Queries per second')
    MAX_QPS=${MAX_QPS%.*}
    if [ -z "$MAX_QPS" ] || [ "$MAX_QPS" -lt 100 ]; then
        echo "network.sh: no usable maximum rate (${MAX_QPS:-none} qps)" >&2
        exit 1
    fi
    TARGET_QPS=$((MAX_QPS * 80 / 100))
    SECS=$SOAK_SECS
    RATE=(-Q "$TARGET_QPS")
    RSS=$WORK/rss.txt
    : >"$RSS"
    rss_sampler "$SERVER_PID" "$SECS" "$RSS" &
    SAMPLER=$!
    PIDS+=("$SAMPLER")
    run_dnsperf 1 root authd-mem real "$port"
    echo "  soak: $(tail -1 "$RESULTS" | cut -f2,4,5,6,10,11 | tr '\t' ' ')" >&2
    wait "$SAMPLER" || true
    awk '/^VmRSS:/ { print $2 }' "/proc/$SERVER_PID/status" >>"$RSS" 2>/dev/null || true
    SENT=$(dnsperf_num 'Queries sent')
    COMPLETED=$(dnsperf_num 'Queries completed')
    LOST=$(dnsperf_num 'Queries lost')
    ACHIEVED=$(dnsperf_num 'Queries per second')
    RUNTIME=$(dnsperf_num 'Run time (s)')
    SERVER_CPU=$(tail -1 "$RESULTS" | cut -f10)
    ALIVE=yes
    kill -0 "$SERVER_PID" 2>/dev/null || ALIVE=no
    stop_server
    LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

    echo
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); nproc: $(nproc); CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "command: bench/network.sh $ARGS"
    echo "server: $SERVER_NAME, root zone, real mix, 1 UDP worker pinned to core 1"
    echo "dnsperf $(dnsperf -h 2>&1 | sed -n 's/.*[Vv]ersion \([0-9.]*\).*/\1/p' | head -1) pinned to core 0, -c 1 -q 100 -b 4096 ${EDNS[*]}; load average at start $LOAD_START, at end $LOAD_END"
    echo "max qps: $MAX_QPS (5 s run)"
    echo "target rate: $TARGET_QPS qps (80%, dnsperf -Q $TARGET_QPS -l $SECS)"
    echo "achieved qps: $(awk -v q="${ACHIEVED:-0}" -v t="${RUNTIME:-0}" -v c="${SERVER_CPU:-0}" \
        'BEGIN { printf "%.0f over %.1f s; authd CPU %.2f s (%.0f%% of core 1)", q, t, c, (t > 0 ? 100 * c / t : 0) }')"
    echo "queries: sent ${SENT:-?}, completed ${COMPLETED:-?}, lost ${LOST:-?}"
    echo "RSS samples (KiB, every 5 s and after the run): $(paste -sd' ' "$RSS")"
    read -r N_RSS RSS_MIN RSS_MAX RSS_FIRST RSS_LAST < <(awk 'NR == 1 { min = max = first = $1 }
        { if ($1 < min) min = $1; if ($1 > max) max = $1; last = $1 }
        END { print NR, min + 0, max + 0, first + 0, last + 0 }' "$RSS")
    echo "RSS (KiB): $N_RSS samples, min $RSS_MIN, max $RSS_MAX, first $RSS_FIRST, last $RSS_LAST"
    REASONS=()
    [ "$ALIVE" = yes ] || REASONS+=("authd exited during the run")
    if [ -z "$LOST" ] || [ -z "$SENT" ]; then
        REASONS+=("no dnsperf summary")
    elif [ "$LOST" -ne 0 ]; then
        REASONS+=("$LOST queries lost")
    fi
    if [ "$N_RSS" -lt 2 ] || [ "$RSS_FIRST" -le 0 ]; then
        REASONS+=("fewer than 2 RSS samples")
    elif [ $((RSS_LAST * 100)) -gt $((RSS_FIRST * 105)) ]; then
        REASONS+=("RSS grew from $RSS_FIRST to $RSS_LAST KiB (> 5%)")
    fi
    if [ ${#REASONS[@]} -eq 0 ]; then
        echo "soak: PASS"
        exit 0
    fi
    MSG=${REASONS[0]}
    for r in "${REASONS[@]:1}"; do MSG="$MSG; $r"; done
    echo "soak: FAIL ($MSG)"
    exit 1
fi

echo "network.sh: mode $MODE, $SECS s per run, $ROUNDS round(s); load average $LOAD_START" >&2
for round in $(seq "$ROUNDS"); do
    ROUND=$round
    for z in "${ZONES[@]}"; do
        for s in "${SERVERS[@]}"; do
            # One start for all mixes, or (--restart) one per mix.
            if [ "$RESTART" = 1 ]; then starts=${MIXES[$z]}; else starts=all; fi
            for start in $starts; do
                port=$(free_port)
                if ! start_server "$s" "$z" "$port"; then
                    stop_server
                    continue
                fi
                mixes=$start
                [ "$start" = all ] && mixes=${MIXES[$z]}
                for mix in $mixes; do
                    CHECK=-
                    if [ "$round" = 1 ]; then check_answers "$z" "$mix" "$port"; fi
                    if [ "$WARM" = 1 ]; then warm_up "$z" "$mix" "$port"; fi
                    run_dnsperf "$round" "$z" "$s" "$mix" "$port"
                    echo "  $(tail -1 "$RESULTS" | cut -f2,4,5,6,10,11 | tr '\t' ' ')" >&2
                done
                stop_server
            done
        done
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# --- table
echo
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); nproc: $(nproc); CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo "command: bench/network.sh $ARGS"
echo "dnsperf $(dnsperf -h 2>&1 | sed -n 's/.*[Vv]ersion \([0-9.]*\).*/\1/p' | head -1) pinned to core 0, $([ "$MODE" = workers ] && echo '-c 8' || echo '-c 1') -q 100 -b 4096 -l $SECS ${EDNS[*]}; load average at start $LOAD_START, at end $LOAD_END"
if [ "$MODE" = large ]; then
    echo "zone: tld., $LARGE_DIR/zone ($LARGE_HOW): $(wc -c <"${ZFILE[large]}") bytes; $(awk '$0 !~ /^[;$]/ && NF' "${ZFILE[large]}" | wc -l) lines; mixes of $(wc -l <"$LARGE_DIR/queries-uniform.txt") queries"
    if needs_sqlite; then echo "sqlite3: $(tail -1 "$WORK/loadzone-large.log")"; fi
fi
python3 - "$RESULTS" "$MODE" "$LOADS" <<'EOF'
import statistics, sys
from collections import OrderedDict
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
mode = sys.argv[2]
cells = OrderedDict()
checks = {}
for r in rows:
    key = (r[1], r[4], r[2])          # zone, mix, server id
    cells.setdefault(key, []).append(r)
    if r[13] != "-":
        checks[key] = r[13]
def pick(runs):                      # the run with the median qps
    runs = sorted(runs, key=lambda r: float(r[5]))
    return runs[(len(runs) - 1) // 2]
out = []
for key, runs in cells.items():
    r = pick(runs)
    qps, cpu, wall = float(r[5]), float(r[9]), float(r[10]) or 1.0
    done = int(r[8])
    qpc = done / cpu if cpu > 0 else float("nan")
    out.append(dict(zone=key[0], mix=key[1], sid=key[2], name=r[3], qps=qps,
                    lat=float(r[6]) * 1e6, lost=int(r[7]), cpu=cpu, wall=wall,
                    util=cpu / wall, qpc=qpc, other=float(r[11]) / wall,
                    resp=r[12], check=checks.get(key, "-"), n=len(runs),
                    user_us=float(r[14]) / done * 1e6 if done else float("nan"),
                    sys_us=float(r[15]) / done * 1e6 if done else float("nan"),
                    spread=(min(float(x[5]) for x in runs), max(float(x[5]) for x in runs))))
print()
print("| zone | mix | server | qps | mean latency (µs) | lost | server CPU (s) | server CPU % | queries / CPU-s | user / kernel µs per query | bound | resp. bytes | rest CPU % | answers |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
for c in out:
    qps = f"{c['qps']:,.0f}"
    if c["n"] > 1:
        qps += f" ({c['spread'][0]:,.0f}–{c['spread'][1]:,.0f})"
    print(f"| {c['zone']} | {c['mix']} | {c['name']} | {qps} | {c['lat']:.0f} | {c['lost']} | "
          f"{c['cpu']:.2f} | {100 * c['util']:.0f} | {c['qpc']:,.0f} | "
          f"{c['user_us']:.2f} / {c['sys_us']:.2f} | "
          f"{'server' if c['util'] >= 0.9 else 'client'} | {c['resp']} | {100 * c['other']:.0f} | {c['check']} |")
if mode == "workers":
    # authd-w1 / authd-sql-w1 are the one-worker base of their source.
    base = {(c["sid"][:-1], c["zone"], c["mix"]): c for c in out if c["sid"].endswith("w1")}
    print()
    print("| zone | mix | source | UDP workers | qps | x 1 worker | server CPU % (of one core) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for c in out:
        b = base.get((c["sid"][:-1], c["zone"], c["mix"]))
        ratio = c["qps"] / b["qps"] if b and b["qps"] else float("nan")
        source = "sqlite3, no cache" if c["sid"].startswith("authd-sql") else "memory"
        print(f"| {c['zone']} | {c['mix']} | {source} | {c['sid'][-1]} | {c['qps']:,.0f} | {ratio:.2f} | {100 * c['util']:.0f} |")
    sys.exit(0)
print()
print("authd / best peer (NSD, Knot, BIND, PowerDNS) in the same mix:")
print()
print("| zone | mix | authd | qps ratio (best peer) | queries/CPU-s ratio (best peer) |")
print("|---|---|---|---:|---:|")
for c in out:
    if not c["sid"].startswith("authd"):
        continue
    peers = [p for p in out if (p["zone"], p["mix"]) == (c["zone"], c["mix"]) and not p["sid"].startswith("authd")]
    if not peers:
        continue
    bq = max(peers, key=lambda p: p["qps"])
    bc = max(peers, key=lambda p: p["qpc"] if p["qpc"] == p["qpc"] else 0)
    print(f"| {c['zone']} | {c['mix']} | {c['name']} | {c['qps'] / bq['qps']:.2f} ({bq['name']}) | "
          f"{c['qpc'] / bc['qpc']:.2f} ({bc['name']}) |")
if mode != "large":
    sys.exit(0)
# authd against each peer, queries per CPU-second (and qps).
print()
print("authd / NSD and authd / Knot in the same mix, queries per server CPU-second (qps ratio in brackets):")
print()
by = {(c["zone"], c["mix"], c["sid"]): c for c in out}
def ratio(c, peer):
    p = by.get((c["zone"], c["mix"], peer))
    if not p or not p["qpc"] or p["qpc"] != p["qpc"]:
        return "–"
    return f"{c['qpc'] / p['qpc']:.2f} ({c['qps'] / p['qps']:.2f})"
print("| zone | mix | authd | / NSD | / Knot |")
print("|---|---|---|---:|---:|")
for c in out:
    if c["sid"].startswith("authd"):
        print(f"| {c['zone']} | {c['mix']} | {c['name']} | {ratio(c, 'nsd')} | {ratio(c, 'knot')} |")
# Start until the first SOA answer, per round.
loads = OrderedDict()
for l in open(sys.argv[3]):
    if l.strip():
        rnd, zone, sid, name, secs = l.rstrip("\n").split("\t")
        loads.setdefault((zone, name), []).append(secs)
print()
print("Start until the first SOA answer (s), each round:")
print()
print("| zone | server | load time (s) |")
print("|---|---|---|")
for (zone, name), secs in loads.items():
    print(f"| {zone} | {name} | {', '.join(secs)} |")
EOF
