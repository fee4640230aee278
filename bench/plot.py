#!/usr/bin/env python3
"""Draw the charts of docs/PERFORMANCE.md from the benchmark outputs in bench/results/.

usage: python3 bench/plot.py [--png DIR]

  Regenerates every chart: docs/charts/root-zone.svg, tld.svg, cache-curve.svg and
  memory.svg, and prints the headline ratios (authd / each peer) that the page quotes.
  --png DIR   also writes each chart as a PNG into DIR, to look at.

Needs matplotlib (`python3 -m pip install matplotlib`). The SVGs are deterministic (fixed
hash salt, no date in the metadata): rerunning with the same inputs and the same matplotlib
rewrites the same bytes, so git shows a change only when the data or this script changed.

Inputs: the files named in INPUTS below, in bench/results/ (its README says when, where and
how each was measured). To chart a new run, save it there and change its name in INPUTS.
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
CHARTS = os.path.join(ROOT, "docs", "charts")

INPUTS = {
    "root": "network-root-682cb09.txt",             # bench/network.sh, as printed (with BIND 9)
    "root-ddbfb9e": "network-root-ddbfb9e.txt",     # the earlier run, same guest, quiet (ratios)
    "root-other": "network-root-d7d0b98-epyc.txt",  # the same on another machine (ratios only)
    "tld": "network-tld300k-483edd7.csv",           # bench/network.sh --large, per CPU-second
    "tld-2rounds": "network-tld300k-725dc1b.csv",   # the same, authd/NSD/Knot, 2 rounds (ratios)
    "cache": "cache-curve-ca14ade.csv",             # query-bench --slots on the 300k zone
    "memory-root": "memory-root-d7d0b98-epyc.csv",  # bench/memory.sh, root zone
    "memory-tld": "memory-tld-e761759-epyc.csv",    # bench/memory.sh, 300k and 1M zones
}

plt.rcParams.update({
    "svg.hashsalt": "authd-bench-plot",  # stable element ids
    "svg.fonttype": "path",              # glyphs as paths: looks the same in every viewer
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
})
METADATA = {"Date": None, "Creator": "bench/plot.py (matplotlib)"}

# One colour per server, the same in every chart.
COLOURS = {
    "authd (memory)": "#1f5fa8",
    "authd (sqlite3 + cache)": "#5b9bd5",
    "authd (sqlite3, no cache)": "#a9c8ea",
    "NSD 4.6.1": "#e07b22",
    "Knot DNS 3.2.6": "#3a9a48",
    "BIND 9.18.49": "#c44e52",
    "PowerDNS 4.7.3 gsqlite3 + caches": "#8a5bb0",
    "PowerDNS 4.7.3 gsqlite3, no caches": "#c9b3dd",
}
MIX_LABELS = {"real": "real", "nxdomain": "NXDOMAIN", "soa": ". SOA", "success": "success",
              "uniform": "uniform referrals", "zipf": "Zipf referrals"}


def thousands(v, _pos=None):
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def server_name(s):
    """network.sh's label for authd memory carries the version; the others do not."""
    return "authd (memory)" if s.startswith("authd ") and s.endswith("(memory)") else s


def number(cell):
    """'231,850 (231,850–235,457)' or '361,552' -> float; the first figure of a cell."""
    return float(cell.split()[0].replace(",", ""))


def read_network_txt(name):
    """The main table of a bench/network.sh output: {(zone, mix, server): row dict}."""
    rows = {}
    header = None
    with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|"):
                if header and rows:
                    break  # the main table ended; the ratio tables follow
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                if "queries / CPU-s" in cells:
                    header = cells
                continue
            if set(cells[0]) <= set("-:"):
                continue  # the |---| line
            r = dict(zip(header, cells))
            rows[(r["zone"], r["mix"], server_name(r["server"]))] = {
                "qps": number(r["qps"]),
                "qcpu": number(r["queries / CPU-s"]),
                "bound": r["bound"],
            }
    if not rows:
        sys.exit(f"plot.py: no network.sh table in {name}")
    return rows


def read_csv(name):
    with open(os.path.join(RESULTS, name), encoding="utf-8", newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def save(fig, name, png_dir):
    os.makedirs(CHARTS, exist_ok=True)
    fig.savefig(os.path.join(CHARTS, name + ".svg"), metadata=METADATA)
    if png_dir:
        fig.savefig(os.path.join(png_dir, name + ".png"), dpi=110)
    plt.close(fig)
    print(f"wrote docs/charts/{name}.svg")


def frame(fig, title, source, legend=None, legend_rows=0, ncol=3):
    """Title and source line at the top, the legend (if any) under the plots, then lay out."""
    h = fig.get_figheight()
    fig.suptitle(title, x=0.01, y=1 - 0.08 / h, ha="left", va="top", fontsize=11)
    fig.text(0.01, 1 - 0.34 / h, source, ha="left", va="top", fontsize=7.5, color="#555555")
    bottom = 0.0
    if legend:
        handles, labels = legend
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=9,
                   bbox_to_anchor=(0.5, 0.01))
        bottom = (0.12 + 0.2 * legend_rows) / h
    fig.tight_layout(rect=(0, bottom, 1, 1 - (0.42 + 0.13 * source.count("\n")) / h))


def note(text):
    """A legend entry that is only text."""
    return plt.Rectangle((0, 0), 0, 0, fill=False, edgecolor="none"), text


def grouped_bars(ax, mixes, servers, value):
    """Bars grouped by mix, one per server; value(mix, server) -> float or None."""
    width = 0.8 / len(servers)
    for i, s in enumerate(servers):
        xs, ys = [], []
        for j, m in enumerate(mixes):
            v = value(m, s)
            if v is not None:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(v)
        ax.bar(xs, ys, width * 0.92, label=s, color=COLOURS[s])
    ax.set_xticks(range(len(mixes)))
    ax.set_xticklabels([MIX_LABELS[m] for m in mixes])
    ax.yaxis.set_major_formatter(FuncFormatter(thousands))
    ax.grid(axis="x", visible=False)


# --------------------------------------------------------------------------------------------
# charts


# The source line of the root-zone chart: the run in INPUTS["root"] (its # header lines).
ROOT_SOURCE = ("bench/network.sh --rounds 3 -l 4 (median of 3 interleaved rounds), "
               "commit 682cb09, 2026-12-01 23:12-23:23 UTC,\n2-core Xeon KVM guest, shared: "
               "load average 1.14 at the start, 1.62 at the end")


def root_zone(png_dir):
    runs = read_network_txt(INPUTS["root"])
    mixes = ["real", "nxdomain", "soa", "success"]
    servers = [s for s in COLOURS if all(("root", m, s) in runs for m in mixes)]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7.2), sharex=True)
    grouped_bars(top, mixes, servers, lambda m, s: runs[("root", m, s)]["qcpu"])
    top.set_ylabel("queries per server CPU-second")
    grouped_bars(bottom, mixes, servers, lambda m, s: runs[("root", m, s)]["qps"])
    bottom.set_ylabel("queries/s")
    bottom.set_xlabel("query mix (tests/data/root.zone, mixes from bench/make_queries.py)")
    cells = [r for k, r in runs.items() if k[0] == "root" and k[2] in servers]
    bound = sum(r["bound"] == "server" for r in cells)
    handles, labels = top.get_legend_handles_labels()
    if bound == len(cells):
        how = "every cell server-bound (the server used >= 90% of its core)"
    else:
        how = (f"{bound} of {len(cells)} cells server-bound (the server used >= 90% of its "
               "core); in the others dnsperf or other users of the machine set the queries/s")
    frame(fig, "Root zone over loopback UDP, one worker per server: "
          "queries per CPU-second (top) and queries/s (bottom)",
          ROOT_SOURCE + "; " + how, (handles, labels), legend_rows=3)
    save(fig, "root-zone", png_dir)
    return runs


def tld(png_dir):
    rows = read_csv(INPUTS["tld"])
    q = {(r["mix"], r["server"]): float(r["queries_per_cpu_s"]) for r in rows}
    mixes = ["uniform", "zipf", "nxdomain"]
    servers = ["authd (memory)", "authd (sqlite3 + cache)", "authd (sqlite3, no cache)",
               "NSD 4.6.1", "Knot DNS 3.2.6"]
    fig, ax = plt.subplots(figsize=(9, 4.6))
    grouped_bars(ax, mixes, servers, lambda m, s: q.get((m, s)))
    ax.set_ylabel("queries per server CPU-second")
    ax.set_xlabel("query mix (bench/make_tld.py --delegations 300000: 930,005 RRs)")
    handles, labels = ax.get_legend_handles_labels()
    for extra in ("PowerDNS, BIND 9: not measured on this zone", "queries/s: not recorded"):
        h, t = note(extra)
        handles.append(h)
        labels.append(t)
    frame(fig, "TLD-like zone, 300,000 delegations, one worker per server: "
          "queries per CPU-second",
          "bench/network.sh --large --delegations 300000, commit 483edd7, 2026-12-01 18:48 UTC, "
          "2-core Xeon KVM guest, load average 1.5-1.8",
          (handles, labels), legend_rows=3)
    save(fig, "tld", png_dir)
    return q


def cache_curve(png_dir):
    rows = [r for r in read_csv(INPUTS["cache"]) if r["backend"] == "sqlite3"]
    unlimited_x = 500.0  # where the "unlimited" points sit on the log axis
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    for ax, mix in zip(axes, ["zipf", "uniform"]):
        mine = [r for r in rows if r["mix"] == mix]
        distinct = int(mine[0]["distinct_qnames"])
        bounded = sorted((int(r["slots"]), r) for r in mine if r["slots"] not in ("", "0"))
        disabled = next(r for r in mine if r["slots"] == "0")
        unlimited = next(r for r in mine if r["slots"] == "")
        xs = [100.0 * s / distinct for s, _ in bounded]
        for which, style in (("after", dict(color="#1f5fa8", marker="o", lw=2,
                                            label="cache after (ca14ade)")),
                             ("before", dict(color="#999999", marker=".", lw=1, ls=":",
                                             label="cache before (e3050b1)"))):
            mean = lambda r: (float(r[which + "_1"]) + float(r[which + "_2"])) / 2  # noqa: E731
            ax.plot(xs, [mean(r) for _, r in bounded], **style)
            ax.plot([unlimited_x], [mean(unlimited)], color=style["color"],
                    marker=style["marker"], ls="none")
        no_cache = (float(disabled["after_1"]) + float(disabled["after_2"])) / 2
        ax.axhline(no_cache, color="#c0392b", ls="--", lw=1.2, label="no cache (--cache-slots 0)")
        ax.set_xscale("log")
        ticks = [1, 5, 10, 25, 50, 100, 200, unlimited_x]
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _p: "unlimited" if v == unlimited_x else f"{v:g}%"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(0.7, 800)
        ax.set_ylim(0, None)
        ax.yaxis.set_major_formatter(FuncFormatter(thousands))
        ax.set_title(f"{MIX_LABELS[mix]} ({distinct:,} distinct names in 200,000 queries)",
                     fontsize=10, loc="left")
        ax.set_xlabel("cache slots, % of the distinct query names")
    axes[0].set_ylabel("queries per CPU-second (in process)")
    frame(fig, "Hot-spot cache over sqlite3, 300k-delegation TLD zone: "
          "throughput against cache size",
          "query-bench -n 2 -t sqlite3 --slots 1%,…,200%, commit ca14ade, 2026-12-02, "
          "2-core AMD EPYC KVM guest, quiet; mean of two interleaved rounds",
          axes[0].get_legend_handles_labels(), legend_rows=1)
    save(fig, "cache-curve", png_dir)


def memory(png_dir):
    rows = read_csv(INPUTS["memory-root"]) + read_csv(INPUTS["memory-tld"])
    zones = []
    for r in rows:
        if r["zone"] not in [z for z, _ in zones]:
            zones.append((r["zone"], int(r["rrs"])))
    zone_label = {"root": "root zone\n21.6k RRs", "tld-300k": "TLD 300k\n930k RRs",
                  "tld-1m": "TLD 1M\n3.1M RRs"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
    for server in ["authd (memory)", "NSD 4.6.1", "Knot DNS 3.2.6"]:
        mine = sorted(((int(r["rrs"]), r) for r in rows if r["server"] == server),
                      key=lambda t: t[0])
        xs = [x for x, _ in mine]
        name = server.replace(" (memory)", "")
        left.plot(xs, [float(r["rss_mib"]) for _, r in mine], marker="o",
                  color=COLOURS[server], label=f"{name}: RSS")
        right.plot(xs, [float(r["load_s"]) for _, r in mine], marker="o",
                   color=COLOURS[server], label=name)
        if server.startswith("authd"):
            left.plot(xs, [float(r["peak_rss_mib"]) for _, r in mine], marker="^", ls="--",
                      color=COLOURS[server], label="authd: peak RSS while loading")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([rrs for _, rrs in zones])
        ax.set_xticklabels([zone_label[z] for z, _ in zones], fontsize=8.5)
        ax.xaxis.set_minor_locator(NullLocator())
        xs = [rrs for _, rrs in zones]
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
        ax.set_xlabel("zone size (resource records, log scale)")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    for ax, cols in ((left, ("rss_mib", "peak_rss_mib")), (right, ("load_s",))):
        values = [float(r[c]) for r in rows for c in cols if r[c]]
        lo, hi = min(values) / 1.6, max(values) * 1.6
        ax.set_ylim(lo, hi)
        ax.set_yticks([t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100,
                                   200, 500, 1000, 2000, 5000) if lo <= t <= hi])
    left.set_ylabel("resident memory after load (MiB)")
    left.set_title("Memory", fontsize=10, loc="left")
    right.set_ylabel("start until the first SOA answer (s)")
    right.set_title("Load time", fontsize=10, loc="left")
    left.legend(fontsize=8.5, loc="upper left")
    right.legend(fontsize=8.5, loc="upper left")
    frame(fig, "Serving a master file from memory: memory and load time against zone size",
          "bench/memory.sh; root zone: commit d7d0b98, 2026-12-01 04:04 UTC, 2-core AMD EPYC "
          "guest; TLD zones: commit e761759, 2026-12-02 09:08 UTC, the same guest.\n"
          "RSS 1 s after the first answer, summed over a server's processes "
          "(NSD's three count the pages they share more than once)")
    save(fig, "memory", png_dir)


# --------------------------------------------------------------------------------------------
# the headline ratios the page quotes


def print_ratios(title, value, mixes, peers, authd="authd (memory)"):
    print(title)
    for m in mixes:
        cells = []
        for p in peers:
            a, b = value(m, authd), value(m, p)
            cells.append(f"{p}: {a / b:.2f}" if a and b else f"{p}: -")
        print(f"  {m:9} " + "   ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--png", metavar="DIR", help="also write PNGs into DIR")
    args = ap.parse_args()
    if args.png:
        os.makedirs(args.png, exist_ok=True)
    root = root_zone(args.png)
    q = tld(args.png)
    cache_curve(args.png)
    memory(args.png)

    peers = ["NSD 4.6.1", "Knot DNS 3.2.6", "BIND 9.18.49", "PowerDNS 4.7.3 gsqlite3 + caches"]
    for name, runs in (("682cb09, Xeon", root),
                       ("ddbfb9e, Xeon", read_network_txt(INPUTS["root-ddbfb9e"])),
                       ("d7d0b98, EPYC", read_network_txt(INPUTS["root-other"]))):
        for key, what in (("qcpu", "queries per CPU-second"), ("qps", "queries/s")):
            print_ratios(f"root zone ({name}), authd memory / peer, {what}:",
                         lambda m, s, k=key, r=runs: r.get(("root", m, s), {}).get(k),
                         ["real", "nxdomain", "soa", "success"], peers)
    print_ratios("TLD 300k (483edd7), authd memory / peer, queries per CPU-second:",
                 lambda m, s: q.get((m, s)), ["uniform", "zipf", "nxdomain"], peers[:2])
    t = {(r["mix"], r["server"]): float(r["queries_per_cpu_s"])
         for r in read_csv(INPUTS["tld-2rounds"])}
    print_ratios("TLD 300k (725dc1b, median of 2 rounds), authd memory / peer, per CPU-second:",
                 lambda m, s: t.get((m, s)), ["uniform", "zipf", "nxdomain"], peers[:2],
                 authd="authd (memory) 725dc1b")


if __name__ == "__main__":
    main()
