// TestNet: `ip` does the work; every step is checked and undone on failure.
#include "test_net.h"

#include <sys/stat.h>

#include <stdexcept>
#include <vector>

#include "process.h"

namespace fle2e {
namespace {

void must(const std::vector<std::string>& argv) {
  auto r = run_command(argv, {}, 10s);
  if (!r.status.is(0)) throw std::runtime_error("test network set-up failed: " + r.describe());
}

}  // namespace

TestNet::TestNet(const std::string& prefix) : a_(prefix + "-a"), b_(prefix + "-b") {
  try {
    must({"ip", "netns", "add", a_});
    must({"ip", "netns", "add", b_});
    must({"ip", "link", "add", kDevA, "netns", a_, "type", "veth", "peer", "name", kDevB, "netns", b_});
    for (const auto& ns : {a_, b_}) {
      // IPv6 off: no router solicitations or MLD reports mixed into what a test counts.
      must({"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"});
      must({"ip", "-n", ns, "link", "set", "lo", "up"});
    }
    must({"ip", "-n", a_, "addr", "add", std::string(kAddrA) + "/24", "dev", kDevA});
    must({"ip", "-n", b_, "addr", "add", std::string(kAddrB) + "/24", "dev", kDevB});
    must({"ip", "-n", b_, "addr", "add", std::string(kAddrB2) + "/24", "dev", kDevB});
    must({"ip", "-n", a_, "link", "set", kDevA, "up"});
    must({"ip", "-n", b_, "link", "set", kDevB, "up"});
  } catch (...) {
    destroy();
    throw;
  }
}

TestNet::~TestNet() { destroy(); }

void TestNet::destroy() {
  // Deleting a namespace destroys its end of the veth, and with it the peer.
  for (const auto& ns : {a_, b_}) {
    struct stat st {};
    if (::stat(("/run/netns/" + ns).c_str(), &st) == 0) (void)run_command({"ip", "netns", "del", ns}, {}, 10s);
  }
}

uint32_t TestNet::inode(const std::string& netns) {
  struct stat st {};
  if (::stat(("/run/netns/" + netns).c_str(), &st) != 0) return 0;
  return static_cast<uint32_t>(st.st_ino);
}

}  // namespace fle2e
