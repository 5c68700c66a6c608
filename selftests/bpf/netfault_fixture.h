// A private netfault state per test: the real object, its pinned maps, the fault table,
// and helpers that run fl_egress / fl_ingress on a crafted packet with BPF_PROG_TEST_RUN.
#pragma once

#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sched.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "faultline/abi.h"
#include "loader/bpffs.h"
#include "loader/map_ops.h"
#include "loader/netfault_maps.h"
#include "loader/netfault_object.h"
#include "selftests/bpf/packet_builder.h"
#include "userspace/faults/packet/fault_table.h"
#include "userspace/faults/packet/spec.h"

namespace faultline::bpftest {

// What a tc program returned, named so that a failed assert reads "Redirect(7)".
enum class Verdict : int32_t {
  Pass = -1,     // TC_ACT_UNSPEC / TCX_NEXT
  Ok = 0,        // TC_ACT_OK (never returned by netfault; listed to name it)
  Shot = 2,      // TC_ACT_SHOT: ingress drop
  Stolen = 4,    // TC_ACT_STOLEN: egress drop under clsact
  Redirect = 7,  // TC_ACT_REDIRECT: egress drop under TCX (redirect to ifindex 0)
};
void PrintTo(Verdict v, std::ostream* os);

struct RunResult {
  int err = 0;  // bpf_prog_test_run_opts: 0 or a negative errno
  Verdict verdict = Verdict::Ok;
  std::vector<uint8_t> data_out;
  __sk_buff ctx_out{};
};

// Everything a test may set on a fault beyond its spec.
struct AddOptions {
  uint64_t lifetime_ns = 30'000'000'000ULL;  // expires_ns = boottime now + this
  std::optional<uint64_t> expires_ns;        // absolute CLOCK_BOOTTIME; wins over lifetime
  std::optional<uint32_t> netns_ino;         // default: the fixture's namespace
  uint32_t ifindex = 0;
  uint64_t cgroup_id = 0;
  uint64_t start_after_ns = 0;  // --start-after as the engine sets it: from now
};

class NetfaultTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The drop verdict of the loaded egress program (Redirect unless reloaded).
  [[nodiscard]] Verdict egress_drop() const { return egress_drop_; }

  // Replaces the program instance (same pinned maps) with one built for another
  // egress drop mode or namespace inode.
  void reload(uint32_t egress_drop, std::optional<uint32_t> netns_ino = std::nullopt);

  // Compiles and adds a fault; returns its slot. A failure is reported and yields
  // UINT32_MAX, so the asserts that follow fail too.
  uint32_t add(const FaultSpec& spec, const AddOptions& opts = {});

  // Runs a program once. ctx_in, when given, is passed as the __sk_buff context.
  [[nodiscard]] RunResult run(int prog_fd, const Packet& pkt, const __sk_buff* ctx_in = nullptr) const;
  // Runs fl_egress / fl_ingress and records a failure if the run itself failed.
  [[nodiscard]] Verdict egress(const Packet& pkt) const;
  [[nodiscard]] Verdict ingress(const Packet& pkt) const;
  [[nodiscard]] int egress_fd() const { return obj_->egress_fd(); }
  [[nodiscard]] int ingress_fd() const { return obj_->ingress_fd(); }

  [[nodiscard]] fl_fault_stats stats(uint32_t slot) const;
  [[nodiscard]] uint64_t reason(fl_drop_reason r) const;
  [[nodiscard]] FaultTable& table() { return *table_; }
  [[nodiscard]] const NetfaultMaps& maps() const { return *maps_; }
  [[nodiscard]] uint32_t netns_ino() const { return netns_ino_; }
  [[nodiscard]] int pinned_cpu() const { return cpu_; }

  void set_armed(uint32_t armed);

  // Keys present in a map, counted by iteration; a broken iterator must not
  // hang the suite, so the count stops past ten million.
  template <typename K>
  [[nodiscard]] static size_t count_keys(int map_fd) {
    size_t n = 0;
    for_each_key<K>(map_fd, [&](const K&) { return ++n <= 10'000'000; });
    return n;
  }

 private:
  BpffsLayout layout_;
  std::optional<NetfaultObject> obj_;
  std::optional<NetfaultMaps> maps_;
  std::optional<FaultTable> table_;
  uint32_t netns_ino_ = 0;
  Verdict egress_drop_ = Verdict::Redirect;
  cpu_set_t saved_affinity_{};
  bool affinity_saved_ = false;
  int cpu_ = -1;
  bool loaded_ = false;
};

// This host's addresses in the crafted packets (documentation ranges).
inline constexpr const char* kLocal4 = "198.51.100.7";
inline constexpr const char* kLocal6 = "2001:db8:100::7";

// A UDP datagram this host sends to remote:rport (egress), or receives from it
// (ingress); the local address and port follow the remote's family.
[[nodiscard]] Packet udp_to(const std::string& remote, uint16_t rport = 80, size_t payload = 32);
[[nodiscard]] Packet udp_from(const std::string& remote, uint16_t rport = 80, size_t payload = 32);
[[nodiscard]] const char* local_for(const std::string& remote);
// A DNS query for qname that this host sends to resolver:dport.
[[nodiscard]] Packet dns_query(const std::string& qname, uint16_t dport = 53, const char* resolver = "192.0.2.53");

// Spec shorthands; targets and source as the operator writes them.
[[nodiscard]] FaultSpec make_spec(FaultKind kind, const std::vector<std::string>& targets = {});
[[nodiscard]] Prefix prefix(const std::string& s);

// CLOCK_MONOTONIC now: the clock of bpf_ktime_get_ns() and of skb->tstamp (EDT).
[[nodiscard]] uint64_t monotonic_ns();

}  // namespace faultline::bpftest
