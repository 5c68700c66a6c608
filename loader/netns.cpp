// Network namespace resolution and entry (setns on the calling thread only).
#include "loader/netns.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstring>

namespace faultline {

Result<NetnsRef> resolve_netns(const std::string& spec) {
  NetnsRef ref;
  if (spec.empty() || spec == "host") {
    ref.path = "/proc/self/ns/net";
    ref.display = "host";
  } else if (spec.rfind("pid:", 0) == 0) {
    std::string pid = spec.substr(4);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos)
      return make_error(EINVAL, "--netns " + spec + ": pid:N needs a numeric pid");
    ref.path = "/proc/" + pid + "/ns/net";
    ref.display = spec;
  } else if (spec[0] == '/') {
    ref.path = spec;
    ref.display = spec;
  } else {
    if (spec.find('/') != std::string::npos || spec == "." || spec == "..")
      return make_error(EINVAL, "--netns " + spec + ": a name may not contain '/'");
    ref.path = "/run/netns/" + spec;
    ref.display = spec;
  }
  struct stat st {};
  if (::stat(ref.path.c_str(), &st) != 0)
    return make_error(errno, "--netns " + spec + ": no network namespace at " + ref.path);
  UniqueFd fd(::open(ref.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error("--netns " + spec + ": cannot open " + ref.path);
  // Entering with CLONE_NEWNET checks that it really is a network namespace file.
  struct stat self {};
  ::stat("/proc/self/ns/net", &self);
  if (st.st_dev != self.st_dev)
    return make_error(EINVAL, "--netns " + spec + ": " + ref.path + " is not a namespace file");
  // /proc/N/ns/mnt is an nsfs file too; setns() would refuse it only later.
  if (int type = ::ioctl(fd.get(), NS_GET_NSTYPE); type >= 0 && type != CLONE_NEWNET)
    return make_error(EINVAL,
                      "--netns " + spec + ": " + ref.path + " is a namespace file, but not of a network namespace");
  ref.inode = static_cast<uint32_t>(st.st_ino);
  return ref;
}

Result<NetnsEnter> NetnsEnter::enter(const NetnsRef& ns) {
  UniqueFd home(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!home) return errno_error("cannot open our own network namespace");
  UniqueFd target(::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target) return errno_error("cannot open network namespace " + ns.path);
  if (::setns(target.get(), CLONE_NEWNET) != 0) return errno_error("cannot enter network namespace " + ns.display);
  return NetnsEnter(std::move(home));
}

NetnsEnter::~NetnsEnter() {
  if (home_) ::setns(home_.get(), CLONE_NEWNET);
}

Result<std::vector<NetDevice>> list_devices() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return errno_error("cannot open a socket to list devices");
  struct if_nameindex* names = ::if_nameindex();
  if (names == nullptr) return errno_error("cannot list network devices");
  std::vector<NetDevice> out;
  for (auto* n = names; n->if_index != 0; ++n) {
    NetDevice d;
    d.name = n->if_name;
    d.ifindex = n->if_index;
    struct ifreq ifr {};
    std::strncpy(ifr.ifr_name, n->if_name, IFNAMSIZ - 1);
    if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) == 0) d.loopback = (ifr.ifr_flags & IFF_LOOPBACK) != 0;
    if (::ioctl(sock.get(), SIOCGIFHWADDR, &ifr) == 0) d.ethernet = ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER;
    out.push_back(std::move(d));
  }
  ::if_freenameindex(names);
  return out;
}

}  // namespace faultline
