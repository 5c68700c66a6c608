// Reading /proc/net/snmp and /proc/net/netstat of a namespace.
#include "userspace/guardrails/proc_net_counters.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <vector>

namespace faultline {
namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

// The whole file from its start: /proc files are made anew at offset 0.
Result<std::string> read_again(int fd, const char* what) {
  std::string text;
  char buf[8192];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n < 0) return errno_error(std::string("cannot read ") + what);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return text;
}

}  // namespace

Result<std::map<std::string, int64_t>> parse_proc_net_counters(std::string_view text) {
  std::map<std::string, int64_t> out;
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (auto l = text.substr(0, nl); !l.empty()) lines.push_back(l);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  if (lines.size() % 2 != 0) return make_error(EPROTO, "a header line without its values");
  for (size_t i = 0; i < lines.size(); i += 2) {
    auto names = words(lines[i]), values = words(lines[i + 1]);
    if (names.empty() || names.size() != values.size() || names[0] != values[0] || names[0].back() != ':')
      return make_error(EPROTO, "mismatched lines '" + std::string(names.empty() ? "" : names[0]) + "'");
    for (size_t k = 1; k < names.size(); ++k) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(values[k].data(), values[k].data() + values[k].size(), v);
      if (ec != std::errc() || end != values[k].data() + values[k].size())
        return make_error(EPROTO, "a value of " + std::string(names[0]) + std::string(names[k]) + " is not a number");
      out[std::string(names[0]) + std::string(names[k])] = v;
    }
  }
  return out;
}

Result<ProcNetCounters> ProcNetCounters::open(const NetnsRef& ns) {
  auto inside = NetnsEnter::enter(ns);
  if (!inside) return inside.error();
  // thread-self, not self: /proc/self/net is the namespace of the whole
  // process (its first thread), and only this thread has entered.
  UniqueFd snmp(::open("/proc/thread-self/net/snmp", O_RDONLY | O_CLOEXEC));
  if (!snmp) return errno_error("cannot open /proc/net/snmp in network namespace " + ns.display);
  UniqueFd netstat(::open("/proc/thread-self/net/netstat", O_RDONLY | O_CLOEXEC));
  if (!netstat) return errno_error("cannot open /proc/net/netstat in network namespace " + ns.display);
  return ProcNetCounters(std::move(snmp), std::move(netstat));
}

Result<std::map<std::string, int64_t>> ProcNetCounters::read() const {
  auto snmp = read_again(snmp_.get(), "/proc/net/snmp");
  if (!snmp) return snmp.error();
  auto netstat = read_again(netstat_.get(), "/proc/net/netstat");
  if (!netstat) return netstat.error();
  auto a = parse_proc_net_counters(*snmp);
  if (!a) return make_error(a.error().err, "/proc/net/snmp: " + a.error().message);
  auto b = parse_proc_net_counters(*netstat);
  if (!b) return make_error(b.error().err, "/proc/net/netstat: " + b.error().message);
  a->merge(*b);
  return a;
}

}  // namespace faultline
