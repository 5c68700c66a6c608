// Kernel queries through libbpf's thin syscall wrappers; tc and /proc through their own tools.
#include "kernel_state.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "faultline/abi.h"
#include "selftests/lib/child_process.h"

namespace fle2e {

using fltest::run_command;
using namespace std::chrono_literals;

namespace {

// The namespace inode a netfault program was loaded for: its .rodata holds
// fl_netns_ino (and fl_egress_drop, 0 or 1), so any word naming an inode we
// look for is it. Returns every plausible word; the caller matches.
std::vector<uint32_t> rodata_words(int prog_fd) {
  std::vector<uint32_t> words;
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0 || info.nr_map_ids == 0) return words;
  std::vector<uint32_t> ids(info.nr_map_ids);
  bpf_prog_info again{};
  again.nr_map_ids = static_cast<uint32_t>(ids.size());
  again.map_ids = reinterpret_cast<uint64_t>(ids.data());
  len = sizeof(again);
  if (bpf_obj_get_info_by_fd(prog_fd, &again, &len) != 0) return words;
  for (uint32_t id : ids) {
    int mfd = bpf_map_get_fd_by_id(id);
    if (mfd < 0) continue;
    bpf_map_info mi{};
    uint32_t mlen = sizeof(mi);
    if (bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0 && std::strstr(mi.name, ".rodata") != nullptr &&
        mi.value_size >= 4 && mi.value_size <= 4096) {
      std::vector<uint8_t> v(mi.value_size);
      uint32_t zero = 0;
      if (bpf_map_lookup_elem(mfd, &zero, v.data()) == 0) {
        for (size_t off = 0; off + 4 <= v.size(); off += 4) {
          uint32_t w;
          std::memcpy(&w, v.data() + off, 4);
          words.push_back(w);
        }
      }
    }
    ::close(mfd);
  }
  return words;
}

}  // namespace

std::vector<NetfaultProg> netfault_programs() {
  std::vector<NetfaultProg> out;
  for (uint32_t id = 0; bpf_prog_get_next_id(id, &id) == 0;) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;  // freed between the two calls
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
        (std::strcmp(info.name, "fl_egress") == 0 || std::strcmp(info.name, "fl_ingress") == 0)) {
      NetfaultProg p;
      p.id = id;
      p.name = info.name;
      for (uint32_t w : rodata_words(fd)) {
        if (w > 1) p.netns_ino = w;  // fl_egress_drop is 0 or 1; the other word is the inode
      }
      out.push_back(p);
    }
    ::close(fd);
  }
  return out;
}

std::vector<NetfaultProg> netfault_programs_in(const std::set<uint32_t>& netns_inodes) {
  std::vector<NetfaultProg> out;
  for (const auto& p : netfault_programs()) {
    if (netns_inodes.contains(p.netns_ino)) out.push_back(p);
  }
  return out;
}

std::string describe(const std::vector<NetfaultProg>& progs) {
  std::string s;
  for (const auto& p : progs) {
    s += (s.empty() ? "" : ", ") + p.name + " id " + std::to_string(p.id) + " (netns inode " +
         std::to_string(p.netns_ino) + ")";
  }
  return s.empty() ? "none" : s;
}

std::vector<std::string> attached_netfault(const std::string& netns, const std::string& dev) {
  std::vector<std::string> out;
  // TCX: ask the kernel from inside the namespace (ifindex is per namespace).
  std::thread t([&] {
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) return;
    int rc = ::setns(ns, CLONE_NEWNET);
    ::close(ns);
    if (rc != 0) return;
    int ifindex = static_cast<int>(if_nametoindex(dev.c_str()));
    if (ifindex == 0) return;
    constexpr int kTcxIngress = 46, kTcxEgress = 47;  // BPF_TCX_*; older uapi headers lack the names
    for (int type : {kTcxIngress, kTcxEgress}) {
      uint32_t ids[64] = {}, cnt = 64, flags = 0;
      if (bpf_prog_query(ifindex, static_cast<bpf_attach_type>(type), 0, &flags, ids, &cnt) != 0) continue;
      for (uint32_t i = 0; i < cnt; ++i) {
        int fd = bpf_prog_get_fd_by_id(ids[i]);
        if (fd < 0) continue;
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && std::strncmp(info.name, "fl_", 3) == 0)
          out.push_back(std::string("tcx ") + (type == kTcxEgress ? "egress " : "ingress ") + info.name);
        ::close(fd);
      }
    }
  });
  t.join();
  for (const char* dir : {"ingress", "egress"}) {
    auto r = run_command({"ip", "netns", "exec", netns, "tc", "filter", "show", "dev", dev, dir}, {}, 10s);
    for (const char* name : {"fl_egress", "fl_ingress"}) {
      if (r.out.find(std::string("name ") + name) != std::string::npos)
        out.push_back(std::string("tc ") + dir + " " + name);
    }
  }
  return out;
}

std::optional<uint64_t> fault_expiry_mono(const std::string& bpffs_root, uint32_t slot) {
  int fd = bpf_obj_get((bpffs_root + "/maps/fl_faults").c_str());
  if (fd < 0) return std::nullopt;
  fl_fault f{};
  int rc = bpf_map_lookup_elem(fd, &slot, &f);
  ::close(fd);
  if (rc != 0 || f.expires_ns == 0) return std::nullopt;
  timespec boot{}, mono{};
  clock_gettime(CLOCK_BOOTTIME, &boot);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  const int64_t offset =
      (static_cast<int64_t>(boot.tv_sec) - mono.tv_sec) * 1'000'000'000LL + (boot.tv_nsec - mono.tv_nsec);
  return static_cast<uint64_t>(static_cast<int64_t>(f.expires_ns) - offset);
}

std::string qdiscs(const std::string& netns, const std::string& dev) {
  auto r = run_command({"ip", "netns", "exec", netns, "tc", "qdisc", "show", "dev", dev}, {}, 10s);
  return r.out + r.err;
}

bool has_clsact(const std::string& netns, const std::string& dev) {
  return qdiscs(netns, dev).find("clsact") != std::string::npos;
}

uint64_t snmp_counter(const std::string& netns, const std::string& table, const std::string& field) {
  auto r = run_command({"ip", "netns", "exec", netns, "cat", "/proc/net/snmp"}, {}, 10s);
  // Pairs of lines: "Udp: InDatagrams NoPorts ..." then "Udp: 12 0 ...".
  std::istringstream in(r.out);
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind(table + ":", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value) {
      if (name == field) return std::stoull(value);
    }
  }
  return 0;
}

std::vector<std::string> tcp_connection_states(const std::string& netns) {
  // The kernel's numbering of TCP states (include/net/tcp_states.h), 0x01..0x0C.
  static constexpr const char* kStates[] = {"?",         "ESTABLISHED", "SYN_SENT",    "SYN_RECV",   "FIN_WAIT1",
                                            "FIN_WAIT2", "TIME_WAIT",   "CLOSE",       "CLOSE_WAIT", "LAST_ACK",
                                            "LISTEN",    "CLOSING",     "NEW_SYN_RECV"};
  auto r = run_command({"ip", "netns", "exec", netns, "cat", "/proc/net/tcp"}, {}, 10s);
  std::vector<std::string> states;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state;
    if (!(f >> slot >> local >> remote >> state)) continue;
    const unsigned long st = std::stoul(state, nullptr, 16);
    if (st == 0x0A) continue;
    states.push_back(st < std::size(kStates) ? kStates[st] : state);
  }
  return states;
}

std::vector<std::string> files_under(const std::string& root) {
  std::vector<std::string> out;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string full = root + "/" + name;
    out.push_back(full);
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      auto sub = files_under(full);
      out.insert(out.end(), sub.begin(), sub.end());
    }
  }
  ::closedir(d);
  return out;
}

std::vector<pid_t> processes_with_env(const std::string& key_value) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
    std::string entry;
    while (std::getline(f, entry, '\0')) {
      if (entry == key_value) {
        out.push_back(static_cast<pid_t>(std::stoi(e->d_name)));
        break;
      }
    }
  }
  ::closedir(d);
  return out;
}

}  // namespace fle2e
