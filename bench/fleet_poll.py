#!/usr/bin/env python3
"""The timing loop of bench/fleet.sh (python3 with dnspython).

    fleet_poll.py PRIMARY_PORT NAME ROUNDS TIMEOUT LABEL=PORT...

Each round, after a pause drawn uniformly from 0-300 ms (seeded: the same
pauses every run), so that the UPDATE lands at any point of the primary's
250 ms NOTIFY poll rather than always just after one: nsupdate (unsigned, to 127.0.0.1:PRIMARY_PORT) replaces NAME's
A RR with a new address (198.51.100.R, R the round, then 198.51.101.R, ...);
from nsupdate's return (the reply is sent after the commit), every
secondary still behind is asked NAME A over UDP (RD clear) about every 2 ms
until it answers the new address with AA, or TIMEOUT seconds pass (the
round then fails). Prints one line a round with each secondary's time and
the slowest, then per-secondary and all-four median, min and max, in ms.
"""
import os
import random
import statistics
import subprocess
import sys
import time

import dns.flags
import dns.message
import dns.query
import dns.rdatatype

POLL_INTERVAL = 0.002
PAUSE = float(os.environ.get("FLEET_PAUSE", "1.0"))


def answer_is(port, name, address):
    q = dns.message.make_query(name, dns.rdatatype.A)
    q.flags &= ~dns.flags.RD
    try:
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=0.05)
    except Exception:
        return False
    if r.rcode() != 0 or not r.flags & dns.flags.AA:
        return False
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.A:
            return [rd.address for rd in rrset] == [address]
    return False


def nsupdate(port, zone, name, old, new):
    script = (
        f"server 127.0.0.1 {port}\nzone {zone}\n"
        f"update delete {name} A {old}\nupdate add {name} 300 A {new}\nsend\n"
    )
    out = subprocess.run(["nsupdate"], input=script, text=True, capture_output=True)
    if out.returncode != 0:
        sys.exit(f"nsupdate failed ({out.returncode}): {out.stderr.strip()}")


def main():
    primary = int(sys.argv[1])
    name = sys.argv[2]
    rounds = int(sys.argv[3])
    timeout = float(sys.argv[4])
    secondaries = [(a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[5:]]
    zone = name.split(".", 1)[1]
    old = "192.0.2.80"
    times = {label: [] for label, _ in secondaries}
    slowest = []
    pauses = random.Random(1)
    for r in range(1, rounds + 1):
        time.sleep(PAUSE + pauses.uniform(0, 0.3))
        new = f"198.51.{100 + (r - 1) // 250}.{(r - 1) % 250 + 1}"
        nsupdate(primary, zone, name, old, new)
        t0 = time.monotonic()
        wall0 = time.time()
        pending = dict(secondaries)
        seen = {}
        while pending and time.monotonic() - t0 < timeout:
            for label, port in list(pending.items()):
                if answer_is(port, name, new):
                    seen[label] = time.monotonic() - t0
                    del pending[label]
            if pending:
                time.sleep(POLL_INTERVAL)
        if pending:
            sys.exit(f"round {r}: {', '.join(pending)} did not serve {name} A {new} within {timeout} s")
        for label in seen:
            times[label].append(seen[label] * 1000)
        slowest.append(max(seen.values()) * 1000)
        if os.environ.get("FLEET_ROUNDS_FILE"):
            with open(os.environ["FLEET_ROUNDS_FILE"], "a") as f:
                for label in seen:
                    f.write(f"{r} {label} {seen[label] * 1000:.3f} {wall0 + seen[label]:.6f}\n")
        print(
            f"round {r:2}: {name} A {new}: "
            + ", ".join(f"{label} {seen[label] * 1000:.1f}" for label, _ in secondaries)
            + f"; all four {slowest[-1]:.1f} ms",
            flush=True,
        )
        old = new
    print(f"{'secondary':<10} {'median':>8} {'min':>8} {'max':>8}  (ms, {rounds} UPDATEs)")
    for label, _ in secondaries + [("all four", 0)]:
        v = times[label] if label in times else slowest
        print(f"{label:<10} {statistics.median(v):8.1f} {min(v):8.1f} {max(v):8.1f}")


if __name__ == "__main__":
    main()
