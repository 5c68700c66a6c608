#!/usr/bin/env bash
# Fails when two test files share a base name (issue 25 §5): a test is found by
# its name alone (in a failure, a log, a search), so each names one file.
set -euo pipefail
cd "$(dirname "$0")/.."
dups=$( (git ls-files 'selftests/*'; git ls-files --others --exclude-standard 'selftests/*') |
  grep -E '_test\.(cpp|c|js|mjs|py)$' | grep -v '/node_modules/' | sort -u |
  awk -F/ '{ print $NF "\t" $0 }' | sort | awk -F'\t' '
    $1 == last { if (!shown) print lastpath; print $2; shown = 1; next }
    { last = $1; lastpath = $2; shown = 0 }')
if [ -n "$dups" ]; then
  echo "check-test-names: test files share a base name; rename one of each (say what it tests):" >&2
  echo "$dups" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-test-names: every test file's base name is its own"
