#!/usr/bin/env bash
# Egress policy against the firewalls operators run today, N denied
# destination addresses each (POLICY_BENCH_NS, default "10 1000 10000 100000"):
#
#  1. load time: `faultctl policy apply` (one cgroup scope, a throw-away
#     cgroup; the file as JSON and as YAML) against iptables-restore (legacy and
#     nft back ends), `nft -f` (one set) and `ipset restore`, each loading into
#     a throw-away network namespace, never the host's tables. Median of
#     BENCH_REPS (default 3) loads, in ms, and each figure's ratio to Faultline's;
#     and the same policy file applied again ("fl same": nothing changes), against
#     nft -f's load (target: at most it).
#  2. throughput with the N addresses loaded, to an ALLOWED destination over a
#     veth pair between two throw-away namespaces (198.18.0.0/15 inside them
#     only): 64-byte UDP datagrams sent with sendto() on an unconnected socket
#     (fl_bench_udp_blast: every datagram passes the OUTPUT chain and the
#     cgroup sendmsg hook) and one iperf3 TCP stream. Mechanisms: none,
#     iptables-legacy rules, iptables-nft rules, one nftables set, ipset (+ one
#     iptables-legacy rule), Faultline (the policy applied on the sender's
#     cgroup). Every mechanism stays loaded for its N and is switched on and off
#     by one jump rule (Faultline: the sender runs in the policy's cgroup or in
#     a sibling without one), so the mechanisms alternate within every
#     repetition; median of BENCH_REPS. Sender pinned to CPU 0, receiver to CPU 1.
#
# Cost: about BENCH_REPS x 6 x (POLICY_BENCH_UDP_S + POLICY_BENCH_TCP_S + ~0.5)
# seconds per N for 2 (defaults 3, 1 and 1: ~45 s per N), plus the loads
# (iptables-nft at 100k takes a few seconds each): 4-5 minutes in all.
#
# Usage: scripts/bench-policy.sh BUILD_DIR   (root; iperf3, iptables, nftables, ipset)
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-policy.sh BUILD_DIR}" && pwd)
FAULTCTL=$BUILD/faultctl
BLAST=$BUILD/bench/fl_bench_udp_blast
REPS=${BENCH_REPS:-3}
SIZES=${POLICY_BENCH_NS:-10 1000 10000 100000}
UDP_S=${POLICY_BENCH_UDP_S:-1}
TCP_S=${POLICY_BENCH_TCP_S:-1}
[ "$(id -u)" -eq 0 ] || { echo "bench-policy: needs root" >&2; exit 1; }
for b in "$FAULTCTL" "$BLAST"; do
  [ -x "$b" ] || { echo "bench-policy: $b is missing; build first" >&2; exit 1; }
done
for tool in iperf3 iptables-legacy iptables-legacy-restore iptables-nft iptables-nft-restore nft ipset taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench-policy: $tool is missing; run scripts/install-deps.sh" >&2; exit 1; }
done

ID=$$
NS=flbench-pol-$ID      # load times
NS_A=flbench-pola-$ID   # traffic: sender
NS_B=flbench-polb-$ID   # traffic: receiver
ADDR_A=198.18.0.1
ADDR_B=198.18.0.2
TMP=$(mktemp -d /tmp/flbench-pol-XXXXXX)
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=/flbench-pol-$ID          # the policy's scope
CG_OFF=/flbench-pol-off-$ID  # a sibling with no policy
export FAULTLINE_BPFFS_ROOT=/sys/fs/bpf/flbench-pol-$ID
export FAULTLINE_RUN_DIR=$TMP/run
cleanup() {
  set +e
  for ns in "$NS_A" "$NS_B"; do
    if [ -e "/run/netns/$ns" ]; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    fi
  done
  # The applied policy, and the lock files of this run's private bpffs root.
  "$FAULTCTL" uninstall >/dev/null 2>&1
  rm -rf "$FAULTLINE_BPFFS_ROOT" 2>/dev/null
  for ns in "$NS" "$NS_A" "$NS_B"; do ip netns del "$ns" 2>/dev/null; done
  for c in "$CG" "$CG_OFF"; do
    # Processes left in them (none after the kills above) go back to the root.
    if [ -d "$CG2$c" ]; then
      while read -r p; do echo "$p" > "$CG2/cgroup.procs" 2>/dev/null; done < "$CG2$c/cgroup.procs"
      rmdir "$CG2$c" 2>/dev/null
    fi
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
mkdir "$CG2$CG" "$CG2$CG_OFF"

# N distinct addresses in 100.64.0.0/10 (shared address space: no real peer here).
addrs() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "100.%d.%d.%d\n", 64 + int(i / 65536), int(i / 256) % 256, i % 256 }'; }

# Runs "$@" REPS times, prints the median wall time in ms; $PREP runs before each.
median_ms() {
  local t=()
  for _ in $(seq "$REPS"); do
    eval "$PREP"
    local a b
    a=$(date +%s%N)
    "$@" >/dev/null
    b=$(date +%s%N)
    t+=($(( (b - a) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] / 1000 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else print v[int((NR + 1) / 2)] }'; }
spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'; }

# The rule files of N addresses: policy (JSON and YAML), iptables-restore, nft -f, ipset restore.
# chain: the iptables chain the rules go to (OUTPUT to load into an empty table).
make_files() {
  local n=$1 chain=$2
  addrs "$n" > "$TMP/addrs"
  { printf 'apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: bench}\nspec:\n  egress:\n'
    printf '    - cgroup: %s\n      mode: enforce\n      default_allow: true\n      rules:\n' "$CG"
    awk '{ printf "        - {name: r%d, action: deny, cidr: %s}\n", NR, $1 }' "$TMP/addrs"; } > "$TMP/policy.yaml"
  { printf '{"apiVersion": "faultline.dev/v1", "kind": "Policy", "metadata": {"name": "bench"}, "spec": {"egress": [\n'
    printf '  {"cgroup": "%s", "mode": "enforce", "default_allow": true, "rules": [\n' "$CG"
    awk '{ printf "%s    {\"name\": \"r%d\", \"action\": \"deny\", \"cidr\": \"%s\"}", (NR > 1 ? ",\n" : ""), NR, $1 } END { print "" }' "$TMP/addrs"
    printf '  ]}\n]}}\n'; } > "$TMP/policy.json"
  { echo '*filter'; [ "$chain" = OUTPUT ] || echo ":$chain - [0:0]"
    awk -v c="$chain" '{ print "-A " c " -d " $1 "/32 -j DROP" }' "$TMP/addrs"; echo COMMIT; } > "$TMP/ipt.rules"
  { echo 'table ip flbench {'; echo '  set deny { type ipv4_addr; elements = {'
    awk '{ printf "%s%s", (NR > 1 ? ",\n" : ""), $1 } END { print "" }' "$TMP/addrs"
    echo '  } }'
    if [ "$chain" = OUTPUT ]; then echo '  chain out { type filter hook output priority 0; ip daddr @deny drop; }'
    else echo '  chain out { type filter hook output priority 0; }'; fi
    echo '}'; } > "$TMP/nft.rules"
  { echo "create flbench hash:ip maxelem $((n * 2 + 1024))"; awk '{ print "add flbench " $1 }' "$TMP/addrs"; } > "$TMP/ipset.rules"
}

SUMMARY=$TMP/targets
: > "$SUMMARY"
target() { printf '%-58s %-26s %s\n' "$1" "$2" "$3" >> "$SUMMARY"; }
# A point of the load-time curve for make bench's report (BENCH_SERIES, set by scripts/bench.sh).
point() {
  [ -n "${BENCH_SERIES:-}" ] && [[ $3 =~ ^[0-9]+(\.[0-9]+)?$ ]] || return 0
  printf '{"plot":"time to load N denied addresses","x_label":"addresses","y_label":"ms","series":"%s","x":%s,"y":%s}\n' \
    "$1" "$2" "$3" >> "$BENCH_SERIES"
}

echo "-- load time of N denied addresses (ms, median of $REPS; ratio: the tool's time / faultline's from JSON)"
printf '%-8s %10s %10s %10s %16s %16s %16s %16s\n' N "fl json" "fl yaml" "fl same" "ipt-legacy" "ipt-nft" "nft set" "ipset"
declare -A FL_LOAD FL_SAME
for n in $SIZES; do
  make_files "$n" OUTPUT
  PREP='"$FAULTCTL" policy delete >/dev/null'
  fl=$(median_ms "$FAULTCTL" policy apply "$TMP/policy.json")
  flyaml=$(median_ms "$FAULTCTL" policy apply "$TMP/policy.yaml")
  # The file already live, applied again (an agent re-applying what it has).
  PREP=':'
  "$FAULTCTL" policy apply "$TMP/policy.json" >/dev/null
  flsame=$(median_ms "$FAULTCTL" policy apply "$TMP/policy.json")
  FL_SAME[$n]=$flsame
  "$FAULTCTL" policy delete >/dev/null
  FL_LOAD[$n]=$fl
  PREP='ip netns exec "$NS" iptables-legacy -F OUTPUT'
  legacy=$(median_ms ip netns exec "$NS" iptables-legacy-restore "$TMP/ipt.rules")
  ip netns exec "$NS" iptables-legacy -F OUTPUT
  PREP='ip netns exec "$NS" iptables-nft -F OUTPUT'
  iptnft=$(median_ms ip netns exec "$NS" iptables-nft-restore "$TMP/ipt.rules")
  ip netns exec "$NS" iptables-nft -F OUTPUT
  PREP='ip netns exec "$NS" nft delete table ip flbench 2>/dev/null || true'
  nftset=$(median_ms ip netns exec "$NS" nft -f "$TMP/nft.rules")
  ip netns exec "$NS" nft delete table ip flbench 2>/dev/null || true
  PREP='ip netns exec "$NS" ipset destroy flbench 2>/dev/null || true'
  ipset=$(median_ms ip netns exec "$NS" ipset restore -file "$TMP/ipset.rules")
  ip netns exec "$NS" ipset destroy flbench 2>/dev/null || true
  for p in "faultline (JSON) $fl" "faultline (YAML) $flyaml" "faultline (same file again) $flsame" "iptables-legacy $legacy" "iptables-nft $iptnft" \
    "nft -f (one set) $nftset" "ipset restore $ipset"; do
    point "${p% *}" "$n" "${p##* }"
  done
  printf '%-8s %10s %10s %10s %10s %5s %10s %5s %10s %5s %10s %5s\n' "$n" "$fl" "$flyaml" "$flsame" "$legacy" "$(ratio "$legacy" "$fl")" \
    "$iptnft" "$(ratio "$iptnft" "$fl")" "$nftset" "$(ratio "$nftset" "$fl")" "$ipset" "$(ratio "$ipset" "$fl")"
  r=$(awk -v a="$flsame" -v b="$nftset" 'BEGIN { print (a <= b ? "MET" : "MISSED") }')
  target "N=$n: the same file again <= nft -f (one set)" "$(ratio "$flsame" "$nftset") of nft -f" "$r"
  if [ "$n" = 100000 ]; then
    for f in "JSON $fl" "YAML $flyaml"; do
      set -- $f
      r=$(awk -v t="$2" 'BEGIN { print (t <= 1000 ? "MET" : "MISSED") }')
      target "100k rules applied in <= 1 s (policy file as $1)" "$2 ms" "$r"
    done
  fi
done
echo "(faultline: parse + compile + build the generation + one flip, a whole faultctl process; the others load into"
echo " an empty namespace. fl same: the same file applied again, nothing changes: its digest is read, no map written.)"
ip netns del "$NS"

echo
echo "-- throughput to an allowed destination with N denied addresses loaded"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add veth0 netns "$NS_A" type veth peer name veth0 netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/30" dev veth0
ip -n "$NS_B" addr add "$ADDR_B/30" dev veth0
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; ip -n "$ns" link set veth0 up; done
ip netns exec "$NS_A" ping -c 1 -W 2 -q "$ADDR_B" >/dev/null || { echo "bench-policy: veth pair does not pass traffic" >&2; exit 1; }
# Not jobs of this shell (cleanup kills them by namespace, without a "Killed" line each).
(ip netns exec "$NS_B" taskset -c 1 "$BLAST" --sink --port 9 >/dev/null 2>&1 &)
(ip netns exec "$NS_B" taskset -c 1 iperf3 -s -p 5201 >/dev/null 2>&1 &)
sleep 0.5

# Runs "$@" in cgroup $1 (the rest: the command), in the sender's namespace on CPU 0.
in_cg() {
  local cg=$1; shift
  sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG2$cg" ip netns exec "$NS_A" taskset -c 0 "$@"
}
# "datagrams per wall second, per CPU second of the sender"
udp_pps() { in_cg "$1" "$BLAST" --dst "$ADDR_B" --port 9 --seconds "$UDP_S" --size 64 2>/dev/null || echo "0 0"; }
tcp_mbps() {
  in_cg "$1" iperf3 -c "$ADDR_B" -p 5201 -t "$TCP_S" -J 2>/dev/null |
    python3 -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["end"]["sum_sent"]["bits_per_second"] / 1e6))' 2>/dev/null || echo 0
}

LA="ip netns exec $NS_A iptables-legacy"
NA="ip netns exec $NS_A iptables-nft"
on() {
  case $1 in
    legacy) $LA -I OUTPUT -j FLBL ;;
    iptnft) $NA -I OUTPUT -j FLBN ;;
    nftset) ip netns exec "$NS_A" nft add rule ip flbench out ip daddr @deny drop ;;
    ipset) $LA -I OUTPUT -m set --match-set flbench dst -j DROP ;;
    *) ;;
  esac
}
off() {
  case $1 in
    legacy) $LA -D OUTPUT -j FLBL ;;
    iptnft) $NA -D OUTPUT -j FLBN ;;
    nftset) ip netns exec "$NS_A" nft flush chain ip flbench out ;;
    ipset) $LA -D OUTPUT -m set --match-set flbench dst -j DROP ;;
    *) ;;
  esac
}
MECHS="none legacy iptnft nftset ipset faultline"
printf '%-8s %-9s %14s %14s %14s %14s %14s %14s\n' N probe none ipt-legacy ipt-nft "nft set" ipset faultline
for n in $SIZES; do
  make_files "$n" FLBL
  ip netns exec "$NS_A" iptables-legacy-restore --noflush "$TMP/ipt.rules"
  sed 's/FLBL/FLBN/g' "$TMP/ipt.rules" | ip netns exec "$NS_A" iptables-nft-restore --noflush
  ip netns exec "$NS_A" nft -f "$TMP/nft.rules"
  ip netns exec "$NS_A" ipset restore -file "$TMP/ipset.rules"
  "$FAULTCTL" policy apply "$TMP/policy.json" >/dev/null
  declare -A UDP=() UDPCPU=() TCP=()
  for _ in $(seq "$REPS"); do
    for m in $MECHS; do
      on "$m"
      cg=$CG_OFF; [ "$m" = faultline ] && cg=$CG
      read -r wall cpu <<<"$(udp_pps "$cg")"
      UDP[$m]+="$wall "
      UDPCPU[$m]+="$cpu "
      TCP[$m]+="$(tcp_mbps "$cg") "
      off "$m"
    done
  done
  for probe in udp udp-cpu tcp; do
    declare -A MED=()
    row=""
    for m in $MECHS; do
      case $probe in
        udp) vals=${UDP[$m]} ;;
        udp-cpu) vals=${UDPCPU[$m]} ;;
        *) vals=${TCP[$m]} ;;
      esac
      MED[$m]=$(tr ' ' '\n' <<<"$vals" | grep . | median)
    done
    fl=${MED[faultline]}
    for m in $MECHS; do
      if [ "$m" = faultline ]; then row+=$(printf ' %14s' "${MED[$m]}")
      else row+=$(printf ' %7s %6s' "${MED[$m]}" "$(ratio "${MED[$m]}" "$fl")"); fi
    done
    case $probe in udp) label=udp/s ;; udp-cpu) label=udp/cpu-s ;; *) label='tcp Mb' ;; esac
    printf '%-8s %-9s%s\n' "$n" "$label" "$row"
    # Targets: at least the nft set's throughput at every N; at least 9x iptables-legacy's at 10k.
    r=$(awk -v f="$fl" -v s="${MED[nftset]}" 'BEGIN { print (f >= s ? "MET" : "MISSED") }')
    target "$probe: faultline >= nft set at N=$n" "$(ratio "$fl" "${MED[nftset]}") of nft set" "$r"
    if [ "$n" = 10000 ]; then
      r=$(awk -v f="$fl" -v s="${MED[legacy]}" 'BEGIN { print (f >= 9 * s ? "MET" : "MISSED") }')
      target "$probe: faultline >= 9x iptables-legacy at N=10000" "$(ratio "$fl" "${MED[legacy]}") of legacy" "$r"
    fi
  done
  # Unload this N's rules before the next.
  $LA -F FLBL; $LA -X FLBL
  $NA -F FLBN; $NA -X FLBN
  ip netns exec "$NS_A" nft delete table ip flbench
  ip netns exec "$NS_A" ipset destroy flbench
done
"$FAULTCTL" policy delete >/dev/null
echo "(median of $REPS; udp/s: 64-byte datagrams sent per second by one unconnected socket over ${UDP_S} s; udp/cpu-s: the"
echo " same per second of the sender's CPU time (user + system), the per-datagram cost without the time other processes"
echo " of a shared machine take; tcp Mb: one iperf3 stream over ${TCP_S} s, Mbit/s. Each figure's ratio: the mechanism's"
echo " / faultline's; the rules never match: every packet pays the full lookup. none: no rule, but the empty netfilter"
echo " tables the others leave registered. Throughput targets are judged on each probe; on a loaded machine udp/cpu-s"
echo " is the steadiest.)"
echo
echo "-- targets"
cat "$SUMMARY"
