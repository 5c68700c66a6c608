#!/usr/bin/env bash
# The time to load N denied destination addresses: `faultctl policy apply`
# (one cgroup scope, monitor mode, a throw-away cgroup) against
# iptables-restore (legacy and nft back ends), `nft -f` (one set) and
# `ipset restore`, each loading into a throw-away network namespace, never the
# host's tables. Median of BENCH_REPS (default 3) loads, in ms, and each
# figure's ratio to Faultline's.
#
# Usage: scripts/bench-policy.sh BUILD_DIR   (root). Rule sets: POLICY_BENCH_NS
# (default "10 1000 10000 60000"; one scope holds at most 65534 address rules).
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-policy.sh BUILD_DIR}" && pwd)
FAULTCTL=$BUILD/faultctl
REPS=${BENCH_REPS:-3}
SIZES=${POLICY_BENCH_NS:-10 1000 10000 60000}
[ "$(id -u)" -eq 0 ] || { echo "bench-policy: needs root" >&2; exit 1; }
[ -x "$FAULTCTL" ] || { echo "bench-policy: $FAULTCTL is missing; build first" >&2; exit 1; }

ID=$$
NS=flbench-pol-$ID
TMP=$(mktemp -d /tmp/flbench-pol-XXXXXX)
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG=/flbench-pol-$ID
export FAULTLINE_BPFFS_ROOT=/sys/fs/bpf/flbench-pol-$ID
export FAULTLINE_RUN_DIR=$TMP/run
LOCKS_BEFORE=$(ls /run/faultline*.policy.lock 2>/dev/null || true)
cleanup() {
  "$FAULTCTL" policy delete >/dev/null 2>&1 || true
  # The lock file faultctl made for this run's private bpffs root.
  for l in /run/faultline*.policy.lock; do
    [ -e "$l" ] && ! grep -qxF "$l" <<<"$LOCKS_BEFORE" && rm -f "$l"
  done
  rm -rf "$FAULTLINE_BPFFS_ROOT" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rmdir "$CG2$CG" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$NS"
mkdir "$CG2$CG"

# N distinct addresses in 100.64.0.0/10 (shared address space: no real peer here).
addrs() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "100.%d.%d.%d\n", 64 + int(i / 65536), int(i / 256) % 256, i % 256 }'; }

now_ms() { date +%s%N | awk '{ printf "%.1f", $1 / 1e6 }'; }
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

printf '%-8s %14s %16s %16s %12s %14s\n' N "faultline ms" "ipt-legacy ms" "ipt-nft ms" "nft set ms" "ipset ms"
for n in $SIZES; do
  addrs "$n" > "$TMP/addrs"
  { printf 'apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: bench}\nspec:\n  egress:\n'
    printf '    - cgroup: %s\n      mode: monitor\n      rules:\n' "$CG"
    awk '{ printf "        - {name: r%d, action: deny, cidr: %s}\n", NR, $1 }' "$TMP/addrs"; } > "$TMP/policy.yaml"
  { echo '*filter'; awk '{ print "-A OUTPUT -d " $1 "/32 -j DROP" }' "$TMP/addrs"; echo COMMIT; } > "$TMP/ipt.rules"
  { echo 'table ip flbench {'; echo '  set deny { type ipv4_addr; elements = {'
    awk '{ printf "%s%s", (NR > 1 ? ",\n" : ""), $1 } END { print "" }' "$TMP/addrs"
    echo '  } }'; echo '  chain out { type filter hook output priority 0; ip daddr @deny drop; }'; echo '}'; } > "$TMP/nft.rules"
  { echo "create flbench hash:ip maxelem $((n * 2 + 1024))"; awk '{ print "add flbench " $1 }' "$TMP/addrs"; } > "$TMP/ipset.rules"

  PREP='"$FAULTCTL" policy delete >/dev/null'
  fl=$(median_ms "$FAULTCTL" policy apply "$TMP/policy.yaml")
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
  ratio() { awk -v a="$1" -v b="$fl" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'; }
  printf '%-8s %14s %10s %5s %10s %5s %8s %5s %8s %5s\n' "$n" "$fl" "$legacy" "$(ratio "$legacy")" "$iptnft" \
    "$(ratio "$iptnft")" "$nftset" "$(ratio "$nftset")" "$ipset" "$(ratio "$ipset")"
done
"$FAULTCTL" policy delete >/dev/null
echo "(faultline: parse + compile + build the generation + one flip, a whole faultctl process; the others load into"
echo " an empty namespace. Ratios: the tool's time / faultline's. Target: 100k rules in at most 1 s.)"
