// fl_bench_progrun: per-packet cost of the real netfault egress program under
// BPF_PROG_TEST_RUN, for a non-matching IPv4 UDP packet, against an empty tc
// program measured in the same repetitions.
//
// --quick (the in-guest run of scripts/vmtest.sh, under emulation): indexes up to
// 100k only, 9 repetitions of 200k, no step-by-step or random-key programs. --json FILE
// writes the ratios to the empty program (median, min, max over the repetitions).
//
// Every index size gets its own loaded program instance bound to its own
// fl_exact / fl_prefix maps and its own fl_control / fl_exact_bloom summarising them
// (all other maps are shared), all pinned under a
// private root /sys/fs/bpf/flbench-<pid> that is removed at exit. So sizes are
// interleaved within each repetition without refilling a million entries.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "bench/bench_util.h"
#include "bench_progs.skel.h"
#include "loader/bpffs.h"
#include "loader/netfault_maps.h"
#include "loader/netfault_object.h"
#include "userspace/faults/packet/netfault_engine.h"

using namespace faultline;
using namespace flbench;

namespace {

constexpr uint16_t kFlowdropSlot = 10000;    // CIDR faults use slots 0..9999
constexpr uint32_t kCidrCount = 10000;       // must match FLB_CIDR_COUNT in bench_progs.bpf.c
constexpr uint32_t kExactBase = 0x0a800000;  // 10.128.0.0: exact entries count up from here
constexpr uint32_t kCidrBase = 0x0a000000;   // 10.0.0.0/24, 10.0.2.0/25, ... (every other /24)
constexpr uint32_t kCidrLens = 4;            // prefix i is /(24 + i % 4): four distinct lengths
constexpr uint32_t kProbeDst = 0x0a000107;   // 10.0.1.7: in a gap of the CIDR set, not exact

std::string g_root;  // /sys/fs/bpf/flbench-<pid>

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    }
    closedir(d);
    for (const auto& n : names) {
      std::string p = dir + "/" + n;
      struct stat st {};
      if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        remove_tree(p);
      else
        unlink(p.c_str());
    }
  }
  rmdir(dir.c_str());
}

void cleanup() {
  if (!g_root.empty()) remove_tree(g_root);
}

void on_signal(int) {
  cleanup();
  _exit(130);
}

fl_addr v4_mapped(uint32_t host_order) {
  fl_addr a{};
  a.b[10] = a.b[11] = 0xFF;
  uint32_t be = htonl(host_order);
  std::memcpy(a.b + 12, &be, 4);
  return a;
}

// Ethernet + IPv4 + UDP, 198.18.0.1:40000 -> 10.0.1.7:9000, 60 bytes.
std::vector<uint8_t> probe_packet() {
  std::vector<uint8_t> p(60, 0);
  const uint8_t dst_mac[6] = {0x02, 0, 0, 0, 0, 2}, src_mac[6] = {0x02, 0, 0, 0, 0, 1};
  std::memcpy(&p[0], dst_mac, 6);
  std::memcpy(&p[6], src_mac, 6);
  p[12] = 0x08;
  p[13] = 0x00;
  uint8_t* ip = &p[14];
  ip[0] = 0x45;
  uint16_t tot = htons(60 - 14);
  std::memcpy(ip + 2, &tot, 2);
  ip[8] = 64;
  ip[9] = 17;  // UDP
  uint32_t src = htonl(0xc6120001), dst = htonl(kProbeDst);
  std::memcpy(ip + 12, &src, 4);
  std::memcpy(ip + 16, &dst, 4);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  uint16_t csum = htons(static_cast<uint16_t>(~sum));
  std::memcpy(ip + 10, &csum, 2);
  uint8_t* udp = ip + 20;
  uint16_t sport = htons(40000), dport = htons(9000), ulen = htons(60 - 34);
  std::memcpy(udp, &sport, 2);
  std::memcpy(udp + 2, &dport, 2);
  std::memcpy(udp + 4, &ulen, 2);
  return p;
}

[[noreturn]] void die(const std::string& what, const Error& e) {
  std::cerr << "fl_bench_progrun: " << what << ": " << e.describe() << "\n";
  cleanup();
  std::exit(1);
}

[[noreturn]] void die_errno(const std::string& what) { die(what, errno_error("")); }

struct Config {
  std::string key;                      // directory name
  std::string label;                    // what the table says
  uint32_t exact = 0;                   // flowdrop addresses in fl_exact
  uint32_t cidr = 0;                    // /24../27 faults in fl_prefix
  bool force_trie = false;              // its control does not vouch for the hash mirror: the trie walk (as before it)
  std::string exact_from, prefix_from;  // reuse another config's filled map
  BpffsLayout layout;
  std::optional<NetfaultObject> obj;
  bench_progs* helper = nullptr;
  bool stages = false;  // also measure the step-by-step programs here
};

struct Deleter {
  void operator()(bench_progs* s) const { bench_progs__destroy(s); }
};

bench_progs* load_helper(const BpffsLayout& layout) {
  std::string pins = layout.maps();
  LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pins.c_str());
  bench_progs* s = bench_progs__open_opts(&opts);
  if (s == nullptr) die_errno("cannot open the bench helper object");
  if (int err = bench_progs__load(s); err != 0) die("cannot load the bench helper programs", make_error(err, ""));
  return s;
}

double populate_exact(int fd, uint32_t n) {
  uint64_t t0 = mono_ns();
  const uint32_t chunk = 65536;
  std::vector<fl_addr> keys(chunk);
  std::vector<fl_bucket> vals(chunk);
  for (auto& b : vals) {
    b = fl_bucket{};
    b.slot[0] = kFlowdropSlot;
    b.plen[0] = 128;
    b.n = 1;
  }
  for (uint32_t i = 0; i < n; i += chunk) {
    uint32_t m = std::min(chunk, n - i);
    for (uint32_t j = 0; j < m; ++j) keys[j] = v4_mapped(kExactBase + i + j);
    uint32_t count = m;
    LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
    if (bpf_map_update_batch(fd, keys.data(), vals.data(), &count, &o) != 0 || count != m)
      die_errno("bpf_map_update_batch on fl_exact");
  }
  return (mono_ns() - t0) / 1e6;
}

double populate_cidr(int fd, uint32_t n) {
  uint64_t t0 = mono_ns();
  std::vector<fl_lpm_key> keys(n);
  std::vector<fl_bucket> vals(n);
  for (uint32_t i = 0; i < n; ++i) {
    // Each starts an even /24, so the odd /24s (the probe, the random keys) match none.
    keys[i].prefixlen = 96 + 24 + i % kCidrLens;
    keys[i].addr = v4_mapped(kCidrBase + (i << 9));
    vals[i] = fl_bucket{};
    vals[i].slot[0] = static_cast<uint16_t>(i);
    vals[i].plen[0] = static_cast<uint8_t>(keys[i].prefixlen);
    vals[i].n = 1;
  }
  uint32_t count = n;
  LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
  if (bpf_map_update_batch(fd, keys.data(), vals.data(), &count, &o) != 0) {
    // LPM tries may not take batches: one update each (10k x ~2 us).
    for (uint32_t i = 0; i < n; ++i) {
      if (bpf_map_update_elem(fd, &keys[i], &vals[i], BPF_ANY) != 0) die_errno("updating fl_prefix");
    }
  }
  return (mono_ns() - t0) / 1e6;
}

// Map writes, as ratios within each repetition so emulation speed cancels out:
// one bpf_map_update_elem() per entry against a getppid() (the cost of a plain
// syscall), and filling a hash map of fl_exact's shape one call per entry
// against one bpf_map_update_batch() (per entry both).
struct MapFillRatios {
  Spread update_vs_syscall, single_vs_batch;
};

MapFillRatios map_fill_ratios(int reps, uint32_t n) {
  LIBBPF_OPTS(bpf_map_create_opts, mo);
  const int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "flb_fill", sizeof(fl_addr), sizeof(fl_bucket), n, &mo);
  if (fd < 0) die_errno("creating the map-fill hash map");
  std::vector<fl_addr> keys(n);
  std::vector<fl_bucket> vals(n, fl_bucket{});
  for (uint32_t i = 0; i < n; ++i) keys[i] = v4_mapped(kExactBase + i);
  std::vector<double> update_vs_syscall, single_vs_batch;
  for (int r = 0; r < reps; ++r) {
    uint64_t t0 = thread_cpu_ns();
    for (uint32_t i = 0; i < n; ++i) (void)getppid();
    const double syscall_ns = static_cast<double>(thread_cpu_ns() - t0) / n;
    t0 = thread_cpu_ns();
    for (uint32_t i = 0; i < n; ++i) {
      if (bpf_map_update_elem(fd, &keys[i], &vals[i], BPF_ANY) != 0) die_errno("bpf_map_update_elem (map fill)");
    }
    const double single_ns = static_cast<double>(thread_cpu_ns() - t0) / n;
    for (uint32_t i = 0; i < n; ++i) (void)bpf_map_delete_elem(fd, &keys[i]);
    uint32_t count = n;
    LIBBPF_OPTS(bpf_map_batch_opts, bo, .elem_flags = BPF_ANY);
    t0 = thread_cpu_ns();
    if (bpf_map_update_batch(fd, keys.data(), vals.data(), &count, &bo) != 0 || count != n)
      die_errno("bpf_map_update_batch (map fill)");
    const double batch_ns = static_cast<double>(thread_cpu_ns() - t0) / n;
    for (uint32_t i = 0; i < n; ++i) (void)bpf_map_delete_elem(fd, &keys[i]);
    update_vs_syscall.push_back(single_ns / syscall_ns);
    single_vs_batch.push_back(single_ns / batch_ns);
  }
  close(fd);
  return {spread(update_vs_syscall), spread(single_vs_batch)};
}

struct RunResult {
  double cpu_ns = NAN;     // thread CPU time of the syscall / repeat
  uint32_t kernel_ns = 0;  // the kernel's own average (integer ns, excludes reschedules)
  int retval = 0;
};

RunResult test_run(int prog_fd, const std::vector<uint8_t>& pkt, uint32_t repeat) {
  std::vector<uint8_t> copy = pkt;
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = copy.data(), .data_size_in = static_cast<uint32_t>(copy.size()),
              .repeat = static_cast<int>(repeat));
  uint64_t c0 = thread_cpu_ns();
  int err = bpf_prog_test_run_opts(prog_fd, &o);
  uint64_t c1 = thread_cpu_ns();
  if (err != 0) die_errno("BPF_PROG_TEST_RUN");
  RunResult r;
  r.cpu_ns = static_cast<double>(c1 - c0) / repeat;
  r.kernel_ns = o.duration;
  r.retval = static_cast<int>(o.retval);
  return r;
}

uint32_t netns_inode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return 0;
  return static_cast<uint32_t>(st.st_ino);
}

void pin_shared(const BpffsLayout& from, const BpffsLayout& to, const std::string& name) {
  int fd = bpf_obj_get(from.map(name).c_str());
  if (fd < 0) die_errno("cannot open " + from.map(name));
  if (bpf_obj_pin(fd, to.map(name).c_str()) != 0) die_errno("cannot pin " + to.map(name));
  close(fd);
}

std::string signed_fmt(double v) { return (v >= 0 ? "+" : "") + fmt(v, 1); }

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

int main(int argc, char** argv) {
  std::string summary;
  int reps = 5;
  uint32_t repeat = 500'000, rand_repeat = 100'000;
  bool random_keys = true;
  bool quick = false;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--summary")
      summary = next();
    else if (a == "--reps")
      reps = std::max(3, std::atoi(next().c_str()));
    else if (a == "--repeat")
      repeat = static_cast<uint32_t>(std::atol(next().c_str()));
    else if (a == "--rand-repeat")
      rand_repeat = static_cast<uint32_t>(std::atol(next().c_str()));
    else if (a == "--no-random")
      random_keys = false;
    else if (a == "--quick")
      quick = true;
    else if (a == "--json")
      json_out = next();
    else if (a == "--root")
      g_root = next();
    else {
      std::cerr
          << "usage: fl_bench_progrun [--root /sys/fs/bpf/flbench-PID] [--summary FILE] [--reps N>=3] [--repeat N]\n"
             "       [--rand-repeat N] [--no-random] [--quick] [--json FILE]\n";
      return 2;
    }
  }
  if (quick) {
    // Under emulation a repetition is descheduled now and then: more, longer
    // repetitions keep the median ratio steady.
    reps = 9;
    repeat = std::min<uint32_t>(repeat, 200'000);
    random_keys = false;
  }
  if (geteuid() != 0) {
    std::cerr << "fl_bench_progrun: needs root (BPF)\n";
    return 1;
  }
  libbpf_set_print(nullptr);
  if (g_root.empty()) g_root = "/sys/fs/bpf/flbench-" + std::to_string(getpid());
  if (g_root.rfind("/sys/fs/bpf/", 0) != 0) {
    std::cerr << "fl_bench_progrun: --root must be under /sys/fs/bpf\n";
    return 2;
  }
  {
    struct stat st {};
    if (stat(g_root.c_str(), &st) == 0) {
      std::cerr << "fl_bench_progrun: " << g_root << " already exists; not touching it\n";
      g_root.clear();
      return 1;
    }
  }
  std::atexit(cleanup);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);

  const uint32_t ino = netns_inode();
  BpffsLayout base{g_root};
  if (auto st = ensure_bpffs(base); !st) die("bpffs", st.error());

  // The shared state: every map, armed, the fault slots filled.
  auto base_obj = NetfaultObject::load(base, ino, FL_EGRESS_DROP_REDIRECT);
  if (!base_obj) die("loading netfault", base_obj.error());
  {
    auto maps = NetfaultMaps::open(base, false);
    if (!maps) die("opening pins", maps.error());
    if (auto st = initialise_maps(*maps); !st) die("initialise_maps", st.error());
    const uint64_t expires = boottime_ns() + 3600ULL * 1'000'000'000ULL;
    FaultSpec fd;
    fd.kind = FaultKind::Flowdrop;
    fd.targets = {*parse_prefix("10.128.0.0")};
    fd.duration_ns = 3600ULL * 1'000'000'000ULL;
    CompiledFault flowdrop = compile_fault(fd, ino, 0, 0);
    flowdrop.entry.expires_ns = expires;
    uint32_t slot = kFlowdropSlot;
    if (bpf_map_update_elem(maps->faults(), &slot, &flowdrop.entry, BPF_ANY) != 0)
      die_errno("writing the flowdrop slot");
    FaultSpec part;
    part.kind = FaultKind::Partition;
    part.targets = {*parse_prefix("10.0.0.0/24")};
    part.duration_ns = fd.duration_ns;
    CompiledFault partition = compile_fault(part, ino, 0, 0);
    partition.entry.expires_ns = expires;
    std::vector<uint32_t> slots(kCidrCount);
    std::vector<fl_fault> entries(kCidrCount, partition.entry);
    for (uint32_t i = 0; i < kCidrCount; ++i) slots[i] = i;
    uint32_t count = kCidrCount;
    LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
    if (bpf_map_update_batch(maps->faults(), slots.data(), entries.data(), &count, &o) != 0)
      die_errno("writing CIDR slots");
  }

  std::vector<Config> cfgs;
  cfgs.reserve(8);
  auto config = [&](const char* key, const char* label, uint32_t exact, uint32_t cidr, const char* exact_from,
                    const char* prefix_from, bool stages) {
    Config c;
    c.key = key;
    c.label = label;
    c.exact = exact;
    c.cidr = cidr;
    c.exact_from = exact_from;
    c.prefix_from = prefix_from;
    c.stages = stages;
    cfgs.push_back(std::move(c));
  };
  config("e0", "exact 0", 0, 0, "", "", false);
  config("e10", "exact 10", 10, 0, "", "", !quick);
  config("e1k", "exact 1k", 1000, 0, "", "", false);
  config("e100k", "exact 100k", 100'000, 0, "", "", !quick);
  if (!quick) {
    config("e1M", "exact 1M", 1'000'000, 0, "", "", false);
    config("c10k", "cidr 10k, 4 lengths", 0, kCidrCount, "e0", "", false);
    // The same prefixes looked up by walking the trie, as every lookup did before the hash mirror.
    config("c10kt", "cidr 10k, trie walk", 0, kCidrCount, "e0", "c10k", false);
    cfgs.back().force_trie = true;
    config("e1Mc10k", "exact 1M + cidr 10k", 1'000'000, kCidrCount, "e1M", "c10k", true);
  }
  std::map<std::string, Config*> by_key;
  std::cout << "populating the indexes (bpf_map_update_batch):\n";
  for (auto& c : cfgs) {
    c.layout = BpffsLayout{g_root + "/" + c.key};
    if (auto st = ensure_bpffs(c.layout); !st) die("bpffs", st.error());
    for (const auto& name : NetfaultMaps::names()) {
      if (name == "fl_exact" && c.exact_from.empty()) continue;
      const bool prefix_map =
          name == "fl_prefix" || name == "fl_prefix_hash" || name == "fl_prefix_lens" || name == "fl_prefix_bloom";
      if (prefix_map && c.prefix_from.empty()) continue;
      // Each config's control and filter speak for its own indexes.
      if (name == "fl_control" || name == "fl_exact_bloom") continue;
      const BpffsLayout& from = name == "fl_exact" ? by_key.at(c.exact_from)->layout
                                : prefix_map       ? by_key.at(c.prefix_from)->layout
                                                   : base;
      pin_shared(from, c.layout, name);
    }
    auto obj = NetfaultObject::load(c.layout, ino, FL_EGRESS_DROP_REDIRECT);
    if (!obj) die("loading netfault for " + c.label, obj.error());
    c.obj.emplace(std::move(*obj));
    if (c.exact > 0 && c.exact_from.empty()) {
      int fd = bpf_obj_get(c.layout.map("fl_exact").c_str());
      double ms = populate_exact(fd, c.exact);
      close(fd);
      std::cout << "  " << pad(c.label, 22) << c.exact << " exact entries in " << fmt(ms, 1) << " ms\n";
    }
    if (c.cidr > 0 && c.prefix_from.empty()) {
      int fd = bpf_obj_get(c.layout.map("fl_prefix").c_str());
      double ms = populate_cidr(fd, c.cidr);
      close(fd);
      std::cout << "  " << pad(c.label, 22) << c.cidr << " prefixes (/24 to /27) in " << fmt(ms, 1) << " ms\n";
    }
    {
      // Armed, and the index bits and exact-address filter of this config's
      // indexes, as faultctl would leave them.
      auto maps = NetfaultMaps::open(c.layout, false);
      if (!maps) die("opening pins of " + c.label, maps.error());
      if (auto st = initialise_maps(*maps); !st) die("initialise_maps for " + c.label, st.error());
      uint64_t t0 = mono_ns();
      if (auto st = FaultTable(*maps).summarise_indexes(); !st)
        die("summarising the indexes of " + c.label, st.error());
      if ((c.exact > 0 && c.exact_from.empty()) || (c.cidr > 0 && c.prefix_from.empty()))
        std::cout << "  " << pad(c.label, 22) << "index summary (filter and prefix mirror rebuilt from every key) in "
                  << fmt((mono_ns() - t0) / 1e6, 1) << " ms\n";
      if (c.force_trie) {
        uint32_t zero = 0;
        fl_control ctl{};
        if (bpf_map_lookup_elem(maps->control(), &zero, &ctl) != 0) die_errno("reading the control map");
        ctl.index &= ~FL_IDX_PREFIX_HASH;
        if (bpf_map_update_elem(maps->control(), &zero, &ctl, BPF_ANY) != 0) die_errno("writing the control map");
      }
    }
    c.helper = load_helper(c.layout);
    int egress = c.obj->egress_fd();
    uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(c.helper->maps.flb_next), &zero, &egress, BPF_ANY) != 0)
      die_errno("filling the tail-call slot");
    by_key[c.key] = &c;
  }
  // Random-key baseline: the same wrapper tail-calling the empty program.
  std::unique_ptr<bench_progs, Deleter> rand_base(load_helper(cfgs[0].layout));

  // The empty tc program: r0 = -1; exit.
  const bpf_insn empty_insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, -1},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  int empty = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "flb_empty", "GPL", empty_insns, 2, nullptr);
  if (empty < 0) die_errno("loading the empty tc program");
  {
    uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(rand_base->maps.flb_next), &zero, &empty, BPF_ANY) != 0)
      die_errno("filling the baseline tail-call slot");
  }

  // What is measured, interleaved in every repetition (order rotated per rep).
  struct Probe {
    std::string id;
    int fd;
    uint32_t repeat;
  };
  std::vector<Probe> probes;
  probes.push_back({"empty", empty, repeat});
  for (auto& c : cfgs) probes.push_back({"hot:" + c.key, c.obj->egress_fd(), repeat});
  for (auto& c : cfgs) {
    if (!c.stages) continue;
    probes.push_back({"stage1:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_ctl), repeat});
    probes.push_back({"stage2:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_parse), repeat});
    probes.push_back({"stage3:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_exact), repeat});
    probes.push_back({"stage4:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_prefix), repeat});
    probes.push_back({"parse_direct:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_parse_direct), repeat});
    probes.push_back({"parse_clock:" + c.key, bpf_program__fd(c.helper->progs.flb_stage_parse_clock), repeat});
  }
  if (random_keys) {
    probes.push_back({"randbase", bpf_program__fd(rand_base->progs.flb_rand_dst), rand_repeat});
    for (auto& c : cfgs)
      probes.push_back({"rand:" + c.key, bpf_program__fd(c.helper->progs.flb_rand_dst), rand_repeat});
  }

  const auto pkt = probe_packet();
  // Warm-up, and a check that nothing matches (every program must pass: -1).
  for (const auto& p : probes) {
    auto r = test_run(p.fd, pkt, 1000);
    if (r.retval != -1) {
      std::cerr << "fl_bench_progrun: " << p.id << " returned " << r.retval
                << " for the probe packet; expected -1 (no match)\n";
      return 1;
    }
  }
  std::map<std::string, std::vector<double>> cpu, kern;
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t k = 0; k < probes.size(); ++k) {
      const auto& p = probes[(k + static_cast<size_t>(rep) * 3) % probes.size()];
      auto r = test_run(p.fd, pkt, p.repeat);
      cpu[p.id].push_back(r.cpu_ns);
      kern[p.id].push_back(r.kernel_ns);
    }
  }
  close(empty);

  auto per_rep = [&](const std::string& a, const std::string& b, auto op) {
    std::vector<double> v;
    for (int i = 0; i < reps; ++i) v.push_back(op(cpu[a][i], cpu[b][i]));
    return spread(v);
  };
  auto ratio = [&](const std::string& a, const std::string& b) {
    return per_rep(a, b, [](double x, double y) { return x / y; });
  };
  auto diff = [&](const std::string& a, const std::string& b) {
    return per_rep(a, b, [](double x, double y) { return x - y; });
  };

  std::cout << "\nBPF_PROG_TEST_RUN, netfault egress, one non-matching IPv4 UDP packet (198.18.0.1 -> 10.0.1.7:9000)\n"
            << reps << " interleaved repetitions of repeat=" << repeat
            << "; ns/packet = thread CPU time / repeat; median [min-max]; ratios taken within each repetition\n\n";
  std::cout << pad("case", 24) << pad("ns/packet", 22) << pad("kernel avg ns", 15) << pad("x empty program", 22)
            << "x exact 10\n";
  auto row = [&](const std::string& id, const std::string& label) {
    std::cout << pad(label, 24) << pad(fmt_spread(spread(cpu[id]), 1), 22) << pad(fmt(spread(kern[id]).median, 0), 15)
              << pad(fmt_spread(ratio(id, "empty"), 2), 22)
              << (id == "empty" ? "" : fmt_spread(ratio(id, "hot:e10"), 2)) << "\n";
  };
  row("empty", "empty tc program");
  for (auto& c : cfgs) row("hot:" + c.key, "netfault, " + c.label);

  const bool any_stages = std::any_of(cfgs.begin(), cfgs.end(), [](const Config& c) { return c.stages; });
  if (any_stages) {
    std::cout
        << "\nwhere the ns go: the same path cut after each step, on the same maps; cumulative ns above the\n"
        << "empty program (median), in brackets what the step adds. Beside it, two alternatives priced the same way:\n"
        << "the parse done by hand with bare direct packet access (IPv4 only, no fallback copy), and a boot\n"
        << "clock read per packet.\n";
    std::cout << pad("index", 22) << pad("control map", 13) << pad("+ parse", 16) << pad("+ exact lookup", 16)
              << pad("+ prefix lookup", 17) << pad("full netfault", 16) << pad("parse, direct", 15) << "clock read\n";
    for (auto& c : cfgs) {
      if (!c.stages) continue;
      std::cout << pad(c.label, 22);
      double prev = 0;
      const size_t widths[] = {13, 16, 16, 17};
      for (int s = 1; s <= 4; ++s) {
        double v = diff("stage" + std::to_string(s) + ":" + c.key, "empty").median;
        std::cout << pad(fmt(v, 1) + (s > 1 ? " (" + signed_fmt(v - prev) + ")" : ""), widths[s - 1]);
        prev = v;
      }
      double full = diff("hot:" + c.key, "empty").median;
      std::cout << pad(fmt(full, 1) + " (" + signed_fmt(full - prev) + ")", 16);
      double ctl = diff("stage1:" + c.key, "empty").median, parse = diff("stage2:" + c.key, "empty").median;
      std::cout << pad(signed_fmt(diff("parse_direct:" + c.key, "empty").median - ctl), 15)
                << signed_fmt(diff("parse_clock:" + c.key, "empty").median - parse) << "\n";
    }
  }

  auto add = [&](const std::string& what, const std::string& abs, const std::string& r, const std::string& target,
                 const std::string& verdict_s) {
    append_summary(summary, {"1 prog-run", what, abs, r, target, verdict_s});
  };
  const Spread empty_s = spread(cpu["empty"]);
  for (auto& c : cfgs) {
    const std::string id = "hot:" + c.key;
    Spread ns = spread(cpu[id]);
    Spread re = ratio(id, "empty");
    std::string abs = fmt(ns.median, 1) + " ns (empty " + fmt(empty_s.median, 1) + ")";
    if (c.key == "e100k") {
      add("hot key, " + c.label + " vs empty prog", abs, fmt_spread(re, 2) + "x", "<= 1.5x", verdict(re.median <= 1.5));
    } else {
      add("hot key, " + c.label + " vs empty prog", abs, fmt_spread(re, 2) + "x", "-", "report");
    }
    if (c.key == "e1M") {
      Spread r10 = ratio(id, "hot:e10");
      add("hot key, exact 1M vs exact 10",
          fmt(ns.median, 1) + " ns (10: " + fmt(spread(cpu["hot:e10"]).median, 1) + ")", fmt_spread(r10, 2) + "x",
          "<= 1.2x", verdict(r10.median <= 1.2));
    }
  }

  const MapFillRatios fill = map_fill_ratios(reps, 20'000);
  std::cout << "\nmap writes, 20k entries of fl_exact's shape, ratios within each repetition:\n"
            << "  one bpf_map_update_elem / one getppid():            " << fmt_spread(fill.update_vs_syscall, 2)
            << " x\n"
            << "  per entry, one call each / one bpf_map_update_batch: " << fmt_spread(fill.single_vs_batch, 2)
            << " x\n";
  add("map update per entry vs getppid()", "-", fmt_spread(fill.update_vs_syscall, 2) + "x", "-", "report");
  add("map fill, one call each vs one batch", "-", fmt_spread(fill.single_vs_batch, 2) + "x", "-", "report");

  if (!json_out.empty()) {
    // {"bench":"progrun","reps":N,"repeat":R,"empty_ns":X,"ratios":{"netfault, exact 0 / empty":{...}}}
    auto num = [](double v) { return std::isnan(v) ? std::string("null") : fmt(v, 3); };
    std::string j = "{\"bench\":\"progrun\",\"reps\":" + std::to_string(reps) +
                    ",\"repeat\":" + std::to_string(repeat) + ",\"empty_ns\":" + num(empty_s.median) + ",\"ratios\":{";
    bool first = true;
    for (auto& c : cfgs) {
      Spread re = ratio("hot:" + c.key, "empty");
      j += std::string(first ? "" : ",") + "\"prog-run per packet, netfault " + c.label +
           " / empty program\":{\"median\":" + num(re.median) + ",\"min\":" + num(re.min) + ",\"max\":" + num(re.max) +
           "}";
      first = false;
    }
    for (const auto& [name, r] : {std::pair{"map update, bpf_map_update_elem / getppid()", fill.update_vs_syscall},
                                  std::pair{"map fill per entry, one update each / one batch", fill.single_vs_batch}}) {
      j += std::string(",\"") + name + "\":{\"median\":" + num(r.median) + ",\"min\":" + num(r.min) +
           ",\"max\":" + num(r.max) + "}";
    }
    j += "}}\n";
    FILE* out = std::fopen(json_out.c_str(), "w");
    if (out == nullptr || std::fputs(j.c_str(), out) < 0) {
      std::cerr << "fl_bench_progrun: cannot write " << json_out << "\n";
      return 1;
    }
    std::fclose(out);
  }

  if (random_keys) {
    std::cout << "\nrandom keys: a wrapper writes a random non-matching destination (10.0.<odd>.x), then tail calls\n"
              << "netfault; minus the same wrapper tail-calling the empty program (repeat=" << rand_repeat << "):\n";
    std::cout << pad("index", 24) << pad("wrapper+netfault ns", 22) << pad("netfault ns (diff)", 24)
              << "x exact 10 (diffs)\n";
    std::cout << pad("(baseline wrapper)", 24) << fmt_spread(spread(cpu["randbase"]), 1) << "\n";
    std::map<std::string, Spread> d;
    for (auto& c : cfgs) d[c.key] = diff("rand:" + c.key, "randbase");
    std::vector<double> d10;
    for (int i = 0; i < reps; ++i) d10.push_back(cpu["rand:e10"][i] - cpu["randbase"][i]);
    for (auto& c : cfgs) {
      std::vector<double> rr;
      for (int i = 0; i < reps; ++i) rr.push_back((cpu["rand:" + c.key][i] - cpu["randbase"][i]) / d10[i]);
      Spread r = spread(rr);
      std::cout << pad(c.label, 24) << pad(fmt_spread(spread(cpu["rand:" + c.key]), 1), 22)
                << pad(fmt_spread(d[c.key], 1), 24) << fmt_spread(r, 2) << "\n";
      if (c.key == "e100k" || c.key == "e1M" || c.key == "e1Mc10k" || c.key == "e10")
        add("random keys, " + c.label + " (netfault part)", fmt(d[c.key].median, 1) + " ns/pkt",
            c.key == "e10" ? "1.00x (ref)" : fmt_spread(r, 2) + "x vs exact 10", "-", "report");
    }
  }

  if (by_key.contains("c10k")) {
    // A non-matching packet with 10k prefixes as a ratio of the empty program. With
    // random keys netfault's cost is (wrapper+netfault - wrapper) + empty, per repetition.
    std::cout << "\nprefixes: a non-matching packet, x empty program (same run, per repetition)\n"
              << pad("index", 24) << pad("hot key", 22) << "random keys\n";
    for (const char* key : {"c10k", "c10kt"}) {
      const Config& c = *by_key.at(key);
      Spread hot = ratio("hot:" + c.key, "empty");
      std::string rnd = "-";
      Spread rs{};
      if (random_keys) {
        std::vector<double> v;
        for (int i = 0; i < reps; ++i)
          v.push_back((cpu["rand:" + c.key][i] - cpu["randbase"][i] + cpu["empty"][i]) / cpu["empty"][i]);
        rs = spread(v);
        rnd = fmt_spread(rs, 2) + "x";
      }
      std::cout << pad(c.label, 24) << pad(fmt_spread(hot, 2) + "x", 22) << rnd << "\n";
      const bool hashed = c.key == "c10k";
      add(std::string("prefixes 10k, 4 lengths, ") + (hashed ? "hash per length" : "trie walk") +
              ", hot key vs empty prog (random keys: " + rnd + ")",
          "-", fmt_spread(hot, 2) + "x", hashed ? "<= 2x" : "-", hashed ? verdict(hot.median <= 2.0) : "report");
    }
  }
  return 0;
}
