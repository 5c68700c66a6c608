// Feature probes: each really loads (and where it matters attaches) a program.
#include "loader/features.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sched.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "base/cgroup.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "loader/feature_cache.h"
#include "loader/rtnetlink.h"
#include "loader/syscall_override_object.h"
#include "loader/tcx.h"

namespace faultline {
namespace {

// UAPI values newer than the headers on a Debian 12 build host.
constexpr int kHelperLoop = 181;
constexpr int kHelperSetRetval = 187;
constexpr int kHelperOverrideReturn = 58;

std::string err_text(int err) { return std::string(strerror(err < 0 ? -err : err)); }

// r0 = imm; exit
std::vector<bpf_insn> insns_return(int imm) {
  return {
      bpf_insn{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = imm},
      bpf_insn{.code = BPF_JMP | BPF_EXIT},
  };
}

// call helper; r0 = 0; exit  (args are whatever r1..r5 hold, fine for a load test)
std::vector<bpf_insn> call_helper(int helper) {
  return {
      bpf_insn{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .imm = 0},
      bpf_insn{.code = BPF_JMP | BPF_CALL, .imm = helper},
      bpf_insn{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      bpf_insn{.code = BPF_JMP | BPF_EXIT},
  };
}

struct LoadedProbeProg {
  UniqueFd fd;
  int err = 0;
  std::string log;
};

LoadedProbeProg load(bpf_prog_type type, const std::vector<bpf_insn>& insns, bpf_attach_type expected = {},
                     uint32_t attach_btf_id = 0) {
  static char logbuf[4096];
  logbuf[0] = '\0';
  LIBBPF_OPTS(bpf_prog_load_opts, opts);
  opts.expected_attach_type = expected;
  opts.attach_btf_id = attach_btf_id;
  opts.log_buf = logbuf;
  opts.log_size = sizeof(logbuf);
  int fd = bpf_prog_load(type, "fl_probe", "GPL", insns.data(), insns.size(), &opts);
  LoadedProbeProg l;
  if (fd < 0) {
    l.err = errno;
    // Retry with a log to learn why (a verifier message names a missing helper).
    opts.log_level = 1;
    int fd2 = bpf_prog_load(type, "fl_probe", "GPL", insns.data(), insns.size(), &opts);
    if (fd2 >= 0) ::close(fd2);
    l.log = logbuf;
    if (auto nl = l.log.find_last_not_of('\n'); nl != std::string::npos) l.log.resize(nl + 1);
    if (auto cut = l.log.rfind('\n'); cut != std::string::npos) l.log = l.log.substr(cut + 1);
  }
  l.fd = UniqueFd(fd);
  return l;
}

std::string failure_text(const LoadedProbeProg& l, const std::string& what) {
  std::string s = what + " failed: " + err_text(l.err);
  if (!l.log.empty()) s += " (" + l.log + ")";
  return s;
}

// Runs fn on a thread inside a fresh, empty network namespace, so probes that
// attach to a device never touch the host's.
template <typename Fn>
FeatureProbe in_scratch_netns(Fn fn) {
  FeatureProbe p;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      p.detail = "cannot create a scratch network namespace: " + err_text(errno);
      return;
    }
    p = fn();
  });
  t.join();
  return p;
}

FeatureProbe probe_tcx() {
  auto prog = load(BPF_PROG_TYPE_SCHED_CLS, insns_return(-1));
  if (!prog.fd) return {false, failure_text(prog, "loading a tc program")};
  return in_scratch_netns([&]() -> FeatureProbe {
    int link = bpf_link_create(prog.fd.get(), 1 /* lo */, kBpfTcxIngress, nullptr);
    if (link < 0) return {false, "TCX link create failed: " + err_text(errno) + " (kernel older than 6.6?)"};
    ::close(link);
    return {true, "attached a TCX ingress link"};
  });
}

FeatureProbe probe_clsact() {
  auto prog = load(BPF_PROG_TYPE_SCHED_CLS, insns_return(-1));
  if (!prog.fd) return {false, failure_text(prog, "loading a tc program")};
  return in_scratch_netns([&]() -> FeatureProbe {
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = 1, .attach_point = BPF_TC_INGRESS);
    int err = bpf_tc_hook_create(&hook);
    if (err != 0 && err != -EEXIST) return {false, "creating clsact failed: " + err_text(err)};
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog.fd.get());
    err = bpf_tc_attach(&hook, &opts);
    if (err != 0) return {false, "cls_bpf attach failed: " + err_text(err)};
    return {true, "attached cls_bpf under clsact"};
  });
}

FeatureProbe probe_helper(bpf_prog_type type, int helper, const char* name, bpf_attach_type expected = {}) {
  auto l = load(type, call_helper(helper), expected);
  if (!l.fd) return {false, failure_text(l, std::string("a program calling ") + name)};
  return {true, std::string("a program calling ") + name + " loaded"};
}

FeatureProbe probe_fq() {
  return in_scratch_netns([]() -> FeatureProbe {
    auto st = replace_root_qdisc(1, "fq");
    if (!st)
      return {false, "installing qdisc fq failed: " + err_text(st.error().err) + " (sch_fq not built or not loadable)"};
    return {true, "installed fq as a root qdisc"};
  });
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

FeatureProbe probe_cgroup_v2() {
  const CgroupMounts& m = cgroup_mounts();
  if (m.v2.empty()) return {false, m.v2_found};
  if (!m.v2_found.empty()) return {true, m.v2_found + ": " + m.v2};
  return {true, "cgroup2 mounted at " + m.v2};
}

FeatureProbe probe_lsm_listed() {
  std::string lsm = read_file("/sys/kernel/security/lsm");
  if (lsm.empty()) {
    ::mount("securityfs", "/sys/kernel/security", "securityfs", 0, nullptr);
    lsm = read_file("/sys/kernel/security/lsm");
  }
  if (lsm.empty()) return {false, "cannot read /sys/kernel/security/lsm"};
  std::stringstream ss(lsm);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "bpf" || item == "bpf\n")
      return {true, "bpf is in the active LSM list: " + lsm.substr(0, lsm.find('\n'))};
  }
  return {false, "bpf is not in the active LSM list (" + lsm.substr(0, lsm.find('\n')) +
                     "): LSM programs would attach and never run"};
}

FeatureProbe probe_trampoline(bpf_prog_type type, bpf_attach_type at, const char* func, const char* what) {
  int id = libbpf_find_vmlinux_btf_id(func, at);
  if (id < 0) return {false, std::string("no BTF id for ") + func + ": " + err_text(id)};
  auto l = load(type, insns_return(0), at, static_cast<uint32_t>(id));
  if (!l.fd) return {false, failure_text(l, std::string("loading ") + what)};
  int link = bpf_link_create(l.fd.get(), 0, at, nullptr);
  if (link < 0 && type != BPF_PROG_TYPE_LSM) {
    return {false, std::string(what) + " attach failed: " + err_text(errno)};
  }
  if (link < 0) {
    int raw = bpf_raw_tracepoint_open(nullptr, l.fd.get());
    if (raw < 0) return {false, std::string(what) + " attach failed: " + err_text(errno)};
    ::close(raw);
  } else {
    ::close(link);
  }
  return {true, std::string(what) + " loaded and attached"};
}

FeatureProbe probe_kprobe_override() {
  if (::access("/sys/bus/event_source/devices/kprobe/type", F_OK) != 0)
    return {false, "no kprobe PMU (CONFIG_KPROBES unset)"};
  auto l = load(BPF_PROG_TYPE_KPROBE, call_helper(kHelperOverrideReturn));
  if (!l.fd)
    return {false, failure_text(l, "a kprobe calling bpf_override_return") + " (CONFIG_BPF_KPROBE_OVERRIDE unset)"};
  // The helper exists: check that our real program (syscall_override.bpf.c) passes the verifier too.
  auto obj = SyscallOverrideObject::load();
  if (!obj) return {false, "the helper loads, but " + obj.error().describe()};
  return {true, "a kprobe calling bpf_override_return loaded, and so did syscall_override.bpf.c"};
}

FeatureProbe probe_ringbuf() {
  int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "fl_probe", 0, 0, 4096, nullptr);
  if (fd < 0) return {false, "creating a ring buffer failed: " + err_text(errno)};
  ::close(fd);
  return {true, "created a ring buffer map"};
}

FeatureProbe probe_seccomp() {
  std::string a = read_file("/proc/sys/kernel/seccomp/actions_avail");
  if (a.find("user_notif") == std::string::npos)
    return {false, "user_notif not in /proc/sys/kernel/seccomp/actions_avail"};
  return {true, "user_notif listed in seccomp actions_avail"};
}

FeatureProbe probe_fanotify() {
  int fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
  if (fd < 0) return {false, "fanotify_init(FAN_CLASS_CONTENT) failed: " + err_text(errno)};
  ::close(fd);
  return {true, "fanotify_init(FAN_CLASS_CONTENT) succeeded"};
}

FeatureProbe probe_io_uring() {
  struct {
    uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
    uint64_t sq_off[5], cq_off[5];
  } params{};
  long fd = ::syscall(__NR_io_uring_setup, 1, &params);
  if (fd < 0) return {false, "io_uring_setup failed: " + err_text(errno)};
  ::close(static_cast<int>(fd));
  return {true, "io_uring_setup succeeded"};
}

// A bare call to bpf_loop fails verification (it wants a callback); libbpf's
// probe knows how to ask the kernel whether the helper exists.
FeatureProbe probe_bpf_loop() {
  int loop = libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, static_cast<bpf_func_id>(kHelperLoop), nullptr);
  return loop == 1 ? FeatureProbe{true, "the kernel knows the bpf_loop helper"}
                   : FeatureProbe{false, loop == 0 ? "the kernel has no bpf_loop helper (added in 5.17)"
                                                   : "probing bpf_loop failed: " + err_text(loop)};
}

// Whether programs of TYPE may call HELPER at all. The probe program passes the
// helper no valid arguments, so its load may fail for them: only the verifier's
// words for a helper the type may not call count as "no": "unknown func" and
// "invalid func" (older kernels), "program of this type cannot use helper"
// (newer ones). libbpf_probe_bpf_helper of Debian 12's libbpf 1.1 knows only the
// first two, and so answered yes for bpf_get_current_comm in cgroup_skb programs
// on Debian 13's 6.12, which refuses it (found by make vmtest).
bool helper_allowed(bpf_prog_type type, int helper) {
  static char logbuf[16384];
  logbuf[0] = '\0';
  LIBBPF_OPTS(bpf_prog_load_opts, opts);
  opts.log_buf = logbuf;
  opts.log_size = sizeof(logbuf);
  opts.log_level = 1;
  const auto insns = call_helper(helper);
  int fd = bpf_prog_load(type, "fl_probe", "GPL", insns.data(), insns.size(), &opts);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  const std::string log = logbuf;
  return log.find("unknown func") == std::string::npos && log.find("invalid func") == std::string::npos &&
         log.find("cannot use helper") == std::string::npos;
}

// Kernels before the task helpers reached cgroup_skb programs (6.1 among them)
// reject a program that calls them; 6.12 allows bpf_get_current_pid_tgid there
// but not bpf_get_current_comm.
FeatureProbe probe_skb_task_helpers() {
  if (!helper_allowed(BPF_PROG_TYPE_CGROUP_SKB, BPF_FUNC_get_current_pid_tgid))
    return {false, "cgroup_skb programs cannot call bpf_get_current_pid_tgid"};
  if (!helper_allowed(BPF_PROG_TYPE_CGROUP_SKB, BPF_FUNC_get_current_comm))
    return {false, "cgroup_skb programs cannot call bpf_get_current_comm"};
  return {true, "cgroup_skb programs may call bpf_get_current_pid_tgid and bpf_get_current_comm"};
}

Features probe_all() {
  Features f;
  auto base = load(BPF_PROG_TYPE_SOCKET_FILTER, insns_return(0));
  f.bpf_syscall = base.fd ? FeatureProbe{true, "loaded a socket filter"}
                          : FeatureProbe{false, failure_text(base, "bpf(BPF_PROG_LOAD)")};
  f.tcx = probe_tcx();
  f.clsact = probe_clsact();
  f.bpf_loop = probe_bpf_loop();
  f.sch_fq = probe_fq();
  f.cgroup_v2 = probe_cgroup_v2();
  f.cgroup_v2_mount = cgroup_mounts().v2;
  f.set_retval =
      probe_helper(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, kHelperSetRetval, "bpf_set_retval", BPF_CGROUP_INET4_CONNECT);
  f.ringbuf = probe_ringbuf();
  f.lsm_listed = probe_lsm_listed();
  f.bpf_lsm = probe_trampoline(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, "file_open", "an LSM program on file_open");
  if (f.bpf_lsm.available && !f.lsm_listed.available) {
    f.bpf_lsm = {false, "LSM programs attach but bpf is not an active LSM, so they would never run"};
  }
  f.fentry =
      probe_trampoline(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, "security_file_open", "fentry on security_file_open");
  f.kprobe_override = probe_kprobe_override();
  f.seccomp_notify = probe_seccomp();
  f.fanotify_perm = probe_fanotify();
  f.io_uring = probe_io_uring();
  f.skb_task_helpers = skb_task_helpers();
  return f;
}

bool g_probe_afresh = false;

// The probes of this boot from the cache, else probed and cached (as root).
Features cached_or_probed(const char* probes, Features (*probe)()) {
  const bool root = ::geteuid() == 0;
  const auto key = root ? FeatureCacheKey::current(probes) : std::nullopt;
  const std::string path = feature_cache_path();
  if (key && !g_probe_afresh) {
    if (auto cached = read_cached_features(path, *key)) return *cached;
  }
  Features f = probe();
  if (key) (void)write_cached_features(path, *key, f);
  return f;
}

Features probe_packet() {
  Features p;
  const FeatureProbe skipped{false, "not probed"};
  p.bpf_syscall = p.set_retval = p.ringbuf = p.lsm_listed = p.bpf_lsm = p.fentry = p.kprobe_override =
      p.seccomp_notify = p.fanotify_perm = p.io_uring = p.skb_task_helpers = skipped;
  p.bpf_syscall = {true, "implied by the probes below"};
  p.tcx = probe_tcx();
  p.clsact = probe_clsact();
  p.bpf_loop = probe_bpf_loop();
  p.sch_fq = probe_fq();
  p.cgroup_v2 = probe_cgroup_v2();
  p.cgroup_v2_mount = cgroup_mounts().v2;
  return p;
}

}  // namespace

void probe_features_afresh() { g_probe_afresh = true; }

const Features& features() {
  static const Features f = cached_or_probed("full", probe_all);
  return f;
}

const FeatureProbe& skb_task_helpers() {
  static const FeatureProbe p = probe_skb_task_helpers();
  return p;
}

const Features& packet_features() {
  static const Features f = cached_or_probed("packet", probe_packet);
  return f;
}

}  // namespace faultline
