// Network namespaces of a test's own (by `ip netns add`, so that ip, tc and
// faultctl --netns find them by name) and veth pairs between them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fltest {

// `ip ARGS...`; throws std::runtime_error naming the command and what it printed.
void ip(const std::vector<std::string>& args);

struct NetnsOptions {
  // false: net.ipv6.conf.all.disable_ipv6=1 (and so the default for devices
  // added later), so no router solicitation or MLD report mixes into what a test counts.
  bool ipv6 = true;
  // Every address of 198.18.0.0/15 and 2001:2::/48 is local on lo (like 127/8):
  // a TCP connect to a port nobody listens on is refused at once.
  bool local_ranges = false;
};

// /run/netns/NAME with lo up; deleted, with every device in it, at the end.
class Netns {
 public:
  // Throws std::runtime_error (after undoing what it made) if a step fails.
  explicit Netns(const std::string& name, const NetnsOptions& o = {});
  ~Netns();
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::string path() const { return "/run/netns/" + name_; }
  // The nsfs inode: what Faultline keys its programs and faults by.
  [[nodiscard]] uint32_t inode() const { return inode_of(name_); }
  [[nodiscard]] static uint32_t inode_of(const std::string& name);  // 0 if there is none

 private:
  std::string name_;
};

// One end of a veth pair: its device name and addresses ("198.18.0.1/24").
struct VethEnd {
  std::string dev;
  std::vector<std::string> addrs;
};

// Adds a veth pair between two namespaces, addresses both ends and sets them up.
// Deleting either namespace deletes the pair.
void add_veth(const Netns& a, const VethEnd& end_a, const Netns& b, const VethEnd& end_b);

// A veth pair that goes away at the end even while both namespaces stay.
class VethPair {
 public:
  VethPair(const Netns& a, const VethEnd& end_a, const Netns& b, const VethEnd& end_b);
  ~VethPair();
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;
  [[nodiscard]] const std::string& dev_a() const { return dev_a_; }

 private:
  std::string ns_a_, dev_a_;
};

// Two test hosts: namespaces "<prefix>-a" and "<prefix>-b" joined by a veth pair.
class NetnsPair {
 public:
  NetnsPair(const std::string& prefix, const VethEnd& end_a, const VethEnd& end_b, const NetnsOptions& o = {});
  [[nodiscard]] const std::string& a() const { return a_.name(); }
  [[nodiscard]] const std::string& b() const { return b_.name(); }
  [[nodiscard]] const Netns& netns_a() const { return a_; }
  [[nodiscard]] const Netns& netns_b() const { return b_; }

 private:
  Netns a_;
  Netns b_;
};

}  // namespace fltest
