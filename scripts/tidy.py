#!/usr/bin/env python3
"""clang-tidy on the C++ sources that changed, for `make lint`.

The build compiles each library as unity files, so BUILD/compile_commands.json
names those, not the sources: this writes BUILD/tidy/compile_commands.json with
one entry per source (the unity file's command, its precompiled header read as
text) and runs clang-tidy on the changed sources of loader/, userspace/, ctl/,
cp/ and base/. A clang-tidy error fails; its warnings are printed.

usage: scripts/tidy.py BUILD [BASE]   (BASE: a git revision, default HEAD~1;
                                       the sources changed since it, and uncommitted ones)
"""
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOMS = ("loader/", "userspace/", "ctl/", "cp/", "base/")


def per_source_database(build):
    entries = []
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        units = json.load(f)
    for unit in units:
        words = shlex.split(unit["command"])
        # The precompiled header as text: clang-tidy's own options may differ
        # from the compiler's, which a .pch refuses.
        kept, skip = [], 0
        for i, w in enumerate(words):
            if skip:
                skip -= 1
                continue
            if w == "-Xclang" and i + 1 < len(words) and words[i + 1] == "-include-pch":
                skip = 3
                continue
            kept.append(w)
        sources = [unit["file"]]
        if "/Unity/" in unit["file"]:
            with open(unit["file"], encoding="utf-8") as u:
                sources = re.findall(r'#include "([^"]+\.cpp)"', u.read())
        for src in sources:
            if not src.startswith(ROOT + "/"):
                continue
            cmd = [w if w != unit["file"] else src for w in kept]
            entries.append({"directory": unit["directory"], "file": src, "command": shlex.join(cmd)})
    out_dir = os.path.join(build, "tidy")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compile_commands.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f)
    return out_dir, {e["file"] for e in entries}


def changed_sources(base):
    names = set()
    for args in (["diff", "--name-only", base, "--"], ["diff", "--name-only", "--"], ["ls-files", "--others", "--exclude-standard"]):
        p = subprocess.run(["git", "-C", ROOT] + args, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"tidy: git {' '.join(args)}: {p.stderr.strip()}", file=sys.stderr)
            sys.exit(2)
        names.update(p.stdout.split())
    return sorted(n for n in names if n.endswith(".cpp") and n.startswith(ROOMS) and os.path.exists(os.path.join(ROOT, n)))


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    base = sys.argv[2] if len(sys.argv) == 3 else "HEAD~1"
    db, known = per_source_database(build)
    files = [f for f in changed_sources(base) if os.path.join(ROOT, f) in known]
    if not files:
        print(f"tidy: no changed source of {', '.join(ROOMS)} since {base}")
        return 0
    print(f"tidy: {len(files)} changed source(s) since {base}")
    p = subprocess.run(["clang-tidy", "-p", db, "--quiet"] + [os.path.join(ROOT, f) for f in files])
    return 1 if p.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
