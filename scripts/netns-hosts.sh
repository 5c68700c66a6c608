#!/usr/bin/env bash
# Two test hosts on one machine: network namespaces joined by a veth pair, with
# addresses from the benchmarking range 198.18.0.0/15 that exist only inside them.
#
#   scripts/netns-hosts.sh up   CLIENT SERVER [CLIENT_IP SERVER_IP [SERVER_IP2]]
#   scripts/netns-hosts.sh down CLIENT SERVER
#   scripts/netns-hosts.sh show CLIENT SERVER
#
# up:   creates the namespaces CLIENT and SERVER, a veth pair (eth0 in each), the
#       addresses (default 198.18.0.1 and 198.18.0.2, /24; SERVER_IP2 adds a second
#       address on the server), and brings everything up. Fails if a name is taken.
# down: kills every process left inside the two namespaces and deletes them
#       (the veth goes with them). Quiet and idempotent: safe in a trap.
# show: prints the addresses of both hosts.
#
# Other scripts may also source this file and call netns_hosts_up / netns_hosts_down.
# Needs root and iproute2.

netns_hosts_in_range() {
  case "$1" in
    198.18.* | 198.19.*) return 0 ;;
    *) return 1 ;;
  esac
}

netns_hosts_up() {
  local client=$1 server=$2 cip=${3:-198.18.0.1} sip=${4:-198.18.0.2} sip2=${5:-}
  local ip
  for ip in "$cip" "$sip" $sip2; do
    if ! netns_hosts_in_range "$ip"; then
      echo "netns-hosts: $ip is outside 198.18.0.0/15; test hosts use the benchmarking range only" >&2
      return 2
    fi
  done
  local ns
  for ns in "$client" "$server"; do
    if [ -e "/run/netns/$ns" ]; then
      echo "netns-hosts: network namespace $ns already exists (run: $0 down $client $server)" >&2
      return 1
    fi
  done
  if ! netns_hosts_build "$client" "$server" "$cip" "$sip" "$sip2"; then
    echo "netns-hosts: set-up failed; removing $client and $server" >&2
    netns_hosts_down "$client" "$server"
    return 1
  fi
}

netns_hosts_build() {
  local client=$1 server=$2 cip=$3 sip=$4 sip2=$5
  ip netns add "$client" || return 1
  ip netns add "$server" || return 1
  ip link add eth0 netns "$client" type veth peer name eth0 netns "$server" || return 1
  ip -n "$client" addr add "$cip/24" dev eth0 || return 1
  ip -n "$server" addr add "$sip/24" dev eth0 || return 1
  if [ -n "$sip2" ]; then ip -n "$server" addr add "$sip2/24" dev eth0 || return 1; fi
  local ns
  for ns in "$client" "$server"; do
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" link set eth0 up || return 1
  done
}

netns_hosts_down() {
  local ns pid
  for ns in "$@"; do
    [ -e "/run/netns/$ns" ] || continue
    # Processes keep a namespace alive after `ip netns del`: end them first.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  return 0
}

netns_hosts_show() {
  local ns
  for ns in "$@"; do
    printf '%-20s %s\n' "$ns" "$(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' | tr '\n' ' ')"
  done
}

# Run as a command (not sourced).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  usage() {
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
  }
  [ $# -ge 3 ] || usage
  if [ "$(id -u)" -ne 0 ]; then
    echo "netns-hosts: needs root (ip netns)" >&2
    exit 1
  fi
  cmd=$1
  shift
  case "$cmd" in
    up) netns_hosts_up "$@" ;;
    down) netns_hosts_down "$1" "$2" ;;
    show) netns_hosts_show "$1" "$2" ;;
    *) usage ;;
  esac
fi
