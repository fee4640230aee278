#!/usr/bin/python3
"""Generate a TLD-like zone and its query mixes, deterministically.

The zone is what a large TLD or hoster serves: an apex (SOA, NS, glue for its
own name servers) and N delegations. A third of the delegations have their
name servers inside the delegation, with in-zone glue (ns1 A + AAAA, ns2 A);
the rest point at out-of-zone name servers of a few thousand hosters. Every
tenth delegation has a DS record, as a signed TLD has.

Mixes (dnsperf format, "name TYPE" per line):
  queries-uniform.txt  referrals: a delegation picked uniformly; the qname is
                       the delegation itself or a name below it (www., mail.)
  queries-zipf.txt     referrals, the delegation drawn from a Zipf law (s = 1)
                       over a fixed random ranking, as real traffic is skewed
  queries-nxdomain.txt names under the apex that do not exist

With --sign the zone is signed with NSEC3 opt-out (RFC 5155 §6), as real
TLDs are: dnssec-keygen and dnssec-signzone (Debian's bind9-utils) do it, so
the zone file written is the signed one.

Every byte depends only on the arguments (fixed seed): running it again gives
identical files; with --sign, the same records and mixes, but fresh keys, so
the DNSKEY and RRSIG records (and dnssec-signzone's "File written on"
comment) differ from run to run. Signing leaves no file behind but the zone.

Usage:
  bench/make_tld.py [--delegations N] [--queries N] [--origin NAME]
                    [--seed N] [--sign] OUTDIR
Writes OUTDIR/zone (the master file) and OUTDIR/queries-*.txt.
"""
import argparse
import bisect
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile

ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'


def label(rng, used):
    """A fresh random label of 4-16 letters and digits, not in `used`."""
    while True:
        n = rng.randint(4, 16)
        s = ''.join(rng.choice(ALPHABET[:26] if i == 0 else ALPHABET) for i in range(n))
        if s not in used:
            used.add(s)
            return s


def write_zone(path, origin, names, hosters, rng):
    apex = origin.rstrip('.') + '.'
    with open(path, 'w') as f:
        f.write(f'$ORIGIN {apex}\n$TTL 86400\n')
        f.write(f'@ 3600 IN SOA a.nic.{apex} hostmaster.nic.{apex} 2026120101 1800 900 604800 3600\n')
        f.write(f'@ 172800 IN NS a.nic.{apex}\n@ 172800 IN NS b.nic.{apex}\n')
        f.write('a.nic 172800 IN A 192.0.2.1\n')
        f.write('b.nic 172800 IN A 198.51.100.1\n')
        for i, name in enumerate(names):
            if i % 3 == 0:
                f.write(f'{name} 172800 IN NS ns1.{name}\n')
                f.write(f'{name} 172800 IN NS ns2.{name}\n')
                f.write(f'ns1.{name} 172800 IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}\n')
                f.write(f'ns1.{name} 172800 IN AAAA 2001:db8:{i >> 16:x}::{i & 65535:x}\n')
                f.write(f'ns2.{name} 172800 IN A 172.16.{i >> 8 & 255}.{i & 255}\n')
            else:
                h = hosters[rng.randrange(len(hosters))]
                f.write(f'{name} 172800 IN NS ns1.{h}.\n')
                f.write(f'{name} 172800 IN NS ns2.{h}.\n')
            if i % 10 == 0:
                digest = '%064x' % rng.getrandbits(256)
                f.write(f'{name} 86400 IN DS {rng.randrange(1, 65535)} 13 2 {digest}\n')


def sign(path, origin):
    """Signs the zone in place with NSEC3 opt-out (dnssec-signzone -3 -A)."""
    for tool in ('dnssec-keygen', 'dnssec-signzone'):
        if shutil.which(tool) is None:
            sys.exit(f'make_tld.py: --sign needs {tool} (apt-get install bind9-utils)')
    apex = origin.rstrip('.') + '.'
    with tempfile.TemporaryDirectory() as keys:
        for extra in ([], ['-f', 'KSK']):
            key = subprocess.run(['dnssec-keygen', '-q', '-K', keys, '-a', 'ECDSAP256SHA256', *extra, apex],
                                 check=True, capture_output=True, text=True).stdout.strip()
            with open(path, 'a') as f, open(os.path.join(keys, key + '.key')) as k:
                f.write(k.read())
        subprocess.run(['dnssec-signzone', '-q', '-K', keys, '-d', keys, '-o', apex, '-3', 'aabbccdd', '-H', '0', '-A',
                        '-s', '20261101000000', '-e', '20370101000000', '-f', path + '.signed', path],
                       check=True, capture_output=True)
        os.replace(path + '.signed', path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--delegations', type=int, default=1_000_000)
    p.add_argument('--queries', type=int, default=200_000)
    p.add_argument('--origin', default='tld')
    p.add_argument('--seed', type=int, default=2026)
    p.add_argument('--sign', action='store_true')
    p.add_argument('outdir')
    a = p.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    rng = random.Random(a.seed)
    used = {'nic'}
    names = [label(rng, used) for _ in range(a.delegations)]
    hosters = [f'{label(rng, set())}-dns.net' for _ in range(2000)]
    write_zone(os.path.join(a.outdir, 'zone'), a.origin, names, hosters, rng)
    if a.sign:
        sign(os.path.join(a.outdir, 'zone'), a.origin)
    apex = a.origin.rstrip('.') + '.'

    def referral(name):
        r = rng.random()
        below = '' if r < 0.5 else 'www.' if r < 0.8 else 'mail.'
        return f'{below}{name}.{apex} {"A" if rng.random() < 0.8 else "AAAA"}\n'

    with open(os.path.join(a.outdir, 'queries-uniform.txt'), 'w') as f:
        for _ in range(a.queries):
            f.write(referral(names[rng.randrange(len(names))]))
    # Zipf (s = 1) by inverse CDF over a random ranking of the delegations.
    ranking = names[:]
    rng.shuffle(ranking)
    cdf = list(itertools.accumulate(1.0 / k for k in range(1, len(ranking) + 1)))
    with open(os.path.join(a.outdir, 'queries-zipf.txt'), 'w') as f:
        for _ in range(a.queries):
            i = bisect.bisect_left(cdf, rng.random() * cdf[-1])
            f.write(referral(ranking[min(i, len(ranking) - 1)]))
    with open(os.path.join(a.outdir, 'queries-nxdomain.txt'), 'w') as f:
        for _ in range(a.queries):
            f.write(f'{label(rng, used)}.{apex} {"A" if rng.random() < 0.8 else "AAAA"}\n')


if __name__ == '__main__':
    main()
