#!/usr/bin/env python3
"""The docs check of `make lint`: the kinds of drift that crept in before.

  1. Every link of README.md and docs/*.md to a file of the tree resolves, and
     so does its #anchor (GitHub's heading slugs).
  2. Every route a doc names ("GET /v1/...", "POST|DELETE /proxies/{p}") is
     registered by one of the HTTP APIs' routers, or the line says it is not
     there ("not yet", "not built", "later", "planned").
  3. Every --flag of a faultctl, faultd or faultcp command line in a doc's code
     block is in that command's --help (the binaries of BUILD).

usage: scripts/check-docs.py BUILD_DIR [--root DIR]   (exit 1 and one line per finding)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # --root replaces it
# Routes of other services that the docs name (model providers, Prometheus)
# and request paths of examples (a rule's path, a stand-in's page).
EXTERNAL = {"/v1/messages", "/v1/chat/completions", "/v1/responses", "/api/v1/query", "/v1/prod/", "/x"}
NOT_THERE = re.compile(r"not yet|not built|later|planned|no route|not served", re.I)
METHODS = "GET|POST|PUT|PATCH|DELETE|HEAD"


def docs():
    out = [os.path.join(ROOT, "README.md")]
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if name.endswith(".md"):
            out.append(os.path.join(ROOT, "docs", name))
    return out


def rel(path):
    return os.path.relpath(path, ROOT)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`|\*", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen, fenced = set(), {}, False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    fenced = not fenced
                m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def prose_lines(path):
    """(number, line, in_code_block) for each line of a markdown file."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            yield n, line.rstrip("\n"), fenced


def check_links(path, findings):
    for n, line, fenced in prose_lines(path):
        if fenced:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                findings.append(f"{rel(path)}:{n}: link to {target}: no such file")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                findings.append(f"{rel(path)}:{n}: link to {target}: no heading with that anchor in {rel(dest)}")


def served_routes():
    routes = set()
    # add("GET", "/a/{id}") and add("POST", cond ? "/a" : "/b")
    pattern = re.compile(r'"(' + METHODS + r')",\s*(?:[\w!.()]+\s*\?\s*)?"(/[^"]*)"(?:\s*:\s*"(/[^"]*)")?')
    # for (const char* method : {"POST", "PATCH"}) { r.add(method, "/a", ...
    loop = re.compile(r'for \(const char\* method : \{([^}]*)\}\)\s*\{\s*\w+\.add\(method,\s*"(/[^"]*)"')
    for top in ("userspace", "cp", "ctl"):
        for base, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith(".cpp"):
                    with open(os.path.join(base, name), encoding="utf-8") as f:
                        text = f.read()
                    for method, route, other in pattern.findall(text):
                        for r in (route, other):
                            if r:
                                routes.add((method, normal_route(r)))
                    for methods, route in loop.findall(text):
                        for method in re.findall(r'"(\w+)"', methods):
                            routes.add((method, normal_route(route)))
    return routes


def normal_route(route):
    route = route.split("?")[0].rstrip("/.,:;") or "/"
    return re.sub(r"\{[^}]*\}", "{}", route)


def check_routes(path, served, findings):
    pattern = re.compile(r"\b((?:" + METHODS + r")(?:\|(?:" + METHODS + r"))*)`?\s+`?(/[A-Za-z0-9_{}./:-]*)")
    for n, line, _ in prose_lines(path):
        if NOT_THERE.search(line):
            continue
        for methods, route in pattern.findall(line):
            if route.startswith("//") or "..." in route or not re.match(r"^/[a-z_{]", route + "x"):
                continue
            norm = normal_route(route)
            if route in EXTERNAL or norm in EXTERNAL:
                continue
            for method in methods.split("|"):
                if (method, norm) not in served and not any(m == method and r.startswith(norm.rstrip("/") + "/")
                                                             and norm.endswith("/") for m, r in served):
                    findings.append(f"{rel(path)}:{n}: {method} {route}: no router serves it "
                                    "(or say on the line that it is not there yet)")


def help_text(build, words, cache={}):
    key = tuple(words)
    if key not in cache:
        binary = os.path.join(build, words[0])
        try:
            p = subprocess.run([binary] + words[1:] + ["--help"], capture_output=True, text=True, timeout=20)
            cache[key] = p.stdout + p.stderr
        except (OSError, subprocess.TimeoutExpired):
            cache[key] = ""
    return cache[key]


def command_lines(path):
    """The faultctl/faultd/faultcp command lines of a file's code blocks, continuation lines joined."""
    pending, start = None, 0
    for n, line, fenced in prose_lines(path):
        if not fenced:
            pending = None
            continue
        text = line.strip()
        if pending is not None:
            pending += " " + text.rstrip("\\")
            if not text.endswith("\\"):
                yield start, pending
                pending = None
            continue
        m = re.match(r"^(?:\$\s+)?(?:sudo\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(faultctl|faultd|faultcp)(\s.*)?$", text)
        if not m:
            continue
        body = m.group(1) + (m.group(2) or "")
        if text.endswith("\\"):
            pending, start = body.rstrip("\\"), n
        else:
            yield n, body


def check_flags(path, build, findings):
    for n, line in command_lines(path):
        line = re.split(r"\s--\s|\s--$|\s[|;&#]|\s>", line + " ")[0]
        words = line.split()
        if any(w.endswith(":") for w in words[:3]):
            continue  # the output of a command ("faultctl run http: ..."), not a command
        tool, path_words = words[0], [words[0]]
        for w in words[1:]:
            if w.startswith("-") or not re.match(r"^[a-z][a-z0-9-]*$", w) or len(path_words) == 3:
                break
            path_words.append(w)
        helps = help_text(build, [tool])
        for k in range(2, len(path_words) + 1):
            helps += help_text(build, path_words[:k])
        if not helps:
            findings.append(f"{rel(path)}:{n}: {tool}: not built in {build}")
            continue
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line):
            if not re.search(re.escape(flag) + r"(?![a-z0-9-])", helps):
                findings.append(f"{rel(path)}:{n}: {' '.join(path_words)} {flag}: not in its --help")


def main():
    global ROOT
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--root":
        ROOT = os.path.abspath(args[2])
        args = args[:1]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build = os.path.abspath(args[0])
    findings = []
    served = served_routes()
    for path in docs():
        check_links(path, findings)
        check_routes(path, served, findings)
        check_flags(path, build, findings)
    for f in findings:
        print("check-docs: " + f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
