#!/usr/bin/env bash
# make bench, the file gate (faultctl guard --enforce-fs): what judging every
# open and exec of a command costs a real build. `make -j2` of a small C
# project (48 files, each compiled and linked by gcc: thousands of opens of
# headers and programs) under `faultctl guard`, with and without --enforce-fs
# (both arms under the same guard, as root, so the fanotify judge is the only
# difference), and bare for reference; interleaved round by round, each build
# from clean. Target (issue 28 §8): the build under --enforce-fs at most 1.10x
# the guard without it. Printed: the build's time, median [min-max] of the
# rounds, and the ratio within each round.
#
# Usage: scripts/bench-enforce-fs.sh BUILD_DIR   (root: fanotify permission
# events; BENCH_REPS rounds, default 5)
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-enforce-fs.sh BUILD_DIR}" && pwd)
REPS=${BENCH_REPS:-5}
FAULTCTL=$BUILD/faultctl
[ -x "$FAULTCTL" ] || { echo "bench-enforce-fs: $FAULTCTL is missing; build first" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench-enforce-fs: needs root (fanotify permission events); skipped" >&2; exit 0; }
command -v gcc >/dev/null && command -v make >/dev/null || { echo "bench-enforce-fs: needs gcc and make" >&2; exit 1; }
DIR=$(mktemp -d /tmp/flbench-fs.XXXXXX)
trap 'rm -rf "$DIR"' EXIT

# The project: 48 translation units with the usual headers, one program.
mkdir -p "$DIR/proj"
for i in $(seq 1 48); do
  cat >"$DIR/proj/u$i.c" <<EOS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
int f$i(int n) { char b[64]; snprintf(b, sizeof b, "%d", n * $i); return (int)strlen(b) + (int)sqrt((double)n) + abs(n); }
EOS
done
{
  echo 'int main(void) { int s = 0;'
  for i in $(seq 1 48); do echo "  extern int f$i(int); s += f$i($i);"; done
  echo '  return s == 0; }'
} >"$DIR/proj/main.c"
printf 'OBJS := $(patsubst %%.c,%%.o,$(wildcard *.c))\nprog: $(OBJS)\n\t$(CC) -o $@ $^ -lm\n%%.o: %%.c\n\t$(CC) -O1 -c -o $@ $<\nclean:\n\trm -f *.o prog\n' >"$DIR/proj/Makefile"
# The build times itself (the guard's start and summary are not in the figure).
cat >"$DIR/build.sh" <<EOS
make -s -C "$DIR/proj" clean >/dev/null
s=\$(date +%s%N); make -s -j2 -C "$DIR/proj" prog >/dev/null; e=\$(date +%s%N)
echo \$(( (e - s) / 1000 ))
EOS
env_args=(env "FAULTLINE_STATE_DIR=$DIR/state" "FAULTLINE_CA_DIR=$DIR/ca" XDG_RUNTIME_DIR=)

run() {  # ARM -> microseconds for the build
  case "$1" in
    bare) bash "$DIR/build.sh" ;;
    guard) "${env_args[@]}" "$FAULTCTL" guard -- bash "$DIR/build.sh" 2>/dev/null ;;
    fs) "${env_args[@]}" "$FAULTCTL" guard --enforce-fs --fs-deny /flbench-no-such-dir/ -- bash "$DIR/build.sh" 2>/dev/null ;;
  esac
}

run bare >/dev/null  # warm the page cache and gcc
# shellcheck source=bench-arms.sh
. "$(dirname "$0")/bench-arms.sh"
bench_rounds "$REPS" fs guard bare guard fs
echo "make -j2 of 49 C files from clean, $REPS rounds (median [min-max]):"
for arm in bare guard fs; do printf '  %-6s %s\n' "$arm" "$(bench_stats $arm 1000 0 ms)"; done
bench_verdict "enforce-fs / guard" 1.10
bench_summary_row "12 enforce-fs" "make -j2 under --enforce-fs (guard alone: $(bench_stats guard 1000 0 ms))" \
  "$(bench_stats fs 1000 0 ms)" "<= 1.10x the guard"
