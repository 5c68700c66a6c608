// Attaches the sockaddr programs in accounting-only mode and renders fl_flows.
#include "userspace/enforce/flow_top.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "base/cgroup.h"
#include "base/clock.h"
#include "faultline/sockaddr_abi.h"
#include "loader/features.h"
#include "loader/map_ops.h"
#include "loader/sockaddr_object.h"
#include "userspace/net/address.h"

namespace faultline {
namespace {

std::atomic<bool> g_stop{false};
void stop_on_signal(int) { g_stop.store(true); }

struct Row {
  std::string dest;
  std::string proto;
  fl_flow f;
};

std::vector<Row> snapshot(int flows_fd) {
  std::vector<Row> rows;
  for_each_key<fl_flow_key>(flows_fd, [&](const fl_flow_key& k) {
    fl_flow f{};
    if (bpf_map_lookup_elem(flows_fd, &k, &f) == 0) {
      rows.push_back({endpoint_text(k.addr, k.port), k.proto == 6 ? "tcp" : k.proto == 17 ? "udp" : "ip", f});
    }
  });
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.f.bytes_out + a.f.bytes_in > b.f.bytes_out + b.f.bytes_in; });
  return rows;
}

void render(const std::vector<Row>& rows, const FlowTopOptions& o, std::ostream& out, bool clear) {
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    uint64_t now = coarse_monotonic_ns();  // the clock the programs stamp flows with
    for (const auto& r : rows) {
      j.push_back({{"destination", r.dest},
                   {"proto", r.proto},
                   {"connects", r.f.connects},
                   {"bytes_out", r.f.bytes_out},
                   {"bytes_in", r.f.bytes_in},
                   {"packets_out", r.f.packets_out},
                   {"packets_in", r.f.packets_in},
                   {"last_seen_s_ago",
                    r.f.last_seen_ns && now > r.f.last_seen_ns ? (now - r.f.last_seen_ns) / 1'000'000'000ULL : 0}});
    }
    out << nlohmann::json{{"scope", o.cgroup.empty() ? "host" : o.cgroup}, {"time", wall_seconds()}, {"flows", j}}
               .dump()
        << std::endl;
    return;
  }
  if (clear) out << "\033[H\033[2J";
  out << "faultctl top — " << (o.cgroup.empty() ? "whole host" : "cgroup " + o.cgroup) << ", " << rows.size()
      << " destinations\n";
  out << std::left << std::setw(44) << "DESTINATION" << std::setw(6) << "PROTO" << std::setw(10) << "CONNECTS"
      << std::setw(14) << "SENT" << std::setw(14) << "RECEIVED"
      << "\n";
  for (size_t i = 0; i < rows.size() && i < o.rows; ++i) {
    const auto& r = rows[i];
    out << std::setw(44) << r.dest << std::setw(6) << r.proto << std::setw(10) << r.f.connects << std::setw(14)
        << r.f.bytes_out << std::setw(14) << r.f.bytes_in << "\n";
  }
  out << std::flush;
}

}  // namespace

int run_flow_top(const FlowTopOptions& o, std::ostream& out, std::ostream& err) {
  std::string path = o.cgroup.empty() ? "/" : o.cgroup;
  auto cg = open_cgroup_v2(path, "--cgroup");
  if (!cg) {
    err << "faultctl top: " << cg.error().describe() << "\n";
    return 2;
  }
  auto obj = SockaddrObject::load();
  if (!obj) {
    err << "faultctl top: " << obj.error().describe() << "\n";
    return 1;
  }
  fl_sa_policy pol{};
  pol.armed = 1;
  pol.expires_ns = FL_SA_NO_EXPIRY;  // accounting only: no rules, no injection, no events
  uint32_t zero = 0;
  if (bpf_map_update_elem(obj->policy_fd(), &zero, &pol, BPF_ANY) != 0) return 1;
  if (auto st = obj->attach(cg->fd.get()); !st) {
    err << "faultctl top: " << st.error().describe() << "\n";
    return 1;
  }
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = stop_on_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_stop.store(false);
  bool tty = !o.json && ::isatty(STDOUT_FILENO);
  uint64_t next = boottime_ns() + o.interval_ns;
  while (!g_stop.load()) {
    ::usleep(50'000);
    if (boottime_ns() < next) continue;
    render(snapshot(obj->flows_fd()), o, out, tty);
    if (o.once) break;
    next = boottime_ns() + o.interval_ns;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return 0;
}

}  // namespace faultline
