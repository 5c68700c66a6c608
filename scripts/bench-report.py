#!/usr/bin/python3
"""make bench's results as data and as a page, and two runs compared.

  bench-report.py build --summary TSV [--series JSONL] --json OUT.json --html OUT.html
      TSV: the summary rows scripts/bench.sh collects (bench, case, absolute,
      ratio, target, result; tab-separated, as bench/bench_util.h writes
      them). JSONL: curve points the steps append to $BENCH_SERIES, one JSON
      object a line: {"plot","x_label","y_label","series","x","y"} (optional
      "min","max"). Writes results.json (every figure with its parsed median,
      min, max and unit, the machine and the kernel) and a self-contained
      report page (tables, and each plot as inline SVG drawn by matplotlib).

  bench-report.py compare A.json B.json
      What moved between two runs beyond the noise: a row whose ratio (else
      absolute) ranges do not overlap. Exit 0; 2 for unreadable input.
"""
import argparse
import datetime
import html
import io
import json
import os
import platform
import re
import sys

NUMBER = r"(-?\d+(?:\.\d+)?)"
# "1.23x [1.20-1.31]", "6.9 ms [3.9-16.7]", "880 us", "MET"
SPREAD = re.compile(r"^\s*" + NUMBER + r"\s*([^\s\[\d][^\[]*?)?\s*(?:\[\s*" + NUMBER + r"\s*-\s*" + NUMBER + r"\s*\])?\s*$")


class BadInput(Exception):
    pass


def figure(text):
    """A figure's text and, when it reads as one, its median, min, max and unit."""
    out = {"text": text}
    m = SPREAD.match(text or "")
    if m:
        out["median"] = float(m.group(1))
        out["unit"] = (m.group(2) or "").strip()
        if m.group(3) is not None:
            out["min"] = float(m.group(3))
            out["max"] = float(m.group(4))
    return out


def read_summary(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) != 6:
                raise BadInput(f"{path}:{n}: expected 6 tab-separated columns (bench, case, absolute, ratio, "
                               f"target, result), found {len(cols)}")
            bench, case, absolute, ratio, target, result = cols
            rows.append({"bench": bench, "case": case, "absolute": figure(absolute), "ratio": figure(ratio),
                         "target": target, "result": result})
    return rows


def read_series(path):
    points = []
    if not path or not os.path.exists(path):
        return points
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                p = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInput(f"{path}:{n}: not JSON: {e.msg} (column {e.colno})")
            for key in ("plot", "x_label", "y_label", "series"):
                if not isinstance(p.get(key), str) or not p[key]:
                    raise BadInput(f"{path}:{n}: {key}: expected a non-empty string")
            for key in ("x", "y"):
                if not isinstance(p.get(key), (int, float)) or isinstance(p.get(key), bool):
                    raise BadInput(f"{path}:{n}: {key}: expected a number")
            points.append(p)
    return points


def machine():
    load = ""
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "kernel": platform.release(), "machine": platform.machine(),
            "load_average": load, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def plots_of(points):
    plots = {}
    for p in points:
        plot = plots.setdefault(p["plot"], {"x_label": p["x_label"], "y_label": p["y_label"], "series": {}})
        plot["series"].setdefault(p["series"], []).append(p)
    for plot in plots.values():
        for s in plot["series"].values():
            s.sort(key=lambda p: p["x"])
    return plots


def svg_of(name, plot):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = [p["x"] for s in plot["series"].values() for p in s]
    ys = [p["y"] for s in plot["series"].values() for p in s]
    for label, s in sorted(plot["series"].items()):
        x = [p["x"] for p in s]
        y = [p["y"] for p in s]
        ax.plot(x, y, marker="o", label=label)
        lo = [p.get("min", p["y"]) for p in s]
        hi = [p.get("max", p["y"]) for p in s]
        if lo != y or hi != y:
            ax.fill_between(x, lo, hi, alpha=0.2)
    if xs and min(xs) > 0 and max(xs) / min(xs) >= 100:
        ax.set_xscale("log")
    if ys and min(ys) > 0 and max(ys) / min(ys) >= 100:
        ax.set_yscale("log")
    ax.set_title(name)
    ax.set_xlabel(plot["x_label"])
    ax.set_ylabel(plot["y_label"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    svg = out.getvalue()
    return svg[svg.index("<svg"):]  # inline: no XML prolog or doctype


def page(results):
    m = results["machine"]
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Faultline bench report</title><style>",
         "body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:1em 0}",
         "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}",
         ".MET{color:#060;font-weight:bold}.MISSED{color:#a00;font-weight:bold}figure{margin:1.5em 0}",
         "</style></head><body>",
         "<h1>Faultline bench report</h1>",
         f"<p id='machine'>{html.escape(str(m['cpus']))} CPUs, {html.escape(m['machine'])}, kernel "
         f"{html.escape(m['kernel'])}, load average {html.escape(m['load_average'])}, {html.escape(m['date'])}. "
         "Every ratio is against a baseline measured in the same run: median [min-max] of its rounds.</p>"]
    h.append("<h2>Figures</h2><table id='figures'><tr><th>bench</th><th>case</th><th>absolute</th><th>ratio</th>"
             "<th>target</th><th>result</th></tr>")
    for r in results["rows"]:
        cls = r["result"] if r["result"] in ("MET", "MISSED") else ""
        h.append("<tr class='row'>" + "".join(f"<td>{html.escape(v)}</td>" for v in (
            r["bench"], r["case"], r["absolute"]["text"], r["ratio"]["text"], r["target"])) +
                 f"<td class='{cls}'>{html.escape(r['result'])}</td></tr>")
    h.append("</table>")
    plots = plots_of(results["points"])
    h.append("<h2>Curves</h2>")
    if not plots:
        h.append("<p id='no-curves'>No step of this run drew a curve.</p>")
    for name, plot in sorted(plots.items()):
        n = sum(len(s) for s in plot["series"].values())
        h.append(f"<figure class='plot' data-points='{n}' data-series='{len(plot['series'])}'>{svg_of(name, plot)}"
                 f"<figcaption>{html.escape(name)}: {n} points in {len(plot['series'])} series</figcaption></figure>")
    h.append("</body></html>")
    return "\n".join(h)


def build(args):
    results = {"format": 1, "machine": machine(), "rows": read_summary(args.summary), "points": read_series(args.series)}
    for path in (args.json, args.html):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    with open(args.html, "w", encoding="utf-8") as f:
        f.write(page(results))
    print(f"bench-report: {len(results['rows'])} figures, {len(plots_of(results['points']))} plots: "
          f"{args.json}, {args.html}")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise BadInput(f"{path}: {e}")
    if not isinstance(j, dict) or not isinstance(j.get("rows"), list):
        raise BadInput(f"{path}: not a results.json of make bench (no rows)")
    return {(r.get("bench", ""), r.get("case", "")): r for r in j["rows"]}


def span(fig):
    """(min, max, median) of a figure with a spread; None without one."""
    if "median" not in fig or "min" not in fig:
        return None
    return fig["min"], fig["max"], fig["median"]


def compare(args):
    a, b = load(args.a), load(args.b)
    moved = quiet = unranged = 0
    for key in sorted(set(a) & set(b)):
        ra, rb = a[key], b[key]
        for kind in ("ratio", "absolute"):
            sa, sb = span(ra.get(kind, {})), span(rb.get(kind, {}))
            if sa and sb:
                break
        else:
            # One round, or no number: nothing to judge the noise by.
            unranged += 1
            ta, tb = ra.get("absolute", {}).get("text", ""), rb.get("absolute", {}).get("text", "")
            if ta != tb:
                print(f"changed (no spread to judge it by): {key[0]}: {key[1]}: {ta} -> {tb}")
            continue
        name = f"{key[0]}: {key[1]} ({kind})"
        if sa[1] < sb[0] or sb[1] < sa[0]:
            moved += 1
            way = "up" if sb[2] > sa[2] else "down"
            print(f"moved {way}: {name}: {ra[kind]['text']} -> {rb[kind]['text']}")
        else:
            quiet += 1
    for key in sorted(set(a) - set(b)):
        print(f"only in {args.a}: {key[0]}: {key[1]}")
    for key in sorted(set(b) - set(a)):
        print(f"only in {args.b}: {key[0]}: {key[1]}")
    print(f"{moved} moved beyond the noise, {quiet} within it, {unranged} without a spread")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    b = sub.add_parser("build")
    b.add_argument("--summary", required=True)
    b.add_argument("--series")
    b.add_argument("--json", required=True)
    b.add_argument("--html", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args()
    try:
        build(args) if args.verb == "build" else compare(args)
    except (BadInput, OSError) as e:
        print(f"bench-report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
