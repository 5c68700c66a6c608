// The process connector (NETLINK_CONNECTOR, CN_IDX_PROC): fork and exit
// events of every process, of which we keep the command's descendants.
#include "userspace/guard/command_tree.h"

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace faultline {
namespace {

constexpr auto kExitedKept = std::chrono::seconds(30);

// /proc/PID/stat's parent pid (field 4, after the parenthesised name).
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  const size_t close = s.rfind(')');
  if (close == std::string::npos || close + 4 >= s.size()) return 0;
  return static_cast<pid_t>(std::atoi(s.c_str() + close + 4));
}

}  // namespace

Result<std::unique_ptr<CommandTree>> CommandTree::listen() {
  UniqueFd sock(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR));
  if (!sock) return errno_error("the process connector (netlink)");
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return errno_error("the process connector: bind");
  // A bigger queue than the default: a burst of forks must not overflow it.
  const int size = 4 << 20;
  (void)::setsockopt(sock.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  alignas(nlmsghdr) char msg[NLMSG_SPACE(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
  auto* nl = reinterpret_cast<nlmsghdr*>(msg);
  nl->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op));
  nl->nlmsg_type = NLMSG_DONE;
  auto* cn = static_cast<cn_msg*>(NLMSG_DATA(nl));
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(cn->data, &op, sizeof op);
  if (::send(sock.get(), msg, nl->nlmsg_len, 0) != static_cast<ssize_t>(nl->nlmsg_len))
    return errno_error("the process connector: listen");
  return std::unique_ptr<CommandTree>(new CommandTree(std::move(sock)));
}

void CommandTree::set_root(pid_t pid) {
  std::lock_guard lock(mu_);
  root_ = pid;
  members_.insert(pid);
}

void CommandTree::drain() {
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(sock_.get(), buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == ENOBUFS) {
        ++lost_;
        continue;
      }
      break;  // EAGAIN: nothing more queued
    }
    auto left = static_cast<unsigned>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      const auto* cn = static_cast<const cn_msg*>(NLMSG_DATA(h));
      if (cn->len < sizeof(proc_event)) continue;
      const auto* ev = reinterpret_cast<const proc_event*>(cn->data);
      if (ev->what == proc_event::PROC_EVENT_FORK) {
        const auto& f = ev->event_data.fork;
        if (f.child_pid == f.child_tgid && members_.contains(f.parent_tgid)) {
          members_.insert(f.child_tgid);
          outsiders_.erase(f.child_tgid);
        }
      } else if (ev->what == proc_event::PROC_EVENT_EXIT) {
        const auto& e = ev->event_data.exit;
        if (e.process_pid == e.process_tgid && members_.contains(e.process_tgid) && e.process_tgid != root_)
          exited_[e.process_tgid] = std::chrono::steady_clock::now();
      }
    }
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto it = exited_.begin(); it != exited_.end();) {
    if (now - it->second > kExitedKept) {
      members_.erase(it->first);
      it = exited_.erase(it);
    } else {
      ++it;
    }
  }
}

bool CommandTree::parent_chain_reaches_root(pid_t pid) const {
  for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
    if (pid == root_) return true;
    pid = parent_of(pid);
  }
  return false;
}

bool CommandTree::contains(pid_t pid) {
  std::lock_guard lock(mu_);
  if (root_ == 0) return false;
  drain();
  if (members_.contains(pid)) return true;
  if (outsiders_.contains(pid)) return false;
  if (!parent_chain_reaches_root(pid)) {
    if (outsiders_.size() > 65536) outsiders_.clear();
    outsiders_.insert(pid);
    return false;
  }
  members_.insert(pid);
  return true;
}

}  // namespace faultline
