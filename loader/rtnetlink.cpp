// Minimal NETLINK_ROUTE client for root qdiscs, tc filters and route lookups:
// request, ack, dump.
#include "loader/rtnetlink.h"

#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "base/unique_fd.h"

namespace faultline {
namespace {

class Request {
 public:
  Request(uint16_t type, uint16_t flags) : buf_(NLMSG_SPACE(sizeof(tcmsg)), 0) {
    auto* h = header();
    h->nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | flags;
    h->nlmsg_seq = 1;
  }
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  tcmsg* tc() { return static_cast<tcmsg*>(NLMSG_DATA(header())); }
  void add_string(uint16_t type, const std::string& s) {
    size_t off = NLMSG_ALIGN(header()->nlmsg_len);
    size_t len = RTA_LENGTH(s.size() + 1);
    buf_.resize(off + RTA_ALIGN(len), 0);
    auto* rta = reinterpret_cast<rtattr*>(buf_.data() + off);
    rta->rta_type = type;
    rta->rta_len = static_cast<uint16_t>(len);
    std::memcpy(RTA_DATA(rta), s.c_str(), s.size() + 1);
    header()->nlmsg_len = static_cast<uint32_t>(off + RTA_ALIGN(len));
  }
  [[nodiscard]] const void* data() const { return buf_.data(); }
  [[nodiscard]] size_t size() const { return buf_.size(); }

 private:
  std::vector<char> buf_;
};

Result<UniqueFd> open_rtnl() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd) return errno_error("cannot open rtnetlink socket");
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0)
    return errno_error("cannot bind rtnetlink socket");
  return fd;
}

// Sends the request and waits for its acknowledgement.
Status transact(Request& req, const std::string& what) {
  auto fd = open_rtnl();
  if (!fd) return fd.error();
  if (::send(fd->get(), req.data(), req.size(), 0) < 0) return errno_error(what);
  std::vector<char> buf(8192);
  for (;;) {
    ssize_t n = ::recv(fd->get(), buf.data(), buf.size(), 0);
    if (n < 0) return errno_error(what);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        if (e->error != 0) return make_error(e->error, what);
        return {};
      }
    }
  }
}

}  // namespace

Result<std::optional<QdiscInfo>> root_qdisc(uint32_t ifindex) {
  auto fd = open_rtnl();
  if (!fd) return fd.error();
  Request req(RTM_GETQDISC, NLM_F_DUMP);
  req.tc()->tcm_family = AF_UNSPEC;
  if (::send(fd->get(), req.data(), req.size(), 0) < 0) return errno_error("cannot dump qdiscs");
  std::optional<QdiscInfo> found;
  std::vector<char> buf(32768);
  for (;;) {
    ssize_t n = ::recv(fd->get(), buf.data(), buf.size(), 0);
    if (n < 0) return errno_error("cannot read qdisc dump");
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) return found;
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        return make_error(e->error, "qdisc dump failed");
      }
      auto* tc = static_cast<tcmsg*>(NLMSG_DATA(h));
      if (static_cast<uint32_t>(tc->tcm_ifindex) != ifindex || tc->tcm_parent != TC_H_ROOT) continue;
      QdiscInfo q;
      q.handle = tc->tcm_handle;
      int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*tc)));
      for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(tc) + NLMSG_ALIGN(sizeof(*tc))); RTA_OK(a, len);
           a = RTA_NEXT(a, len)) {
        if (a->rta_type == TCA_KIND) q.kind = static_cast<const char*>(RTA_DATA(a));
      }
      found = q;
    }
  }
}

Status replace_root_qdisc(uint32_t ifindex, const std::string& kind) {
  Request req(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
  req.tc()->tcm_family = AF_UNSPEC;
  req.tc()->tcm_ifindex = static_cast<int>(ifindex);
  req.tc()->tcm_parent = TC_H_ROOT;
  req.add_string(TCA_KIND, kind);
  return transact(req, "cannot install qdisc " + kind + " on ifindex " + std::to_string(ifindex));
}

Status delete_root_qdisc(uint32_t ifindex) {
  Request req(RTM_DELQDISC, NLM_F_ACK);
  req.tc()->tcm_family = AF_UNSPEC;
  req.tc()->tcm_ifindex = static_cast<int>(ifindex);
  req.tc()->tcm_parent = TC_H_ROOT;
  return transact(req, "cannot delete the root qdisc of ifindex " + std::to_string(ifindex));
}

Result<int> count_filters(uint32_t ifindex, uint32_t parent) {
  auto fd = open_rtnl();
  if (!fd) return fd.error();
  Request req(RTM_GETTFILTER, NLM_F_DUMP);
  req.tc()->tcm_family = AF_UNSPEC;
  req.tc()->tcm_ifindex = static_cast<int>(ifindex);
  req.tc()->tcm_parent = parent;
  if (::send(fd->get(), req.data(), req.size(), 0) < 0) return errno_error("cannot dump tc filters");
  int count = 0;
  std::vector<char> buf(32768);
  for (;;) {
    ssize_t n = ::recv(fd->get(), buf.data(), buf.size(), 0);
    if (n < 0) return errno_error("cannot read tc filter dump");
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) return count;
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        if (e->error == -EINVAL || e->error == -ENOENT) return 0;  // no such parent
        return make_error(e->error, "tc filter dump failed");
      }
      if (h->nlmsg_type == RTM_NEWTFILTER) {
        auto* tc = static_cast<tcmsg*>(NLMSG_DATA(h));
        if (tc->tcm_handle != 0) ++count;  // handle 0 rows describe the chain, not a filter
      }
    }
  }
}

Result<RouteLookup> RouteLookup::open() {
  auto fd = open_rtnl();
  if (!fd) return fd.error();
  return RouteLookup(std::move(*fd));
}

Result<RouteAnswer> RouteLookup::get(int family, const std::array<uint8_t, 16>& addr) {
  if (family != AF_INET && family != AF_INET6) return make_error(EAFNOSUPPORT, "route lookup: not an IP family");
  const size_t alen = family == AF_INET ? 4 : 16;
  struct {
    nlmsghdr h;
    rtmsg r;
    char attrs[RTA_SPACE(16)];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  req.h.nlmsg_type = RTM_GETROUTE;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = ++seq_;
  req.r.rtm_family = static_cast<uint8_t>(family);
  req.r.rtm_dst_len = static_cast<uint8_t>(alen * 8);
  auto* rta = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&req) + NLMSG_ALIGN(req.h.nlmsg_len));
  rta->rta_type = RTA_DST;
  rta->rta_len = static_cast<uint16_t>(RTA_LENGTH(alen));
  std::memcpy(RTA_DATA(rta), addr.data(), alen);
  req.h.nlmsg_len = NLMSG_ALIGN(req.h.nlmsg_len) + RTA_ALIGN(rta->rta_len);

  if (::send(fd_.get(), &req, req.h.nlmsg_len, 0) < 0) return errno_error("cannot ask for a route");
  std::vector<char> buf(8192);
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0) return errno_error("cannot read the route answer");
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != seq_) continue;  // a late answer to an earlier question
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        return make_error(e->error != 0 ? -e->error : EPROTO, "no route");
      }
      if (h->nlmsg_type != RTM_NEWROUTE) continue;
      auto* r = static_cast<rtmsg*>(NLMSG_DATA(h));
      RouteAnswer out;
      out.type = r->rtm_type;
      int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*r)));
      for (auto* a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == RTA_OIF) std::memcpy(&out.oif, RTA_DATA(a), sizeof(out.oif));
      }
      return out;
    }
  }
}

}  // namespace faultline
