#!/usr/bin/env python3
"""The kernel report: scripts/kernel-report.sh is the entry point; this does the work.

  collect WORK OUT       read what scripts/vmtest.sh left in WORK/<kernel>/ (serial logs,
                         boot status, or the host run's files) and write OUT/report.json,
                         OUT/report.md; print the summary table and "N passed, M failed";
                         exit 1 on any failure
  compare A B            every capability gained or lost, every test group that changed,
                         every ratio that moved by more than its run-to-run spread;
                         A and B are report.json files, each optionally FILE#KERNEL
  docs REPORT DOC        rewrite the marked section of DOC (docs/kernel-support.md) from REPORT

Standard library only (Debian 12's python3).
"""
import datetime
import json
import os
import re
import subprocess
import sys

FORMAT = 1
TEST_LINE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] ([A-Za-z0-9_/]+)\.([A-Za-z0-9_/]+)(?:, where GetParam\(\) = .*)? \((\d+) ms\)$")
NA_LINE = re.compile(r"^vmtest-na: ([A-Za-z0-9_/]+)\.([A-Za-z0-9_/]+): (.*)$")
BOOTS = [("lsm-default", "default LSM list (bpf active)"), ("lsm-without-bpf", "lsm= without bpf")]


def group_of(suite, name):
    """Attach/Packet + Loss/tcx -> Packet/tcx; LsmSyscall + X -> LsmSyscall."""
    base = suite.split("/")[-1]
    if "/" in name:
        return base + "/" + name.split("/")[-1]
    return base


def between(text, start, end):
    out, inside = [], False
    for line in text.splitlines():
        if line == start:
            inside, out = True, []
        elif line == end and inside:
            return "\n".join(out)
        elif inside:
            out.append(line)
    return None


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def parse_log(text, boot):
    """One serial log (or the host run's log): features, tests, figures, bench."""
    res = {"tests": [], "figures": [], "features": None, "bench": None, "release": None, "lsm": None,
           "verifier": None}
    m = re.search(r"^vmtest-guest: kernel (\S+), active LSMs (\S*), suite", text, re.M)
    if m:
        res["release"], res["lsm"] = m.group(1), m.group(2)
    fj = between(text, "===== faultctl features --json =====", "===== end of faultctl features --json =====")
    if fj:
        try:
            res["features"] = json.loads(fj)
        except ValueError:
            res["features"] = None
    vj = between(text, "===== faultctl features --verifier-cost --json =====",
                 "===== end of faultctl features --verifier-cost --json =====")
    if vj:
        try:
            res["verifier"] = json.loads(vj)
        except ValueError:
            res["verifier"] = None
    na = {}
    for line in text.splitlines():
        m = NA_LINE.match(line)
        if m:
            na[m.group(1) + "." + m.group(2)] = m.group(3)
    for line in text.splitlines():
        m = TEST_LINE.match(line)
        if not m:
            if line.startswith("vmtest-figure: "):
                res["figures"].append(line[len("vmtest-figure: "):])
            elif line.startswith("vmtest-bench: "):
                # One line per benchmark (per packet, connect): their ratios merged.
                try:
                    b = json.loads(line[len("vmtest-bench: "):])
                except ValueError:
                    continue
                if res["bench"] is None:
                    res["bench"] = b
                else:
                    res["bench"].setdefault("ratios", {}).update(b.get("ratios") or {})
            continue
        verdict, suite, name, ms = m.groups()
        full = suite + "." + name
        t = {"name": full, "group": group_of(suite, name), "boot": boot, "ms": int(ms)}
        if verdict == "OK":
            t["result"] = "passed"
        elif verdict == "FAILED":
            t["result"] = "failed"
        elif full in na:
            t["result"] = "not applicable"
            t["why"] = na[full]
        else:
            # A skip that did not say why is not a verdict we accept.
            t["result"] = "failed"
            t["why"] = "skipped without a reason from the probe"
        res["tests"].append(t)
    return res


def summarise_groups(tests):
    groups = {}
    for t in tests:
        g = groups.setdefault(t["group"], {"passed": 0, "failed": 0, "not applicable": 0, "why": []})
        g[t["result"]] += 1
        if t["result"] == "not applicable" and t.get("why") and t["why"] not in g["why"]:
            g["why"].append(t["why"])
    for g in groups.values():
        if g["failed"]:
            g["verdict"] = "failed"
        elif g["passed"]:
            g["verdict"] = "passed"
        else:
            g["verdict"] = "not applicable"
    return groups


def collect_kernel(kdir, name):
    k = {"name": name}
    if os.path.exists(os.path.join(kdir, "unavailable")):
        k["status"] = "unavailable"
        k["why"] = read(os.path.join(kdir, "unavailable")).strip()
        k["tests"], k["groups"] = [], {}
        return k
    k["package"] = read(os.path.join(kdir, "package")).strip() or None
    secs = read(os.path.join(kdir, "seconds")).strip()
    k["seconds"] = int(secs) if secs.isdigit() else None
    k["boots"] = {}
    tests, figures = [], []
    logs = [(b, d) for b, d in BOOTS if os.path.exists(os.path.join(kdir, b + ".log"))]
    if name == "host":
        logs = [("host", "this machine's kernel, no VM")]
    for boot, desc in logs:
        text = read(os.path.join(kdir, boot + ".log"))
        st = read(os.path.join(kdir, boot + ".status")).splitlines()
        status = st[0] if st else "no status"
        r = parse_log(text, boot)
        b = {"what": desc, "status": status, "seconds": int(st[1]) if len(st) > 1 and st[1].isdigit() else None,
             "release": r["release"], "lsm": r["lsm"], "features": r["features"], "verifier": r["verifier"]}
        k["boots"][boot] = b
        tests += r["tests"]
        figures += r["figures"]
        if r["bench"] is not None:
            k["bench"] = r["bench"]
        if status != "ok":
            # A boot that did not end with a verdict (timeout, crash) is one failure.
            tests.append({"name": "boot " + boot, "group": "boot", "boot": boot, "result": "failed", "why": status})
    first = k["boots"].get("lsm-default") or k["boots"].get("host") or {}
    k["release"] = first.get("release")
    k["features"] = first.get("features")
    k["verifier"] = verifier_programs(first.get("verifier"))
    tests += verifier_budget_tests(k["verifier"], next(iter(k["boots"]), "host"))
    k["status"] = "tested"
    k["tests"] = tests
    k["groups"] = summarise_groups(tests)
    k["figures"] = figures
    return k


def verifier_programs(doc):
    """faultctl features --verifier-cost --json -> {"object program": {insns, share, us}}, and
    {"object": "not loaded: why"} for an object that did not load on that kernel."""
    if not doc:
        return None
    out = {}
    for o in doc.get("objects") or []:
        if not o.get("loaded"):
            out[o["object"]] = {"error": o.get("error", ""), "expected": o.get("expected", True)}
            continue
        for p in o.get("programs") or []:
            out["%s %s" % (o["object"], p["program"])] = {"insns": p["verified_insns"],
                                                          "share": p["share_of_limit"], "us": p["verify_us"]}
    return out


VERIFIER_FAIL_SHARE = 0.5


def verifier_budget_tests(progs, boot):
    """The budget as a test of the kernel's run (the same check as bpf.VerifierBudget in make
    test, from the one measurement faultctl features --verifier-cost made in the guest): every
    program at most half the limit, and every object that should load there loaded."""
    t = {"name": "VerifierBudget.EveryProgramUnderHalfTheLimit", "group": "VerifierBudget", "boot": boot, "ms": 0}
    if progs is None:
        t.update(result="failed", why="no faultctl features --verifier-cost section in the log")
        return [t]
    bad = []
    for name, v in sorted(progs.items()):
        if "error" in v and v.get("expected", True):
            bad.append("%s did not load: %s" % (name, v["error"]))
        elif "share" in v and v["share"] > VERIFIER_FAIL_SHARE:
            bad.append("%s: %d insns, %.1f%% of the limit" % (name, v["insns"], 100 * v["share"]))
    if bad:
        t.update(result="failed", why="; ".join(bad))
    else:
        t["result"] = "passed"
    return [t]


def verifier_largest(k):
    best = None
    for name, v in (k.get("verifier") or {}).items():
        if "share" in v and (best is None or v["share"] > best[1]["share"]):
            best = (name, v)
    return best


def git_describe(root):
    try:
        return subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


# --- the table --------------------------------------------------------------------------

def column_name(k):
    if k["status"] != "tested":
        return k["name"]
    return "%s %s" % (k["name"], k.get("release") or "?")


def probe_cell(k, probe):
    f = k.get("features") or {}
    p = (f.get("probes") or {}).get(probe)
    if p is None:
        return "?"
    return "yes" if p.get("available") else "no"


def capability_cell(k, cap):
    f = k.get("features") or {}
    for c in f.get("capabilities") or []:
        if c.get("capability") == cap:
            return c.get("chosen") or "unavailable"
    return "?"


def group_cell(k, group):
    g = k["groups"].get(group)
    if g is None:
        return "-"
    parts = []
    if g["passed"]:
        parts.append("%d passed" % g["passed"])
    if g["failed"]:
        parts.append("%d FAILED" % g["failed"])
    if g["not applicable"]:
        parts.append("%d n.a." % g["not applicable"])
    return ", ".join(parts)


def ratio_cell(k, key):
    r = ((k.get("bench") or {}).get("ratios") or {}).get(key)
    if r is None or r.get("median") is None:
        return "-"
    return "%.2fx [%.2f-%.2f]" % (r["median"], r["min"], r["max"])


def verifier_cell(k, name):
    v = (k.get("verifier") or {}).get(name)
    if v is None:
        return "-"
    if "error" in v:
        return "not loaded" if not v.get("expected", True) else "NOT LOADED"
    return "%d (%.1f%%)" % (v["insns"], 100 * v["share"])


def rows(report):
    ks = report["kernels"]
    caps, probes, groups, ratios, progs = [], [], [], [], []
    for k in ks:
        f = k.get("features") or {}
        for c in f.get("capabilities") or []:
            if c["capability"] not in caps:
                caps.append(c["capability"])
        for p in sorted((f.get("probes") or {}).keys()):
            if p not in probes:
                probes.append(p)
        for g in k["groups"]:
            if g not in groups:
                groups.append(g)
        for r in ((k.get("bench") or {}).get("ratios") or {}):
            if r not in ratios:
                ratios.append(r)
        for v in (k.get("verifier") or {}):
            if v not in progs:
                progs.append(v)
    out = []
    for c in caps:
        out.append(("capability", c, [capability_cell(k, c) if k["status"] == "tested" else "-" for k in ks]))
    for p in probes:
        out.append(("probe", p, [probe_cell(k, p) if k["status"] == "tested" else "-" for k in ks]))
    for g in sorted(groups):
        out.append(("tests", g, [group_cell(k, g) for k in ks]))
    for r in ratios:
        out.append(("benchmark", r, [ratio_cell(k, r) for k in ks]))
    for v in progs:
        out.append(("verifier", v, [verifier_cell(k, v) for k in ks]))
    if progs:
        cells = []
        for k in ks:
            b = verifier_largest(k)
            cells.append("-" if b is None else "%.1f%% (%s)" % (100 * b[1]["share"], b[0]))
        out.append(("verifier", "largest share of the 1M limit", cells))
    out.append(("run", "status", [k["status"] if k["status"] == "tested" else "unavailable: " + k.get("why", "")
                                  for k in ks]))
    out.append(("run", "seconds", [str(k.get("seconds")) if k.get("seconds") is not None else "-" for k in ks]))
    return out


def text_table(report):
    ks = report["kernels"]
    head = ["", ""] + [column_name(k) for k in ks]
    body = [[kind, name] + cells for kind, name, cells in rows(report)]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    lines = []
    fmt = lambda r: "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()
    lines.append(fmt(head))
    lines.append(fmt(["-" * w for w in widths]))
    prev = None
    for r in body:
        if prev is not None and r[0] != prev:
            lines.append("")
        prev = r[0]
        lines.append(fmt(r))
    return "\n".join(lines)


def md_escape(s):
    return s.replace("|", "\\|")


def md_table(report, kinds=None):
    ks = report["kernels"]
    lines = ["| | " + " | ".join(md_escape(column_name(k)) for k in ks) + " |",
             "|---|" + "---|" * len(ks)]
    for kind, name, cells in rows(report):
        if kinds and kind not in kinds:
            continue
        label = {"capability": "%s", "probe": "probe `%s`", "tests": "tests: %s", "benchmark": "%s",
                 "verifier": "verifier: %s", "run": "%s"}[kind] % name
        lines.append("| " + md_escape(label) + " | " + " | ".join(md_escape(c) for c in cells) + " |")
    return "\n".join(lines)


def md_report(report):
    out = ["# Kernel report", "",
           "Generated %s by `%s` from Faultline %s." % (report["generated"], report["generator"],
                                                        report.get("faultline") or "?"), "",
           md_table(report), ""]
    for k in report["kernels"]:
        out.append("## %s" % column_name(k))
        out.append("")
        if k["status"] != "tested":
            out.append("Not tested: %s" % k.get("why", ""))
            out.append("")
            continue
        if k.get("package"):
            out.append("Package `%s`; %s s in all." % (k["package"], k.get("seconds")))
        for b, info in k.get("boots", {}).items():
            out.append("- boot `%s` (%s): %s, %s s, active LSMs `%s`" % (b, info["what"], info["status"],
                                                                          info.get("seconds"), info.get("lsm")))
        out.append("")
        na = [t for t in k["tests"] if t["result"] != "passed"]
        if na:
            out.append("| test | boot | result | why |")
            out.append("|---|---|---|---|")
            for t in na:
                out.append("| %s | %s | %s | %s |" % (md_escape(t["name"]), t["boot"], t["result"],
                                                       md_escape(t.get("why", ""))))
            out.append("")
        if k.get("figures"):
            out.append("Figures:")
            out.append("")
            out.extend("- " + f for f in k["figures"])
            out.append("")
        f = k.get("features") or {}
        if f.get("probes"):
            out.append("| probe | result | detail |")
            out.append("|---|---|---|")
            for p, v in sorted(f["probes"].items()):
                out.append("| %s | %s | %s |" % (p, "yes" if v.get("available") else "no", md_escape(v.get("detail", ""))))
            out.append("")
    return "\n".join(out) + "\n"


def totals(report):
    p = f = n = 0
    for k in report["kernels"]:
        for t in k["tests"]:
            if t["result"] == "passed":
                p += 1
            elif t["result"] == "failed":
                f += 1
            else:
                n += 1
        if k["status"] != "tested" and k["name"] != "host":
            f += 1  # a kernel that could not be fetched or booted
    return p, f, n


def cmd_collect(work, out, generator):
    names = [l.strip() for l in read(os.path.join(work, "kernels")).split() if l.strip()]
    if not names:
        names = sorted(d for d in os.listdir(work) if os.path.isdir(os.path.join(work, d)) and d != "common")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    report = {"format": FORMAT, "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "generator": generator, "faultline": git_describe(root),
              "kernels": [collect_kernel(os.path.join(work, n), n) for n in names]}
    p, f, n = totals(report)
    report["totals"] = {"passed": p, "failed": f, "not applicable": n}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w") as fh:
        json.dump(report, fh, indent=2, sort_keys=False)
        fh.write("\n")
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write(md_report(report))
    print()
    print(text_table(report))
    print()
    for k in report["kernels"]:
        for t in k["tests"]:
            if t["result"] == "failed":
                print("FAILED on %s: %s%s" % (k["name"], t["name"], (" (" + t["why"] + ")") if t.get("why") else ""))
        if k["status"] != "tested":
            print("NOT TESTED: %s: %s" % (k["name"], k.get("why", "")))
        b = verifier_largest(k)
        if b is not None:
            print("verifier on %s: largest %s, %d insns, %.1f%% of the limit%s" % (
                k["name"], b[0], b[1]["insns"], 100 * b[1]["share"],
                " (OVER THE %d%% BUDGET)" % int(100 * VERIFIER_BUDGET) if b[1]["share"] > VERIFIER_BUDGET else ""))
    print("report: %s/report.json, %s/report.md" % (out, out))
    print("%d passed, %d failed (%d not applicable)" % (p, f, n))
    return 1 if f else 0


# --- comparison --------------------------------------------------------------------------

def load_kernels(arg):
    path, _, sel = arg.partition("#")
    with open(path) as fh:
        rep = json.load(fh)
    ks = [k for k in rep["kernels"] if k["status"] == "tested"]
    if sel:
        ks = [k for k in rep["kernels"] if k["name"] == sel or (k.get("release") or "") == sel]
        if not ks:
            sys.exit("kernel-report: no kernel %s in %s (it has: %s)" % (sel, path, ", ".join(
                k["name"] for k in rep["kernels"])))
    return ks


VERIFIER_BUDGET = 0.25


def compare_pair(a, b):
    changes = 0
    la, lb = column_name(a), column_name(b)
    print("%s  ->  %s" % (la, lb))
    fa, fb = a.get("features") or {}, b.get("features") or {}
    pa, pb = fa.get("probes") or {}, fb.get("probes") or {}
    for p in sorted(set(pa) | set(pb)):
        va = (pa.get(p) or {}).get("available")
        vb = (pb.get(p) or {}).get("available")
        if va == vb:
            continue
        changes += 1
        if vb and not va:
            print("  + gained  probe %-20s %s" % (p, (pb.get(p) or {}).get("detail", "")))
        elif va and not vb:
            print("  - lost    probe %-20s %s" % (p, (pb.get(p) or {}).get("detail", "absent from the report")))
    ca = {c["capability"]: c.get("chosen") for c in fa.get("capabilities") or []}
    cb = {c["capability"]: c.get("chosen") for c in fb.get("capabilities") or []}
    for c in list(ca) + [c for c in cb if c not in ca]:
        if ca.get(c) != cb.get(c):
            changes += 1
            sign = "-" if cb.get(c) is None else "+" if ca.get(c) is None else "~"
            print("  %s mechanism %-24s %s -> %s" % (sign, c, ca.get(c) or "unavailable", cb.get(c) or "unavailable"))
    ga, gb = a.get("groups") or {}, b.get("groups") or {}
    for g in sorted(set(ga) | set(gb)):
        va = (ga.get(g) or {}).get("verdict", "absent")
        vb = (gb.get(g) or {}).get("verdict", "absent")
        if va != vb:
            changes += 1
            print("  ~ tests     %-24s %s -> %s" % (g, va, vb))
    ra = (a.get("bench") or {}).get("ratios") or {}
    rb = (b.get("bench") or {}).get("ratios") or {}
    for r in list(ra) + [r for r in rb if r not in ra]:
        x, y = ra.get(r), rb.get(r)
        if not x or not y or x.get("median") is None or y.get("median") is None:
            if bool(x) != bool(y):
                changes += 1
                print("  ~ ratio     %s: only in %s" % (r, la if x else lb))
            continue
        # Moved: the two runs' [min, max] ranges do not overlap.
        if y["min"] > x["max"] or y["max"] < x["min"]:
            changes += 1
            print("  ~ ratio     %s: %.2fx [%.2f-%.2f] -> %.2fx [%.2f-%.2f] (%+.0f%%)" % (
                r, x["median"], x["min"], x["max"], y["median"], y["min"], y["max"],
                100 * (y["median"] / x["median"] - 1)))
    # Verifier cost: a program that grew by more than 20%, or passed the budget (a quarter of the limit).
    va, vb = a.get("verifier") or {}, b.get("verifier") or {}
    for p in list(va) + [p for p in vb if p not in va]:
        x, y = va.get(p) or {}, vb.get(p) or {}
        if "insns" not in y:
            if "insns" in x:
                changes += 1
                print("  - verifier  %s: loaded in %s, not in %s" % (p, la, lb))
            continue
        if y["share"] > VERIFIER_BUDGET:
            changes += 1
            print("  ! verifier  %s: %d insns, %.1f%% of the limit, over the %d%% budget" % (
                p, y["insns"], 100 * y["share"], int(100 * VERIFIER_BUDGET)))
        elif "insns" in x and x["insns"] and y["insns"] > 1.2 * x["insns"]:
            changes += 1
            print("  ! verifier  %s: %d -> %d insns (%+.0f%%, more than 20%%)" % (
                p, x["insns"], y["insns"], 100 * (y["insns"] / x["insns"] - 1)))
    if changes == 0:
        print("  no capability, mechanism, test group, ratio or verifier cost differs")
    return changes


def cmd_compare(a_arg, b_arg):
    ka, kb = load_kernels(a_arg), load_kernels(b_arg)
    pairs = []
    if len(ka) == 1 and len(kb) == 1:
        pairs = [(ka[0], kb[0])]
    else:
        names_b = {k["name"]: k for k in kb}
        pairs = [(k, names_b[k["name"]]) for k in ka if k["name"] in names_b]
        if not pairs:
            sys.exit("kernel-report: no kernel name in common; pick one each with FILE#NAME")
    for i, (x, y) in enumerate(pairs):
        if i:
            print()
        compare_pair(x, y)
    return 0


# --- docs ----------------------------------------------------------------------------------

BEGIN = "<!-- kernel-report: begin (generated by scripts/kernel-report.sh --update-docs; do not edit by hand) -->"
END = "<!-- kernel-report: end -->"


def cmd_docs(report_path, doc):
    with open(report_path) as fh:
        report = json.load(fh)
    text = read(doc)
    if BEGIN not in text or END not in text:
        sys.exit("kernel-report: %s has no generated section (%s ... %s)" % (doc, BEGIN, END))
    body = ["", "From `%s`, generated %s from Faultline %s by `%s`." % (
        os.path.relpath(report_path), report["generated"], report.get("faultline") or "?", report["generator"]),
            "", md_table(report), ""]
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(doc, "w") as fh:
        fh.write(head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail)
    print("kernel-report: rewrote the generated section of %s" % doc)
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "collect":
        return cmd_collect(argv[1], argv[2], argv[3] if len(argv) > 3 else "make vmtest")
    if len(argv) == 3 and argv[0] == "compare":
        return cmd_compare(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "docs":
        return cmd_docs(argv[1], argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
