#!/usr/bin/python3
"""Generate dnsperf query files ("name TYPE" per line) for the perf anchors.

A copy of the project workspace's shared/tools/make_queries.py, so that
bench/network.sh runs from a fresh clone: it makes the mixes from the zones in
the repository (tests/data/root.zone, auth/src/default/example.com.zone, the
same files as shared/data's), with the same seed, hence the same queries.

Deterministic: every file is produced from a fixed seed (SEED below, or
--seed), so re-running the script yields byte-identical files for the same
input zones.

Usage:
  /usr/bin/python3 make_queries.py [--seed N] [--lines N] [--data DIR]

Inputs (under DIR, default: the data/ folder beside this tools/ folder):
  root/root.zone                    signed root zone (RRSIGs etc. present)
  smallzone/example.com.zone        small synthetic zone
Outputs:
  root/queries-success.txt  root/queries-nxdomain.txt
  root/queries-soa.txt      root/queries-real.txt
  smallzone/queries-success.txt  smallzone/queries-nxdomain.txt

Only the Python standard library is used; the small zone is read through a
minimal master-file reader that understands exactly what example.com.zone
uses ($ORIGIN, $TTL, blank owners, '@', parenthesised SOA, comments).
"""
import argparse
import os
import random
import string

SEED = 2012          # BIND 10 era; any fixed value works, documented in README
LINES = 100_000

# --------------------------------------------------------------------------
# zone readers


def read_root(path):
    """Return (tlds, ds_tlds, glue) from a root zone in one-RR-per-line form."""
    tlds, ds_tlds = set(), set()
    glue = {}  # name -> set(types)
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith(';'):
                continue
            p = line.split()
            owner, rtype = p[0].lower(), p[3].upper()
            if owner == '.':
                continue
            if rtype == 'NS':
                tlds.add(owner)
            elif rtype == 'DS':
                ds_tlds.add(owner)
            elif rtype in ('A', 'AAAA'):
                glue.setdefault(owner, set()).add(rtype)
    return sorted(tlds), sorted(ds_tlds), {k: sorted(v) for k, v in sorted(glue.items())}


def read_small(path):
    """Minimal master-file reader for example.com.zone -> list of (owner, type)."""
    origin, last = None, None
    rrsets = []
    seen = set()
    pending = ''
    with open(path) as f:
        for raw in f:
            line = raw.split(';', 1)[0].rstrip('\n')
            if pending:
                pending += ' ' + line
                if ')' in line:
                    line, pending = pending, ''
                else:
                    continue
            elif '(' in line and ')' not in line:
                pending = line
                continue
            if not line.strip():
                continue
            if line.startswith('$ORIGIN'):
                origin = line.split()[1]
                continue
            if line.startswith('$'):
                continue
            blank_owner = line[0] in ' \t'
            p = line.split()
            if blank_owner:
                owner = last
            else:
                owner = p.pop(0)
                if owner == '@':
                    owner = origin
                elif not owner.endswith('.'):
                    owner = owner + '.' + origin
                last = owner
            # skip optional TTL / class
            while p and (p[0].isdigit() or p[0] == 'IN'):
                p.pop(0)
            rtype = p[0].upper()
            key = (owner.rstrip('.').lower(), rtype)
            if key not in seen:
                seen.add(key)
                rrsets.append(key)
    return origin.rstrip('.').lower(), rrsets


# --------------------------------------------------------------------------
# helpers

ALNUM = string.ascii_lowercase + string.digits
SYLL = ['ba', 'be', 'bi', 'bo', 'ca', 'co', 'da', 'de', 'di', 'fa', 'fi', 'ga',
        'go', 'ha', 'ka', 'ki', 'la', 'le', 'li', 'lo', 'ma', 'me', 'mi', 'mo',
        'na', 'ne', 'no', 'pa', 'pe', 'po', 'ra', 're', 'ri', 'ro', 'sa', 'se',
        'si', 'so', 'ta', 'te', 'ti', 'to', 'va', 've', 'za', 'zo', 'net', 'web',
        'shop', 'cloud', 'tech', 'soft', 'data', 'news', 'info', 'max', 'pro']


def rand_label(rng, lo, hi):
    n = rng.randint(lo, hi)
    return rng.choice(string.ascii_lowercase) + ''.join(rng.choice(ALNUM) for _ in range(n - 1))


def word_label(rng):
    """Second-level-looking names: 'foo123', 'mobile-shop', 'bamoli7' ..."""
    w = ''.join(rng.choice(SYLL) for _ in range(rng.randint(1, 3)))
    r = rng.random()
    if r < 0.35:
        w += str(rng.randint(0, 999))
    elif r < 0.45:
        w += '-' + ''.join(rng.choice(SYLL) for _ in range(rng.randint(1, 2)))
    return w


def weighted(rng, items):
    """items: list of (weight, value)."""
    tot = sum(w for w, _ in items)
    x = rng.random() * tot
    for w, v in items:
        x -= w
        if x < 0:
            return v
    return items[-1][1]


def write(path, lines):
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'{path}: {len(lines)} lines')


def q(name, rtype):
    return f'{name.rstrip(".") or "."} {rtype}'


# --------------------------------------------------------------------------
# root zone mixes

# Popular TLDs for the "real" mix (rough shape of root-server referral traffic:
# a heavy head of com/net/org/big ccTLDs plus a long tail).  Weights are
# relative; TLDs missing from the zone are ignored.
HEAD_TLDS = [
    ('com', 40), ('net', 12), ('org', 6), ('arpa', 4), ('de', 3), ('uk', 2.5),
    ('ru', 2.5), ('jp', 2), ('cn', 2), ('br', 2), ('fr', 1.5), ('io', 1.5),
    ('info', 1.5), ('nl', 1.2), ('au', 1.2), ('in', 1.2), ('it', 1), ('pl', 1),
    ('kr', 1), ('es', 1), ('ca', 1), ('eu', 0.8), ('co', 0.8), ('tv', 0.6),
    ('me', 0.6), ('us', 0.6), ('edu', 0.6), ('gov', 0.5), ('xyz', 0.5),
    ('se', 0.4), ('ch', 0.4), ('tr', 0.4), ('ir', 0.4), ('vn', 0.4),
    ('id', 0.4), ('mx', 0.4), ('ar', 0.3), ('za', 0.3), ('ua', 0.3),
    ('cz', 0.3), ('biz', 0.3), ('top', 0.3), ('online', 0.2), ('site', 0.2),
]

# Typical junk TLDs seen at the root (RFC 6762 .local, home routers, AD
# domains, search-list leakage ...), all absent from the root zone.
JUNK_TLDS = [
    ('local', 14), ('home', 12), ('lan', 10), ('localdomain', 8), ('corp', 8),
    ('internal', 5), ('domain', 4), ('belkin', 3), ('dlink', 2), ('router', 2),
    ('localhost', 4), ('intranet', 2), ('workgroup', 2), ('wpad', 3),
    ('gateway', 1), ('dhcp', 1), ('invalid', 1), ('ip', 1), ('private', 1),
    ('mshome', 1), ('sys', 1), ('loc', 1), ('hub', 1),
    ('fritz', 1), ('openstacklocal', 1), ('cluster', 1),
]

REF_QTYPES = [('A', 55), ('AAAA', 25), ('MX', 3), ('TXT', 3), ('NS', 4),
              ('DS', 2), ('SRV', 2), ('SOA', 2), ('CNAME', 1),
              ('ANY', 1), ('DNSKEY', 2)]
JUNK_QTYPES = [('A', 55), ('AAAA', 25), ('SOA', 6), ('SRV', 5), ('PTR', 3),
               ('MX', 2), ('TXT', 2), ('NS', 2)]


def root_mixes(data, rng_seed, nlines):
    tlds, ds_tlds, glue = read_root(os.path.join(data, 'root', 'root.zone'))
    tldset = set(t.rstrip('.') for t in tlds)
    tld_names = sorted(tldset)
    ds_names = sorted(t.rstrip('.') for t in ds_tlds)
    glue_items = [(n.rstrip('.'), t) for n, ts in glue.items() for t in ts]
    rootsrv = [f'{c}.root-servers.net' for c in 'abcdefghijklm']
    print(f'root zone: {len(tld_names)} delegations, {len(ds_names)} with DS, '
          f'{len(glue_items)} glue RRsets')

    # ---- success: existing names with existing types --------------------
    rng = random.Random(rng_seed)
    out = []
    for _ in range(nlines):
        r = rng.random()
        if r < 0.50:
            out.append(q(rng.choice(tld_names), 'NS'))            # referral
        elif r < 0.70:
            out.append(q(rng.choice(ds_names), 'DS'))             # auth answer
        elif r < 0.85:
            n, t = rng.choice(glue_items)                         # glue -> referral
            out.append(q(n, t))
        elif r < 0.91:
            out.append(q('.', 'SOA'))
        elif r < 0.97:
            out.append(q('.', 'NS'))
        else:
            out.append(q('.', 'DNSKEY'))   # NODATA on root-unsigned.zone
    rng.shuffle(out)
    write(os.path.join(data, 'root', 'queries-success.txt'), out)

    # ---- nxdomain: random non-existent TLD labels -------------------------
    rng = random.Random(rng_seed + 1)
    out = []
    while len(out) < nlines:
        lab = rand_label(rng, 6, 14)
        if lab in tldset:
            continue
        out.append(q(lab, 'A'))
    write(os.path.join(data, 'root', 'queries-nxdomain.txt'), out)

    # ---- soa: ". SOA" repeated --------------------------------------------
    write(os.path.join(data, 'root', 'queries-soa.txt'), [q('.', 'SOA')] * 10_000)

    # ---- real: realistic root-server-like mix -----------------------------
    rng = random.Random(rng_seed + 2)
    head = [(w, t) for t, w in HEAD_TLDS if t in tldset and w > 0]
    junk = [(w, t) for t, w in JUNK_TLDS if t not in tldset and w > 0]
    out = []
    for _ in range(nlines):
        r = rng.random()
        if r < 0.60:
            # referral for an existing TLD, random second-level name
            tld = weighted(rng, head) if rng.random() < 0.70 else rng.choice(tld_names)
            qt = weighted(rng, [(w, t) for t, w in REF_QTYPES])
            if tld == 'arpa':
                if rng.random() < 0.7:
                    name = '.'.join(str(rng.randint(1, 254)) for _ in range(4)) + '.in-addr.arpa'
                else:
                    name = '.'.join(rng.choice('0123456789abcdef') for _ in range(32)) + '.ip6.arpa'
                qt = 'PTR'
            else:
                name = word_label(rng) + '.' + tld
                if rng.random() < 0.30:
                    name = rng.choice(['www', 'mail', 'api', 'cdn', 'ns1', 'm', 'static', 'img']) + '.' + name
            out.append(q(name, qt))
        elif r < 0.90:
            # NXDOMAIN junk TLD
            qt = weighted(rng, [(w, t) for t, w in JUNK_QTYPES])
            if rng.random() < 0.40:
                # Chromium-style intranet-redirect probe: single random label
                name = ''.join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(7, 15)))
                if name in tldset:
                    name += 'x'
                qt = 'A'
            else:
                tld = weighted(rng, junk)
                rr = rng.random()
                if rr < 0.15:
                    name = tld
                elif rr < 0.30:
                    name = '_ldap._tcp.dc._msdcs.' + word_label(rng) + '.' + tld
                    qt = 'SRV'
                elif rr < 0.40:
                    name = 'wpad.' + tld
                else:
                    name = rng.choice(['host', 'pc', 'desktop', 'printer', 'nas', 'laptop', 'iphone',
                                       'android', 'tv', 'router', 'cam', 'srv', 'dc']) \
                        + ('-' + str(rng.randint(1, 999)) if rng.random() < 0.5 else '') + '.' + tld
            out.append(q(name, qt))
        else:
            # other: apex NS/SOA/DNSKEY, root-server names
            rr = rng.random()
            if rr < 0.30:
                out.append(q('.', 'NS'))
            elif rr < 0.50:
                out.append(q('.', 'SOA'))
            elif rr < 0.70:
                out.append(q('.', 'DNSKEY'))
            else:
                out.append(q(rng.choice(rootsrv), rng.choice(['A', 'AAAA'])))
    rng.shuffle(out)
    write(os.path.join(data, 'root', 'queries-real.txt'), out)


# --------------------------------------------------------------------------
# small zone mixes

def small_mixes(data, rng_seed, nlines):
    origin, rrsets = read_small(os.path.join(data, 'smallzone', 'example.com.zone'))
    deleg = {n for n, t in rrsets if t == 'NS' and n != origin}
    below_cut = {n for n, _ in rrsets if any(n.endswith('.' + d) for d in deleg)}
    cnames = {n for n, t in rrsets if t == 'CNAME'}
    wild = [n[2:] for n, _ in rrsets if n.startswith('*.')]
    auth = [(n, t) for n, t in rrsets
            if n not in deleg and n not in below_cut and not n.startswith('*.')]
    # query CNAME owners for A (server must chase the CNAME inside the zone)
    auth = [(n, 'A' if t == 'CNAME' else t) for n, t in auth]
    print(f'{origin}: {len(rrsets)} RRsets, {len({n for n, _ in rrsets})} names, '
          f'wildcards under {wild}, delegations {sorted(deleg)}, {len(cnames)} CNAMEs')
    first_labels = {n[:-len(origin) - 1].split('.')[-1] for n, _ in rrsets if n != origin}

    rng = random.Random(rng_seed + 10)
    out = []
    hot = [(f'www.{origin}', 'A'), (f'www.{origin}', 'AAAA'), (origin, 'MX'),
           (origin, 'A'), (f'mail.{origin}', 'A'), (origin, 'TXT')]
    for _ in range(nlines):
        r = rng.random()
        if r < 0.55:
            out.append(q(*rng.choice(auth)))                       # existing RRset
        elif r < 0.75:
            out.append(q(*rng.choice(hot)))                        # popular names
        elif r < 0.90:
            w = rng.choice(wild)                                   # wildcard match
            out.append(q(rand_label(rng, 3, 10) + '.' + w, rng.choice(['A', 'AAAA']) if w.startswith('dyn') else 'A'))
        else:
            d = rng.choice(sorted(deleg))                          # referral
            out.append(q(rng.choice(['www', 'host1', 'ci', 'db']) + '.' + d, 'A'))
    rng.shuffle(out)
    write(os.path.join(data, 'smallzone', 'queries-success.txt'), out)

    rng = random.Random(rng_seed + 11)
    out = []
    while len(out) < nlines:
        lab = rand_label(rng, 5, 14)
        if lab in first_labels:
            continue
        out.append(q(lab + '.' + origin, rng.choice(['A', 'A', 'A', 'AAAA'])))
    write(os.path.join(data, 'smallzone', 'queries-nxdomain.txt'), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=SEED)
    ap.add_argument('--lines', type=int, default=LINES)
    ap.add_argument('--data', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data'))
    a = ap.parse_args()
    root_mixes(a.data, a.seed, a.lines)
    small_mixes(a.data, a.seed, a.lines)


if __name__ == '__main__':
    main()
