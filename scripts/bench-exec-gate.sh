#!/usr/bin/env bash
# make bench, the exec gate (faultctl guard --block-dangerous): what judging
# an exec costs. One bash runs N execs of /bin/true under `faultctl guard`,
# with and without --block-dangerous (both arms under the same guard, so the
# gate is the only difference), and bare for reference; interleaved round by
# round. Target (issue 28 §8): exec under the gate at most 1.15x the guard
# without it. Printed: per-exec time, median [min-max] of the rounds, and the
# ratio within each round.
#
# Usage: scripts/bench-exec-gate.sh BUILD_DIR   (any user; BENCH_REPS rounds,
# default 5; BENCH_EXECS execs per run, default 2000)
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-exec-gate.sh BUILD_DIR}" && pwd)
REPS=${BENCH_REPS:-5}
N=${BENCH_EXECS:-2000}
FAULTCTL=$BUILD/faultctl
[ -x "$FAULTCTL" ] || { echo "bench-exec-gate: $FAULTCTL is missing; build first" >&2; exit 1; }
DIR=$(mktemp -d /tmp/flbench-exec.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
chmod 0777 "$DIR"
# The loop times itself (the guard's start and summary are not in the figure).
cat >"$DIR/loop.sh" <<EOS
s=\$(date +%s%N); i=0; while [ \$i -lt $N ]; do /bin/true; i=\$((i+1)); done; e=\$(date +%s%N)
echo \$(( (e - s) / $N ))
EOS
# As a user: the guard's proxy alone (as root, a kernel rule would be asked for).
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
env_args=(env "FAULTLINE_STATE_DIR=$DIR/state" "FAULTLINE_CA_DIR=$DIR/ca" XDG_RUNTIME_DIR=)

run() {  # ARM -> ns per exec
  case "$1" in
    bare) bash "$DIR/loop.sh" ;;
    guard) "${as_user[@]}" "${env_args[@]}" "$FAULTCTL" guard -- bash "$DIR/loop.sh" 2>/dev/null ;;
    gate) "${as_user[@]}" "${env_args[@]}" "$FAULTCTL" guard --block-dangerous -- bash "$DIR/loop.sh" 2>/dev/null ;;
  esac
}

# shellcheck source=bench-arms.sh
. "$(dirname "$0")/bench-arms.sh"
bench_rounds "$REPS" gate guard bare guard gate
echo "exec of /bin/true, $N per run, $REPS rounds (median [min-max] per exec):"
for arm in bare guard gate; do printf '  %-6s %s\n' "$arm" "$(bench_stats $arm 1000 1 us)"; done
bench_verdict "gate / guard" 1.15
bench_summary_row "11 exec gate" "exec of /bin/true under --block-dangerous (guard alone: $(bench_stats guard 1000 1 us))" \
  "$(bench_stats gate 1000 1 us)" "<= 1.15x the guard"
