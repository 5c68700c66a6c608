#!/usr/bin/env python3
"""scripts/check-docs.py finds each kind of drift it is there for, and nothing else.

A throw-away tree: the real source rooms (for the routes) linked in, and a
README plus docs/ written here with one planted finding of each kind beside
correct lines of the same kind.
usage: check_docs_test.py SOURCE_DIR BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile

src, build = sys.argv[1], sys.argv[2]
GOOD_AND_BAD = {
    "README.md": "# Top\n\nSee [guard](docs/guard.md#rules) and [gone](docs/nowhere.md).\n",
    "docs/guard.md": """# The guard

## Rules

A link to [the top](#the-guard), one to [nothing](#no-such-heading).

| route | |
|---|---|
| `GET /v1/guardrails/approvals` | served |
| `POST /v1/guardrails/nonesuch` | planted |
| `GET /v1/guardrails/later-thing` | not yet |

```
faultctl guard --enforce --default-deny -- curl --no-such-flag https://x
faultctl guard --planted-flag -- true
faultctl run loss --percent 10 --duration 5s
faultctl run: --output-line is output, not a command
```
""",
}
EXPECTED = [
    "README.md:3: link to docs/nowhere.md: no such file",
    "docs/guard.md:5: link to #no-such-heading: no heading with that anchor in docs/guard.md",
    "docs/guard.md:10: POST /v1/guardrails/nonesuch: no router serves it",
    "docs/guard.md:15: faultctl guard --planted-flag: not in its --help",
]

with tempfile.TemporaryDirectory(prefix="fl-check-docs-") as root:
    os.makedirs(os.path.join(root, "docs"))
    for room in ("userspace", "cp", "ctl"):
        os.symlink(os.path.join(src, room), os.path.join(root, room))
    for name, text in GOOD_AND_BAD.items():
        with open(os.path.join(root, name), "w", encoding="utf-8") as f:
            f.write(text)
    p = subprocess.run(["python3", os.path.join(src, "scripts/check-docs.py"), build, "--root", root],
                       capture_output=True, text=True)
    found = [line.removeprefix("check-docs: ") for line in p.stdout.splitlines()]
    print("\n".join(found))
    missing = [e for e in EXPECTED if not any(f.startswith(e) for f in found)]
    extra = [f for f in found if not any(f.startswith(e) for e in EXPECTED)]
    if p.returncode != 1 or missing or extra:
        print(f"FAIL: exit {p.returncode} (want 1); missing {missing}; unexpected {extra}; stderr {p.stderr}")
        sys.exit(1)
    print("ok: each planted finding named, nothing else")
