// What the kernel and the system say is there, asked directly (not through
// faultctl): programs, qdiscs, pins, namespace counters, processes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fle2e {

struct NetfaultProg {
  uint32_t id = 0;
  std::string name;        // fl_egress or fl_ingress
  uint32_t netns_ino = 0;  // from the program's .rodata (fl_netns_ino); 0 if unreadable
};

// Every program named fl_egress / fl_ingress the kernel has loaded (bpf_prog_get_next_id).
[[nodiscard]] std::vector<NetfaultProg> netfault_programs();

// The ones loaded for one of these namespaces (Faultline loads one instance per namespace).
[[nodiscard]] std::vector<NetfaultProg> netfault_programs_in(const std::set<uint32_t>& netns_inodes);

[[nodiscard]] std::string describe(const std::vector<NetfaultProg>& progs);

// The netfault programs attached to a device, as the kernel lists them: TCX
// programs by a link query (bpf_prog_query), tc filters by `tc filter show`.
// Entries read like "tcx egress fl_egress" or "tc ingress fl_ingress".
[[nodiscard]] std::vector<std::string> attached_netfault(const std::string& netns, const std::string& dev);

// expires_ns (CLOCK_BOOTTIME) of a fault slot, read from the pinned fl_faults map,
// converted to CLOCK_MONOTONIC so it compares with monotonic_ns().
[[nodiscard]] std::optional<uint64_t> fault_expiry_mono(const std::string& bpffs_root, uint32_t slot);

// `tc qdisc show dev DEV` inside the namespace, and whether it lists a clsact.
[[nodiscard]] std::string qdiscs(const std::string& netns, const std::string& dev);
[[nodiscard]] bool has_clsact(const std::string& netns, const std::string& dev);

// One counter of /proc/net/snmp as the namespace sees it, e.g. ("Udp", "InCsumErrors").
[[nodiscard]] uint64_t snmp_counter(const std::string& netns, const std::string& table, const std::string& field);

// The namespace's IPv4 TCP sockets that are not listening (/proc/net/tcp):
// connections, including those closing or in TIME_WAIT.
[[nodiscard]] std::vector<std::string> tcp_connection_states(const std::string& netns);

// Every file and folder under root (empty when root does not exist).
[[nodiscard]] std::vector<std::string> files_under(const std::string& root);

// Processes whose environment holds exactly this KEY=VALUE entry.
[[nodiscard]] std::vector<pid_t> processes_with_env(const std::string& key_value);

}  // namespace fle2e
