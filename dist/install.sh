#!/usr/bin/env bash
# Installs authd as a systemd service on Debian (12 or later). As root, from
# the repository root, after `cargo build --release`:
#
#   dist/install.sh
#
# Each step can be run by hand; none overwrites the configuration or a zone DB
# that is already there, so running it again upgrades binaries, manual pages
# and the unit only.
#
#   1. the system user and group authd (home /var/lib/authd, no shell);
#   2. the binaries authd, authc, loadzone, zone, dbutil, query-bench in
#      /usr/local/bin;
#   3. /etc/authd/authd.toml from the commented dist/authd.toml (port 53 on
#      loopback, the zone DB below, the control socket), root:authd 0640 so
#      TSIG secrets in it stay private;
#   4. /var/lib/authd, owned by authd (0750), with an empty zone DB
#      zones.sqlite3 (the schema of migrations/sql/create_2_2.sql, WAL mode);
#   5. the manual pages: one per binary in /usr/local/share/man/man1, and
#      authd.toml(5), made from docs/CONFIG.md, in man5 (then mandb);
#   6. dist/authd.service in /etc/systemd/system, checked with
#      systemd-analyze verify; systemctl daemon-reload when systemd runs.
#
# It neither enables nor starts the service; then:
#
#   systemctl enable --now authd
#   install -m 0644 examples/example.com.zone /etc/authd/
#   runuser -u authd -- loadzone --db /var/lib/authd/zones.sqlite3 example.com. /etc/authd/example.com.zone
#   dig @127.0.0.1 www.example.com A
#
# (a zone loaded into the DB is served within a second, without a reload).
# Needs: python3 and sqlite3 (apt-get install python3 sqlite3); man-db for
# `man authd`. BIN=DIR takes the binaries from DIR instead of target/release.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release}
BINARIES=(authd authc loadzone zone dbutil query-bench)
PREFIX=/usr/local
CONF=/etc/authd
STATE=/var/lib/authd
UNIT=/etc/systemd/system/authd.service

die() {
    echo "install.sh: $*" >&2
    exit 1
}
[ "$(id -u)" -eq 0 ] || die "run as root"
for b in "${BINARIES[@]}"; do
    [ -x "$BIN/$b" ] || die "$BIN/$b not found; build first: cargo build --release"
done
for c in python3 sqlite3; do
    command -v "$c" >/dev/null 2>&1 || die "$c not found; apt-get install python3 sqlite3"
done

# 1. The user.
if ! getent passwd authd >/dev/null; then
    useradd --system --user-group --home-dir "$STATE" --no-create-home \
        --shell /usr/sbin/nologin --comment "authd DNS server" authd
    echo "created the system user authd"
fi

# 2. The binaries.
for b in "${BINARIES[@]}"; do
    install -m 0755 "$BIN/$b" "$PREFIX/bin/$b"
done
echo "installed ${BINARIES[*]} in $PREFIX/bin"

# 3. The configuration.
install -d -m 0755 "$CONF"
if [ -e "$CONF/authd.toml" ]; then
    echo "kept $CONF/authd.toml (the new example is dist/authd.toml)"
else
    install -m 0640 -o root -g authd dist/authd.toml "$CONF/authd.toml"
    echo "installed $CONF/authd.toml"
fi

# 4. The state folder and an empty zone DB, both the user authd's.
install -d -m 0750 -o authd -g authd "$STATE"
if [ -e "$STATE/zones.sqlite3" ]; then
    echo "kept $STATE/zones.sqlite3"
else
    { echo "PRAGMA journal_mode=WAL; BEGIN;"; cat migrations/sql/create_2_2.sql; echo "COMMIT;"; } |
        runuser -u authd -- sqlite3 -bail "$STATE/zones.sqlite3" >/dev/null
    echo "created the empty zone DB $STATE/zones.sqlite3"
fi

# 5. The manual pages.
install -d -m 0755 "$PREFIX/share/man/man1" "$PREFIX/share/man/man5"
for b in "${BINARIES[@]}"; do
    "$BIN/$b" --man > "$PREFIX/share/man/man1/$b.1"
done
python3 dist/authd.toml.5.py > "$PREFIX/share/man/man5/authd.toml.5"
if command -v mandb >/dev/null 2>&1; then
    mandb -q "$PREFIX/share/man" || true
    echo "installed the manual pages (man authd, man authd.toml)"
else
    echo "installed the manual pages in $PREFIX/share/man; apt-get install man-db to read them"
fi

# 6. The unit.
install -m 0644 dist/authd.service "$UNIT"
if command -v systemd-analyze >/dev/null 2>&1; then
    systemd-analyze verify "$UNIT"
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
fi
echo "installed $UNIT; start it with: systemctl enable --now authd"
