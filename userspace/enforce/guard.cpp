// The guard: cgroup, policy, programs, the command, decisions streamed, a summary.
#include "userspace/enforce/guard.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include "base/cgroup.h"
#include "base/child.h"
#include "base/clock.h"
#include "base/errno_names.h"
#include "base/exit_code.h"
#include "loader/bpffs.h"
#include "loader/map_ops.h"
#include "loader/netns.h"
#include "loader/sockaddr_object.h"
#include "userspace/net/address.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

std::atomic<int> g_forward{0};
void forward_signal(int sig) { g_forward.store(sig); }

const char* op_name(uint8_t op) {
  switch (op) {
    case FL_OP_CONNECT:
      return "connect";
    case FL_OP_SENDMSG:
      return "sendmsg";
    case FL_OP_SOCKET:
      return "socket";
    case FL_OP_BIND:
      return "bind";
    case FL_OP_EGRESS:
      return "egress";
    default:
      return "?";
  }
}

const char* proto_text(uint8_t p) { return p == 6 ? "tcp" : p == 17 ? "udp" : "ip"; }

// The fence's mode, changed while it runs: the rest of the kernel's policy
// (armed, or disarmed by faultctl abort) is kept as it is.
Status set_enforce(int policy_fd, bool enforce) {
  uint32_t zero = 0;
  fl_sa_policy pol{};
  if (bpf_map_lookup_elem(policy_fd, &zero, &pol) != 0) return errno_error("reading the kernel's policy");
  pol.flags = enforce ? (pol.flags | FL_SA_ENFORCE) : (pol.flags & ~uint32_t(FL_SA_ENFORCE));
  if (bpf_map_update_elem(policy_fd, &zero, &pol, BPF_EXIST) != 0) return errno_error("writing the kernel's policy");
  return {};
}

struct EventSink {
  const GuardOptions* opts;
  std::ostream* log;
  std::ofstream* json;
  std::set<std::tuple<uint8_t, std::string, uint8_t>> seen;  // (op, endpoint, verdict)
  std::map<std::string, uint64_t> denied;                    // endpoint -> attempts
  std::vector<std::string> exfil;
  std::map<std::string, uint64_t> redirected;  // "endpoint -> target" -> redirects reported
};

std::string rule_text(const GuardOptions& o, uint32_t id) {
  if (id == FL_SA_RULE_DEFAULT || id >= o.rules.size()) return o.default_deny ? "default deny" : "default allow";
  const auto& r = o.rules[id];
  if (!o.policy_name.empty())
    return "rule " + r.text + ": " + (r.verdict == Verdict::Allow ? "allow" : "deny") + ", policy " + o.policy_name;
  return std::string(r.verdict == Verdict::Allow ? "--allow " : "--deny ") + r.text;
}

int on_event(void* ctx, void* data, size_t size) {
  auto* sink = static_cast<EventSink*>(ctx);
  if (size < sizeof(fl_sa_event)) return 0;
  const auto* e = static_cast<const fl_sa_event*>(data);
  std::string ep = endpoint_text(e->addr, e->port);
  std::string rule = rule_text(*sink->opts, e->rule);
  std::string verdict = decision_name(e->verdict);
  if (e->verdict == FL_V_REDIRECT && e->rule < sink->opts->redirects.size()) {
    const RedirectRule& r = sink->opts->redirects[e->rule];
    rule = "rule " + std::to_string(e->rule + 1) + ": --redirect " + r.text;
    verdict = "redirect to " + r.target_text();
    sink->redirected[ep + "/" + proto_text(e->proto) + " -> " + r.target_text()]++;
  }
  if (sink->json != nullptr && sink->json->is_open()) {
    nlohmann::json j{{"op", op_name(e->op)},
                     {"destination", ep},
                     {"proto", proto_text(e->proto)},
                     {"verdict", decision_name(e->verdict)},
                     {"rule", rule},
                     {"pid", e->pid},
                     {"comm", std::string(e->comm, strnlen(e->comm, sizeof(e->comm)))}};
    // Wall clock seconds of the decision, for `faultctl policy suggest --window`.
    const uint64_t boot_now = boottime_ns();
    j["time"] =
        std::round((wall_seconds() - static_cast<double>(boot_now > e->ts_ns ? boot_now - e->ts_ns : 0) / 1e9) * 1000) /
        1000;
    if (e->verdict == FL_V_EXFIL || e->verdict == FL_V_WOULD_EXFIL) j["bytes"] = e->bytes;
    if (e->verdict == FL_V_REDIRECT && e->rule < sink->opts->redirects.size())
      j["redirect_to"] = sink->opts->redirects[e->rule].target_text();
    *sink->json << j.dump() << "\n";
  }
  if (e->verdict == FL_V_DENY || e->verdict == FL_V_WOULD_DENY) sink->denied[ep]++;
  if (e->verdict == FL_V_EXFIL || e->verdict == FL_V_WOULD_EXFIL)
    sink->exfil.push_back(ep + " after " + std::to_string(e->bytes) + " bytes" +
                          (e->verdict == FL_V_WOULD_EXFIL ? " (monitor: not dropped)" : ""));
  // One line per distinct decision; repeats are counted in the summary.
  if (!sink->seen.emplace(e->op, ep, e->verdict).second) return 0;
  // One write per line, so it does not interleave with the command's own stderr.
  std::string line =
      "faultline guard: " + std::string(op_name(e->op)) + " " + ep + "/" + proto_text(e->proto) + " -> " + verdict +
      " (" + rule + ")" +
      (e->verdict == FL_V_EXFIL || e->verdict == FL_V_WOULD_EXFIL ? " sent " + std::to_string(e->bytes) + " bytes"
                                                                  : "") +
      " pid " + std::to_string(e->pid) + " " + std::string(e->comm, strnlen(e->comm, sizeof(e->comm))) + "\n";
  *sink->log << line << std::flush;
  return 0;
}

struct RingBufferDeleter {
  void operator()(ring_buffer* r) const { ring_buffer__free(r); }
};

}  // namespace

namespace {

// Registers the guard so that status lists it and `faultctl abort gN` can
// release it, and pins its links beside the record: a guard that is killed
// leaves its hooks enforcing on the cgroup (fail closed) until the cgroup is
// empty or an operator releases them. Without a record (no state folder) the
// links stay unpinned, since nothing could find the pins again.
Result<std::optional<SessionOwner>> register_guard(const GuardOptions& opts, const ScopedCgroup& cg,
                                                   SockaddrObject& obj, std::ostream& log) {
  Session s;
  s.kind = "guard";
  s.mechanism = "guard";
  std::string what = std::string(opts.enforce ? "enforce" : "monitor") + ", default " +
                     (opts.default_deny ? "deny" : "allow") + ", " + std::to_string(opts.rules.size()) + " rule" +
                     (opts.rules.size() == 1 ? "" : "s");
  if (!opts.redirects.empty()) what += ", " + std::to_string(opts.redirects.size()) + " redirect";
  if (opts.exfil_cap) what += ", exfil cap " + std::to_string(opts.exfil_cap) + " B";
  if (!opts.netns.empty()) what += ", netns " + opts.netns;
  if (!opts.policy_name.empty()) what += ", policy " + opts.policy_name;
  s.summary = what + ", command " + opts.command[0];
  s.policy_map_id = map_id_of(obj.policy_fd());
  s.stats_map_id = map_id_of(obj.stats_fd());
  // The name below the hierarchy root, which every faultctl resolves in its own
  // view (the mount point differs under `ip netns exec` and in containers).
  s.cgroup = cgroup_v2_name(cg.path());
  auto session = register_session(std::move(s), log);
  if (!session) return session;
  const std::string dir = guard_pin_dir(session->id());
  // Inside `ip netns exec` or a container /sys/fs/bpf may be missing from our
  // view: then the pins go to a bpffs of this mount namespace, which the
  // command (in it too) keeps alive, so a kill still leaves the hooks on.
  if (auto st = ensure_pin_root(dir); !st)
    return make_error(st.error().err, st.error().describe() + ": a guard that a kill would lift is not started");
  const std::string guards = dir.substr(0, dir.rfind('/'));
  ::mkdir(guards.substr(0, guards.rfind('/')).c_str(), 0700);
  ::mkdir(guards.c_str(), 0700);
  if (auto st = obj.pin_links(dir); !st)
    return make_error(st.error().err, st.error().describe() + ": a guard that a kill would lift is not started");
  session->session().pin_dir = dir;
  session->session().pin_mnt_ns = own_mount_ns();
  if (auto st = session->save(); !st) {
    obj.unpin_links();
    (void)remove_guard_pins(dir);
    return st.error();
  }
  return session;
}

}  // namespace

int Guard::run() {
  // First, so that a bad --netns leaves nothing made.
  NetnsRef netns;
  if (!opts_.netns.empty()) {
    auto ns = resolve_netns(opts_.netns);
    if (!ns) {
      log_ << "faultctl guard: " << ns.error().message << "\n";
      return kExitBadInput;
    }
    netns = *ns;
  }
  auto cg = ScopedCgroup::create("faultline-guard-" + std::to_string(::getpid()));
  if (!cg) {
    log_ << "faultctl guard: " << cg.error().describe() << "\n";
    return 1;
  }
  std::optional<CgroupLimits> limits;
  if (opts_.limits.any()) {
    auto l = CgroupLimits::apply(opts_.limits, cg->path(), "faultline-guard-" + std::to_string(::getpid()));
    if (!l) {
      log_ << "faultctl guard: " << l.error().describe() << "\n";
      return 1;
    }
    limits.emplace(std::move(*l));
    log_ << ("faultline guard: limits: " + limits->describe() + "\n") << std::flush;  // one write
  }
  auto obj = SockaddrObject::load(static_cast<uint32_t>(opts_.rules.size()));
  if (!obj) {
    log_ << "faultctl guard: " << obj.error().describe() << "\n";
    return 1;
  }
  fl_sa_policy pol{};
  pol.expires_ns = FL_SA_NO_EXPIRY;  // lives as long as this process holds the links
  pol.armed = 1;
  pol.flags = FL_SA_POLICY | FL_SA_EVENTS | (opts_.enforce ? FL_SA_ENFORCE : 0) |
              (opts_.default_deny ? 0 : FL_SA_DEFAULT_ALLOW) | (opts_.redirects.empty() ? 0 : FL_SA_REDIRECT);
  pol.deny_errno = static_cast<uint32_t>(opts_.deny_errno);
  pol.exfil_cap = opts_.exfil_cap;
  auto tries = load_rules(opts_.rules, obj->deny_fd(), obj->allow_fd());
  if (!tries) {
    log_ << "faultctl guard: " << tries.error().describe() << "\n";
    return 1;
  }
  pol.flags |= *tries;
  uint32_t zero = 0;
  if (bpf_map_update_elem(obj->policy_fd(), &zero, &pol, BPF_ANY) != 0) {
    log_ << "faultctl guard: cannot write the policy: " << strerror(errno) << "\n";
    return 1;
  }
  if (auto st = load_redirects(opts_.redirects, obj->redirect_fd()); !st) {
    log_ << "faultctl guard: " << st.error().describe() << "\n";
    return 1;
  }
  if (auto st = obj->attach(cg->fd(), !opts_.redirects.empty()); !st) {
    log_ << "faultctl guard: " << st.error().describe() << "\n";
    return 1;
  }
  std::ofstream json;
  if (!opts_.json_log.empty()) {
    json.open(opts_.json_log, std::ios::app);
    if (!json) {
      log_ << "faultctl guard: --json-log " << opts_.json_log << ": cannot open for writing\n";
      return 1;
    }
  }
  EventSink sink{&opts_, &log_, &json, {}, {}, {}, {}};
  std::unique_ptr<ring_buffer, RingBufferDeleter> rb(ring_buffer__new(obj->events_fd(), on_event, &sink, nullptr));
  if (!rb) {
    log_ << "faultctl guard: cannot open the decision ring buffer\n";
    return 1;
  }

  auto registered = register_guard(opts_, *cg, *obj, log_);
  if (!registered) {
    log_ << "faultctl guard: " << registered.error().describe() << "\n";
    return 1;
  }
  std::optional<SessionOwner> session = std::move(*registered);
  // Whatever way this function returns, the pins go before the record.
  struct Unpin {
    SockaddrObject& obj;
    std::optional<SessionOwner>& session;
    ~Unpin() {
      if (session && !session->session().pin_dir.empty()) {
        obj.unpin_links();
        (void)remove_guard_pins(session->session().pin_dir);
        session->end();
      }
    }
  } unpin{*obj, session};

  // Built before the fork (the child must not allocate).
  std::unique_ptr<ChildEnvironment> child_env;
  if (!opts_.env.empty()) child_env = std::make_unique<ChildEnvironment>(opts_.env);
  // The command waits on a pipe until it is in the cgroup: nothing may escape it.
  // With --netns it is forked from inside that namespace, and the cgroup hooks
  // judge its sockets there as anywhere.
  auto held = [&]() -> Result<HeldChild> {
    std::optional<NetnsEnter> in_ns;
    if (!netns.path.empty()) {
      auto e = NetnsEnter::enter(netns);
      if (!e) return e.error();
      in_ns.emplace(std::move(*e));
    }
    std::function<bool()> prepare;
    if (child_env || opts_.before_exec)
      prepare = [env = child_env.get(), &before = opts_.before_exec] {
        if (env != nullptr) env->apply();
        return !before || before();
      };
    return HeldChild::spawn(opts_.command, prepare, "faultctl guard");
  }();
  if (!held) {
    log_ << "faultctl guard: " << held.error().describe() << "\n";
    return 1;
  }
  const pid_t child = held->pid();
  if (opts_.forked) opts_.forked(child);
  if (auto st = cg->join(child); !st) {
    log_ << "faultctl guard: " << st.error().describe() << "\n";
    return 1;  // the held child is killed and reaped with `held`
  }
  if (limits) {
    if (auto st = limits->join(child); !st) {
      log_ << "faultctl guard: limits: " << st.error().describe() << "\n";
      return 1;
    }
  }
  // Forward signals from before the command runs: a SIGTERM that came before the
  // handler would kill the guard alone, leaving the command running unguarded
  // and its cgroup behind.
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = forward_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  if (auto st = held->release(); !st) {
    log_ << "faultctl guard: " << st.error().describe() << "\n";
    return 1;
  }
  if (session) {
    session->session().summary += " pid " + std::to_string(child);
    (void)session->save();
  }
  bool released = false;
  bool mode_changed = false;
  bool fence_revoked = false;
  int exit_code = 1;
  for (;;) {
    ring_buffer__poll(rb.get(), 100);
    if (opts_.enforce_now && !released && !fence_revoked) {  // a revoked fence stays revoked
      if (const bool want = opts_.enforce_now(); want != opts_.enforce) {
        if (auto st = set_enforce(obj->policy_fd(), want); !st) {
          log_ << "faultline guard: the kernel fence cannot follow the policy to " << (want ? "enforce" : "monitor")
               << ": " << st.error().describe() << "\n";
        } else {
          log_ << "faultline guard: the kernel fence follows the policy: "
               << (want ? "enforce: egress outside the proxy (UDP, other protocols) is refused\n"
                        : "monitor: egress outside the proxy is logged as would-deny\n")
               << std::flush;
        }
        opts_.enforce = want;  // asked again only when the policy changes again
        mode_changed = true;
      }
    }
    if (int sig = g_forward.exchange(0); sig != 0) ::kill(child, sig);
    if (opts_.tick && opts_.tick(child) && !fence_revoked) {
      fence_revoked = true;
      fl_sa_policy revoked = pol;
      revoked.flags = FL_SA_POLICY | FL_SA_EVENTS | FL_SA_ENFORCE;  // default deny, no rule, no redirect
      if (bpf_map_update_elem(obj->policy_fd(), &zero, &revoked, BPF_ANY) == 0)
        log_ << "faultline guard: the kernel fence is revoked: every connect and send of the command's cgroup is "
                "refused\n"
             << std::flush;
      else
        log_ << "faultline guard: the kernel fence could not be revoked: " << strerror(errno) << "\n" << std::flush;
    }
    if (!released && session && session->abort_requested()) {
      // `faultctl abort` has disarmed the policy in the kernel; let go of the hooks too.
      released = true;
      obj->unpin_links();
      (void)remove_guard_pins(session->session().pin_dir);
      obj->detach();
      session->end();
      log_ << "faultline guard: released by faultctl abort: " << opts_.command[0] << " runs on unguarded\n"
           << std::flush;
    }
    if (auto code = held->poll_exit()) {
      exit_code = *code;
      break;
    }
  }
  ring_buffer__consume(rb.get());
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  // Summary: what the command reached, and what was (or would have been) refused.
  struct Row {
    std::string ep;
    fl_flow f;
  };
  std::vector<Row> rows;
  for_each_key<fl_flow_key>(obj->flows_fd(), [&](const fl_flow_key& k) {
    fl_flow f{};
    if (bpf_map_lookup_elem(obj->flows_fd(), &k, &f) == 0)
      rows.push_back({endpoint_text(k.addr, k.port) + "/" + proto_text(k.proto), f});
  });
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.f.bytes_out > b.f.bytes_out; });
  fl_sa_stats total = sum_sa_stats(obj->stats_fd()).value_or(fl_sa_stats{});
  log_ << "faultline guard: summary (" << (opts_.enforce ? "enforce" : "monitor") << ", default "
       << (opts_.default_deny ? "deny" : "allow") << (released ? ", released early by faultctl abort" : "") << ")\n";
  log_ << "  destinations reached: " << rows.size() << "\n";
  for (const auto& r : rows) {
    log_ << "    " << r.ep << "  connects " << r.f.connects << "  sent " << r.f.bytes_out << " B  received "
         << r.f.bytes_in << " B" << (r.f.capped ? "  (exfil cap hit)" : "") << "\n";
  }
  if (mode_changed) {
    // Both modes ran: each count is its own.
    log_ << "  denied (while enforcing): " << total.denied << " attempts\n"
         << "  would have been denied (while monitoring): " << total.would_deny << " attempts\n";
  } else {
    log_ << "  " << (opts_.enforce ? "denied" : "would have been denied") << ": "
         << (opts_.enforce ? total.denied : total.would_deny) << " attempts\n";
  }
  for (const auto& [ep, n] : sink.denied) log_ << "    " << ep << "  x" << n << "\n";
  if (auto hits = obj->rule_hits(); hits && !opts_.rules.empty()) {
    log_ << "  rules (calls each decided):\n";
    for (size_t i = 0; i < opts_.rules.size() && i < hits->size(); ++i)
      log_ << "    " << rule_text(opts_, static_cast<uint16_t>(i)) << "  " << (*hits)[i] << "\n";
  }
  if (!opts_.redirects.empty()) log_ << "  redirected: " << total.redirected << " calls\n";
  for (const auto& [what, n] : sink.redirected) log_ << "    " << what << "  x" << n << "\n";
  for (const auto& e : sink.exfil) log_ << "  exfil cap: " << e << "\n";
  if (total.exfil_dropped) log_ << "  packets dropped by the exfil cap: " << total.exfil_dropped << "\n";
  if (limits) {
    const std::string hits = limits->hits();
    log_ << "  limits: " << (hits.empty() ? "none reached" : hits) << "\n";
  }
  if (total.events_lost) log_ << "  decisions not reported (ring buffer full): " << total.events_lost << "\n";
  obj->detach();
  return exit_code;
}

}  // namespace faultline
