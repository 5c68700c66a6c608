#!/usr/bin/env bash
# Faultline in one minute (`make demo`): two test hosts, a web service, a guarded
# experiment, a guardrail abort, the in-kernel deadman, and a clean uninstall.
#
#   scripts/demo.sh [FAULTCTL [FL_TESTHOST]]
#
# FAULTCTL defaults to build/faultctl; FL_TESTHOST to selftests/e2e/fl-testhost
# next to it. Needs root. Runs without a terminal. Everything it creates (two
# network namespaces, their processes, the Faultline state under its own bpffs
# root) is removed on exit, whatever happens.
set -euo pipefail

FAULTCTL=${1:-build/faultctl}
TESTHOST=${2:-$(dirname "$FAULTCTL")/selftests/e2e/fl-testhost}
HERE=$(cd "$(dirname "$0")" && pwd)
CLIENT=fl-demo-client
SERVER=fl-demo-server
CLIENT_IP=198.18.0.1
SERVER_IP=198.18.0.2
HTTP_PORT=8080
ECHO_PORT=7007
SINK_PORT=9000
URL="http://$SERVER_IP:$HTTP_PORT/"

# The demo keeps its Faultline state apart from any real installation.
export FAULTLINE_BPFFS_ROOT=/sys/fs/bpf/fl-demo

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: needs root (network namespaces, BPF programs)" >&2
  exit 1
fi
for bin in "$FAULTCTL" "$TESTHOST"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing; build first (make build)" >&2; exit 1; }
done
FAULTCTL=$(cd "$(dirname "$FAULTCTL")" && pwd)/$(basename "$FAULTCTL")
TESTHOST=$(cd "$(dirname "$TESTHOST")" && pwd)/$(basename "$TESTHOST")
# shellcheck source=scripts/netns-hosts.sh
. "$HERE/netns-hosts.sh"

WORK=$(mktemp -d /tmp/fl-demo.XXXXXX)
BG_PIDS=()
START=$(date +%s%N)

cleanup() {
  local rc=$?
  set +e
  stop_background
  if [ -d "$FAULTLINE_BPFFS_ROOT" ]; then
    "$FAULTCTL" abort --all >/dev/null 2>&1
    rm -rf "$FAULTLINE_BPFFS_ROOT"
  fi
  netns_hosts_down "$CLIENT" "$SERVER"
  rm -rf "$WORK"
  if [ "$rc" -ne 0 ]; then echo "demo: failed (exit $rc); everything it created has been removed" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n==== %s\n' "$*"; }
say() { printf '  %s\n' "$*"; }
run() { printf '  $ %s\n' "$*"; "$@" 2>&1 | sed 's/^/    /'; }
# Seconds since a `date +%s%N` stamp, with one decimal.
secs_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
json_field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2" | tail -1; }
on_client() { "$TESTHOST" --netns "$CLIENT" "$@"; }
# Ends the servers this script started, quietly (bash would report each kill).
stop_background() {
  local pid
  for pid in "${BG_PIDS[@]}"; do
    { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
  done
  BG_PIDS=()
}
# Starts an fl-testhost server on the server host and waits until it listens.
serve() {
  local log=$WORK/$1.log
  "$TESTHOST" --netns "$SERVER" "$@" >"$log" 2>&1 &
  BG_PIDS+=($!)
  for _ in $(seq 50); do
    grep -q '^ready' "$log" && return 0
    sleep 0.1
  done
  echo "demo: $1 did not start: $(cat "$log")" >&2
  return 1
}

step "Faultline demo: fault injection decided per packet in the kernel (eBPF), driven by faultctl"
say "faultctl: $FAULTCTL"
say "state:    $FAULTLINE_BPFFS_ROOT (private to this demo)"
MECHANISM=$("$FAULTCTL" features --json | grep -m1 '"chosen"' | sed -n 's/.*"chosen": *"\([^"]*\)".*/\1/p')
say "packet faults on this kernel attach with: ${MECHANISM:-nothing (see faultctl features)}"

# A stale pair from an interrupted run would block the set-up.
netns_hosts_down "$CLIENT" "$SERVER"

step "1. Two test hosts: network namespaces joined by a veth pair"
netns_hosts_up "$CLIENT" "$SERVER" "$CLIENT_IP" "$SERVER_IP"
netns_hosts_show "$CLIENT" "$SERVER" | sed 's/^/  /'

step "2. A web service on the server ($URL) and a UDP echo for probing"
serve http-server "$HTTP_PORT"
serve udp-echo "$ECHO_PORT"
say "fl-testhost http-server and udp-echo are listening in $SERVER"

step "3. Steady state, measured from the client: five requests"
run on_client http-get "$SERVER_IP" "$HTTP_PORT" --count 5 --interval-ms 50

step "4. A guarded experiment: 30% loss of the UDP traffic to the server for 8 s"
say "Guardrail: GET $URL every second must answer within 1 s, or the fault ends at once (exit 7)."
say "Traffic: 1000 numbered datagrams per second from the client to a counting sink."
"$TESTHOST" --netns "$SERVER" udp-sink "$SINK_PORT" --expect-payload --timeout 30 >"$WORK/sink.log" 2>&1 &
SINK=$!
BG_PIDS+=("$SINK")
for _ in $(seq 50); do grep -q '^ready' "$WORK/sink.log" && break; sleep 0.1; done
"$FAULTCTL" run loss --percent 30 --proto udp --target "$SERVER_IP" --netns "$CLIENT" --duration 8s \
  --health-url "$URL" --interval 1s >"$WORK/run.log" 2>&1 &
RUN=$!
BG_PIDS+=("$RUN")
for _ in $(seq 50); do grep -q 'applied' "$WORK/run.log" && break; sleep 0.1; done
sed -n '1s/^/    /p' "$WORK/run.log"
on_client udp-send "$SERVER_IP" "$SINK_PORT" --count 6000 --rate 1000 >"$WORK/send.log" &
SEND=$!
BG_PIDS+=("$SEND")
sleep 3
say "Live counters, read from the pinned maps by another process:"
run "$FAULTCTL" status
wait "$SEND"
RC=0
wait "$RUN" || RC=$?
kill -TERM "$SINK"
wait "$SINK" || true
sed '1d; s/^/    /' "$WORK/run.log"
SENT=$(json_field sent "$WORK/send.log")
GOT=$(json_field received "$WORK/sink.log")
say "the sink received $GOT of $SENT datagrams: $(awk -v g="$GOT" -v s="$SENT" 'BEGIN { printf "%.1f", 100 - 100 * g / s }')% lost (asked: 30%)"
say "faultctl run exit code: $RC (0 = the experiment completed and the service stayed healthy)"
[ "$RC" -eq 0 ] || { echo "demo: expected exit 0" >&2; exit 1; }

step "5. A guardrail abort: partition the server; the health check fails and ends the fault"
say "\$ faultctl run partition --target $SERVER_IP --netns $CLIENT --duration 30s --health-url $URL --interval 500ms --health-max-latency 300ms"
T0=$(date +%s%N)
RC=0
"$FAULTCTL" run partition --target "$SERVER_IP" --netns "$CLIENT" --duration 30s --health-url "$URL" \
  --interval 500ms --health-max-latency 300ms >"$WORK/guard.log" 2>&1 || RC=$?
sed 's/^/    /' "$WORK/guard.log"
say "exit code $RC after $(secs_since "$T0") s of a 30 s fault (7 = aborted by the guardrail)"
[ "$RC" -eq 7 ] || { echo "demo: expected exit 7" >&2; exit 1; }
run on_client http-get "$SERVER_IP" "$HTTP_PORT" --count 1

step "6. The in-kernel deadman: kill -9 faultctl mid-fault; the kernel still ends it on time"
say "A probe from the client sends a UDP echo request every 20 ms and reports outages:"
on_client udp-watch "$SERVER_IP" "$ECHO_PORT" --seconds 6 --interval-ms 20 --timeout-ms 100 >"$WORK/watch.log" &
WATCH=$!
WATCH_T0=$(date +%s%N)
BG_PIDS+=("$WATCH")
"$FAULTCTL" run partition --target "$SERVER_IP" --netns "$CLIENT" --duration 3s >"$WORK/deadman.log" 2>&1 &
DEADMAN=$!
BG_PIDS+=("$DEADMAN")
for _ in $(seq 50); do grep -q 'applied' "$WORK/deadman.log" && break; sleep 0.1; done
say "t=$(secs_since "$WATCH_T0")s  $(head -1 "$WORK/deadman.log")"
sleep 0.5
say "t=$(secs_since "$WATCH_T0")s  \$ kill -9 $DEADMAN    (faultctl gets no chance to clean up)"
kill -9 "$DEADMAN"
wait "$DEADMAN" 2>/dev/null || true
if kill -0 "$DEADMAN" 2>/dev/null; then echo "demo: faultctl survived kill -9?" >&2; exit 1; fi
say "faultctl is gone (pid $DEADMAN no longer exists); the fault lives on in the kernel:"
run "$FAULTCTL" status
wait "$WATCH"
sed 's/^/    /' "$WORK/watch.log"
say "traffic came back when the fault's expiry passed, with no process alive to end it."
say "The next faultctl reaps the expired entry and, with nothing left, detaches the programs:"
run "$FAULTCTL" status

step "7. Uninstall: no programs, links, filters or pins remain"
stop_background
run "$FAULTCTL" uninstall
LEFT=$(bpftool prog show 2>/dev/null | grep -cE 'name fl_(egress|ingress)' || true)
say "netfault programs still loaded in the kernel: $LEFT"
say "pins under $FAULTLINE_BPFFS_ROOT: $(find "$FAULTLINE_BPFFS_ROOT" -mindepth 1 2>/dev/null | wc -l)"
netns_hosts_down "$CLIENT" "$SERVER"
say "test hosts $CLIENT and $SERVER removed"

step "Done in $(secs_since "$START") s"
