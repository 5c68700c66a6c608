#!/usr/bin/env bash
# The compile-time budget (docs/code-map.md, "Building"): a from-scratch build of
# everything `make` builds, in a throw-away folder, without ccache, then the
# compile time per target and in all, from the ninja log.
#
#   scripts/build-time.sh [JOBS]     JOBS: parallel jobs, default nproc
#
# The sum of the ninja log is wall time per compile: on a busy machine it grows
# with the load, so the CPU time of the whole build (user + sys of every child)
# is printed beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "build-time: JOBS must be a positive number, not '$jobs'" >&2; exit 2; }

dir=$(mktemp -d /tmp/fl-build-time.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_C_COMPILER_LAUNCHER= >/dev/null
echo "build-time: building in $dir with -j $jobs (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
start=$(date +%s)
ninja -C "$dir" -j "$jobs" >/dev/null
wall=$(($(date +%s) - start))
# `times`: the shell's own user/sys, then its children's (ninja and every
# compiler). A builtin with a redirection runs in this shell, not a subshell.
times > "$dir/times"
read -r child_user child_sys < <(sed -n 2p "$dir/times")

python3 - "$dir/.ninja_log" "$wall" "$child_user" "$child_sys" "$(${CXX:-c++} --version 2>/dev/null | head -1)" <<'EOF'
import collections, re, sys

log, wall, user, sys_t = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def seconds(t):  # bash `times`: 1m2.345s
    m = re.fullmatch(r"(\d+)m([\d.]+)s", t)
    return int(m.group(1)) * 60 + float(m.group(2)) if m else 0.0

per_target, count = collections.Counter(), collections.Counter()
compile_s = other_s = 0.0
for line in open(log):
    if line.startswith("#"):
        continue
    start, end, _, out, _ = line.rstrip("\n").split("\t")
    took = (int(end) - int(start)) / 1000
    if out.endswith((".o", ".pch", ".gch")):
        m = re.search(r"([^/]+)\.dir/", out)
        target = m.group(1) if m else out
        per_target[target] += took
        count[target] += 1
        compile_s += took
    else:
        other_s += took

print(f"{'target':<28} {'compiles':>8} {'seconds':>8}")
for target, s in per_target.most_common(15):
    print(f"{target:<28} {count[target]:>8} {s:>8.1f}")
rest = compile_s - sum(s for _, s in per_target.most_common(15))
print(f"{'(the other targets)':<28} {sum(count.values()) - sum(count[t] for t, _ in per_target.most_common(15)):>8} {rest:>8.1f}")
cpu = seconds(user) + seconds(sys_t)
print()
print(f"compile time, sum of the ninja log: {compile_s / 60:5.1f} min  (budget 6.0 min)")
print(f"links, BPF objects, generators:     {other_s / 60:5.1f} min")
print(f"CPU time of the whole build:        {cpu / 60:5.1f} min  (user {user}, sys {sys_t})")
print(f"wall time:                          {wall / 60:5.1f} min")
EOF
