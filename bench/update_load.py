#!/usr/bin/env python3
"""Sends dynamic updates (RFC 2136) at a steady rate, for bench/update-load.sh.

usage: update_load.py HOST PORT ZONE RATE SECONDS

Each UPDATE (unsigned, over UDP) either adds the TXT RR `load-N.ZONE 60 IN
TXT "N"` or deletes the one added before it, so the zone stays the same size.
Replies are read as they come (none is waited for); at the end one line says
how many were sent and how many got NOERROR, another rcode, or no reply.
Standard library only.
"""

import socket
import struct
import sys
import time


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def update(msg_id, zone, n, add):
    header = struct.pack(">HHHHHH", msg_id, 5 << 11, 1, 0, 1, 0)
    question = wire_name(zone) + struct.pack(">HH", 6, 1)  # zone SOA IN
    owner = wire_name(f"load-{n}.{zone}")
    txt = str(n).encode()
    rdata = bytes([len(txt)]) + txt
    if add:
        rr = owner + struct.pack(">HHIH", 16, 1, 60, len(rdata)) + rdata
    else:  # delete this RR: class NONE, TTL 0
        rr = owner + struct.pack(">HHIH", 16, 254, 0, len(rdata)) + rdata
    return header + question + rr


def main():
    host, port, zone, rate, secs = sys.argv[1:6]
    port, rate, secs = int(port), float(rate), float(secs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect((host, port))
    sock.setblocking(False)
    sent, noerror, other = 0, 0, 0
    start = time.monotonic()
    end = start + secs
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = start + sent / rate
        if now >= due:
            n = sent // 2
            sock.send(update(sent & 0xFFFF, zone, n, sent % 2 == 0))
            sent += 1
        try:
            while True:
                reply = sock.recv(512)
                if len(reply) >= 4 and reply[3] & 0x0F == 0:
                    noerror += 1
                else:
                    other += 1
        except BlockingIOError:
            pass
        time.sleep(min(0.002, max(0.0, start + sent / rate - time.monotonic())))
    deadline = time.monotonic() + 3
    sock.setblocking(True)
    sock.settimeout(0.2)
    while noerror + other < sent and time.monotonic() < deadline:
        try:
            reply = sock.recv(512)
        except socket.timeout:
            continue
        if len(reply) >= 4 and reply[3] & 0x0F == 0:
            noerror += 1
        else:
            other += 1
    print(f"updates: {sent} sent in {secs:.0f} s ({sent / secs:.1f}/s), "
          f"{noerror} NOERROR, {other} other rcode, {sent - noerror - other} unanswered")


if __name__ == "__main__":
    main()
