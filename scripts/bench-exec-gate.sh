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

declare -A all
ratios=()
for r in $(seq "$REPS"); do
  for arm in bare guard gate; do all[$arm]+="$(run $arm) "; done
  g=$(echo "${all[guard]}" | awk '{print $NF}'); t=$(echo "${all[gate]}" | awk '{print $NF}')
  ratios+=("$(awk -v a="$t" -v b="$g" 'BEGIN{printf "%.2f", a/b}')")
done
stats() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{v[NR]=$1} END{printf "%.1f us [%.1f-%.1f]", v[int((NR+1)/2)]/1000, v[1]/1000, v[NR]/1000}'; }
echo "exec of /bin/true, $N per run, $REPS rounds (median [min-max] per exec):"
for arm in bare guard gate; do printf '  %-6s %s\n' "$arm" "$(echo "${all[$arm]}" | stats)"; done
med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}')
lo=$(printf '%s\n' "${ratios[@]}" | sort -n | head -1); hi=$(printf '%s\n' "${ratios[@]}" | sort -n | tail -1)
verdict=MET
awk -v m="$med" 'BEGIN{exit !(m > 1.15)}' && verdict=MISSED
echo "  gate / guard: ${med}x [${lo}-${hi}] (target <= 1.15x: $verdict)"
# The row for make bench's summary and results.json.
[ -n "${BENCH_SUMMARY:-}" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\n' "11 exec gate" \
  "exec of /bin/true under --block-dangerous (guard alone: $(echo "${all[guard]}" | stats))" \
  "$(echo "${all[gate]}" | stats)" "${med}x [${lo}-${hi}]" "<= 1.15x the guard" "$verdict" >>"$BENCH_SUMMARY"
exit 0
