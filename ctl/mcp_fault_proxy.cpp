// Faults on the calls mcp-guard passes, checked against the kill switches at
// each call and every 50 ms of a delay; the trace file's redacted lines.
#include "ctl/mcp_fault_proxy.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/files.h"
#include "base/redact.h"
#include "userspace/guard/mcp_rule.h"
#include "userspace/guard/mcp_wire.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace mcp_fault_proxy_impl {

nlohmann::json redact_json(const nlohmann::json& v, const Redactor& r) {
  if (v.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, x] : v.items())
      out[k] =
          Redactor::secret_name(k) && !x.is_object() && !x.is_array() ? nlohmann::json(kRedacted) : redact_json(x, r);
    return out;
  }
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : v) out.push_back(redact_json(x, r));
    return out;
  }
  if (v.is_string()) return r.text(v.get<std::string>());
  return v;
}

}  // namespace mcp_fault_proxy_impl

using namespace mcp_fault_proxy_impl;

McpFaultProxy::McpFaultProxy(McpFaultSpec spec, Send log) : spec_(std::move(spec)), log_(std::move(log)) {
  uint64_t seed = 0;
  if (::getrandom(&seed, sizeof seed, 0) != sizeof seed) seed = monotonic_ns();
  rng_.seed(seed);
}

McpFaultProxy::~McpFaultProxy() {
  ending_.store(true);
  std::vector<Delayed> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(delayed_);
  }
  for (auto& d : threads) d.t.join();
}

std::string McpFaultProxy::stopped() {
  std::string why;
  if (auto refused = fault_start_refused()) why = *refused;
  std::lock_guard lock(mu_);
  if (why != last_stop_) {
    if (log_)
      log_(why.empty() ? "faultline mcp-guard: faults on again (the kill switch is off)"
                       : "faultline mcp-guard: faults off: " + why + " (the gate goes on)");
    last_stop_ = why;
  }
  return why;
}

void McpFaultProxy::to_server(const std::string& line, const Send& send, const Send& to_client) {
  if (spec_.tool.empty()) return send(line);
  const McpMessage m = parse_mcp_message(line);
  if (m.kind != McpMessage::Kind::Request || m.method != "tools/call" || !m.doc.contains("params") ||
      !m.doc["params"].is_object() || !m.doc["params"].contains("name") || !m.doc["params"]["name"].is_string())
    return send(line);
  const std::string tool = m.doc["params"]["name"].get<std::string>();
  if (!mcp_glob_match(spec_.tool, tool)) return send(line);
  if (!stopped().empty()) return send(line);
  bool hit = true;
  if (spec_.pct < 100) {
    std::lock_guard lock(mu_);
    hit = std::uniform_real_distribution<double>(0, 100)(rng_) < spec_.pct;
  }
  if (!hit) return send(line);
  faulted_.fetch_add(1);
  if (!spec_.error_text.empty()) {
    if (log_) log_("faultline mcp-guard: fault: tools/call " + tool + " -> error \"" + spec_.error_text + "\"");
    return to_client(tool_result_line(m.id, spec_.error_text, true));
  }
  if (log_) log_("faultline mcp-guard: fault: tools/call " + tool + " -> delayed " + format_duration(spec_.delay_ns));
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(mu_);
  std::erase_if(delayed_, [](Delayed& d) {
    if (!d.done->load()) return false;
    d.t.join();
    return true;
  });
  delayed_.push_back(Delayed{std::thread([this, line, send, done] {
                               const uint64_t until = monotonic_ns() + spec_.delay_ns;
                               // The kill switch, or the guard's end, sends what waits at once.
                               for (uint64_t next_check = 0; monotonic_ns() < until && !ending_.load();) {
                                 const uint64_t now = monotonic_ns();
                                 if (now >= next_check) {
                                   if (fault_start_refused()) break;
                                   next_check = now + 50'000'000;
                                 }
                                 sleep_ms(static_cast<int>(std::min<uint64_t>(20, (until - now) / 1'000'000 + 1)));
                               }
                               send(line);
                               done->store(true);
                             }),
                             done});
}

Result<std::unique_ptr<McpTrace>> McpTrace::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return as_bad_input(errno_error("--trace " + path));
  std::unique_ptr<McpTrace> t(new McpTrace());
  t->fd_ = fd;
  return t;
}

McpTrace::~McpTrace() {
  if (fd_ >= 0) ::close(fd_);
}

void McpTrace::record(const char* to, const std::string& line) {
  static const Redactor kRedactor;
  nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  nlohmann::json out = {{"ts_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count()},
                        {"to", to}};
  if (doc.is_discarded()) {
    out["text"] = kRedactor.text(line);
  } else {
    out["message"] = redact_json(doc, kRedactor);
  }
  std::lock_guard lock(mu_);
  (void)write_all(fd_, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "--trace");
}

}  // namespace faultline
