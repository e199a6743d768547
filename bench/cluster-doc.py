#!/usr/bin/env python3
"""doc/benchmarks.md's cluster table from `bench/run-cluster.sh --json` (stdin): busbw as
% of the link per implementation and size; the data-parallel, pipeline and parameter-server
rows; then each goal of issue 50 with its measured figure and whether it is reached. bench/make-benchmarks-doc.sh pipes the bench into it."""
import json
import sys

rows = []
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        rows.append(json.loads(line))
if not rows:
    sys.exit("cluster-doc.py: no JSON rows on stdin (run bench/run-cluster.sh --json)")

MiB = 1 << 20
impls = ["ksdist", "gloo", "torch", "mpi"]
ar = {}
link = None
for r in rows:
    if "size" in r:
        ar.setdefault(r["impl"], {})[r["size"]] = 100 * r["busbw_gbs"] / r["link_gbs"]
        link = r["link_gbs"]
present = [i for i in impls if i in ar]
sizes = sorted({s for i in present for s in ar[i]})
verdict = lambda ok: "reached" if ok else "not reached"
pct = lambda v: "%.0f%%" % v

if sizes:
    print("# allreduce, float32 sum, one rank per host, links %.4g GB/s: busbw %% of the link" % link)
    print("# %10s" % "size (B)" + "".join(" %8s" % i for i in present) + "  ksdist-best peer (pp)")
    for s in sizes:
        cells = "".join(" %8s" % (pct(ar[i][s]) if s in ar[i] else "-") for i in present)
        peers = [ar[i][s] for i in present if i != "ksdist" and s in ar[i]]
        lead = "%+.0f" % (ar["ksdist"][s] - max(peers)) if peers and s in ar.get("ksdist", {}) else "-"
        print("  %10d%s  %s" % (s, cells, lead))
def table(title, columns, lines):
    """A titled table: columns as (heading, width); each line's cells are text already."""
    if not lines:
        return
    print("# " + title)
    print("# " + " ".join("%*s" % (w, h) for h, w in columns))
    for cells in lines:
        print("  " + " ".join("%*s" % (w, c) for (_, w), c in zip(columns, cells)))

num = lambda v, f: "-" if v is None else f % v
table("data parallel, one rank per host; efficiency = samples/s / (hosts x one host's); "
      "1-host eff: the same ranks on one host, no link (what the shared cores allow)",
      [("impl", 16), ("model", 6), ("hosts", 6), ("samples/s", 10), ("efficiency", 10),
       ("1-host eff", 10)],
      [(r["impl"], r["model"], r["hosts"], num(r["samples_per_s"], "%.0f"), num(r["efficiency"], "%.2f"),
        num(r.get("one_host_efficiency"), "%.2f"))
       for r in rows if r.get("impl") in ("ksdist dp", "torch ddp")])
table("pipeline, one stage per host: the measured bubble beside the schedule's theory",
      [("schedule", 10), ("v", 3), ("m", 3), ("bubble", 8), ("theory", 8)],
      [(r["schedule"], r["v"], r["m"], num(r["bubble"], "%.3f"), num(r["theory"], "%.3f"))
       for r in rows if r.get("impl") == "ksdist pipeline"])
ps_rows = [r for r in rows if r.get("impl") == "ksdist ps"]
def x_sync(r):
    sync = next((q for q in ps_rows if q["mode"] == "sync" and q["rate"] == r["rate"]), None)
    ok = sync and sync["samples_per_s"] and r["samples_per_s"] is not None
    return r["samples_per_s"] / sync["samples_per_s"] if ok else None
table("parameter servers; x sync = samples/s over sync's on the same link",
      [("mode", 10), ("link", 8), ("samples/s", 10), ("x sync", 7), ("accuracy", 9)],
      [(r["mode"], r["rate"], num(r["samples_per_s"], "%.0f"), num(x_sync(r), "%.2f"),
        num(r["accuracy"], "%.4f")) for r in ps_rows])
print("# goals (issue 50)")
k = ar.get("ksdist", {})
big = [s for s in sizes if s >= 16 * MiB and s in k]
if big:
    print("  ksdist busbw >= 90%% of the link from 16 MiB: %s: %s" % (
        ", ".join("%s at %d MiB" % (pct(k[s]), s // MiB) for s in big),
        verdict(all(k[s] >= 90 for s in big))))
behind = []
for s in sizes:
    for i in present:
        if i != "ksdist" and s in ar[i] and s in k and ar[i][s] > k[s]:
            behind.append("%d B: %s %s > %s" % (s, i, pct(ar[i][s]), pct(k[s])))
if k:
    print("  ksdist ahead of every peer at every size: %s: %s" % (
        "behind at " + "; ".join(behind) if behind else "ahead everywhere", verdict(not behind)))
dp = {(r["model"], r["hosts"]): r for r in rows if r.get("impl") == "ksdist dp"}
top = max([h for m, h in dp if m == "gpt"], default=None)
if top and top > 1:
    e, h = dp[("gpt", top)].get("efficiency"), dp[("gpt", top)].get("one_host_efficiency")
    print("  data-parallel GPT efficiency >= 0.90 at %d hosts: %s (%s on one host, no link): %s" % (
        top, "%.2f" % e if e is not None else "-", "%.2f" % h if h is not None else "-",
        verdict(e is not None and e >= 0.9)))
ps = {(r["mode"], r["rate"]): r for r in rows if r.get("impl") == "ksdist ps"}
for rate in sorted({r for _, r in ps}, key=lambda r: -min(x["link_gbs"] for (m, q), x in ps.items() if q == r)):
    sync = ps.get(("sync", rate))
    for mode, want in (("async", 1.5), ("geo", 2.0)):
        r = ps.get((mode, rate))
        if not sync or not r or not sync["samples_per_s"] or r["samples_per_s"] is None:
            continue
        x = r["samples_per_s"] / sync["samples_per_s"]
        da = None if r["accuracy"] is None or sync["accuracy"] is None else sync["accuracy"] - r["accuracy"]
        print("  %s >= %.1fx sync at %s, accuracy within 0.02: %.2fx, accuracy %s vs sync's %s: %s" % (
            mode, want, rate, x, "-" if r["accuracy"] is None else "%.4f" % r["accuracy"],
            "-" if sync["accuracy"] is None else "%.4f" % sync["accuracy"],
            verdict(x >= want and da is not None and da <= 0.02)))
