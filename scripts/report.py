#!/usr/bin/env python3
"""Figures and report.md for a `wort reproduce` output directory.

    python3 scripts/report.py DIR [--published data/published/wort_fast17.json]

Reads DIR/results.jsonl (one JSON record per result, with an "experiment" field) and
DIR/config.json (written by `wort reproduce`), and writes into DIR:
  fig7.png   insert time per index, grouped by distribution (paper Figure 7)
  fig8.png   insert time vs emulated write latency, one column per distribution (Figure 8)
  fig9.png   search time per index per distribution (Figure 9)
  fig10.png  range query time, 0.001% and 0.01% of N (Figure 10)
  space.png  pool bytes per key per index per distribution (thesis Figure 5.5)
  cceh_seg.png, cceh_lat.png, cceh_breakdown.png, b3_page.png, b3_order.png, b3_grow.png
             the thesis chapter IV experiments (CCEH Figures 24-25, B3-tree Figures 12-15), when
             their records are present; their claims (data/published/thesis_ch4.json) get a
             section of report.md, as do ROART's against P-ART when DIR/peers.jsonl is there
  report.md  configuration, summary table, Table 1 beside the published values, and a verdict
             for each prose claim, computed from the results
Figures have one panel (or row of panels) per index family, at most MAX_SERIES series each, and
every kind keeps one colour and marker throughout (see "figures" below).
It runs no benchmark: running it again on an existing output directory (for example a committed
doc/results/*/ that holds results.jsonl and config.json) re-renders the figures and report.md.
`wort reproduce` runs it with the first python3 that has matplotlib (/usr/bin/python3 before a
pyenv shim); run it by hand the same way. Without matplotlib it still writes report.md (and says
the figures are missing).
"""
import argparse
import json
import math
import os
import sys

DISTS = ["dense", "sparse", "clustered"]
RADIX = ["wort", "woart", "artcow"]
PAPER_BTREES = ["fptree", "nvtree", "wbtree"]
PAPER_NAMES = {"wort": "WORT", "woart": "WOART", "artcow": "ART+CoW", "roart": "ROART", "fptree": "FPTree",
               "nvtree": "NVTree", "wbtree": "wB+Tree", "bptree": "B+-tree"}
FIGURES = ["fig7", "fig8", "fig9", "fig10", "space"]
# Volatile DRAM references registered in wort, and the paper's names they stand for.
VOLATILE = ["vart", "vbptree", "vradix"]
# A measured ratio "holds" a published one only within this factor either way; outside it, a
# claim whose direction is right is "direction only".
TOLERANCE = 1.5
# An LLC-miss figure compares with the paper's only if the index at the cachegrind N is at least
# this many times the simulated LLC (the paper's 128M-key indexes are hundreds of times its LLC).
LLC_MIN_RATIO = 8
ALIASES = {"bptree": "vbptree", "art": "vart"}


def load(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"report.py: {path}:{n}: {e}")
    return recs


class Results:
    """Lookups over the records: value(experiment, index, dist, field, **match)."""

    def __init__(self, recs):
        self.recs = recs

    def find(self, exp, index, dist, **match):
        for r in self.recs:
            if r.get("experiment") == exp and r.get("index") == index and r.get("dist") == dist and \
                    all(abs(r.get(k, -1) - v) < 1e-9 if isinstance(v, float) else r.get(k) == v
                        for k, v in match.items()):
                return r
        return None

    def value(self, exp, index, dist, field, **match):
        r = self.find(exp, index, dist, **match)
        return None if r is None or r.get(field) is None else r[field]

    def insert_ns(self, i, d):
        return self.value("fig7", i, d, "ns_per_op")

    def search_ns(self, i, d):
        return self.value("fig9", i, d, "ns_per_op")

    def scan_ns(self, i, d, pct):
        return self.value("fig10", i, d, "ns_per_op", range_pct=pct)

    def fig8(self, i, d, lat):
        """(median, min, max, runs) of the fig8 insert time at latency `lat`; None if not measured.
        Older outputs have no fig8 run at 0 ns: Figure 7's run stands in for it."""
        vals = sorted(r["ns_per_op"] for r in self.recs
                      if r.get("experiment") == "fig8" and r.get("index") == i and r.get("dist") == d and
                      r.get("write_latency_ns") == lat and r.get("ns_per_op") is not None)
        if not vals and lat == 0 and self.insert_ns(i, d) is not None:
            vals = [self.insert_ns(i, d)]
        if not vals:
            return None
        m = len(vals)
        med = vals[m // 2] if m % 2 else (vals[m // 2 - 1] + vals[m // 2]) / 2
        return med, vals[0], vals[-1], m


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "-"
    if abs(v) >= 100000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


# ---- figures --------------------------------------------------------------------------------
#
# Every index kind has one look (colour, marker, hollow or filled) in every figure, and kinds are
# grouped by family. Colours are shades of one hue per family, ordered by lightness (ColorBrewer
# sequential ramps, which stay distinguishable by lightness alone for colour-blind readers):
# radix trees blue, volatile references grey (hollow markers, dashed lines, hatched bars),
# persistent B-trees red to orange, hash tables purple to pink. Within a family each kind also
# has its own marker, so no panel relies on hue alone. A figure with all kinds is split into one
# panel per family; beside its own members a panel shows the radix trees as a shaded min-max
# band (and the B-tree panel the volatile B+-tree), so that each panel compares its family with
# the paper's trees while keeping at most MAX_SERIES series per axis.

MAX_SERIES = 8
FAMILIES = [  # (family, panel title, kinds in legend order)
    ("radix", "persistent radix trees + volatile references", ["wort", "woart", "artcow", "roart"]),
    ("volatile", "volatile DRAM references", ["vart", "vradix", "vbptree"]),
    ("btree", "persistent B-trees", ["fptree", "nvtree", "wbtree", "wbtree-slot", "fastfair", "b3tree"]),
    ("hash", "persistent hash tables", ["cceh", "cceh-cow", "linp", "cuck", "bch", "levl", "path"]),
]
PALETTE = {  # one entry per kind of the family, in FAMILIES order; lightness alternates so that
    #         neighbours in a legend differ most
    "radix": ["#08519c", "#3182bd", "#6baed6", "#08306b"],
    "volatile": ["#000000", "#525252", "#969696"],
    "btree": ["#67000d", "#cb181d", "#f16913", "#fdae6b", "#8c2d04", "#fb6a4a"],
    "hash": ["#3f007d", "#9e9ac8", "#7a0177", "#dd3497", "#6a51a3", "#f768a1", "#fa9fb5"],
    "other": ["#00441b", "#238b45", "#66c2a4", "#8c6d31", "#bd9e39", "#e7ba52"],
}
MARKERS = {
    "wort": "o", "woart": "s", "artcow": "^", "roart": "D",
    "vart": "o", "vradix": "D", "vbptree": "s",
    "fptree": "v", "nvtree": "D", "wbtree": "^", "wbtree-slot": "<", "fastfair": "P", "b3tree": "X",
    "cceh": "h", "cceh-cow": "H", "linp": "d", "cuck": "*", "bch": "p", "levl": ">", "path": "8",
}
OTHER_MARKERS = ["o", "s", "^", "D", "v", "P"]
LABELS = {
    "wort": "WORT", "woart": "WOART", "artcow": "ART+CoW", "roart": "ROART",
    "vart": "vart (DRAM ART)", "vradix": "vradix (DRAM)", "vbptree": "vbptree (DRAM B+)",
    "fptree": "FPTree", "nvtree": "NVTree", "wbtree": "wB+Tree", "wbtree-slot": "wB+Tree slot-only",
    "fastfair": "FAST&FAIR", "b3tree": "B3-tree",
    "cceh": "CCEH", "cceh-cow": "CCEH CoW-split", "linp": "linear probing", "cuck": "cuckoo",
    "bch": "bucketized cuckoo", "levl": "level hashing", "path": "path hashing",
}
BAND_LABEL = "radix trees (min-max)"
BAND_COLOUR = "#9ecae1"
LOG_RATIO = 20  # a y axis goes logarithmic when its largest value is this many times its smallest


def family_of(kind):
    for fam, _, members in FAMILIES:
        if kind in members:
            return fam
    return "other"


def style(kind, kinds=()):
    """The look of `kind` in every figure: dict(family, label, colour, marker, hollow).
    A kind missing from FAMILIES (added to the registry after this script) gets an 'other'
    colour chosen by its rank among the unknown kinds of this run."""
    fam = family_of(kind)
    if fam == "other":
        unknown = sorted(k for k in set(kinds) | {kind} if family_of(k) == "other")
        n = unknown.index(kind)
        colour, marker = PALETTE["other"][n % len(PALETTE["other"])], OTHER_MARKERS[n % len(OTHER_MARKERS)]
    else:
        members = next(m for f, _, m in FAMILIES if f == fam)
        colour, marker = PALETTE[fam][members.index(kind)], MARKERS[kind]
    return {"family": fam, "label": LABELS.get(kind, kind), "colour": colour, "marker": marker,
            "hollow": fam == "volatile"}


def panel_plan(kinds):
    """Panels for a figure over `kinds`: [dict(title, members, refs, band)]. members are drawn
    as series, refs are extra kinds shown for comparison, band is whether the radix band is
    drawn. Every kind is a member of exactly one panel; a family too large for one panel is
    split so that members + refs + band never exceed MAX_SERIES."""
    present = set(kinds)
    radix = [k for k in FAMILIES[0][2] if k in present]
    volatile = [k for k in FAMILIES[1][2] if k in present]
    groups = []
    if radix or volatile:
        title = FAMILIES[0][1] if radix and volatile else (FAMILIES[0][1].split(" +")[0] if radix
                                                          else FAMILIES[1][1])
        groups.append((title, radix + volatile, [], False))
    for fam, title, members in FAMILIES[2:]:
        mine = [k for k in members if k in present]
        refs = ["vbptree"] if fam == "btree" and "vbptree" in present else []
        groups.append((title, mine, refs, bool(radix)))
    groups.append(("other index kinds", [k for k in kinds if family_of(k) == "other"], [], bool(radix)))
    panels = []
    for title, members, refs, band in groups:
        room = MAX_SERIES - len(refs) - int(band)
        chunks = [members[i:i + room] for i in range(0, len(members), room)]
        for n, chunk in enumerate(chunks):
            t = title if len(chunks) == 1 else f"{title} ({n + 1}/{len(chunks)})"
            panels.append({"title": t, "members": chunk, "refs": refs, "band": band, "radix": radix})
    return panels


def wide(values):
    vals = [v for v in values if v is not None and v > 0]
    return bool(vals) and max(vals) / min(vals) >= LOG_RATIO


def log_y(ax, values):
    """Logarithmic y over `values` (with room below the smallest, so that its bar shows), with
    plain-number labels at 1, 2 and 5 times each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    vals = [v for v in values if v is not None and v > 0]
    ax.set_yscale("log")
    ax.set_ylim(min(vals) / 1.6, max(vals) * 1.25)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def set_y(ax, values, label):
    """Label the (shared) y axis of `ax`; logarithmic when `values` span LOG_RATIO or more."""
    ax.set_ylabel(label + (", log scale" if wide(values) else ""))
    if wide(values):
        log_y(ax, values)
    ax.grid(axis="y", alpha=0.35)


def legend_below(ax, ncol=2):
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=ncol, fontsize=8, frameon=False)


def bar_panel(ax, kinds, panel, getter, groups, group_labels):
    """Grouped bars: one group per entry of `groups`, one bar per member and ref (in the kind's
    colour), and the radix band behind each group. Returns the values drawn."""
    from matplotlib.collections import PolyCollection
    series = panel["members"] + panel["refs"]
    width = 0.8 / max(1, len(series))
    drawn = []
    for k, idx in enumerate(series):
        st = style(idx, kinds)
        xs, ys = [], []
        for g, grp in enumerate(groups):
            v = getter(idx, grp)
            if v is not None:
                xs.append(g + (k - (len(series) - 1) / 2) * width)
                ys.append(v)
        drawn += ys
        if st["hollow"]:
            ax.bar(xs, ys, width, label=st["label"], facecolor="white", edgecolor=st["colour"], hatch="///",
                   linewidth=0.8, zorder=2)
        else:
            ax.bar(xs, ys, width, label=st["label"], color=st["colour"], edgecolor="white", linewidth=0.4,
                   zorder=2)
    if panel["band"]:
        verts = []
        for g, grp in enumerate(groups):
            vals = [v for v in (getter(r, grp) for r in panel["radix"]) if v is not None]
            if vals:
                lo, hi = min(vals), max(vals)
                verts.append([(g - 0.45, lo), (g + 0.45, lo), (g + 0.45, hi), (g - 0.45, hi)])
                drawn += [lo, hi]
        if verts:
            ax.add_collection(PolyCollection(verts, facecolors=BAND_COLOUR, edgecolors="#4292c6", alpha=0.45,
                                             linewidths=0.8, zorder=1, label=BAND_LABEL))
            ax.autoscale_view()
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(group_labels)
    ax.set_title(panel["title"], fontsize=10)
    return drawn


def bar_figure(plt, res, kinds, getter, ylabel, title, n):
    """Figures 7 and 9 and the space figure: one panel per family, distributions on x, one
    shared y axis."""
    panels = panel_plan(kinds)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 0.6, 4.9), sharey=True,
                             squeeze=False)
    values = []
    for ax, panel in zip(axes[0], panels):
        values += bar_panel(ax, kinds, panel, getter, DISTS, [d.capitalize() for d in DISTS])
        legend_below(ax)
    set_y(axes[0][0], values, ylabel)
    for ax in axes[0][1:]:
        ax.grid(axis="y", alpha=0.35)
    fig.suptitle(f"{title}, N={n:,}")
    return fig


def build_figures(res, cfg, kinds, ordered):
    """[(file name, matplotlib figure)] for the figures of this run; nothing is written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = cfg.get("keys") or 0
    figs = []
    figs.append(("fig7.png", bar_figure(plt, res, kinds, res.insert_ns, "avg time per insert (ns)",
                                        "Figure 7: insertion at DRAM latency", n)))

    lats = cfg.get("latencies_ns") or [0]
    dists = DISTS
    panels = panel_plan(kinds)

    def ins(idx, dist, lat):
        v = res.fig8(idx, dist, lat)
        return None if v is None else v[0]

    def spread(idx, dist, lat):
        v = res.fig8(idx, dist, lat)
        return (0, 0) if v is None else (v[0] - v[1], v[2] - v[0])

    fig, axes = plt.subplots(len(panels), len(dists), figsize=(4.3 * len(dists) + 2.6, 2.9 * len(panels) + 0.8),
                             sharex=True, sharey=True, squeeze=False)
    values = []
    for r, panel in enumerate(panels):
        for c, dist in enumerate(dists):
            ax = axes[r][c]
            if panel["band"]:
                lo, hi, xs = [], [], []
                for lat in lats:
                    vals = [v for v in (ins(i, dist, lat) for i in panel["radix"]) if v is not None]
                    if vals:
                        xs.append(lat)
                        lo.append(min(vals))
                        hi.append(max(vals))
                if xs:
                    ax.fill_between(xs, lo, hi, color=BAND_COLOUR, alpha=0.45, linewidth=0, zorder=1,
                                    label=BAND_LABEL)
                    values += lo + hi
            for idx in panel["members"] + panel["refs"]:
                st = style(idx, kinds)
                pts = [(lat, ins(idx, dist, lat)) for lat in lats]
                pts = [(x, y) for x, y in pts if y is not None]
                if not pts:
                    continue
                values += [y for _, y in pts]
                err = [spread(idx, dist, x) for x, _ in pts]
                if any(a or b for a, b in err):
                    # The spread of the repeated runs: one vertical bar per point, min to max (gid
                    # "spread": part of the series drawn next, not a series of its own).
                    bars = ax.vlines([x for x, _ in pts], [y - a for (_, y), (a, _) in zip(pts, err)],
                                     [y + b for (_, y), (_, b) in zip(pts, err)], colors=st["colour"],
                                     linewidth=1.0, zorder=2)
                    bars.set_gid("spread")
                    values += [y + b for (_, y), (_, b) in zip(pts, err)] + \
                        [y - a for (_, y), (a, _) in zip(pts, err) if y - a > 0]
                ax.plot([x for x, _ in pts], [y for _, y in pts], color=st["colour"], marker=st["marker"],
                        markersize=6, linewidth=1.6, linestyle="--" if st["hollow"] else "-",
                        markeredgecolor=st["colour"] if st["hollow"] else "#333333", markeredgewidth=0.6 if not
                        st["hollow"] else 1.0,
                        markerfacecolor="white" if st["hollow"] else st["colour"], label=st["label"], zorder=3)
            if r == 0:
                ax.set_title(f"({'abc'[c]}) {dist.capitalize()}")
            if r == len(panels) - 1:
                ax.set_xlabel("emulated write latency (ns per flushed line)")
            ax.set_xticks(lats)
            ax.grid(alpha=0.3)
        axes[r][-1].legend(loc="center left", bbox_to_anchor=(1.03, 0.5), fontsize=8, frameon=False,
                           title=panel["title"], title_fontsize=8)
    for r in range(len(panels)):
        axes[r][0].set_ylabel("avg time per insert (ns)" + (", log scale" if wide(values) else ""))
    if wide(values):
        log_y(axes[0][0], values)
    n8 = cfg.get("fig8_keys") or n
    reps = cfg.get("fig8_repeats") or 1
    fig.suptitle(f"Figure 8: insertion vs emulated PM write latency (N={n8:,}; median of {reps} run"
                 f"{'s' if reps > 1 else ''}{', bars: min to max' if reps > 1 else ''}; read latency not emulated)")
    figs.append(("fig8.png", fig))

    figs.append(("fig9.png", bar_figure(plt, res, kinds, res.search_ns, "avg time per search (ns)",
                                        "Figure 9: search at DRAM latency", n)))

    pcts = cfg.get("range_pct") or [0.001, 0.01]
    rpanels = panel_plan(ordered)
    fig, axes = plt.subplots(len(pcts), len(rpanels), figsize=(4.6 * len(rpanels) + 0.6, 3.6 * len(pcts) + 1.2),
                             sharey="row", squeeze=False)
    for r, pct in enumerate(pcts):
        def scan_us(i, d, p=pct):
            v = res.scan_ns(i, d, p)
            return None if v is None else v / 1000
        values = []
        for c, panel in enumerate(rpanels):
            ax = axes[r][c]
            values += bar_panel(ax, ordered, panel, scan_us, DISTS, [d.capitalize() for d in DISTS])
            ax.set_title(f"{pct:g}% of N = {max(1, round(pct / 100 * n)):,} keys: {panel['title']}", fontsize=9)
            ax.grid(axis="y", alpha=0.35)
            if r == len(pcts) - 1:
                legend_below(ax)
        set_y(axes[r][0], values, "avg time per range query (us)")
    fig.suptitle(f"Figure 10: range queries (N={n:,}; hash kinds have no ordered scan)")
    figs.append(("fig10.png", fig))

    figs.append(("space.png", bar_figure(plt, res, kinds, lambda i, d: res.value("fig7", i, d, "bytes_per_key"),
                                         "bytes per key (pool + volatile)",
                                         "Space after insertion (thesis Figure 5.5)", n)))
    return figs


def draw(out, res, cfg, kinds, ordered):
    figs = build_figures(res, cfg, kinds, ordered)
    import matplotlib.pyplot as plt
    written = []
    for name, fig in figs:
        fig.savefig(os.path.join(out, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(name)
    return written


# ---- claims ---------------------------------------------------------------------------------

def within(measured, published):
    if not measured or not published or measured <= 0:
        return None
    return max(measured / published, published / measured)


def ratio_verdict(pairs):
    """Verdict over [(measured, published)] ratio pairs (published > 1: 'x times slower/more'):
    'holds' only when every measured ratio is within TOLERANCE of its published one; 'direction
    only' when each is on the published side of 1 but some are outside it; otherwise 'does not
    hold'. The measured range is stated beside the published values."""
    pairs = [(m, p) for m, p in pairs if m is not None and p]
    if not pairs:
        return "cannot check"
    ms = [m for m, _ in pairs]
    pubs = sorted({p for _, p in pairs})
    rng = f"{min(ms):.2f}x" if len(ms) == 1 else f"{min(ms):.2f}-{max(ms):.2f}x"
    said = f"measured {rng} vs published {', '.join(f'{p:g}x' for p in pubs)}"
    right = [(m > 1) == (p > 1) for m, p in pairs]
    close = [within(m, p) is not None and within(m, p) <= TOLERANCE for m, p in pairs]
    if all(close) and all(right):
        return f"holds (within {TOLERANCE:g}x; {said})"
    if all(right):
        return f"direction only ({said}; holds needs within {TOLERANCE:g}x)"
    return f"does not hold (direction right in {sum(right)} of {len(right)}; {said})"


def check_claims(pub, res, kinds, ordered):
    """[(id, text, verdict, detail)] for each claim in the published data."""
    out = []
    radix = [k for k in RADIX if k in kinds]
    btrees_here = [k for k in ordered if k not in RADIX and k not in VOLATILE and k != "bptree"]
    paper_btrees_here = [k for k in PAPER_BTREES if k in kinds]
    for c in pub.get("claims", []):
        cid, text = c["id"], c["text"]
        verdict, detail = "cannot check", ""
        if cid == "fig7_clustered_slower":
            parts, pairs = [], []
            for i in radix:
                cl = res.insert_ns(i, "clustered")
                other = [res.insert_ns(i, d) for d in ("dense", "sparse")]
                if cl is None or None in other:
                    continue
                r = cl / (sum(other) / 2)
                pairs.append((r, c["ratio"]))
                parts.append(f"{i} {r:.2f}x (paper {c['ratio']}x)")
            if pairs:
                verdict = ratio_verdict(pairs)
                detail = "clustered / mean(dense, sparse) insert time: " + "; ".join(parts)
        elif cid in ("fig7_radix_beat_nvtree_wbtree", "fig9_radix_beat_btrees_search"):
            getter = res.insert_ns if cid.startswith("fig7") else res.search_ns
            versus = [k for k in (["nvtree", "wbtree"] if cid.startswith("fig7") else PAPER_BTREES) if k in kinds]
            proxy = not versus
            if proxy:
                versus = btrees_here
            cmp, ok = [], []
            for d in DISTS:
                for i in radix:
                    for b in versus:
                        a, bv = getter(i, d), getter(b, d)
                        if a is None or bv is None:
                            continue
                        ok.append(a < bv)
                        cmp.append(f"{d}: {i}/{b} = {a / bv:.2f}")
            if ok:
                verdict = ("holds" if all(ok) else "partly holds" if any(ok) else "does not hold") + \
                          (" (proxy)" if proxy else "")
                detail = (f"the paper's B-trees are not in this build; compared with the persistent B-tree kinds "
                          f"registered here ({', '.join(versus)}) instead. " if proxy else "") + \
                    "".join(f"{PAPER_NAMES[x]} is not in this build. " for x in
                            (["nvtree", "wbtree"] if cid.startswith("fig7") else PAPER_BTREES) if x not in kinds) + \
                    f"{sum(ok)}/{len(ok)} pairs radix faster; time ratios radix/B-tree: " + ", ".join(cmp)
            else:
                detail = "no B-tree kind measured here"
        elif cid == "fig9_artcow_best_search":
            if "artcow" in kinds:
                field = [k for k in ordered if k not in VOLATILE]
                parts, ok = [], []
                for d in DISTS:
                    vals = {k: res.search_ns(k, d) for k in field if res.search_ns(k, d) is not None}
                    if "artcow" not in vals:
                        continue
                    best = min(vals, key=vals.get)
                    ok.append(best == "artcow")
                    parts.append(f"{d}: fastest {best} ({vals[best]:.0f} ns), artcow {vals['artcow']:.0f} ns "
                                 f"({vals['artcow'] / vals[best]:.2f}x the fastest)")
                if ok:
                    verdict = "holds" if all(ok) else "partly holds" if any(ok) else "does not hold"
                    detail = "among the persistent ordered kinds measured (hash tables and volatile references " \
                             "excluded, as in the paper): " + \
                        "; ".join(parts)
        elif cid.startswith("fig10_vs_"):
            v = ALIASES.get(c["versus"], c["versus"])
            if v in kinds:
                parts, pairs = [], []
                for pct_name, ratio in c["ratios"].items():
                    pct = float(pct_name.rstrip("%"))
                    for d in DISTS:
                        rv = [res.scan_ns(i, d, pct) for i in radix]
                        rv = [x for x in rv if x is not None]
                        b = res.scan_ns(v, d, pct)
                        if not rv or b is None:
                            continue
                        m = (sum(rv) / len(rv)) / b
                        pairs.append((m, ratio))
                        parts.append(f"{pct_name} {d}: {m:.2f}x (paper {ratio}x)")
                if pairs:
                    verdict = ratio_verdict(pairs)
                    detail = "mean radix range-query time / " + v + ": " + "; ".join(parts)
            else:
                detail = f"{PAPER_NAMES.get(v, v)} ('{v}') is not an index kind of this build"
        elif cid.startswith("fig11"):
            detail = ("Memcached is not part of `wort reproduce`; see `wort bench-server` and "
                      "scripts/bench_server.sh (mc-benchmark pattern against `wort serve`)")
        elif cid == "fig5_5_space":
            parts, ok = [], []
            for d in DISTS:
                rv = {i: res.value("fig7", i, d, "bytes_per_key") for i in radix + (["vart"] if "vart" in kinds else [])}
                rv = {k: x for k, x in rv.items() if x}
                if len(rv) >= 2:
                    spread = max(rv.values()) / min(rv.values())
                    parts.append(f"{d}: radix max/min {spread:.2f}x")
                if rv and btrees_here:
                    bt = {b: res.value("fig7", b, d, "bytes_per_key") for b in btrees_here}
                    bt = {k: x for k, x in bt.items() if x}
                    if bt:
                        more = min(rv.values()) > max(bt.values())
                        ok.append(more)
                        parts.append(f"{d}: radix {min(rv.values()):.0f}-{max(rv.values()):.0f} B/key vs "
                                     f"B-trees ({', '.join(bt)}) {min(bt.values()):.0f}-{max(bt.values()):.0f}")
            if "vradix" in kinds:
                dv, sv = res.value("fig7", "vradix", "dense", "bytes_per_key"), \
                    res.value("fig7", "vradix", "sparse", "bytes_per_key")
                if dv and sv:
                    parts.append(f"radix tree without path compression (vradix): sparse {sv:.0f} vs dense "
                                 f"{dv:.0f} B/key ({sv / dv:.1f}x)")
            if parts:
                verdict = ("holds" if all(ok) else "partly holds" if any(ok) else "does not hold") if ok \
                    else "cannot check"
                detail = ("radix spread over WORT, WOART, ART+CoW" + (" and the volatile ART (vart)" if "vart" in kinds
                                                                       else "") + ". ") + "; ".join(parts)
        out.append((cid, text, verdict, detail))
    return out


# ---- report ---------------------------------------------------------------------------------


def load_peers(path):
    """(P-ART's driver record, {(index, op): wort bench record}) from a roart-peer peers.jsonl
    (scripts/peers.sh), or (None, {}) when there is none."""
    if not path or not os.path.exists(path):
        return None, {}
    part, wort_recs = None, {}
    for r in load(path):
        if r.get("bench") == "peer" and r.get("peer") == "P-ART":
            part = r
        elif r.get("bench") == "index":
            wort_recs[(r.get("index"), r.get("op"))] = r
    return part, wort_recs


def roart_section(res, kinds, path, peers_path=None, peer_state=None):
    """The ROART section (wort issues 16, 34): the published ROART ratios beside this run's ratio
    of the other kind's time to roart's (throughput ratio roart / other). Claims against P-ART use
    P-ART itself when the run built it (roart-peer: peers.jsonl, same keys, CPU ns), else woart
    stands in, labelled so. Empty when roart or the published file is absent."""
    if "roart" not in kinds or not os.path.exists(path):
        return []
    pub = json.load(open(path))
    part, pw = load_peers(peers_path)
    if part is not None and not (("roart", "insert") in pw and ("roart", "search") in pw):
        part = None
    note = pub.get("note", "")
    if part is not None:
        note = ("P-ART itself was measured in this run (roart-peer: scripts/peers.sh built RECIPE's P-ART outside the "
                f"repository and ran it and roart on the same {part.get('keys', 0):,} sparse keys in the same order; "
                "CPU ns per operation, one run; P-ART in DRAM with clflush, roart in a /dev/shm pool with clflush). "
                "Memcached figures are compared with index-level insert (set) and lookup (get).")
    elif peer_state:
        note += f" P-ART run: {peer_state}."
    L = ["## ROART (FAST 2021) beside this run\n",
         f"Source: {pub.get('source', '')}. {note} Ratios are time(other) / time(roart) "
         "from the fig7 (insert) and fig9 (search) runs (P-ART: the roart-peer run), i.e. roart's throughput "
         f"advantage; the verdict uses the same rule as above (within {TOLERANCE:g}x of the published value: 'holds').\n",
         "| claim | published | compared with | measured (per distribution) | verdict |", "|---|---|---|---|---|"]
    dists = sorted({r.get("dist") for r in res.recs if r.get("index") == "roart" and r.get("dist")})
    for c in pub.get("claims", []):
        pubr = c.get("ratio", [])
        pub_s = "-".join(f"{x:g}x" for x in pubr)
        part_claim = c.get("versus") == "woart" and "P-ART" in c.get("text", "")
        if part_claim and part is not None:
            op = "insert" if c["op"] == "insert" else "search"
            mine = pw[("roart", op)].get("cpu_ns_per_op")
            other = part.get("insert_cpu_ns" if op == "insert" else "lookup_cpu_ns")
            if mine and other:
                r = other / mine
                L.append(f"| {c['text']} | {pub_s} | P-ART itself (RECIPE; 1 thread; same keys) | sparse {r:.2f}x "
                         f"(P-ART {other:.0f} vs roart {mine:.0f} CPU ns/{op}) | **{ratio_verdict([(r, max(pubr))])}** |")
                continue
        if c.get("check", True) is False or c.get("versus") not in kinds:
            why = c.get("why") or f"{c.get('versus')} not in this run"
            L.append(f"| {c['text']} | {pub_s} | - | - | **cannot check** ({why}) |")
            continue
        getter = res.insert_ns if c["op"] == "insert" else res.search_ns
        parts, pairs = [], []
        for d in dists:
            mine, other = getter("roart", d), getter(c["versus"], d)
            if not mine or not other:
                continue
            r = other / mine
            parts.append(f"{d} {r:.2f}x")
            pairs.append((r, max(pubr)))
        verdict = ratio_verdict(pairs) if pairs else "cannot check (no runs)"
        proxy = c.get("proxy", "-") + (" (stand-in: P-ART not built in this run; give --peers-src)" if part_claim else "")
        L.append(f"| {c['text']} | {pub_s} | {proxy} | {'; '.join(parts) or '-'} | **{verdict}** |")
    if part is not None and part.get("scan_cpu_ns") and ("roart", "scan") in pw:
        ms, ps = pw[("roart", "scan")].get("cpu_ns_per_op"), part["scan_cpu_ns"]
        L.append(f"\nRange scans of {part.get('scan_len')} keys in the same run (no published ratio; the ROART paper "
                 f"credits leaf compaction with its range-query gains): roart {ms:,.0f} vs P-ART {ps:,.0f} CPU ns per "
                 f"query, P-ART/roart = {ps / ms:.2f}x. Lookups: roart "
                 f"{pw[('roart', 'search')].get('cpu_ns_per_op', 0):.0f} vs P-ART {part.get('lookup_cpu_ns', 0):.0f} "
                 f"CPU ns. The whole comparison: peers.md.")
    L.append("")
    return L


# ---- thesis chapter IV: CCEH (4.4.7) and B3-tree (4.3) -----------------------------------------

THESIS_EXPS = ["cceh-seg", "cceh-lat", "cceh-search", "cceh-cdf", "b3-page", "b3-grow", "b3-order"]
# (b3-page records of b3tree at other page sizes than 1 KB are renamed b3-pagesize by Thesis.)
THESIS_FIGURES = ["cceh_seg.png", "cceh_lat.png", "cceh_breakdown.png", "cceh_cdf.png", "b3_page.png", "b3_order.png",
                  "b3_grow.png"]
THESIS_NAMES = {"cceh": "CCEH", "cceh-lsb": "CCEH(LSB)", "exth": "EXTH(LSB)", "cceh-cow": "CCEH(C)", "levl": "LEVL", "linp": "LINP", "cuck": "CUCK",
                "bch": "BCH", "path": "PATH", "b3tree": "B3-tree", "wbtree": "wB+-tree",
                "wbtree-slot": "wB+-tree w/o bitmap", "fptree": "FPTree", "fastfair": "FAST&FAIR"}
# cceh-seg records of cceh's directory variants: the name they are compared under.
CCEH_VARIANTS = {"lsb": "cceh-lsb", "exth": "exth"}
# Absolute per-op counts (flushes per insert) 'hold' within this many flushes of the published one.
FLUSH_TOLERANCE = 0.5
# An ordering claim tolerates this much noise: a kind within it of the best counts as the best.
NOISE = 0.05


class Thesis:
    """The thesis experiments' records: get(exp, index, op, **match) -> record or None."""

    def __init__(self, recs):
        self.recs = [dict(r) for r in recs if r.get("experiment") in THESIS_EXPS]
        for r in self.recs:  # cceh's directory variants (cceh.h "Variants") as kinds of their own here
            v = r.get("cceh_variant")
            if v in CCEH_VARIANTS and r.get("index") == "cceh":
                r["index"] = CCEH_VARIANTS[v]
        for r in self.recs:  # b3tree at other page sizes than 1 KB: the page-size sweep (Figures 12/14's axis)
            if r.get("experiment") == "b3-page" and r.get("page_bytes") not in (None, 1024):
                r["experiment"] = "b3-pagesize"
        for r in self.recs:  # the time compared: CPU ns per op where recorded (robust on a shared machine)
            r["t_ns"] = r.get("cpu_ns_per_op") or r.get("ns_per_op")

    def get(self, exp, index, op, **match):
        for r in self.recs:
            if r.get("experiment") == exp and r.get("index") == index and r.get("op") == op and \
                    all(r.get(k) == v for k, v in match.items()):
                return r
        return None

    def val(self, exp, index, op, field="t_ns", **match):
        r = self.get(exp, index, op, **match)
        return None if r is None else r.get(field)

    def kinds(self, exp):
        seen = []
        for r in self.recs:
            if r.get("experiment") == exp and r["index"] not in seen:
                seen.append(r["index"])
        return seen

    def page_sweep(self, op, field="t_ns"):
        """{page bytes: b3tree's value} over the b3-page run (1 KB) and the page-size sweep."""
        out = {}
        v = self.val("b3-page", "b3tree", op, field)
        if v is not None:
            out[1024] = v
        for r in self.recs:
            if r.get("experiment") == "b3-pagesize" and r.get("index") == "b3tree" and r.get("op") == op and \
                    r.get(field) is not None:
                out[r["page_bytes"]] = r[field]
        return dict(sorted(out.items()))

    def values(self, exp, field):
        return sorted({r[field] for r in self.recs if r.get("experiment") == exp and r.get(field) is not None})


def absolute_verdict(measured, published, tol=FLUSH_TOLERANCE):
    said = f"measured {measured:.2f} vs published {published:g}"
    if abs(measured - published) <= tol:
        return f"holds (within {tol:g}; {said})"
    return f"does not hold ({said}; holds needs within {tol:g})"


def order_verdict(oks, what):
    if not oks:
        return "cannot check (no runs)"
    n = sum(oks)
    return ("holds" if n == len(oks) else "partly holds" if n else "does not hold") + f" ({what} in {n} of {len(oks)})"


# Figure 26(a): a stall (busy gap between completions, src/bench/arrival_bench.h) of at least this
# many ms is a flat region of the CDF; the runs record their own threshold (stall_min_ns).
FULL_REHASH_KINDS = ["levl", "linp", "cuck", "bch", "path"]


def cdf_verdict(t, c):
    """Verdict and detail of a Figure 26(a) claim from the cceh-cdf records at the thesis's rate (load 1:
    LINP's batch throughput); the other loads' figures are appended to the detail."""
    loads = t.values("cceh-cdf", "load")
    main = 1.0 if 1.0 in loads else (loads[0] if loads else None)
    if main is None:
        return "cannot check (no runs)", ""
    verdict, detail = cdf_verdict_at(t, c, main)
    for other in [x for x in loads if x != main]:
        _, d = cdf_verdict_at(t, c, other)
        if d:
            detail += f"; at {other:g}x LINP's rate: {d}"
    return verdict, f"at {main:g}x LINP's rate: {detail}"


def cdf_verdict_at(t, c, load):
    def rec(k):
        return t.get("cceh-cdf", k, "insert", load=load)
    chk = c["check"]
    if chk == "cdf_max_ratio":
        a, b = rec(c["kind"]), rec(c["versus"])
        if not a or not b or not b.get("max_ns"):
            return "cannot check (no runs)", ""
        m = a["max_ns"] / b["max_ns"]
        detail = (f"max latency {c['kind']} {a['max_ns'] / 1e6:.2f} ms / {c['versus']} {b['max_ns'] / 1e6:.2f} ms = "
                  f"{m:.2f}x" + (f" (published {c['published_ms'][0]} vs {c['published_ms'][1]} ms)"
                                if c.get("published_ms") else ""))
        if c.get("at_least"):
            said = f"measured {m:.2f}x vs published over {c['ratio']:g}x"
            return ((f"holds ({said})" if m >= c["ratio"] else f"direction only ({said})" if m > 1 else
                     f"does not hold ({said})"), detail)
        return ratio_verdict([(m, c["ratio"])]), detail
    if chk == "cdf_no_flat":
        a = rec(c["kind"])
        if not a:
            return "cannot check (no runs)", ""
        thr = a.get("stall_min_ns", 1e6)
        others = {k: rec(k)["longest_stall_ns"] for k in FULL_REHASH_KINDS if rec(k)}
        detail = (f"{c['kind']}: longest stall {a['longest_stall_ns'] / 1e6:.3f} ms, {a.get('stalls', 0)} stalls >= "
                  f"{thr / 1e6:g} ms (the flat-region threshold); full-rehash kinds' longest: " +
                  ", ".join(f"{k} {v / 1e6:.2f} ms" for k, v in others.items()))
        if a["longest_stall_ns"] < thr:
            return f"holds (no stall >= {thr / 1e6:g} ms)", detail
        if others and a["longest_stall_ns"] * 2 <= min(others.values()):
            return (f"direction only ({a.get('stalls', 0)} stalls >= {thr / 1e6:g} ms, each under half of every "
                    "full-rehash kind's longest)"), detail
        return f"does not hold ({a.get('stalls', 0)} stalls >= {thr / 1e6:g} ms)", detail
    if chk == "cdf_longest_stall":
        st = {k: rec(k)["longest_stall_ns"] for k in t.kinds("cceh-cdf") if rec(k)}
        if not st:
            return "cannot check (no runs)", ""
        if c["kind"] not in st:
            return "cannot check (no runs)", ""
        top = max(st.values())
        detail = "longest stall: " + ", ".join(f"{k} {v / 1e6:.2f} ms" for k, v in st.items())
        ok = st[c["kind"]] >= top * (1 - NOISE)
        return order_verdict([ok], f"{c['kind']}'s longest stall the longest"), detail
    return "cannot check", ""


def check_thesis(pub, recs):
    """[(section, id, text, verdict, detail)] for every claim of thesis_ch4.json."""
    t = Thesis(recs)
    out = []
    segs = t.values("cceh-seg", "segment_bytes")
    lats = t.values("cceh-lat", "write_latency_ns")
    for c in pub.get("cceh", []):
        chk, verdict, detail = c.get("check"), "cannot check (no runs)", ""
        if chk == "missing":
            verdict, detail = "not reproduced: kind missing" if "variant" in c.get("why", "") or \
                "not a variant" in c.get("why", "") else "not reproduced", c.get("why", "")
        elif chk == "exth_flushes" and segs:
            # EXTH(LSB)'s flushes per insert at 256-byte buckets (at="small") or at its largest bucket.
            fs = {s: t.val("cceh-seg", "exth", "insert", "flushes_per_op", segment_bytes=s) for s in segs}
            fs = {s: v for s, v in fs.items() if v is not None}
            at = (256 if 256 in fs else None) if c.get("at") == "small" else (max(fs) if fs and max(fs) > 256 else None)
            if at is not None:
                verdict = absolute_verdict(fs[at], c["value"])
                detail = "EXTH(LSB) flushes/insert: " + ", ".join(f"{v:.2f} at {s} B" for s, v in sorted(fs.items()))
        elif chk == "lsb_split" and segs:
            # Split cost as flushes per insert beyond the one that stores the record, LSB over MSB.
            pairs, parts = [], []
            for s_ in [x for x in segs if x <= c.get("max_bytes", 4096)]:
                fm = t.val("cceh-seg", "cceh", "insert", "flushes_per_op", segment_bytes=s_)
                fl = t.val("cceh-seg", "cceh-lsb", "insert", "flushes_per_op", segment_bytes=s_)
                if fm is None or fl is None or fm <= 1:
                    continue
                pairs.append((fl - 1) / (fm - 1))
                parts.append(f"{s_} B: MSB {fm - 1:.3f} vs LSB {fl - 1:.3f} split flushes/insert "
                             f"(MSB {1 - (fm - 1) / (fl - 1):.0%} below)" if fl > 1 else f"{s_} B: LSB {fl:.3f}")
            if pairs:
                verdict = ratio_verdict([(max(pairs), 1 / (1 - c["value"]))]) + " (proxy)"
                detail = f"{c.get('proxy', '')}: " + "; ".join(parts)
        elif chk == "lsb_time" and segs:
            rs, parts = [], []
            for s_ in segs:
                tm, tl = t.val("cceh-seg", "cceh", "insert", segment_bytes=s_), \
                    t.val("cceh-seg", "cceh-lsb", "insert", segment_bytes=s_)
                if tm and tl:
                    rs.append(tl / tm)
                    parts.append(f"{s_} B {tl / tm:.2f}x")
            if rs:
                mean = sum(rs) / len(rs)
                verdict = ratio_verdict([(mean, c["ratio"])])
                detail = f"insert CPU ns CCEH(LSB)/CCEH(MSB), mean {mean:.2f}x: " + ", ".join(parts)
        elif chk == "seg_best" and segs:
            parts, oks = [], []
            for k in [k for k in t.kinds("cceh-seg") if k != "exth"]:
                ns = {s: t.val("cceh-seg", k, "insert", segment_bytes=s) for s in segs}
                ns = {s: v for s, v in ns.items() if v}
                if not ns:
                    continue
                best = min(ns, key=ns.get)
                mid = {s: v for s, v in ns.items() if 4096 <= s <= 16384}
                ok = bool(mid) and min(mid.values()) <= ns[best] * (1 + NOISE)
                oks.append(ok)
                parts.append(f"{k}: fastest at {best // 1024 if best >= 1024 else best}{'KB' if best >= 1024 else 'B'} "
                             f"({ns[best]:.0f} ns/insert)" + (f", best of 4-16 KB {min(mid.values()):.0f} ns" if mid else ""))
            if oks:
                verdict = order_verdict(oks, f"a 4-16 KB segment within {NOISE:.0%} of the fastest")
                detail = "; ".join(parts)
        elif chk == "seg_flushes" and segs:
            parts, oks = [], []
            big = [s for s in segs if s > 16384]
            for k in [k for k in t.kinds("cceh-seg") if k != "exth"]:
                f16 = t.val("cceh-seg", k, "insert", "flushes_per_op", segment_bytes=16384)
                if f16 is None or not big:
                    continue
                fb = t.val("cceh-seg", k, "insert", "flushes_per_op", segment_bytes=big[-1])
                if fb is None:
                    continue
                oks.append(fb > f16)
                parts.append(f"{k}: {f16:.2f} flushes/insert at 16 KB, {fb:.2f} at {big[-1] // 1024} KB")
            if oks:
                verdict = order_verdict(oks, "more flushes per insert above 16 KB")
                detail = "; ".join(parts)
        elif chk in ("lat_fastest", "lat_slowest") and lats:
            parts, oks = [], []
            for lat in lats:
                ns = {k: t.val("cceh-lat", k, "insert", write_latency_ns=lat) for k in t.kinds("cceh-lat")}
                ns = {k: v for k, v in ns.items() if v}
                if c["kind"] not in ns or len(ns) < 2:
                    continue
                if chk == "lat_fastest":
                    best = min(ns, key=ns.get)
                    oks.append(ns[c["kind"]] <= ns[best] * (1 + NOISE))
                else:
                    best = max(ns, key=ns.get)
                    oks.append(ns[c["kind"]] >= ns[best] * (1 - NOISE))
                parts.append(f"{lat} ns: {'fastest' if chk == 'lat_fastest' else 'slowest'} {best} ({ns[best]:.0f} ns), "
                             f"{c['kind']} {ns[c['kind']]:.0f} ns")
            if oks:
                verdict = order_verdict(oks, f"{c['kind']} {'fastest' if chk == 'lat_fastest' else 'slowest'} "
                                             f"(within {NOISE:.0%}) at a latency")
                detail = "; ".join(parts)
        elif chk == "cow_levl" and lats:
            lo, hi = lats[0], lats[-1]
            a0, b0 = t.val("cceh-lat", "cceh-cow", "insert", write_latency_ns=lo), \
                t.val("cceh-lat", "levl", "insert", write_latency_ns=lo)
            a1, b1 = t.val("cceh-lat", "cceh-cow", "insert", write_latency_ns=hi), \
                t.val("cceh-lat", "levl", "insert", write_latency_ns=hi)
            if None not in (a0, b0, a1, b1) and hi > lo:
                oks = [a0 < b0, b1 < a1]
                verdict = order_verdict(oks, "the stated ordering")
                detail = (f"{lo} ns: CCEH(C) {a0:.0f} vs LEVL {b0:.0f} ns/insert; {hi} ns: CCEH(C) {a1:.0f} vs "
                          f"LEVL {b1:.0f}")
        elif chk == "breakdown" and lats:
            parts = []
            for lat in lats:
                row = []
                for k in t.kinds("cceh-lat"):
                    r = t.get("cceh-lat", k, "insert", write_latency_ns=lat)
                    if r is None or r.get("rehash_ns_per_op") is None:
                        continue
                    tot, rh, dp = r["ns_per_op"], r["rehash_ns_per_op"], r.get("displacement_ns_per_op", 0)
                    row.append(f"{k} {tot - rh - dp:.0f}/{rh:.0f}/{dp:.0f}")
                if row:
                    parts.append(f"{lat} ns: " + ", ".join(row))
            if parts:
                verdict = "measured (a figure: no numeric claim)"
                detail = "wall ns per insert, write/rehash/displacement: " + "; ".join(parts)
        elif chk == "cow_split" and t.val("cceh-lat", "cceh", "insert", "rehash_ns_per_op", write_latency_ns=lats[0]
                                           if lats else 0):
            # Rehash (split) time itself, from the kinds' counters, at every latency.
            pairs, parts = [], []
            for lat in lats:
                rc = t.val("cceh-lat", "cceh", "insert", "rehash_ns_per_op", write_latency_ns=lat)
                rw = t.val("cceh-lat", "cceh-cow", "insert", "rehash_ns_per_op", write_latency_ns=lat)
                if rc and rw:
                    pairs.append((rw / rc, c["ratio"]))
                    parts.append(f"{lat} ns: CCEH {rc:.0f}, CCEH(C) {rw:.0f} wall ns of split per insert ({rw / rc:.2f}x)")
            if pairs:
                verdict = ratio_verdict(pairs)
                detail = "; ".join(parts)
        elif chk == "cow_split":
            fc = t.val("cceh-seg", "cceh", "insert", "flushes_per_op", segment_bytes=16384)
            fw = t.val("cceh-seg", "cceh-cow", "insert", "flushes_per_op", segment_bytes=16384)
            if fc is None or fw is None:
                fc, fw = t.val("cceh-lat", "cceh", "insert", "flushes_per_op", write_latency_ns=0), \
                    t.val("cceh-lat", "cceh-cow", "insert", "flushes_per_op", write_latency_ns=0)
            if fc is not None and fw is not None and fc > 1:
                verdict = ratio_verdict([((fw - 1) / (fc - 1), c["ratio"])]) + " (proxy)"
                detail = (f"{c.get('proxy', '')}: CCEH {fc:.3f}, CCEH(C) {fw:.3f} flushes/insert -> split flushes "
                          f"{fc - 1:.3f} vs {fw - 1:.3f}")
        elif chk == "search":
            mine, other = t.val("cceh-search", "cceh-cow", "search"), t.val("cceh-search", c["versus"], "search")
            if mine and other:
                verdict = ratio_verdict([(other / mine, c["ratio"])]) + " (proxy)"
                detail = (f"{c.get('proxy', '')}: search CPU ns/op {c['versus']} {other:.0f} / cceh-cow {mine:.0f} = "
                          f"{other / mine:.2f}x")
        elif chk in ("cdf_max_ratio", "cdf_no_flat", "cdf_longest_stall") and t.kinds("cceh-cdf"):
            verdict, detail = cdf_verdict(t, c)
        out.append(("CCEH", c["id"], c["text"], verdict, detail))

    grow = t.values("b3-grow", "keys")
    for c in pub.get("b3", []):
        chk, verdict, detail = c.get("check"), "cannot check (no runs)", ""
        if chk == "missing":
            verdict, detail = "not reproduced", c.get("why", "")
        elif chk == "insert_ratio":
            mine, other = t.val("b3-page", "b3tree", "insert"), t.val("b3-page", c["versus"], "insert")
            if mine and other:
                verdict = ratio_verdict([(other / mine, c["ratio"])])
                detail = (f"insert CPU ns: {c['versus']} {other:.0f} / b3tree {mine:.0f} = {other / mine:.2f}x "
                          f"(b3tree at {mine / other:.0%} of it; published {1 / c['ratio']:.0%})")
        elif chk == "flushes":
            v = t.val("b3-page", c["kind"], c["op"], "flushes_per_op")
            if v is not None:
                verdict = absolute_verdict(v, c["value"])
                detail = f"{c['kind']}: {v:.2f} flushes per {c['op']}"
        elif chk == "grow_fastest" and grow:
            parts, oks = [], []
            for n in grow:
                ns = {k: t.val("b3-grow", k, c["op"], keys=n) for k in t.kinds("b3-grow")}
                ns = {k: v for k, v in ns.items() if v}
                if "b3tree" not in ns or len(ns) < 2:
                    continue
                best = min(ns, key=ns.get)
                oks.append(ns["b3tree"] <= ns[best] * (1 + NOISE))
                parts.append(f"N={n:,}: fastest {best} ({ns[best]:.0f} ns), b3tree {ns['b3tree']:.0f} ns")
            if oks:
                verdict = order_verdict(oks, f"b3tree fastest (within {NOISE:.0%}) at an N")
                detail = "; ".join(parts)
        elif chk == "grow_ratio" and grow:
            pairs, parts = [], []
            for n in grow:
                mine, other = t.val("b3-grow", "b3tree", "insert", keys=n), t.val("b3-grow", c["versus"], "insert", keys=n)
                if mine and other:
                    pairs.append((other / mine, c["ratio"]))
                    parts.append(f"N={n:,}: {other / mine:.2f}x")
            if pairs:
                if c.get("agg") == "max":
                    pairs = [max(pairs)]
                verdict = ratio_verdict(pairs)
                detail = f"insert throughput b3tree / {c['versus']}: " + "; ".join(parts) + \
                    (" (the largest is compared)" if c.get("agg") == "max" else "")
        elif chk == "page_size_flat":
            parts, oks = [], []
            for op in c["ops"]:
                sw = t.page_sweep(op)
                fl = t.page_sweep(op, "flushes_per_op")
                if len(sw) >= 2:
                    spread = max(sw.values()) / min(sw.values())
                    oks.append(spread <= TOLERANCE)
                    parts.append(f"{op}: " + ", ".join(f"{b} B {v:.0f} ns ({fl.get(b, 0):.2f} flushes)"
                                                       for b, v in sw.items()) + f" (max/min {spread:.2f}x)")
            if oks:
                verdict = (f"holds (b3tree's max/min time over page sizes within {TOLERANCE:g}x for " +
                           " and ".join(c["ops"]) + ")" if all(oks) else
                           f"does not hold (max/min over page sizes above {TOLERANCE:g}x for "
                           f"{len(oks) - sum(oks)} of {len(oks)} ops)")
                detail = "CPU ns per op; " + "; ".join(parts)
        elif chk == "page_size_trend":
            sw = t.page_sweep(c["op"])
            if len(sw) >= 2:
                small, large = sw[min(sw)], sw[max(sw)]
                verdict = order_verdict([large < small], f"{c['op']} faster at {max(sw)} B than at {min(sw)} B pages")
                detail = f"b3tree {c['op']} CPU ns: " + ", ".join(f"{b} B {v:.0f}" for b, v in sw.items())
        elif chk == "order":
            parts, pairs = [], []
            for k in t.kinds("b3-order"):
                row = []
                for op in ("insert", "search"):
                    a = t.val("b3-order", k, op, insert_order="random", rebalance=True)
                    b = t.val("b3-order", k, op, insert_order="sorted", rebalance=True)
                    if a and b:
                        row.append(f"{op} sorted/random {b / a:.2f}x")
                        if k == "b3tree":
                            pairs.append(b / a)
                if row:
                    parts.append(f"{k}: " + ", ".join(row))
            if pairs:
                ok = all(1 / TOLERANCE <= x <= TOLERANCE for x in pairs)
                verdict = (f"holds (b3tree's sorted/random time ratios within {TOLERANCE:g}x of 1)" if ok else
                           f"does not hold (a b3tree sorted/random time ratio outside {TOLERANCE:g}x of 1)")
                detail = "CPU ns; " + "; ".join(parts) + \
                    " (BST heights and accessed lines are not counted; times stand for them)"
        elif chk == "norebalance":
            on = t.val("b3-order", "b3tree", "search", insert_order="sorted", rebalance=True)
            off = t.val("b3-order", "b3tree", "search", insert_order="sorted", rebalance=False)
            offr = t.val("b3-order", "b3tree", "search", insert_order="random", rebalance=False)
            if on and off:
                verdict = order_verdict([off > on * (1 + NOISE)], "lookups slower without rebalancing after "
                                                                    "sorted inserts")
                detail = (f"{c.get('proxy', '')}: b3tree search after sorted inserts {off:.0f} CPU ns without "
                          f"rebalancing vs {on:.0f} with ({off / on:.2f}x)" +
                          (f"; after random inserts without rebalancing {offr:.0f}" if offr else ""))
        elif chk == "grow_search_fastfair" and grow:
            parts, oks = [], []
            for n in grow:
                mine, ff = t.val("b3-grow", "b3tree", "search", keys=n), t.val("b3-grow", "fastfair", "search", keys=n)
                if mine and ff:
                    oks.append(ff < mine <= ff * 1.5)
                    parts.append(f"N={n:,}: b3tree {mine:.0f} vs fastfair {ff:.0f} ns/search ({mine / ff:.2f}x)")
            if oks:
                verdict = order_verdict(oks, "b3tree slower than FAST&FAIR by at most 1.5x")
                detail = "; ".join(parts)
        out.append(("B3-tree", c["id"], c["text"], verdict, detail))
    return out


def thesis_section(recs, cfg, path, figures):
    """report.md lines of the thesis chapter IV sections; empty when none of its experiments ran."""
    t = Thesis(recs)
    if not t.recs or not os.path.exists(path):
        return []
    pub = json.load(open(path))
    th = cfg.get("thesis", {})
    L = ["## Thesis chapter IV: CCEH (4.4.7) and B3-tree (4.3) beside this run\n",
         f"Source: {pub.get('source', '')}. Measured here: random 8-byte integer keys (the bench's sparse "
         f"distribution), CCEH experiments at N = {th.get('cceh_keys', 0):,} (thesis 16M) from tables sized for "
         f"2,048 records, segment sizes {', '.join(str(s) for s in th.get('segment_bytes', []))} B, write latencies "
         f"{', '.join(str(x) for x in th.get('latencies_ns', []))} ns per flushed line (emulated by the bench; read "
         f"latency, which the thesis set with Quartz, is not emulated here); B3-tree at N = {th.get('b3_keys', 0):,} "
         f"(thesis 10M), Figure 15 at N = {', '.join(f'{n:,}' for n in th.get('b3_grow', []))}. One thread, one run "
         "per point on a shared machine; times compared are CPU ns per operation (thread CPU time; the "
         "emulated write latency is a busy wait, so it counts), wall ns are listed beside them (Figure 26(a): "
         "latencies, two workers). Verdicts: a "
         f"ratio 'holds' within {TOLERANCE:g}x of the published one, 'direction only' if on its side of 1; a "
         f"flush count 'holds' within {FLUSH_TOLERANCE:g} of the published one; an ordering 'holds' if it holds at "
         f"every point (a kind within {NOISE:.0%} of the best counts as the best); 'not reproduced' says why.\n",
         "| section | claim | statement | verdict | measured |", "|---|---|---|---|---|"]
    for sec, cid, text, verdict, detail in check_thesis(pub, recs):
        L.append(f"| {sec} | {cid} | {text} | **{verdict}** | {detail or '-'} |")
    L.append("\n### Measured values\n")
    L.append("| experiment | index | op | N | segment (b3: page) B | write latency ns | ns/op | CPU ns/op | flushes/op | bytes/key |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in t.recs:
        if r["experiment"] == "cceh-cdf":  # latencies: their own table below
            continue
        L.append(f"| {r['experiment']} | {r['index']} | {r['op']} | {r.get('keys', 0):,} | "
                 f"{r.get('segment_bytes', r.get('page_bytes', '-'))} | {r.get('write_latency_ns', 0)} | {fmt(r.get('ns_per_op'))} | "
                 f"{fmt(r.get('cpu_ns_per_op'))} | {fmt(r.get('flushes_per_op'), 2)} | {fmt(r.get('bytes_per_key'))} |")
    cdf = [r for r in t.recs if r["experiment"] == "cceh-cdf"]
    if cdf:
        r0 = cdf[0]
        L.append(f"\n### Figure 26(a): insert latency with Poisson arrivals\n\n`wort bench arrival` "
                 f"(src/bench/arrival_bench.h): {r0.get('keys', 0):,} inserts arriving as a Poisson process at "
                 f"{r0.get('rate_per_s', 0):,.0f}/s ({r0.get('rate_from', '')}: the thesis's rate, LINP's batch "
                 f"throughput; other loads are multiples of it), served by {r0.get('threads', 1)} worker threads; latency from the scheduled arrival, "
                 "so waiting behind a blocking rehash counts. A stall is a gap between two completions while "
                 f"requests were waiting; those of at least {r0.get('stall_min_ns', 1e6) / 1e6:g} ms are the CDF's "
                 "flat regions. This machine: the workers share its cores with the rest of the system, so a stall "
                 "can also be every worker descheduled at once; the thesis's concurrent clients and its 16M inserts "
                 "are not reproduced at this scale (the thesis's maxima are tens to hundreds of ms).\n")
        L.append("| index | load | rate/s | achieved/s | mean us | p50 us | p99 us | p99.9 us | max ms | longest stall ms | "
                 "stalls | flushes/insert |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in cdf:
            L.append(f"| {r['index']} | {r.get('load', 0):g} | {r.get('rate_per_s', 0):,.0f} | {r.get('achieved_per_s', 0):,.0f} | "
                     f"{r.get('mean_ns', 0) / 1e3:.1f} | {r.get('p50_ns', 0) / 1e3:.1f} | {r.get('p99_ns', 0) / 1e3:.1f} | "
                     f"{r.get('p999_ns', 0) / 1e3:.1f} | {r.get('max_ns', 0) / 1e6:.2f} | "
                     f"{r.get('longest_stall_ns', 0) / 1e6:.2f} | {r.get('stalls', 0)} | {fmt(r.get('flushes_per_op'), 2)} |")
    wrong = [r for r in t.recs if r.get("errors")]
    if wrong:
        L.append("\n**Wrong results:** " + "; ".join(f"{r['index']} {r['experiment']} {r['op']}: {r['errors']}"
                                                    for r in wrong))
    for f in figures:
        L.append(f"\n![{f}]({f})")
    L.append("")
    return L


def draw_thesis(out, recs):
    """The thesis chapter IV figures that have records; returns the file names written."""
    t = Thesis(recs)
    if not t.recs:
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []

    def save(fig, name):
        fig.savefig(os.path.join(out, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(name)

    segs = t.values("cceh-seg", "segment_bytes")
    if segs:
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.8))
        for k in t.kinds("cceh-seg"):
            xs = [s for s in segs if t.val("cceh-seg", k, "insert", segment_bytes=s)]
            st = style(k, t.kinds("cceh-seg"))
            axs[0].plot(xs, [1e3 / t.val("cceh-seg", k, "insert", segment_bytes=s) for s in xs], label=THESIS_NAMES.get(k, k),
                        color=st["colour"], marker=st["marker"])
            axs[1].plot(xs, [t.val("cceh-seg", k, "insert", "flushes_per_op", segment_bytes=s) for s in xs],
                        label=THESIS_NAMES.get(k, k), color=st["colour"], marker=st["marker"])
        for ax, yl in zip(axs, ["insert throughput (Mops/s)", "cache-line flushes per insert"]):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("segment size (bytes)")
            ax.set_ylabel(yl)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle("Thesis Figure 24: CCEH segment (EXTH: bucket) size")
        save(fig, "cceh_seg.png")
    lats = t.values("cceh-lat", "write_latency_ns")
    if lats:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for k in t.kinds("cceh-lat"):
            xs = [x for x in lats if t.val("cceh-lat", k, "insert", write_latency_ns=x)]
            st = style(k)
            ax.plot(xs, [t.val("cceh-lat", k, "insert", write_latency_ns=x) for x in xs], label=THESIS_NAMES.get(k, k),
                    color=st["colour"], marker=st["marker"])
        ax.set_xlabel("emulated write latency per flushed line (ns)")
        ax.set_ylabel("insert CPU time (ns/op)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(ncol=2, fontsize=8)
        ax.set_title("Thesis Figure 25: hash tables' insert time vs write latency")
        save(fig, "cceh_lat.png")
        # Figure 25's breakdown: write / rehash / displacement per insert (wall ns), per latency.
        bk = [k for k in t.kinds("cceh-lat")
              if any(t.val("cceh-lat", k, "insert", "rehash_ns_per_op", write_latency_ns=x) is not None for x in lats)]
        if bk:
            fig, axs = plt.subplots(1, len(lats), figsize=(3.6 * len(lats), 3.8), squeeze=False)
            for ax, lat in zip(axs[0], lats):
                bottoms = [0.0] * len(bk)
                for part, colour in (("write", "#4c72b0"), ("rehash", "#dd8452"), ("displacement", "#55a868")):
                    vals = []
                    for k in bk:
                        r = t.get("cceh-lat", k, "insert", write_latency_ns=lat) or {}
                        rh, dp = r.get("rehash_ns_per_op") or 0, r.get("displacement_ns_per_op") or 0
                        vals.append({"write": max(0.0, (r.get("ns_per_op") or 0) - rh - dp), "rehash": rh,
                                     "displacement": dp}[part])
                    ax.bar(range(len(bk)), vals, bottom=bottoms, color=colour, label=part)
                    bottoms = [b + v for b, v in zip(bottoms, vals)]
                ax.set_xticks(range(len(bk)))
                ax.set_xticklabels([THESIS_NAMES.get(k, k) for k in bk], rotation=45, ha="right", fontsize=8)
                ax.set_title(f"{lat} ns per flushed line", fontsize=9)
                ax.grid(alpha=0.3, axis="y")
            axs[0][0].set_ylabel("insert wall time (ns/op)")
            axs[0][0].legend(fontsize=8)
            fig.suptitle("Thesis Figure 25: insert time broken into write, rehash and cuckoo displacement")
            save(fig, "cceh_breakdown.png")
    ck = t.kinds("cceh-cdf")
    cl = t.values("cceh-cdf", "load")
    if ck and cl:
        fig, axs = plt.subplots(len(cl), 2, figsize=(11, 3.8 * len(cl)), squeeze=False)
        for row, load in zip(axs, sorted(cl, reverse=True)):
            r0 = {}
            for k in ck:
                r = t.get("cceh-cdf", k, "insert", load=load)
                pts = (r or {}).get("cdf") or []
                if not pts:
                    continue
                r0 = r0 or r
                st = style(k, ck)
                xs = [max(p[0], 1.0) / 1e6 for p in pts]
                ys = [p[1] for p in pts]
                for ax in row:
                    ax.plot(xs, ys, label=THESIS_NAMES.get(k, k), color=st["colour"], drawstyle="steps-post")
            row[0].set_xscale("log")
            row[0].set_title(f"{load:g}x LINP's batch rate ({r0.get('rate_per_s', 0):,.0f}/s): whole CDF", fontsize=9)
            row[1].set_ylim(0.9, 1.0005)
            row[1].set_title("tail (flat regions: stalls)", fontsize=9)
            for ax in row:
                ax.set_xlabel("insert latency from the scheduled arrival (ms)")
                ax.set_ylabel("fraction of inserts")
                ax.grid(alpha=0.3)
            row[0].legend(fontsize=8)
        fig.subplots_adjust(hspace=0.4)
        r1 = t.get("cceh-cdf", ck[0], "insert") or {}
        fig.suptitle(f"Thesis Figure 26(a): insert latency, Poisson arrivals, {r1.get('threads', 1)} workers, "
                     f"N = {r1.get('keys', 0):,}")
        save(fig, "cceh_cdf.png")
    pk = t.kinds("b3-page")
    if pk:
        sweep = len(t.page_sweep("insert")) >= 2
        fig, axs = plt.subplots(1, 4 if sweep else 3, figsize=(16 if sweep else 12, 3.8))
        if sweep:
            ax = axs[3]
            for op, colour in (("insert", "#cb181d"), ("delete", "#2171b5")):
                sw = t.page_sweep(op)
                ax.plot(list(sw), list(sw.values()), marker="o", color=colour, label=f"{op} CPU ns")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("b3tree page size (bytes)")
            ax.set_ylabel("CPU time (ns/op)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        for ax, (op, field, yl) in zip(axs, [("insert", "t_ns", "insert CPU time (ns/op)"),
                                             ("insert", "flushes_per_op", "flushes per insert"),
                                             ("delete", "flushes_per_op", "flushes per delete")]):
            vals = [t.val("b3-page", k, op, field) or 0 for k in pk]
            ax.bar(range(len(pk)), vals, color=[style(k)["colour"] for k in pk])
            ax.set_xticks(range(len(pk)))
            ax.set_xticklabels([THESIS_NAMES.get(k, k) for k in pk], rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(yl)
            ax.grid(alpha=0.3, axis="y")
        fig.suptitle("Thesis Figures 12/14: B3-tree vs wB+-tree (1 KB pages)" +
                     (", and b3tree's page size swept" if sweep else ""))
        save(fig, "b3_page.png")
    ok = t.kinds("b3-order")
    if ok:
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, op in zip(axs, ["insert", "search"]):
            w = 0.38
            cols = [(k, True) for k in ok] + ([("b3tree", False)] if t.get("b3-order", "b3tree", op, rebalance=False)
                                               else [])
            for j, order in enumerate(["random", "sorted"]):
                vals = [t.val("b3-order", k, op, insert_order=order, rebalance=rb) or 0 for k, rb in cols]
                ax.bar([i + (j - 0.5) * w for i in range(len(cols))], vals, w, label=f"{order} insertion",
                       color=["#cb181d", "#fdae6b"][j])
            ax.set_xticks(range(len(cols)))
            ax.set_xticklabels([THESIS_NAMES.get(k, k) + ("" if rb else "\nno rebalancing") for k, rb in cols],
                               fontsize=8)
            ax.set_ylabel(f"{op} CPU time (ns/op)")
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        fig.suptitle("Thesis Figure 13: random vs sorted insertion (b3tree-norebal: WORT_B3_REBALANCE=0)")
        save(fig, "b3_order.png")
    grow = t.values("b3-grow", "keys")
    if grow:
        fig, axs = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, op in zip(axs, ["insert", "search"]):
            for k in t.kinds("b3-grow"):
                xs = [n for n in grow if t.val("b3-grow", k, op, keys=n)]
                st = style(k)
                ax.plot(xs, [1e3 / t.val("b3-grow", k, op, keys=n) for n in xs], label=THESIS_NAMES.get(k, k),
                        color=st["colour"], marker=st["marker"])
            ax.set_xscale("log")
            ax.set_xlabel("keys indexed")
            ax.set_ylabel(f"{op} throughput (Mops/s)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle("Thesis Figure 15: throughput as the index grows")
        save(fig, "b3_grow.png")
    return written


CANRT_BASELINES = ["reply-wort", "reply-woart"]


def canrt_section(recs, cfg, path):
    """The CANRT section (wort issue 18): the published CANRT ratios beside this run's
    bench-remote records (experiment "canrt"), per transport. Empty when there are none."""
    rr = [r for r in recs if r.get("experiment") == "canrt"]
    if not rr or not os.path.exists(path):
        return []
    pub = json.load(open(path))
    transports = []
    for r in rr:
        t = (r.get("backend", "?"), r.get("tls", ""))
        if t not in transports:
            transports.append(t)

    def tname(t):
        return t[0] + (f" (UCX_TLS={t[1]})" if t[1] else "")

    def get(t, design, op, threads=1):
        for r in rr:
            if (r.get("backend"), r.get("tls", "")) == t and r.get("design") == design and r.get("op") == op and \
                    r.get("threads", 1) == threads:
                return r
        return None

    def mean_ns(r):
        """Mean wall time per op of one client thread."""
        return r["seconds"] * 1e9 * r.get("threads", 1) / r["ops"] if r and r.get("ops") else None

    def cpu_ns(r):
        if not r or r.get("cpu_ns_per_op") is None:
            return None
        return r["cpu_ns_per_op"] + max(0.0, r.get("server_cpu_ns_per_op") or 0.0)

    params = {(c.get("backend"), c.get("tls", "")): c for c in cfg.get("canrt", [])}
    L = ["## CANRT (ICA3PP 2020) beside this run\n",
         f"Source: {pub.get('source', '')}. Paper's setup: {pub.get('setup', '')}. {pub.get('note', '')}\n",
         "**What differs here.** One 2-core machine runs the server and the clients in one process "
         "(`wort bench-remote`, src/bench/remote_bench.h), with 1 and 2 client threads instead of 16 on two client "
         "machines, and the pool in /dev/shm (DRAM) instead of Optane. No RDMA NIC: the `local` backend is the "
         "truly one-sided path (the client maps the pool and uses CPU loads, stores and atomics: no server CPU, "
         "but also no network round trip, where the paper's CANRT pays about 1.5 RTTs per write and 1 per read); "
         "`ucx` over `UCX_TLS=sm` or `tcp` is UCX on loopback, where every get/put/atomic on the registered pool "
         "is emulated by the server's progress thread (doc/remote.md), so it is not one-sided either. CANRT's Put "
         "returns once its item is durable by the client's own doing (local: it writes the line back through its "
         "mapping; ucx: flush + read-after-write), before the server applies it in the background, as the paper's "
         "client-active write (doc/remote.md says what other clients see, and when). The baselines reply over the same transport (a one-sided "
         "Write of the request, the client polls for the reply with Reads) and batch a range into 64 KiB replies "
         "(the paper's read a range one key per request). Wall times come from a machine shared with other jobs; "
         "the CPU columns (client + server CPU per op, server CPU being the process's CPU minus the client "
         "threads') are the steadier figures.\n",
         f"Ratios are time(baseline) / time(canrt) for latencies (mean wall time per op of one client) and "
         f"throughput(canrt) / throughput(baseline) for YCSB (at the most client threads run); the 'CPU' column is "
         f"the same ratio of client + server CPU per op. Verdicts use the wall-time ratios and the rule above "
         f"(within {TOLERANCE:g}x of every published value: 'holds').\n"]
    for t in transports:
        p = params.get(t, {})
        ranges = p.get("ranges") or sorted({r.get("range_keys") for r in rr if r.get("range_keys") and
                                            (r.get("backend"), r.get("tls", "")) == t})
        threads = sorted({r.get("threads", 1) for r in rr if (r.get("backend"), r.get("tls", "")) == t and
                          str(r.get("op", "")).startswith("ycsb-")})
        tmax = threads[-1] if threads else 1
        keys = next((r.get("keys") for r in rr if (r.get("backend"), r.get("tls", "")) == t), "?")
        L.append(f"### Transport {tname(t)}: {keys:,} records of 16-byte keys and 15-byte values\n" if isinstance(keys, int)
                 else f"### Transport {tname(t)}\n")
        L += ["| claim | source | published | measured (wall) | CPU | verdict |", "|---|---|---|---|---|---|"]
        for c in pub.get("claims", []):
            pubr = c.get("ratio", [])
            by = c.get("ratio_by_baseline", {})
            pub_s = "-".join(f"{x:g}x" for x in pubr) if pubr else \
                ", ".join(f"{b}: {'-'.join(f'{x:g}x' for x in v)}" for b, v in by.items())
            if c.get("check", True) is False:
                L.append(f"| {c['text']} | {c.get('source', '')} | {pub_s or '-'} | - | - | **cannot check** "
                         f"({c.get('why', '')}) |")
                continue
            metric, op = c.get("metric"), c.get("op")
            parts, cparts, pairs, verdict = [], [], [], None
            if metric == "latency":
                if op == "range":
                    k = c.get("range_rank", 0)
                    if k >= len(ranges):
                        L.append(f"| {c['text']} | {c.get('source', '')} | {pub_s} | - | - | **cannot check** "
                                 f"(no range size {k + 1} in this run) |")
                        continue
                    op = f"range-{ranges[k]}"
                mine = get(t, "canrt", op)
                for b in CANRT_BASELINES:
                    other = get(t, b, op)
                    if not mine or not other:
                        continue
                    r = mean_ns(other) / mean_ns(mine)
                    parts.append(f"{b} {r:.2f}x")
                    cm, co = cpu_ns(mine), cpu_ns(other)
                    if cm and co:
                        cparts.append(f"{b} {co / cm:.2f}x")
                    pv = by.get(b, pubr)
                    if pv:
                        pairs.append((r, max(pv)))
                for extra in c.get("also_ops", []):
                    em = get(t, "canrt", extra)
                    for b in CANRT_BASELINES:
                        eo = get(t, b, extra)
                        if em and eo and mean_ns(em):
                            parts.append(f"{extra} vs {b} {mean_ns(eo) / mean_ns(em):.2f}x (p50 "
                                         f"{eo.get('p50_ns', 0) / max(1.0, em.get('p50_ns', 0)):.2f}x)")
                if op.startswith("range-") and c.get("paper_range_keys") and c["paper_range_keys"] != ranges[c.get("range_rank", 0)]:
                    parts.append(f"(scans of {ranges[c.get('range_rank', 0)]:,} keys stand for the paper's "
                                 f"{c['paper_range_keys']:,})")
            elif metric == "throughput":
                for mix in ["write-only", "50:50", "95:5", "read-only"]:
                    mine = get(t, "canrt", "ycsb-" + mix, tmax)
                    for b in CANRT_BASELINES:
                        other = get(t, b, "ycsb-" + mix, tmax)
                        if not mine or not other or not other.get("ops_per_s"):
                            continue
                        r = mine["ops_per_s"] / other["ops_per_s"]
                        parts.append(f"{mix} vs {b} {r:.2f}x")
                        cm, co = cpu_ns(mine), cpu_ns(other)
                        if cm and co:
                            cparts.append(f"{mix}/{b} {co / cm:.2f}x")
                        pairs.append((r, max(pubr)))
                if parts:
                    parts.insert(0, f"with {tmax} client thread{'s' if tmax > 1 else ''} (paper: {c.get('threads', 16)})")
            elif metric == "ordering":
                tp = {m: (get(t, "canrt", "ycsb-" + m, tmax) or {}).get("ops_per_s")
                      for m in ["write-only", "50:50", "95:5", "read-only"]}
                if all(tp.values()):
                    order = sorted(tp, key=lambda m: -tp[m])
                    parts.append(", ".join(f"{m} {tp[m]:,.0f} ops/s" for m in order))
                    best, worst = order[0] == "write-only", order[-1] == "read-only"
                    verdict = "holds" if best and worst else "partly holds" if best or worst else "does not hold"
                    if not best:
                        verdict += " (here a read is one local Read with no server work and no wire; a write is " \
                                   "a fetch-add (lock; it returns the pending set), a Read (bitmap), a Write, the client's own " \
                                   "persist, a fetch-add (pending bit and unlock at once) and a post into the client's " \
                                   "own segment - a compare-swap and a Read of `wake`, a notify system call only once per batch " \
                                   "or when the segment is full)"
            elif metric == "scaling":
                mix = op[len("ycsb-"):]
                if len(threads) >= 2:
                    a, b = get(t, "canrt", op, threads[0]), get(t, "canrt", op, threads[-1])
                    if a and b and a.get("ops_per_s"):
                        f = b["ops_per_s"] / a["ops_per_s"]
                        ideal = threads[-1] / threads[0]
                        pf = c.get("factor")
                        pideal = c.get("threads_to", 16) / c.get("threads_from", 2)
                        parts.append(f"canrt {mix} {threads[0]} -> {threads[-1]} threads: {f:.2f}x "
                                     f"({f / ideal:.0%} of proportional; paper {pf:g}x over {pideal:g}x the threads, "
                                     f"{pf / pideal:.0%})")
                        for bl in CANRT_BASELINES:
                            ba, bb = get(t, bl, op, threads[0]), get(t, bl, op, threads[-1])
                            if ba and bb and ba.get("ops_per_s"):
                                parts.append(f"{bl} {bb['ops_per_s'] / ba['ops_per_s']:.2f}x")
                        close = within(f / ideal, pf / pideal)
                        verdict = (f"holds (scaling efficiency within {TOLERANCE:g}x of the paper's)"
                                   if close is not None and close <= TOLERANCE else
                                   "does not hold") + f"; only {threads[-1]} threads on 2 cores, not {c.get('threads_to', 16)}"
                if verdict is None:
                    verdict = "cannot check (one thread count only)"
            elif metric == "sequential":
                seq, rnd = get(t, "canrt", op), get(t, "canrt", c.get("random_op", "put-random"))
                if seq and rnd and mean_ns(seq) and mean_ns(rnd):
                    r = mean_ns(seq) / mean_ns(rnd)
                    parts.append(f"canrt mean sequential put / random put {r:.2f}x (p50 "
                                 f"{seq.get('p50_ns', 0) / max(1.0, rnd.get('p50_ns', 0)):.2f}x; resizes "
                                 f"{100 * (seq.get('resizes_per_op') or 0):.2f}% vs {100 * (rnd.get('resizes_per_op') or 0):.2f}% of puts)")
                    pairs.append((r, max(pubr)))
            elif metric == "resize_share":
                ld = get(t, "canrt", op)
                pts = {int(k): v for k, v in c.get("points", {}).items()}
                if ld and ld.get("resizes_per_op") is not None and ld.get("keys") and pts:
                    n, share = ld["keys"], ld["resizes_per_op"]
                    xs = sorted(pts)
                    # The published share at n: log-linear between (or beyond) the two points.
                    a, b = xs[0], xs[-1]
                    f = (math.log10(n) - math.log10(a)) / (math.log10(b) - math.log10(a)) if b != a else 0
                    want = pts[a] + f * (pts[b] - pts[a])
                    parts.append(f"{100 * share:.2f}% of the {n:,} random inserts of the load asked for a resize "
                                 f"(paper {', '.join(f'{100 * pts[x]:.2f}% at {x:,}' for x in xs)}"
                                 f"{'' if n in pts else f'; {100 * want:.2f}% interpolated at {n:,}'})")
                    if want > 0 and share > 0:
                        close = within(share / want, 1.0)
                        verdict = (f"holds (within {TOLERANCE:g}x of the paper's share)" if close is not None and
                                   close <= TOLERANCE else "does not hold") + \
                            f"; measured {100 * share:.2f}% vs {100 * want:.2f}%"
            elif metric == "server_cpu":
                mine = get(t, "canrt", op)
                ok = []
                for b in CANRT_BASELINES:
                    other = get(t, b, op)
                    if not mine or not other or other.get("server_cpu_ns_per_op", -1) < 0:
                        continue
                    ms, os_ = mine["server_cpu_ns_per_op"], other["server_cpu_ns_per_op"]
                    parts.append(f"server CPU per {op}: canrt {ms:,.0f} ns vs {b} {os_:,.0f} ns")
                    ok.append(ms * 10 < os_)
                if ok:
                    verdict = ("holds (canrt's server CPU per read under a tenth of each baseline's)" if all(ok) else
                               "does not hold (canrt's server CPU per read not under a tenth of a baseline's)")
            if verdict is None:
                verdict = ratio_verdict(pairs) if pairs else "cannot check (no runs)"
            L.append(f"| {c['text']} | {c.get('source', '')} | {pub_s or '-'} | {'; '.join(parts) or '-'} | "
                     f"{'; '.join(cparts) or '-'} | **{verdict}** |")
        # The run's own figures, and the one-sided operations per op (the paper's round trips).
        L += ["", f"Measured on {tname(t)} (one client for put/get/range; YCSB with {', '.join(map(str, threads))} "
                  "threads). Transport operations per op are the clients' connections' counters over the phase (a "
                  "baseline's polls for its reply are Reads; the paper counts 1 RTT per CANRT read and about 1.5 per "
                  "write, 1 RTT plus the server's processing per baseline operation).\n",
              "| design | op | threads | ops | mean us (per thread) | p50 us | p99 us | ops/s | client CPU ns/op | server CPU ns/op | "
              "reads/op | writes/op | atomics/op | notifies/op | bytes read/op | resizes % |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rr:
            if (r.get("backend"), r.get("tls", "")) != t or r.get("op") == "load":
                continue
            m = mean_ns(r)
            L.append(f"| {r.get('design')} | {r.get('op')} | {r.get('threads', 1)} | {r.get('ops', 0):,} | "
                     f"{fmt(None if m is None else m / 1000, 2)} | {fmt(r.get('p50_ns', 0) / 1000, 2)} | "
                     f"{fmt(r.get('p99_ns', 0) / 1000, 1)} | {fmt(r.get('ops_per_s'), 0)} | "
                     f"{fmt(r.get('cpu_ns_per_op'), 0)} | {fmt(r.get('server_cpu_ns_per_op'), 0)} | "
                     f"{fmt(r.get('reads_per_op'), 2)} | {fmt(r.get('writes_per_op'), 2)} | "
                     f"{fmt(r.get('atomics_per_op'), 2)} | {fmt(r.get('notifies_per_op'), 2)} | "
                     f"{fmt(r.get('bytes_read_per_op'), 0)} | "
                     f"{fmt(None if r.get('resizes_per_op') is None else 100 * r['resizes_per_op'], 2)} |")
        L.append("")
    return L


def write_report(out, recs, cfg, pub, figures, fig_error, thesis_figures=()):
    res = Results(recs)
    kinds = [k["name"] for k in cfg.get("kinds", [])] or sorted({r["index"] for r in recs if "index" in r})
    ordered = [k["name"] for k in cfg.get("kinds", []) if k.get("ordered")] or kinds
    pcts = cfg.get("range_pct", [0.001, 0.01])
    L = []
    L.append("# wort reproduce: the WORT paper's evaluation (FAST 2017, section 5)\n")
    L.append("## Configuration\n")
    L.append("| setting | value |\n|---|---|")
    rss = cfg.get("peak_rss_kib", 0) / 1024
    crss = cfg.get("peak_rss_children_kib", 0) / 1024
    rows = [
        ("machine", f"{cfg.get('cpu', '?')}, {cfg.get('cpus', '?')} CPUs, host {cfg.get('host', '?')}, "
                    f"{cfg.get('kernel', '?')}"),
        ("scale", f"{cfg.get('scale')} (N = {cfg.get('keys', 0):,} keys per run, 8-byte keys in random order)"),
        ("emulated write latency (fig8)", ", ".join(f"{x} ns" for x in cfg.get("latencies_ns", [])) +
         " per flushed cache line" + (f"; N = {cfg['fig8_keys']:,}, each point run {cfg.get('fig8_repeats', 1)} "
                                      "times (median plotted, min to max as bars)" if cfg.get("fig8_keys") else "")),
        ("range queries (fig10)",
         (f"{cfg['range_keys'][0]:,} and {cfg['range_keys'][1]:,} keys per query: the number of keys the paper's "
          f"{pcts[0]:g}% and {pcts[1]:g}% ranges hold at its 128M keys (not a fraction of this run's N), "
          if cfg.get("range_keys") else f"{pcts[0]:g}% and {pcts[1]:g}% of N, ") +
         f"{cfg.get('scans') or 'min(N, 10000)'} queries per run"),
        ("flush instruction", cfg.get("flush", "?")),
        ("LLC misses (Table 1(a)/(c))",
         (f"cachegrind-simulated (valgrind --tool=cachegrind --cache-sim=yes --LL={cfg.get('cachegrind_ll')}), "
          f"N = {cfg.get('cachegrind_keys', 0):,}, distributions {', '.join(cfg.get('cachegrind_dists', []))}; "
          "LL misses = ILmr + DLmr + DLmw; per insert = (generate+insert run - generate-only run) / N, per search = "
          "(generate+insert+search run - generate+insert run) / N. The paper's LLC is 20-way; valgrind needs a "
          "power-of-two set count, so the 15 MB simulated LLC is 15-way")
         if cfg.get("cachegrind") else "not measured"),
        ("index kinds", ", ".join(f"{k['name']}{'' if k.get('ordered') else ' (hash, no scan)'}"
                                  for k in cfg.get("kinds", []))),
        ("date (UTC)", cfg.get("date", "?")),
        ("git commit", cfg.get("git_commit", "?")),
        ("run time", f"{cfg.get('run_seconds', 0):.0f} s"),
        ("peak memory (ru_maxrss)", f"{rss:.0f} MiB (this process, pools in /dev/shm included); "
                                    f"{crss:.0f} MiB (largest cachegrind child)"),
    ]
    for k, v in rows:
        L.append(f"| {k} | {v} |")
    L.append("\nTimes are wall-clock on a machine shared with other jobs, so they are noisy; single runs except "
             "Figure 8's points (median of repeated runs, with their spread).\n")

    L.append("## Summary\n")
    L.append(f"| index | dist | insert ns | search ns | flushes/insert | leaf depth | bytes/key | "
             f"range {pcts[0]:g}% us | range {pcts[1]:g}% us | LLC miss/insert | LLC miss/search |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for i in kinds:
        for d in DISTS:
            s1, s2 = res.scan_ns(i, d, pcts[0]), res.scan_ns(i, d, pcts[1])
            L.append(f"| {i} | {d} | {fmt(res.insert_ns(i, d))} | {fmt(res.search_ns(i, d))} | "
                     f"{fmt(res.value('fig7', i, d, 'flushes_per_op'), 2)} | "
                     f"{fmt(res.value('fig7', i, d, 'leaf_depth'), 2)} | "
                     f"{fmt(res.value('fig7', i, d, 'bytes_per_key'))} | "
                     f"{fmt(None if s1 is None else s1 / 1000, 2)} | {fmt(None if s2 is None else s2 / 1000, 2)} | "
                     f"{fmt(res.value('table1', i, d, 'llc_miss_per_insert'), 2)} | "
                     f"{fmt(res.value('table1', i, d, 'llc_miss_per_search'), 2)} |")
    wrong = [r for r in recs if r.get("errors")]
    if wrong:
        L.append("\n**Wrong results:** " + "; ".join(
            f"{r.get('index', r.get('design', '?'))} {r.get('dist', r.get('backend', ''))} {r.get('op')}: {r['errors']}"
            for r in wrong))
    L.append("")

    L.append("## Table 1 beside the published values\n")
    L.append("Published: 128M keys, Xeon E5-2620 v3 (15 MB LLC), hardware counters. Measured: this run "
             f"(flushes and depth at N = {cfg.get('keys', 0):,}; LLC misses cachegrind-simulated at "
             f"N = {cfg.get('cachegrind_keys', 0):,}). An index the paper measured but this build lacks "
             "shows 'not in this build'. Leaf depth grows with N (WORT, 4-bit spans: about log16 N; "
             "ART: about log256 N), so at a smaller N it is lower than at 128M. At a small N the whole "
             "index fits in the simulated 15 MB LLC, so the simulated misses are mostly first-touch "
             "misses and lower than the paper's.\n")
    L.append("| metric | index | dist | measured | published | measured/published |")
    L.append("|---|---|---|---|---|---|")
    table1 = pub.get("table1", {})
    metric_src = {"llc_miss_per_insert": ("table1", "llc_miss_per_insert"),
                  "flushes_per_insert": ("fig7", "flushes_per_op"),
                  "llc_miss_per_search": ("table1", "llc_miss_per_search"),
                  "leaf_depth": ("fig7", "leaf_depth")}
    llc_bytes = 0
    try:
        llc_bytes = int(str(cfg.get("cachegrind_ll", "")).split(",")[0])
    except ValueError:
        pass
    cgn = cfg.get("cachegrind_keys") or 0

    def llc_meaningful(idx, d):
        """(True, '') if the index at the cachegrind N is LLC_MIN_RATIO times the simulated LLC,
        else (False, why)."""
        bpk = res.value("fig7", idx, d, "bytes_per_key")
        if not llc_bytes or not cgn or not bpk:
            return False, "index size at the cachegrind N unknown"
        size = bpk * cgn
        if size >= LLC_MIN_RATIO * llc_bytes:
            return True, ""
        return False, (f"ratio dropped: the index at N = {cgn:,} is about {size / 2**20:.1f} MiB, "
                       f"{'inside' if size <= llc_bytes else 'not much larger than'} the simulated "
                       f"{llc_bytes / 2**20:.0f} MiB LLC, so its misses are mostly first touches; the paper's "
                       "128M-key indexes are hundreds of times its LLC")
    dropped = []
    for metric, table in table1.items():
        exp, field = metric_src.get(metric, (None, None))
        for idx, vals in table.items():
            if not isinstance(vals, list):
                continue
            for d, pv in zip(DISTS, vals):
                if idx not in kinds:
                    m, ratio = "not in this build", "-"
                else:
                    mv = res.value(exp, idx, d, field) if exp else None
                    m = fmt(mv, 2) if mv is not None else "not measured"
                    ratio = f"{mv / pv:.2f}" if mv is not None and pv else "-"
                    if mv is not None and metric.startswith("llc_"):
                        ok, why = llc_meaningful(idx, d)
                        if not ok:
                            ratio = "- (see below)"
                            dropped.append(why)
                L.append(f"| {metric} ({table.get('source', '')}) | {PAPER_NAMES.get(idx, idx)} | {d} | {m} | "
                         f"{pv} | {ratio} |")
    if dropped:
        L.append(f"\nLLC-miss ratios to the paper are shown only where the index at the cachegrind N is at least "
                 f"{LLC_MIN_RATIO}x the simulated LLC; here they are not ({dropped[0]}). Run `--scale medium` "
                 "or `paper` for LLC rows that compare.")
    L.append("")

    L.append("## The paper's claims, checked against this run\n")
    L.append(f"Computed from results.jsonl by scripts/report.py. Where the paper states a ratio, the verdict gives "
             f"the measured ratio beside it: 'holds' only if every measured ratio is within {TOLERANCE:g}x of the "
             "published one, 'direction only' if each is on the right side of 1 but not that close, 'does not hold' "
             "otherwise. Where the paper states only an ordering, 'holds' means the ordering holds in every "
             "comparison ('partly holds' in some).\n")
    L.append("| claim | source | statement | verdict | measured |")
    L.append("|---|---|---|---|---|")
    srcs = {c["id"]: c.get("source", "") for c in pub.get("claims", [])}
    for cid, text, verdict, detail in check_claims(pub, res, kinds, ordered):
        L.append(f"| {cid} | {srcs.get(cid, '')} | {text} | **{verdict}** | {detail or '-'} |")
    L.append("")

    L += roart_section(res, kinds, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "published",
                                                "roart_fast21.json"), os.path.join(out, "peers.jsonl"),
                       cfg.get("roart_peer"))
    L += canrt_section(recs, cfg, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "published",
                                               "canrt_ica3pp20.json"))
    L += thesis_section(recs, cfg, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                "published", "thesis_ch4.json"), thesis_figures)

    L.append("## Figures\n")
    if figures:
        L.append("Each index kind has one colour and marker in every figure: radix trees blue, volatile DRAM "
                 "references grey (hollow markers, dashed lines, hatched bars), persistent B-trees red to "
                 "orange, hash tables purple to pink. Kinds are split into one panel per family, with at most "
                 f"{MAX_SERIES} series per panel; beside its own kinds, the B-tree and hash panels show the "
                 "radix trees' range (min to max of WORT, WOART, ART+CoW) as a shaded band, and the B-tree "
                 "panel the volatile B+-tree. Panels of a figure share the y axis, logarithmic where the values "
                 f"span a factor of {LOG_RATIO} or more.\n")
        for f in figures:
            L.append(f"![{f}]({f})")
    else:
        L.append(f"No figures: {fig_error}")
    L.append("")

    L.append("## What cannot be reproduced here\n")
    missing = sorted({i for t in table1.values() if isinstance(t, dict) for i in t
                      if i != "source" and ALIASES.get(i, i) not in kinds})
    L.append("- **Read latency (Quartz)**: the paper emulates PM read latency with Quartz; no such emulator "
             "is available here, so Figure 8's read-latency half and Figure 9's right half (300 ns read "
             "latency) are not reproduced. Write latency is emulated by the bench as a delay per flushed "
             "cache line (the paper's method).")
    L.append("- **Real PM**: there are no PM DIMMs on this machine; pools live in /dev/shm (DRAM), so "
             "flushes cost what they cost on DRAM.")
    L.append("- **Hardware LLC counters**: perf_event_open is not available; LLC misses are simulated by "
             "cachegrind at a reduced N (see Table 1 above).")
    L.append("- **Indexes not yet in wort**: " + (", ".join(f"{PAPER_NAMES.get(i, i)} ('{i}')" for i in missing)
                                                   if missing else "none") +
             "; the volatile B+-tree of Figure 10 " +
             ("is present as 'vbptree'." if "vbptree" in kinds else "is not an index kind either."))
    L.append("- **Memcached (Figure 11)**: not part of this command (see `wort bench-server`).")
    if Thesis(recs).recs:
        L.append("- **Thesis chapter IV**: B3-tree page sizes "
                 "other than 1 KB (no such option), the insert-time breakdown "
                 "(write / rehash / displacement), the Poisson-arrival latency CDF and multi-threaded search "
                 "throughput, Quartz read latency and hardware cache counters: see the 'not reproduced' rows above.")
    if cfg.get("scale") != "paper":
        L.append(f"- **Scale**: N = {cfg.get('keys', 0):,} instead of 128M (`--scale paper` runs 128M; not run "
                 "here). Depth, cache behaviour and thus times depend on N.")
    notes = cfg.get("notes", [])
    if notes:
        L.append("\n## Notes from the run\n")
        for n in notes:
            L.append(f"- {n}")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="a `wort reproduce` output directory (results.jsonl, config.json); "
                                "the figures and report.md are (re)written there")
    ap.add_argument("--published", help="the published values and claims (default: %(default)s)", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                       "published", "wort_fast17.json"))
    a = ap.parse_args()
    res_path = os.path.join(a.dir, "results.jsonl")
    # `--only roart-peer` alone writes peers.jsonl and no results.jsonl: a report of that section.
    recs = load(res_path) if os.path.exists(res_path) or not os.path.exists(os.path.join(a.dir, "peers.jsonl")) else []
    cfg_path = os.path.join(a.dir, "config.json")
    cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    pub = json.load(open(a.published)) if os.path.exists(a.published) else {}
    res = Results(recs)
    kinds = [k["name"] for k in cfg.get("kinds", [])] or sorted({r["index"] for r in recs if "index" in r})
    ordered = [k["name"] for k in cfg.get("kinds", []) if k.get("ordered")] or kinds
    figures, err, thesis_figures = [], "", []
    try:
        if recs:  # (a roart-peer run alone has no figures)
            figures = draw(a.dir, res, cfg, kinds, ordered)
            thesis_figures = draw_thesis(a.dir, recs)
    except ImportError as e:
        err = f"matplotlib is not installed for {sys.executable} ({e}); install python3-matplotlib"
        print(f"report.py: {err}", file=sys.stderr)
    write_report(a.dir, recs, cfg, pub, figures, err, thesis_figures)
    print(f"report.py: wrote {os.path.join(a.dir, 'report.md')} and {len(figures) + len(thesis_figures)} figures")


if __name__ == "__main__":
    main()
