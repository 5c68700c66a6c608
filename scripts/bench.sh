#!/usr/bin/env bash
# Faultline benchmarks (`make bench`): every figure against a baseline measured in
# the same run, interleaved, median and min-max over the repetitions.
#
#   1. fl_bench_progrun  netfault egress per packet (BPF_PROG_TEST_RUN) vs an empty tc program
#   2. fl_bench_veth     iperf3 TCP / 64-byte UDP over veth, program attached vs not
#   3. fl_bench_apply    faultctl run / abort to effect, seen by a 10 kHz UDP stream,
#                        standalone and through faultd (interleaved; the ratio of the two); and from a
#                        client holding its connection: a run through faultd's local API (target <= 1 ms)
#                        and a latency toxic through its Toxiproxy API on an open connection (<= 2 ms)
#   4. fl_bench_connect  connect() with the sockaddr programs (0 / 10k rules) vs none;
#                        getppid() under seccomp user notification vs bare
#   5. bench-proxy.sh    wrk/redis-benchmark direct vs haproxy vs faultd's proxy (its own table)
#   6. fl_bench_tls_mint TLS termination's leaf certificate: minted (target <= 5 ms) vs cached (~0)
#   7. fl_bench_cp_fleet faultcp with 1000 simulated agents, SQLite and PostgreSQL: dispatch p50/p99
#                        (target p99 <= 100 ms), kill to every agent (<= 500 ms), listing req/s (1 and
#                        16 clients, p99 < 20 ms), RSS per agent; PostgreSQL as a ratio of SQLite (its
#                        own table; BENCH_CP_AGENTS=N)
#   8. bench-policy.sh   N = 10, 1k, 10k, 100k denied addresses: the time to load them (faultctl policy
#                        apply vs iptables-restore legacy and nft, nft -f one set, ipset restore), and UDP
#                        (unconnected sendto) / TCP throughput to an allowed peer over veth with each loaded;
#                        ratios against Faultline, targets MET/MISSED (its own tables; ~5 min)
#   9. fl_bench_dlp      the guard's DLP engine on one core, GB/s, vs RE2::Set, PCRE2-JIT and std::regex
#                        on the same chat-JSON corpus (targets >= 1 GB/s and >= 5x RE2::Set)
#  10. fl_bench_guard_rules  the guard's decide() with 1,000 rules, indexed vs walked vs one rule
#  10. bench-guard.sh    the AI-agent guard's cost per request: wrk as the guarded command, no rule vs 1k
#                        rules, a 16 KiB body with and without the LLM facts scan, the activity log on;
#                        the budget under 20 callers (its own table, targets MET/MISSED)
#  11. bench-exec-gate.sh  an exec under faultctl guard --block-dangerous vs the same guard without it
#                        (exec of /bin/true from one bash; target <= 1.15x, MET/MISSED)
#  12. bench-enforce-fs.sh  make -j2 of a small C project under faultctl guard --enforce-fs vs the
#                        same guard without it (root; target <= 1.10x, MET/MISSED)
#
# At the end: BUILD_DIR/bench/results.json (every figure, parsed) and BUILD_DIR/bench/report.html
# (the tables and the curves the steps drew, scripts/bench-report.py).
#
# Usage: scripts/bench.sh BUILD_DIR   (root; iperf3 from scripts/install-deps.sh)
# Everything it creates is private to this run and removed on exit: two network
# namespaces with a veth pair (198.18.0.0/15 addresses only inside them), bpffs
# state under /sys/fs/bpf/flbench-<pid>*, the programs and links in it.
# BENCH_REPS (default 5) sets the repetitions of 1 and 2 and the trials of 3.
# BENCH_STEPS (default all) runs only the steps it names: BENCH_STEPS="3 8".
set -euo pipefail

BUILD=${1:?usage: scripts/bench.sh BUILD_DIR}
REPS=${BENCH_REPS:-5}
want() { [ -z "${BENCH_STEPS:-}" ] || [[ " $BENCH_STEPS " == *" $1 "* ]]; }
if [ "$(id -u)" -ne 0 ]; then
  echo "bench: needs root (BPF, network namespaces)" >&2
  exit 1
fi
BUILD=$(cd "$BUILD" && pwd)
FAULTCTL=$BUILD/faultctl
for b in "$FAULTCTL" "$BUILD/bench/fl_bench_progrun" "$BUILD/bench/fl_bench_veth" "$BUILD/bench/fl_bench_apply"; do
  case $b in
    *fl_bench_progrun) want 1 || continue ;;
    *fl_bench_veth) want 2 || continue ;;
    *fl_bench_apply) want 3 || continue ;;
  esac
  [ -x "$b" ] || { echo "bench: $b is missing; build first (make build, or ninja -C $BUILD)" >&2; exit 1; }
done
for tool in iperf3 ip taskset; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing; run scripts/install-deps.sh" >&2; exit 1; }
done
if [ "$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo 0)" != 0 ]; then
  echo "bench: warning: kernel.bpf_stats_enabled=1 inflates the cost of every BPF program" >&2
fi

ID=$$
NS_A=flbench-a-$ID
NS_B=flbench-b-$ID
ADDR_A=198.18.0.1
ADDR_B=198.18.0.2
NON_PEER=198.19.255.254 # in the benchmarking range, never the peer
PROGRUN_ROOT=/sys/fs/bpf/flbench-$ID
export FAULTLINE_BPFFS_ROOT=/sys/fs/bpf/flbench-$ID-ctl # faultctl state of this run only
SUMMARY=$(mktemp /tmp/flbench-summary.XXXXXX)
export BENCH_SUMMARY=$SUMMARY # the scripts' rows join the binaries' (bench-proxy.sh's CPU per request)
# Curve points the steps append (scripts/bench-report.py reads both).
export BENCH_SERIES
BENCH_SERIES=$(mktemp /tmp/flbench-series.XXXXXX)
CPUS=$(nproc)
CPU_CLIENT=0
CPU_SERVER=$((CPUS > 1 ? 1 : 0))

cleanup() {
  local rc=$?
  set +e
  for ns in "$NS_A" "$NS_B"; do
    if [ -e "/run/netns/$ns" ]; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    fi
  done
  # Ends every fault of this run's state and detaches its programs (only ours:
  # the state lives under our own FAULTLINE_BPFFS_ROOT).
  [ -d "$FAULTLINE_BPFFS_ROOT" ] && "$FAULTCTL" abort --all >/dev/null 2>&1
  "$FAULTCTL" uninstall >/dev/null 2>&1 # and the lock files of this private root
  for d in "$PROGRUN_ROOT" "$FAULTLINE_BPFFS_ROOT" "$FAULTLINE_BPFFS_ROOT"-breakdown "$FAULTLINE_BPFFS_ROOT"-breakdown-load; do
    [ -e "$d" ] && rm -rf "$d"
  done
  for ns in "$NS_A" "$NS_B"; do
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
  done
  rm -f "$SUMMARY" "$BENCH_SERIES"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== setup: netns $NS_A ($ADDR_A) <-veth-> $NS_B ($ADDR_B); client CPU $CPU_CLIENT, server CPU $CPU_SERVER"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add veth0 netns "$NS_A" type veth peer name veth0 netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/30" dev veth0
ip -n "$NS_B" addr add "$ADDR_B/30" dev veth0
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set veth0 up
done
# Faults on the never-matching targets (NON_PEER and its neighbours) attach where
# their route leads, as every packet fault does: route 198.19/16 over the veth.
ip -n "$NS_A" route add 198.19.0.0/16 via "$ADDR_B" dev veth0
ip netns exec "$NS_A" ping -c 1 -W 2 -q "$ADDR_B" >/dev/null || { echo "bench: veth pair does not pass traffic" >&2; exit 1; }

FAILED=0
step() {
  local rc=0
  "$@" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "bench: $(basename "$1") failed (exit $rc)" >&2
    FAILED=1
  fi
}

START=$(date +%s)
if want 1; then
echo
echo "== 1. netfault egress program per packet (BPF_PROG_TEST_RUN)"
step taskset -c "$CPU_SERVER" "$BUILD/bench/fl_bench_progrun" --root "$PROGRUN_ROOT" --reps "$REPS" --summary "$SUMMARY"

fi
if want 2; then
echo
echo "== 2. veth throughput, program attached (no matching fault) vs nothing attached"
step "$BUILD/bench/fl_bench_veth" --client-ns "$NS_A" --server-ns "$NS_B" --server-ip "$ADDR_B" --non-peer "$NON_PEER" \
  --faultctl "$FAULTCTL" --client-cpu "$CPU_CLIENT" --server-cpu "$CPU_SERVER" --reps "$REPS" --seconds 3 \
  --summary "$SUMMARY"

fi
if want 3; then
echo
echo "== 3. time to apply and to revert a fault (faultctl run / abort)"
# Through faultd too: the bench starts its own on a private socket (same bpffs state).
APPLY_FAULTD=()
if [ -x "$BUILD/faultd" ]; then
  APPLY_FAULTD=(--faultd "$BUILD/faultd")
else
  echo "bench: $BUILD/faultd is missing: the apply bench runs standalone only" >&2
  FAILED=1
fi
# BENCH_APPLY_API_ONLY=1: only the local API's held-connection trial (kept state);
# BENCH_FAULTD_BASELINE=PATH beside it: the same against that faultd too, interleaved.
if [ -n "${BENCH_APPLY_API_ONLY:-}" ]; then
  APPLY_FAULTD+=(--api-only)
  [ -n "${BENCH_FAULTD_BASELINE:-}" ] && APPLY_FAULTD+=(--faultd-baseline "$BENCH_FAULTD_BASELINE")
fi
step "$BUILD/bench/fl_bench_apply" --client-ns "$NS_A" --server-ns "$NS_B" --server-ip "$ADDR_B" --non-peer "$NON_PEER" \
  --faultctl "$FAULTCTL" --trials "$REPS" --summary "$SUMMARY" "${APPLY_FAULTD[@]}"

fi
if want 4; then
echo
echo "== 4. connect() with the sockaddr programs (0 and 10k missing rules) vs none; a syscall under seccomp user notification vs bare"
if [ -x "$BUILD/bench/fl_bench_connect" ]; then
  step "$BUILD/bench/fl_bench_connect" --cpu "$CPU_CLIENT" --reps "$REPS" --faultctl "$FAULTCTL" --summary "$SUMMARY"
else
  echo "bench: $BUILD/bench/fl_bench_connect is missing; build first" >&2
  FAILED=1
fi

fi
if want 5; then
echo
echo "== 5. TCP proxies: wrk against nginx and redis-benchmark against redis, direct vs haproxy (TCP mode) vs faultd's proxy"
step "$(dirname "$0")/bench-proxy.sh" "$BUILD"

fi
if want 6; then
echo
echo "== 6. TLS termination: a leaf certificate minted for a new server name vs one from the cache"
if [ -x "$BUILD/bench/fl_bench_tls_mint" ]; then
  step taskset -c "$CPU_SERVER" "$BUILD/bench/fl_bench_tls_mint" --reps "$REPS" --summary "$SUMMARY"
else
  echo "bench: $BUILD/bench/fl_bench_tls_mint is missing; build first" >&2
  FAILED=1
fi

fi
if want 7; then
echo
echo "== 7. faultcp: 1000 simulated agents long-polling one faultcp, SQLite vs PostgreSQL"
if [ -x "$BUILD/bench/fl_bench_cp_fleet" ]; then
  step "$BUILD/bench/fl_bench_cp_fleet"
else
  echo "bench: $BUILD/bench/fl_bench_cp_fleet is missing; build first" >&2
  FAILED=1
fi

fi
if want 8; then
echo
echo "== 8. egress policy vs the firewalls: time to load N denied addresses, and throughput with them loaded"
step "$(dirname "$0")/bench-policy.sh" "$BUILD"

fi
if want 9; then
echo
echo "== 9. DLP: the guard's engine vs RE2::Set, PCRE2-JIT and std::regex, one core, the same corpus"
if [ -x "$BUILD/bench/fl_bench_dlp" ]; then
  step taskset -c "$CPU_SERVER" "$BUILD/bench/fl_bench_dlp" --reps "$REPS" --summary "$SUMMARY"
else
  echo "bench: $BUILD/bench/fl_bench_dlp is missing; build first" >&2
  FAILED=1
fi

fi
if want 10; then
echo
echo "== 10. the AI-agent guard: what rules, the LLM facts scan and the activity log cost a request"
if [ -x "$BUILD/bench/fl_bench_guard_rules" ]; then
  step taskset -c "$CPU_SERVER" "$BUILD/bench/fl_bench_guard_rules" --reps "$REPS" --summary "$SUMMARY"
else
  echo "bench: $BUILD/bench/fl_bench_guard_rules is missing; build first" >&2
  FAILED=1
fi
step "$(dirname "$0")/bench-guard.sh" "$BUILD"

fi
if want 11; then
echo
echo "== 11. the exec gate: what judging each exec of a guarded command costs (--block-dangerous)"
step "$(dirname "$0")/bench-exec-gate.sh" "$BUILD"

fi
if want 12; then
echo
echo "== 12. the file gate: what judging every open and exec costs a build (--enforce-fs)"
step "$(dirname "$0")/bench-enforce-fs.sh" "$BUILD"

fi
echo
echo "== summary ($(($(date +%s) - START)) s; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); ratios within each repetition)"
{
  printf 'bench\tcase\tabsolute (median [min-max])\tratio (median [min-max])\ttarget\tresult\n'
  cat "$SUMMARY"
} | column -t -s $'\t'
echo
# Every figure as data (results.json: compare two runs with scripts/bench-compare.sh) and as a page with plots.
/usr/bin/python3 "$(dirname "$0")/bench-report.py" build --summary "$SUMMARY" --series "$BENCH_SERIES" \
  --json "$BUILD/bench/results.json" --html "$BUILD/bench/report.html" || FAILED=1
exit $FAILED
