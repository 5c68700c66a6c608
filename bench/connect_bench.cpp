// connect() on loopback with the sockaddr programs attached to this benchmark's
// cgroup (0 rules, 10k rules that all miss, 10k rules with decisions streamed)
// against no program; and the per-syscall price of seccomp user notification
// (the universal fallback of `faultctl run syscall -- COMMAND`) against bare calls.
// Every ratio is against the baseline of the same repetition; variants are
// interleaved within each repetition.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <atomic>
#include <climits>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "base/cgroup.h"
#include "bench_util.h"
#include "faultline/sockaddr_abi.h"
#include "loader/sockaddr_object.h"
#include "userspace/net/egress_rules.h"

namespace {

using namespace flbench;
using faultline::SockaddrObject;

struct Options {
  int reps = 5;
  long udp_iters = 20000;
  long tcp_iters = 2000;
  int rules = 10000;
  long syscalls = 100000;
  int cpu = -1;
  bool seccomp = true;
  bool connect = true;  // --seccomp-only: the seccomp rows alone
  std::string summary;
  std::string json_out;  // --json FILE: the ratios, for the kernel report
  std::vector<std::pair<std::string, Spread>> ratios;
  std::string faultctl = FAULTCTL_PATH;
};

// ---- the bench's own cgroup -------------------------------------------------

// Moves this process into a fresh cgroup and back out before it is removed (the
// cgroup's destructor kills whatever is still inside: it must not be us).
class OwnCgroup {
 public:
  static std::optional<OwnCgroup> enter() {
    std::ifstream in("/proc/self/cgroup");
    std::string line, home;
    while (std::getline(in, line))
      if (line.rfind("0::", 0) == 0) home = line.substr(3);
    auto cg = faultline::ScopedCgroup::create("flbench-connect-" + std::to_string(::getpid()));
    if (!cg) {
      std::cerr << "connect bench: " << cg.error().describe() << "\n";
      return std::nullopt;
    }
    std::string mount = cg->path().substr(0, cg->path().rfind('/'));
    if (auto st = cg->join(::getpid()); !st) {
      std::cerr << "connect bench: " << st.error().describe() << "\n";
      return std::nullopt;
    }
    return OwnCgroup(std::move(*cg), mount + (home == "/" ? "" : home));
  }
  OwnCgroup(OwnCgroup&&) = default;
  ~OwnCgroup() {
    if (home_.empty()) return;
    std::ofstream procs(home_ + "/cgroup.procs");
    procs << ::getpid();
  }
  [[nodiscard]] int fd() const { return cg_.fd(); }

 private:
  OwnCgroup(faultline::ScopedCgroup cg, std::string home) : cg_(std::move(cg)), home_(std::move(home)) {}
  faultline::ScopedCgroup cg_;
  std::string home_;
};

// ---- program variants ----------------------------------------------------------

enum Variant { kNone, kDisarmed, kEmpty, kRules, kRulesEvents, kVariants };
const char* kVariantName[kVariants] = {"no program", "programs, disarmed", "programs, 0 rules", "programs, 10k rules",
                                       "10k rules, decisions streamed"};

// Deny rules that never match loopback: random /32 and /24 anywhere but 127/8.
std::vector<faultline::EgressRule> missing_rules(int n) {
  std::mt19937 rng(42);
  std::vector<faultline::EgressRule> rules;
  std::set<std::string> seen;
  while (static_cast<int>(rules.size()) < n) {
    uint32_t a = rng();
    if ((a >> 24) == 127 || (a >> 24) == 0) continue;
    bool slash24 = rules.size() % 2 == 1;
    if (slash24) a &= 0xffffff00U;
    char text[32];
    std::snprintf(text, sizeof(text), "%u.%u.%u.%u/%d", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255,
                  slash24 ? 24 : 32);
    if (!seen.insert(text).second) continue;
    auto r = faultline::parse_rule(faultline::Verdict::Deny, text);
    if (r) rules.push_back(*r);
  }
  return rules;
}

// tries: which rule tries hold rules (what load_rules returned; 0 for none).
bool write_policy(const SockaddrObject& obj, bool events, bool armed = true, uint32_t tries = 0) {
  fl_sa_policy pol{};
  pol.expires_ns = FL_SA_NO_EXPIRY;
  pol.armed = armed ? 1 : 0;  // disarmed: each program returns after one lookup (the kill switch)
  // What `faultctl guard --enforce` sets, with or without the decision stream.
  pol.flags = FL_SA_POLICY | FL_SA_ENFORCE | FL_SA_DEFAULT_ALLOW | (events ? FL_SA_EVENTS : 0) | tries;
  uint32_t zero = 0;
  return bpf_map_update_elem(obj.policy_fd(), &zero, &pol, BPF_ANY) == 0;
}

struct RingBufferFree {
  void operator()(ring_buffer* r) const { ring_buffer__free(r); }
};

// ---- loopback peers and the timed calls -------------------------------------------

struct Listener {
  int fd = -1;
  uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::thread th;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd, 4096);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    th = std::thread([this] {
      while (!stop.load()) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) ::close(c);
      }
    });
  }
  ~Listener() {
    stop = true;
    th.join();
    ::close(fd);
  }
};

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Appends the mean ns of a UDP connect() over each batch of 32 calls (a batch,
// so that the ~60 ns of reading the clock stays out of a ~1 us call); `between`
// runs untimed between batches.
template <typename Between>
void udp_connects(long iters, std::vector<double>& t, Between between) {
  constexpr int kBatch = 32;
  sockaddr_in to = loopback(9);
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  for (long done = -kBatch; done < iters; done += kBatch) {  // the first batch warms up
    int failed = 0;
    uint64_t a = mono_ns();
    for (int i = 0; i < kBatch; ++i) failed |= ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    uint64_t b = mono_ns();
    if (failed != 0) {
      std::cerr << "connect bench: UDP connect failed: " << strerror(errno) << "\n";
      std::exit(1);
    }
    if (done >= 0) t.push_back(static_cast<double>(b - a) / kBatch);
    if ((done / kBatch) % 16 == 0) between();
  }
  ::close(fd);
}

template <typename Between>
void tcp_connects(long iters, uint16_t port, std::vector<double>& t, Between between) {
  sockaddr_in to = loopback(port);
  const linger rst{1, 0};  // close with RST: no TIME_WAIT, no port exhaustion
  for (long i = 0; i < iters + 2; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint64_t a = mono_ns();
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    uint64_t b = mono_ns();
    if (rc != 0) {
      std::cerr << "connect bench: TCP connect failed: " << strerror(errno) << "\n";
      std::exit(1);
    }
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
    ::close(fd);
    if (i >= 2) t.push_back(static_cast<double>(b - a));
    if (i % 256 == 0) between();
  }
}

int bench_connect(Options& o) {
  Listener listener;  // made before we enter the cgroup: its sockets stay outside it
  cpu_set_t all;
  sched_getaffinity(0, sizeof(all), &all);
  if (o.cpu >= 0) {  // the timing thread only, after the listener thread started
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(o.cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
  struct Unpin {
    cpu_set_t set;
    ~Unpin() { sched_setaffinity(0, sizeof(set), &set); }
  } unpin{all};
  auto cg = OwnCgroup::enter();
  if (!cg) return 1;

  auto rules = missing_rules(o.rules);
  auto empty = SockaddrObject::load();
  auto ruled = SockaddrObject::load(static_cast<uint32_t>(rules.size()));
  if (!empty || !ruled) {
    std::cerr << "connect bench: " << (!empty ? empty.error() : ruled.error()).describe() << "\n";
    return 1;
  }
  uint64_t t0 = mono_ns();
  auto tries = faultline::load_rules(rules, ruled->deny_fd(), ruled->allow_fd());
  if (!tries) {
    std::cerr << "connect bench: " << tries.error().describe() << "\n";
    return 1;
  }
  std::cout << "  " << rules.size()
            << " deny rules (random /32 and /24 outside 127/8, all missing) compiled and loaded in "
            << fmt((mono_ns() - t0) / 1e9, 2) << " s\n";
  if (!write_policy(*empty, false) || !write_policy(*ruled, false, true, *tries)) {
    std::cerr << "connect bench: cannot write the policy\n";
    return 1;
  }
  long drained = 0;
  std::unique_ptr<ring_buffer, RingBufferFree> rb(ring_buffer__new(
      ruled->events_fd(),
      [](void* ctx, void*, size_t) {
        ++*static_cast<long*>(ctx);
        return 0;
      },
      &drained, nullptr));

  // Each repetition is kRounds rounds; each round runs every variant for a slice
  // of the calls, in a rotating order, so that drift on this shared machine
  // falls on every variant alike.
  constexpr int kRounds = 10;
  std::vector<double> udp[kVariants], tcp[kVariants];
  for (int rep = 0; rep < o.reps; ++rep) {
    std::vector<double> u[kVariants], t[kVariants];
    for (int round = 0; round < kRounds; ++round) {
      for (int k = 0; k < kVariants; ++k) {
        const int v = (k + round + rep) % kVariants;
        SockaddrObject* obj = (v == kEmpty || v == kDisarmed) ? &*empty : v == kNone ? nullptr : &*ruled;
        if (obj == &*empty && !write_policy(*empty, false, v == kEmpty)) return 1;
        if (obj == &*ruled && !write_policy(*ruled, v == kRulesEvents, true, *tries)) return 1;
        if (obj != nullptr) {
          if (auto st = obj->attach(cg->fd()); !st) {
            std::cerr << "connect bench: " << st.error().describe() << "\n";
            return 1;
          }
        }
        // The guard drains decisions as they come; here, untimed between calls.
        auto drain = [&] {
          if (v == kRulesEvents) ring_buffer__consume(rb.get());
        };
        udp_connects(o.udp_iters / kRounds, u[v], drain);
        tcp_connects(o.tcp_iters / kRounds, listener.port, t[v], drain);
        if (obj != nullptr) obj->detach();
      }
    }
    for (int v = 0; v < kVariants; ++v) {
      udp[v].push_back(spread(u[v]).median);
      tcp[v].push_back(spread(t[v]).median);
    }
  }

  // The programs must really have been in the path of these connects.
  auto decided = [](const SockaddrObject& obj) {
    fl_sa_stats t = faultline::sum_sa_stats(obj.stats_fd()).value_or(fl_sa_stats{});
    return std::pair{t.allowed, t.denied};
  };
  auto [e_allowed, e_denied] = decided(*empty);
  auto [r_allowed, r_denied] = decided(*ruled);
  if (e_allowed == 0 || r_allowed == 0 || e_denied + r_denied != 0) {
    std::cerr << "connect bench: the programs did not see the connects as expected (allowed " << e_allowed << " and "
              << r_allowed << ", denied " << e_denied + r_denied << ")\n";
    return 1;
  }
  std::printf("  the programs allowed %llu connects (0 rules) and %llu (10k rules), denied none\n",
              static_cast<unsigned long long>(e_allowed), static_cast<unsigned long long>(r_allowed));

  auto row = [&](const char* proto, std::vector<double>* per, int v, double target) {
    std::vector<double> ratio;
    for (int r = 0; r < o.reps; ++r) ratio.push_back(per[v][r] / per[kNone][r]);
    Spread abs = spread(per[v]), rat = spread(ratio);
    std::printf("  %-4s %-31s %18s ns   %s x\n", proto, kVariantName[v], fmt_spread(abs, 0).c_str(),
                v == kNone ? "1.00" : fmt_spread(rat, 3).c_str());
    if (v == kNone) return;
    o.ratios.emplace_back(std::string(proto) + " connect(), " + kVariantName[v] + " / no program", rat);
    std::string tgt = target > 0 ? "<= " + fmt(target, 2) + "x no program" : "-";
    append_summary(o.summary,
                   {"4 connect", std::string(proto) + " connect(), " + kVariantName[v], fmt_spread(abs, 0) + " ns",
                    fmt_spread(rat, 3) + "x", tgt, target > 0 ? verdict(rat.median <= target) : "report"});
  };
  std::printf(
      "\n  connect() on loopback from this benchmark's cgroup: median ns per call in each repetition,\n"
      "  [min-max] over %d repetitions; ratio against no program in the same repetition\n",
      o.reps);
  for (int v = 0; v < kVariants; ++v) row("UDP", udp, v, v == kRules ? 1.05 : 0);
  for (int v = 0; v < kVariants; ++v) row("TCP", tcp, v, v == kRules ? 1.05 : 0);
  std::vector<double> rules_cost;
  for (int r = 0; r < o.reps; ++r) rules_cost.push_back(udp[kRules][r] / udp[kEmpty][r]);
  std::printf("  10k rules against 0 rules (the cost of the rules themselves), UDP: %s x\n",
              fmt_spread(spread(rules_cost), 3).c_str());
  append_summary(o.summary, {"4 connect", "UDP connect(), 10k rules vs 0 rules", "-",
                             fmt_spread(spread(rules_cost), 3) + "x", "-", "report"});
  if (drained == 0) std::printf("  (note: the streamed variant delivered no decisions)\n");
  return 0;
}

// ---- seccomp user notification ---------------------------------------------------

// The helper: N calls of one syscall, timed inside, so process start-up and the
// supervisor's set-up do not count.
int syscall_loop(const std::string& name, long n) {
  long nr = name == "getppid" ? SYS_getppid : -1;
  if (nr < 0) return 2;
  for (int i = 0; i < 100; ++i) ::syscall(nr);
  uint64_t a = mono_ns();
  for (long i = 0; i < n; ++i) ::syscall(nr);
  uint64_t b = mono_ns();
  std::printf("ns_per_call %.1f\n", static_cast<double>(b - a) / static_cast<double>(n));
  return 0;
}

double run_loop(const std::vector<std::string>& argv) {
  Child c = spawn(argv, Out::Capture, /*quiet_stderr=*/true);
  std::string line, last;
  while (read_line(c.out, line, 120'000)) last = line;
  int rc = wait_child(c, 120'000);
  if (rc != 0 || last.rfind("ns_per_call ", 0) != 0) {
    std::cerr << "connect bench: the syscall helper failed (exit " << rc << "): " << last << "\n";
    return NAN;
  }
  return std::atof(last.c_str() + 12);
}

int bench_seccomp(Options& o) {
  char self[PATH_MAX] = {};
  if (::readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return 1;
  const std::string n = std::to_string(o.syscalls);
  const std::vector<std::string> helper = {self, "--syscall-loop", "getppid", n};
  auto wrapped = [&](const std::string& sc) {
    std::vector<std::string> v = {o.faultctl, "run",       "syscall", "--syscall",  sc,    "--errno",
                                  "EIO",      "--percent", "0",       "--duration", "10m", "--"};
    v.insert(v.end(), helper.begin(), helper.end());
    return v;
  };
  enum { kBare, kOther, kListed, kN };
  const char* name[kN] = {"bare", "seccomp filter, getppid not listed", "seccomp notify, getppid listed (0%)"};
  std::vector<double> ns[kN];
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int k = 0; k < kN; ++k) {
      const int v = (k + rep) % kN;
      ns[v].push_back(run_loop(v == kBare ? helper : wrapped(v == kOther ? "openat" : "getppid")));
    }
  }
  std::printf("\n  %s getppid() calls in a helper, timed inside it; median [min-max] over %d repetitions\n", n.c_str(),
              o.reps);
  for (int v = 0; v < kN; ++v) {
    std::vector<double> ratio;
    for (int r = 0; r < o.reps; ++r) ratio.push_back(ns[v][r] / ns[kBare][r]);
    Spread abs = spread(ns[v]), rat = spread(ratio);
    if (v != kBare) o.ratios.emplace_back(std::string("getppid(), ") + name[v] + " / bare", rat);
    std::printf("  %-40s %22s ns/call   %s x\n", name[v], fmt_spread(abs, 1).c_str(),
                v == kBare ? "1.00" : fmt_spread(rat, 1).c_str());
    if (v != kBare)
      append_summary(o.summary, {"4 connect", std::string("getppid(), ") + name[v], fmt_spread(abs, 1) + " ns/call",
                                 fmt_spread(rat, 1) + "x", "-", "report"});
  }
  std::vector<double> price;
  for (int r = 0; r < o.reps; ++r) price.push_back((ns[kListed][r] - ns[kBare][r]) / 1000.0);
  std::printf(
      "  price of the universal fallback: %s us per intercepted syscall (notify, wake the supervisor,\n"
      "  its answer, resume); calls the filter does not list pay only the filter\n",
      fmt_spread(spread(price), 1).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--syscall-loop") {
      std::string name = next();
      return syscall_loop(name, std::atol(next().c_str()));
    } else if (a == "--reps") {
      o.reps = std::max(3, std::atoi(next().c_str()));
    } else if (a == "--udp-iters") {
      o.udp_iters = std::max(1000L, std::atol(next().c_str()));
    } else if (a == "--tcp-iters") {
      o.tcp_iters = std::max(200L, std::atol(next().c_str()));
    } else if (a == "--rules") {
      o.rules = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--syscalls") {
      o.syscalls = std::max(1000L, std::atol(next().c_str()));
    } else if (a == "--cpu") {
      o.cpu = std::atoi(next().c_str());
    } else if (a == "--faultctl") {
      o.faultctl = next();
    } else if (a == "--summary") {
      o.summary = next();
    } else if (a == "--no-seccomp") {
      o.seccomp = false;
    } else if (a == "--seccomp-only") {
      o.connect = false;
    } else if (a == "--json") {
      o.json_out = next();
    } else {
      std::cerr
          << "usage: fl_bench_connect [--reps N>=3] [--udp-iters N] [--tcp-iters N] [--rules N] [--syscalls N]\n"
             "                        [--cpu N] [--faultctl PATH] [--summary FILE] [--no-seccomp | --seccomp-only]\n"
             "                        [--json FILE]\n";
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::cerr << "connect bench: needs root (a cgroup, cgroup BPF programs, seccomp supervision)\n";
    return 1;
  }
  std::cout << "connect() with the sockaddr programs (" << o.reps << " reps, " << o.udp_iters << " UDP and "
            << o.tcp_iters << " TCP connects per variant and rep)\n";
  int rc = o.connect ? bench_connect(o) : 0;
  if (rc == 0 && o.seccomp) rc = bench_seccomp(o);
  if (rc == 0 && !o.json_out.empty()) {
    // {"bench":"connect","reps":N,"ratios":{"UDP connect(), ... / no program":{"median":..,"min":..,"max":..}}}
    auto num = [](double v) { return std::isnan(v) ? std::string("null") : fmt(v, 3); };
    std::string j = "{\"bench\":\"connect\",\"reps\":" + std::to_string(o.reps) + ",\"ratios\":{";
    for (size_t i = 0; i < o.ratios.size(); ++i) {
      const auto& [name, r] = o.ratios[i];
      j += std::string(i ? "," : "") + "\"" + name + "\":{\"median\":" + num(r.median) + ",\"min\":" + num(r.min) +
           ",\"max\":" + num(r.max) + "}";
    }
    j += "}}\n";
    FILE* out = std::fopen(o.json_out.c_str(), "w");
    if (out == nullptr || std::fputs(j.c_str(), out) < 0) {
      std::cerr << "fl_bench_connect: cannot write " << o.json_out << "\n";
      return 1;
    }
    std::fclose(out);
  }
  return rc;
}
