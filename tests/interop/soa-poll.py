#!/usr/bin/env python3
"""Polls a DNS server until every zone of a list answers its SOA with one
serial, authoritatively (the interop scripts' bulk check; stdlib only).

    soa-poll.py PORT SERIAL NAMES_FILE TIMEOUT [START]

Each round sends a SOA query (no recursion) over UDP to 127.0.0.1:PORT for
every name of NAMES_FILE not yet served, and counts a name served when the
answer is NOERROR with the AA flag and one SOA RR of SERIAL. Rounds repeat
every 0.1 s until all are served (prints the seconds since START, a
`date +%s.%N`, or since the poller started, and exits 0) or TIMEOUT seconds
have passed (prints how many are served and the first few that are not, and
exits 1).
"""
import os
import random
import select
import socket
import struct
import sys
import time


def wire(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def skip_name(msg, i):
    while True:
        n = msg[i]
        if n == 0:
            return i + 1
        if n & 0xC0 == 0xC0:
            return i + 2
        i += n + 1


def served_serial(msg, qid):
    """The SOA serial of an authoritative NOERROR answer, else None."""
    if len(msg) < 12:
        return None
    rid, flags, qd, an = struct.unpack("!HHHH", msg[:8])
    if rid != qid or not flags & 0x8000 or not flags & 0x0400 or flags & 0x000F:
        return None
    if qd != 1 or an != 1:
        return None
    i = skip_name(msg, 12) + 4
    i = skip_name(msg, i)
    rtype, _, _, _ = struct.unpack("!HHIH", msg[i : i + 10])
    if rtype != 6:
        return None
    i += 10
    i = skip_name(msg, skip_name(msg, i))
    return struct.unpack("!I", msg[i : i + 4])[0]


def main():
    port, serial, names_file, timeout = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3],
        float(sys.argv[4]),
    )
    start = float(sys.argv[5]) if len(sys.argv) > 5 else time.time()
    with open(names_file) as f:
        todo = {line.strip() for line in f if line.strip()}
    total = len(todo)
    deadline = time.time() + timeout
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    while todo and time.time() < deadline:
        ids = {}
        for name in todo:
            qid = random.randrange(65536)
            while qid in ids:
                qid = random.randrange(65536)
            ids[qid] = name
            # RD clear; QTYPE SOA, QCLASS IN.
            query = struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 0) + wire(name) + b"\0\x06\0\x01"
            sock.sendto(query, ("127.0.0.1", port))
        # Collect answers for up to 0.5 s after the last send.
        wait_until = time.time() + 0.5
        while ids and time.time() < wait_until:
            ready, _, _ = select.select([sock], [], [], max(0.0, wait_until - time.time()))
            if not ready:
                break
            msg, _ = sock.recvfrom(65535)
            if len(msg) < 2:
                continue
            qid = struct.unpack("!H", msg[:2])[0]
            name = ids.pop(qid, None)
            if name is not None and served_serial(msg, qid) == serial:
                todo.discard(name)
        if todo:
            time.sleep(0.1)
    if todo:
        missing = sorted(todo)
        print(
            f"{total - len(todo)} of {total} served with serial {serial}; not yet: "
            + " ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
        return 1
    print(f"{time.time() - start:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
