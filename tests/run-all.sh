#!/usr/bin/env bash
# Runs every test of authd: the Cargo test suite and the interop scripts in
# tests/interop/. This is README.md's test command and what .ci/run calls.
#
#   tests/run-all.sh            install what is missing (as root), then test
#   tests/run-all.sh --check    only list what is missing (exit 1 if anything)
#
# The end-to-end tests drive real tools and peers, and fail (rather than skip)
# without them. Their Debian packages are listed once, here, in PREREQUISITES.
# Run as root, the script apt-get installs the missing ones; run as another
# user, it prints the one `apt-get install` line to run as root and stops
# before building anything. Debian 12 (bookworm) or later; other
# distributions: install the same tools by hand.
#
# On a machine with systemd, Debian starts and enables the servers it
# installs (bind9 as named, knot, nsd, unbound, prometheus) on port 53 and
# 9090. The tests do not need them running: they start their own instances
# on loopback ports. Stop them with
#   systemctl disable --now named knot nsd unbound prometheus
#
# Python: the TSIG tests run `python3` with dnspython. When the python3 on
# PATH (say, pyenv's) has no dnspython, the tests are run with Debian's
# /usr/bin/python3 (package python3-dnspython) first on PATH instead.
#
# Time on a 2-core machine from a fresh clone: about 8 minutes (the debug
# build of the workspace and its tests, the tests, then the interop scripts
# in about 30 s).
# The interop scripts go on after a failure; the summary at the end lists
# every step that failed, and the exit status is 1 if any did.
set -euo pipefail
cd "$(dirname "$0")/.."

# COMMAND=PACKAGE: a command the tests run and the Debian package with it.
PREREQUISITES=(
    cc=build-essential               # C compiler: the bundled SQLite, mimalloc
    dig=bind9-dnsutils               # queries in every end-to-end test
    nsupdate=bind9-dnsutils          # UPDATE tests (update.rs, metrics.rs)
    dnstap-read=bind9-dnsutils       # reads authd's dnstap (dnstap.rs)
    fstrm_capture=fstrm-bin          # a dnstap socket reader (dnstap.rs)
    sqlite3=sqlite3                  # zone-admin tests (SQL on the zone DB)
    knotd=knot                       # reference server (dnssec.rs), secondary, primary and catalog producer (interop)
    kdig=knot-dnsutils               # dnssec.rs
    knsupdate=knot-dnsutils          # update.rs
    kzonecheck=knot-dnssecutils      # reference zone checker (rrtypes.rs)
    named=bind9                      # reference server (rrtypes.rs), TSIG secondary and primary (interop)
    named-checkzone=bind9-utils      # reference zone checker (rrtypes.rs)
    dnssec-verify=bind9-utils        # checks zones authd signs (signing.rs, signing_sqlite.rs, interop)
    dnssec-signzone=bind9-utils      # signs with keys authd makes (datasrc signer::keys)
    ldns-verify-zone=ldnsutils       # checks zones authd signs, by ldns (signing.rs, interop)
    unbound=unbound                  # validating resolver (dnssec.rs, signing.rs)
    delv=bind9-dnsutils              # validates answers of zones authd signs (signing.rs)
    promtool=prometheus              # checks /metrics (metrics.rs)
    prometheus=prometheus            # scrapes authd (interop/prometheus.sh)
    nsd=nsd                          # primary of authd (interop/nsd-primary.sh)
    dnsdist=dnsdist                  # PROXY v2 sender over UDP and TCP (proxy.rs)
    haproxy=haproxy                  # PROXY v2 sender over TCP (proxy.rs)
    curl=curl                        # Prometheus API (interop/prometheus.sh)
    openssl=openssl                  # certificates for XoT (interop/xot.sh)
    man=man-db                       # renders the manual pages (service.rs)
    systemd-analyze=systemd          # checks dist/authd.service (service.rs)
)
# Debian's python3 with dnspython (BADTIME and signed-NOTIFY tests, tsig.rs).
DEBIAN_PYTHON=/usr/bin/python3
DNSPYTHON=python3-dnspython

# missing_packages: the packages of PREREQUISITES whose command is not on
# PATH, and python3-dnspython when Debian's python3 lacks dnspython; each once.
missing_packages() {
    local pair pkgs=()
    for pair in "${PREREQUISITES[@]}"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || pkgs+=("${pair#*=}")
    done
    "$DEBIAN_PYTHON" -c 'import dns.tsig' >/dev/null 2>&1 || pkgs+=("$DNSPYTHON")
    [ ${#pkgs[@]} -eq 0 ] || printf '%s\n' "${pkgs[@]}" | awk '!seen[$0]++' | tr '\n' ' '
}

missing=$(missing_packages)
if [ "${1:-}" = "--check" ]; then
    if [ -n "$missing" ]; then
        echo "missing: apt-get install ${missing% }"
        exit 1
    fi
    echo "nothing missing"
    exit 0
fi
if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "run-all.sh: the tests need these Debian packages; as root, run:" >&2
        echo "apt-get install ${missing% }" >&2
        exit 1
    fi
    echo "run-all.sh: apt-get install ${missing% }" >&2
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    # shellcheck disable=SC2086 # one word per package
    if ! { apt-get update -qq && apt-get install -y -qq $missing; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "run-all.sh: apt-get failed" >&2
        exit 1
    fi
    rm -f "$log"
    missing=$(missing_packages)
    if [ -n "$missing" ]; then
        echo "run-all.sh: still missing after apt-get install: $missing" >&2
        exit 1
    fi
fi

# Rust: the rust-version of Cargo.toml, or newer (rustup; Debian's is older).
want_rust=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if ! command -v cargo >/dev/null 2>&1; then
    echo "run-all.sh: cargo not found; install Rust $want_rust or newer with rustup (https://rustup.rs)" >&2
    exit 1
fi
have_rust=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$want_rust" "$have_rust" | sort -V | head -1)" != "$want_rust" ]; then
    echo "run-all.sh: rustc $have_rust is older than $want_rust (Cargo.toml rust-version); rustup update" >&2
    exit 1
fi

# A python3 first on PATH that has dnspython.
if ! python3 -c 'import dns.tsig' >/dev/null 2>&1; then
    shim=$(mktemp -d)
    trap 'rm -rf "$shim"' EXIT
    ln -s "$DEBIAN_PYTHON" "$shim/python3"
    echo "run-all.sh: $(command -v python3) has no dnspython; the tests use $DEBIAN_PYTHON" >&2
    export PATH="$shim:$PATH"
fi

# Each step runs to the end; the failed ones are listed at the end.
failed=()
summary=()
step() {
    local start=$SECONDS status=0
    echo "=== $*" >&2
    "$@" || status=$?
    summary+=("$(printf '%-40s %s, %d s' "$*" "$([ $status -eq 0 ] && echo ok || echo "FAILED ($status)")" $((SECONDS - start)))")
    [ $status -eq 0 ] || failed+=("$*")
}

# The Cargo test suite. --no-fail-fast: every failing test binary is
# reported, not only the first.
step cargo test --workspace --locked --no-fail-fast
# Interop: Knot DNS as a secondary of authd (AXFR, then IXFR after NOTIFY).
step tests/interop/secondary.sh
# Knot DNS and BIND 9 as secondaries under TSIG (signed AXFR, signed NOTIFY,
# IXFR; refused without the key).
step tests/interop/tsig-secondaries.sh
# authd as the secondary of Knot DNS and BIND 9 (TSIG, AXFR, IXFR, NOTIFY,
# expiry; the chain Knot -> authd -> BIND 9), of NSD, and of Knot for the
# whole signed root zone.
step tests/interop/primaries.sh
step tests/interop/nsd-primary.sh
step tests/interop/root-axfr.sh
# The chain Knot DNS -> authd (a secondary zone served from memory) -> Knot
# DNS by IXFR, and a restart served from the zone's DB without its primary.
step tests/interop/memory-chain.sh
# IXFR from differences: Knot DNS and BIND 9 follow authd by IXFR after
# loadzone replaces an sqlite3 zone and after SIGHUP reloads a master file.
step tests/interop/ixfr-from-differences.sh
# A real Prometheus server scrapes authd's /metrics.
step tests/interop/prometheus.sh
# Zone transfers over TLS: BIND 9 and NSD follow authd over TLS (AXFR, IXFR
# after NOTIFY), authd follows BIND 9 over TLS, certificates verified.
step tests/interop/xot.sh
# Catalog zones (RFC 9432): authd consumes the catalog Knot DNS generates
# (members added, 1,000 in one change, a group, removed, reset, a restart),
# and catalogs an authd primary serves from a master file (broken ones, a
# member configured locally, a member PTR to the root); Knot DNS and BIND 9
# consume the catalog authd produces (members created, deleted, a group,
# a restart, 1,000 in one transaction).
step tests/interop/catalog-knot.sh
step tests/interop/catalog-broken.sh
step tests/interop/catalog-consumers.sh
# Online signing: Knot DNS and BIND 9 follow a zone authd signs by IXFR
# (UPDATE, plain SQL, zone update), every copy passing dnssec-verify and
# ldns-verify-zone.
step tests/interop/signed-secondaries.sh
# A bump-in-the-wire signer: authd signs the zone BIND 9 serves unsigned, as
# its secondary, follows it by IXFR past its own re-signing and a restart,
# and Knot DNS follows authd by IXFR.
step tests/interop/bump-in-the-wire.sh

echo "=== summary" >&2
printf '%s\n' "${summary[@]}" >&2
if [ ${#failed[@]} -gt 0 ]; then
    echo "run-all.sh: ${#failed[@]} step(s) failed" >&2
    exit 1
fi
echo "run-all.sh: all tests passed" >&2
