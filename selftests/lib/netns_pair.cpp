// Netns, veth pairs: `ip` does the work; every step is checked, and undone on failure.
#include "selftests/lib/netns_pair.h"

#include <sys/stat.h>

#include <stdexcept>

#include "selftests/lib/child_process.h"

namespace fltest {
namespace {

void quietly_delete(const std::string& netns) {
  struct stat st {};
  if (::stat(("/run/netns/" + netns).c_str(), &st) == 0) (void)run_command({"ip", "netns", "del", netns}, {}, 15s);
}

}  // namespace

void ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv, {}, 15s);
  if (!r.status.is(0)) throw std::runtime_error("ip failed: " + r.describe());
}

Netns::Netns(const std::string& name, const NetnsOptions& o) : name_(name) {
  ip({"netns", "add", name_});
  try {
    if (!o.ipv6) {
      auto r =
          run_command({"ip", "netns", "exec", name_, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"}, {}, 15s);
      if (!r.status.is(0)) throw std::runtime_error("cannot turn IPv6 off: " + r.describe());
    }
    ip({"-n", name_, "link", "set", "lo", "up"});
    if (o.local_ranges) {
      ip({"-n", name_, "route", "add", "local", "198.18.0.0/15", "dev", "lo"});
      ip({"-n", name_, "-6", "route", "add", "local", "2001:2::/48", "dev", "lo"});
    }
  } catch (...) {
    quietly_delete(name_);
    throw;
  }
}

Netns::~Netns() { quietly_delete(name_); }

uint32_t Netns::inode_of(const std::string& name) {
  struct stat st {};
  if (::stat(("/run/netns/" + name).c_str(), &st) != 0) return 0;
  return static_cast<uint32_t>(st.st_ino);
}

void add_veth(const Netns& a, const VethEnd& end_a, const Netns& b, const VethEnd& end_b) {
  ip({"link", "add", end_a.dev, "netns", a.name(), "type", "veth", "peer", "name", end_b.dev, "netns", b.name()});
  for (const auto& addr : end_a.addrs) ip({"-n", a.name(), "addr", "add", addr, "dev", end_a.dev});
  for (const auto& addr : end_b.addrs) ip({"-n", b.name(), "addr", "add", addr, "dev", end_b.dev});
  ip({"-n", a.name(), "link", "set", end_a.dev, "up"});
  ip({"-n", b.name(), "link", "set", end_b.dev, "up"});
}

VethPair::VethPair(const Netns& a, const VethEnd& end_a, const Netns& b, const VethEnd& end_b)
    : ns_a_(a.name()), dev_a_(end_a.dev) {
  try {
    add_veth(a, end_a, b, end_b);
  } catch (...) {
    (void)run_command({"ip", "-n", ns_a_, "link", "del", dev_a_}, {}, 15s);
    throw;
  }
}

VethPair::~VethPair() { (void)run_command({"ip", "-n", ns_a_, "link", "del", dev_a_}, {}, 15s); }

// A failed add_veth throws out of the body: a_ and b_ are deleted, and the pair with them.
NetnsPair::NetnsPair(const std::string& prefix, const VethEnd& end_a, const VethEnd& end_b, const NetnsOptions& o)
    : a_(prefix + "-a", o), b_(prefix + "-b", o) {
  add_veth(a_, end_a, b_, end_b);
}

}  // namespace fltest
