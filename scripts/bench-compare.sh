#!/usr/bin/env bash
# What moved between two `make bench` runs beyond the noise:
#   scripts/bench-compare.sh OLD/results.json NEW/results.json
# A figure moved when its ranges (min-max of its rounds; the ratio's, else the
# absolute's) do not overlap; the rest are within the noise.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/bench-compare.sh A.json B.json" >&2; exit 2; }
# Debian's python3 (matplotlib is its package), whatever python3 comes first on PATH.
exec /usr/bin/python3 "$(dirname "$0")/bench-report.py" compare "$1" "$2"
