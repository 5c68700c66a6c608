// The fixture's life cycle: a private bpffs root per process, one CPU per test,
// every pin and folder removed again however the test ended.
#include "selftests/bpf/netfault_fixture.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "selftests/lib/require_root.h"
#include "userspace/faults/packet/netfault_engine.h"

namespace faultline::bpftest {

void PrintTo(Verdict v, std::ostream* os) {
  switch (v) {
    case Verdict::Pass:
      *os << "Pass(-1, TC_ACT_UNSPEC)";
      return;
    case Verdict::Ok:
      *os << "Ok(0)";
      return;
    case Verdict::Shot:
      *os << "Shot(2)";
      return;
    case Verdict::Stolen:
      *os << "Stolen(4)";
      return;
    case Verdict::Redirect:
      *os << "Redirect(7)";
      return;
  }
  *os << "unknown verdict " << static_cast<int32_t>(v);
}

FaultSpec make_spec(FaultKind kind, const std::vector<std::string>& targets) {
  FaultSpec s;
  s.kind = kind;
  s.duration_ns = 30'000'000'000ULL;
  s.percent = 100;
  s.dir_mask = FL_DIR_EGRESS;
  for (const auto& t : targets) s.targets.push_back(prefix(t));
  return s;
}

Prefix prefix(const std::string& s) {
  auto p = parse_prefix(s);
  if (!p) {
    ADD_FAILURE() << "test bug: '" << s << "' does not parse: " << p.error().describe();
    return Prefix{};
  }
  return *p;
}

const char* local_for(const std::string& remote) { return remote.find(':') != std::string::npos ? kLocal6 : kLocal4; }

Packet udp_to(const std::string& remote, uint16_t rport, size_t payload) {
  return PacketBuilder(local_for(remote), remote).udp(40000, rport).payload_size(payload).build();
}

Packet udp_from(const std::string& remote, uint16_t rport, size_t payload) {
  return PacketBuilder(remote, local_for(remote)).udp(rport, 40000).payload_size(payload).build();
}

Packet dns_query(const std::string& qname, uint16_t dport, const char* resolver) {
  return PacketBuilder(local_for(resolver), resolver).udp(40000, dport).dns(qname).build();
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

constexpr const char* kRootPrefix = "/sys/fs/bpf/fltest-bpf-";

// A test process that was killed (a timeout, say) cannot run its TearDown: remove
// the pins of any root of ours whose process is gone.
void sweep_dead_roots() {
  DIR* d = ::opendir("/sys/fs/bpf");
  if (d == nullptr) return;
  const std::string base = std::string(kRootPrefix).substr(std::strlen("/sys/fs/bpf/"));
  std::vector<std::string> dead;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(base, 0) != 0) continue;
    std::string pid = name.substr(base.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::access(("/proc/" + pid).c_str(), F_OK) != 0) dead.push_back("/sys/fs/bpf/" + name);
  }
  ::closedir(d);
  for (const auto& root : dead) {
    BpffsLayout l;
    l.root = root;
    for (const auto& name : NetfaultMaps::names()) ::unlink(l.map(name).c_str());
    remove_bpffs_dirs(l);
    remove_layout_locks(l);
  }
}

}  // namespace

void NetfaultTest::SetUp() {
  FL_REQUIRE_ROOT(
      "loading programs and running them with BPF_PROG_TEST_RUN (CAP_BPF, CAP_NET_ADMIN, "
      "CAP_SYS_ADMIN for bpffs)");
  // Loss and correlation state is per CPU: every run of a test must hit one CPU's memory.
  CPU_ZERO(&saved_affinity_);
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved_affinity_), &saved_affinity_), 0) << std::strerror(errno);
  affinity_saved_ = true;
  cpu_ = sched_getcpu();
  ASSERT_GE(cpu_, 0) << std::strerror(errno);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu_, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0)
      << "cannot pin the test to CPU " << cpu_ << ": " << std::strerror(errno);

  sweep_dead_roots();
  layout_.root = std::string(kRootPrefix) + std::to_string(::getpid());
  auto st = ensure_bpffs(layout_);
  ASSERT_TRUE(st.ok()) << st.error().describe() << " (" << st.error().where << ")";
  loaded_ = true;  // from here on TearDown has pins and folders to remove

  struct stat ns {};
  ASSERT_EQ(::stat("/proc/self/ns/net", &ns), 0) << std::strerror(errno);
  netns_ino_ = static_cast<uint32_t>(ns.st_ino);

  auto obj = NetfaultObject::load(layout_, netns_ino_, FL_EGRESS_DROP_REDIRECT);
  ASSERT_TRUE(obj.ok()) << obj.error().describe() << " (" << obj.error().where << ")";
  obj_.emplace(std::move(*obj));
  auto m = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(m.ok()) << m.error().describe();
  ASSERT_FALSE(m->created()) << "the object should have pinned the maps already";
  maps_.emplace(std::move(*m));
  auto init = initialise_maps(*maps_);
  ASSERT_TRUE(init.ok()) << init.error().describe();
  table_.emplace(*maps_);
}

void NetfaultTest::TearDown() {
  table_.reset();
  maps_.reset();
  obj_.reset();  // unloads the programs: nothing holds them any more
  if (loaded_) {
    for (const auto& name : NetfaultMaps::names()) ::unlink(layout_.map(name).c_str());
    remove_bpffs_dirs(layout_);
    remove_layout_locks(layout_);
    struct stat st {};
    EXPECT_NE(::stat(layout_.root.c_str(), &st), 0) << "left behind: " << layout_.root;
  }
  if (affinity_saved_) sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
}

void NetfaultTest::reload(uint32_t egress_drop, std::optional<uint32_t> netns_ino) {
  obj_.reset();
  auto obj = NetfaultObject::load(layout_, netns_ino.value_or(netns_ino_), egress_drop);
  ASSERT_TRUE(obj.ok()) << obj.error().describe();
  obj_.emplace(std::move(*obj));
  egress_drop_ = egress_drop == FL_EGRESS_DROP_STOLEN ? Verdict::Stolen : Verdict::Redirect;
}

uint32_t NetfaultTest::add(const FaultSpec& spec, const AddOptions& opts) {
  auto slot = table_->allocate_slot();
  if (!slot) {
    ADD_FAILURE() << "no slot: " << slot.error().describe();
    return UINT32_MAX;
  }
  CompiledFault c = compile_fault(spec, opts.netns_ino.value_or(netns_ino_), opts.ifindex, opts.cgroup_id);
  uint64_t now = boottime_ns();
  c.entry.expires_ns = opts.expires_ns.value_or(now + opts.lifetime_ns);
  if (opts.start_after_ns) c.budget.start_ns = now + opts.start_after_ns;
  fl_meta meta{};
  meta.created_ns = now;
  meta.expires_ns = c.entry.expires_ns;
  meta.owner_pid = static_cast<uint32_t>(::getpid());
  std::string json = spec.to_json().dump();
  std::strncpy(meta.spec, json.c_str(), sizeof(meta.spec) - 1);
  auto st = table_->add(*slot, c, meta);
  if (!st.ok()) {
    ADD_FAILURE() << "FaultTable::add(" << spec.summary() << ") failed: " << st.error().describe();
    return UINT32_MAX;
  }
  return *slot;
}

RunResult NetfaultTest::run(int prog_fd, const Packet& pkt, const __sk_buff* ctx_in) const {
  RunResult r;
  std::vector<uint8_t> out(pkt.bytes.size() + 256);
  __sk_buff ctx_copy{};
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt.bytes.data(), .data_out = out.data(),
              .data_size_in = static_cast<__u32>(pkt.bytes.size()), .data_size_out = static_cast<__u32>(out.size()),
              .repeat = 1);
  if (ctx_in != nullptr) {
    ctx_copy = *ctx_in;
    o.ctx_in = &ctx_copy;
    o.ctx_size_in = sizeof(ctx_copy);
    o.ctx_out = &r.ctx_out;
    o.ctx_size_out = sizeof(r.ctx_out);
  }
  r.err = bpf_prog_test_run_opts(prog_fd, &o);
  r.verdict = static_cast<Verdict>(static_cast<int32_t>(o.retval));
  out.resize(o.data_size_out);
  r.data_out = std::move(out);
  return r;
}

Verdict NetfaultTest::egress(const Packet& pkt) const {
  RunResult r = run(egress_fd(), pkt);
  EXPECT_EQ(r.err, 0) << "BPF_PROG_TEST_RUN of fl_egress on " << pkt.describe << " failed: " << std::strerror(-r.err);
  return r.verdict;
}

Verdict NetfaultTest::ingress(const Packet& pkt) const {
  RunResult r = run(ingress_fd(), pkt);
  EXPECT_EQ(r.err, 0) << "BPF_PROG_TEST_RUN of fl_ingress on " << pkt.describe << " failed: " << std::strerror(-r.err);
  return r.verdict;
}

fl_fault_stats NetfaultTest::stats(uint32_t slot) const {
  auto s = table_->stats(slot);
  if (!s) {
    ADD_FAILURE() << "cannot read the counters of slot " << slot << ": " << s.error().describe();
    return fl_fault_stats{};
  }
  return *s;
}

uint64_t NetfaultTest::reason(fl_drop_reason r) const {
  auto sum = sum_percpu<uint64_t>(maps_->reasons(), static_cast<uint32_t>(r));
  if (!sum) {
    ADD_FAILURE() << "cannot read fl_reasons[" << r << "]: " << sum.error().describe();
    return 0;
  }
  return *sum;
}

void NetfaultTest::set_armed(uint32_t armed) {
  uint32_t zero = 0;
  fl_control ctl{};
  ASSERT_EQ(bpf_map_lookup_elem(maps_->control(), &zero, &ctl), 0) << std::strerror(errno);
  ctl.armed = armed;
  ASSERT_EQ(bpf_map_update_elem(maps_->control(), &zero, &ctl, BPF_ANY), 0) << std::strerror(errno);
}

}  // namespace faultline::bpftest
