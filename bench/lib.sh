# shellcheck shell=bash
# Shared by the bench scripts: sourced, not run.
#
# bench_workdir PREFIX: makes a temporary folder in $WORK and, on exit, stops
# every PID in $PIDS (by PID) and removes the folder.

bench_workdir() {
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    PIDS=()
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}

# A loopback port free for both UDP and TCP.
free_port() {
    # A UDP port the kernel picks, kept only if TCP can bind it too (retried:
    # the same number may be taken for TCP).
    python3 -c 'import socket, sys
for _ in range(50):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", s.getsockname()[1]))
    except OSError:
        continue
    print(s.getsockname()[1]); sys.exit(0)
sys.exit("free_port: no port free for both UDP and TCP")'
}

# The PID and every descendant of it.
tree() {
    local pid=$1 child
    echo "$pid"
    for child in $(pgrep -P "$pid" 2>/dev/null || true); do
        tree "$child"
    done
}

# query_mixes: makes sure $SHARED holds the query mixes (root/queries-*.txt,
# smallzone/queries-*.txt); when the shared data is not there, makes them in
# $WORK/data from the repository's zones with bench/make_queries.py (same
# seed, same files) and points SHARED there. Needs $ROOT and $WORK.
query_mixes() {
    if [ -r "$SHARED/root/queries-real.txt" ] && [ -r "$SHARED/smallzone/queries-success.txt" ]; then
        return 0
    fi
    echo "making the query mixes from the repository's zones (bench/make_queries.py)" >&2
    SHARED=$WORK/data
    mkdir -p "$SHARED/root" "$SHARED/smallzone"
    ln -sf "$ROOT/tests/data/root.zone" "$SHARED/root/root.zone"
    ln -sf "$ROOT/auth/src/default/example.com.zone" "$SHARED/smallzone/example.com.zone"
    python3 "$ROOT/bench/make_queries.py" --data "$SHARED" >&2
}
