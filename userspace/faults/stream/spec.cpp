// TcpFaultSpec: the target and the toxics as operators write them.
#include "userspace/faults/stream/spec.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/units.h"

namespace faultline {
namespace {

Error target_error(const std::string& text, const std::string& why) {
  return input_error(EINVAL, "--target " + text + ": " + why);
}

// Every address a name resolves to, as exact prefixes, once each.
Result<std::vector<Prefix>> resolve_host(const std::string& text, const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0)
    return target_error(text, "cannot resolve " + host + ": " + ::gai_strerror(rc));
  std::set<std::string> seen;
  std::vector<Prefix> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ai->ai_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, buf, sizeof buf);
    else if (ai->ai_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, buf, sizeof buf);
    else
      continue;
    if (!seen.insert(buf).second) continue;
    auto p = parse_prefix(buf);
    if (p) out.push_back(*p);
  }
  ::freeaddrinfo(res);
  if (out.empty()) return target_error(text, host + " resolves to no IPv4 or IPv6 address");
  return out;
}

// "200ms" as a whole number of `unit` nanoseconds, for an attribute in that unit.
Result<int64_t> duration_in(const std::string& toxic, const std::string& key, const std::string& value,
                            uint64_t unit_ns, const char* unit) {
  auto d = parse_duration_ns(value);
  if (!d) return input_error(EINVAL, "--toxic " + toxic + ": " + key + "=" + value + ": " + d.error().message);
  if (*d % unit_ns != 0)
    return input_error(EINVAL, "--toxic " + toxic + ": " + key + "=" + value + ": not a whole number of " + unit);
  return int64_t(*d / unit_ns);
}

Result<int64_t> bytes_of(const std::string& toxic, const std::string& key, const std::string& value) {
  auto b = parse_size_bytes(value);
  if (!b) return input_error(EINVAL, "--toxic " + toxic + ": " + key + "=" + value + ": " + b.error().message);
  if (*b > (uint64_t{1} << 62))
    return input_error(EINVAL, "--toxic " + toxic + ": " + key + "=" + value + ": too large");
  return int64_t(*b);
}

// "100KB/s", "2MB/s", "100" (KB/s): Toxiproxy's rate, in KB (1000 bytes) per second.
Result<int64_t> rate_kbps(const std::string& toxic, const std::string& value) {
  std::string v = value;
  if (v.ends_with("/s")) v.resize(v.size() - 2);
  uint64_t scale = 1;
  if (v.ends_with("KB")) {
    v.resize(v.size() - 2);
  } else if (v.ends_with("MB")) {
    v.resize(v.size() - 2);
    scale = 1000;
  }
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos)
    return input_error(EINVAL, "--toxic " + toxic + ": bandwidth=" + value +
                                   ": expected a whole number of KB/s or MB/s (e.g. bandwidth=100KB/s)");
  return int64_t(std::stoull(v) * scale);
}

constexpr std::string_view kToxicTypes[] = {"latency",    "bandwidth", "slow_close", "timeout",
                                            "reset_peer", "slicer",    "limit_data", "noop"};

}  // namespace

bool is_toxic_type(std::string_view name) {
  return std::find(std::begin(kToxicTypes), std::end(kToxicTypes), name) != std::end(kToxicTypes);
}

bool starts_toxic(const std::string& word) { return is_toxic_type(std::string_view(word).substr(0, word.find('='))); }

Result<TcpTarget> parse_tcp_target(const std::string& text) {
  if (text.empty()) return target_error(text, "empty (expected HOST:PORT, e.g. db.internal:5432 or [::1]:443)");
  std::string host, port;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return target_error(text, "unclosed [IPv6]");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':')
      return target_error(text, "the port is missing (write [ADDR]:PORT)");
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return target_error(text, "the port is missing (HOST:PORT)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) return target_error(text, "write an IPv6 address as [ADDR]:PORT");
  }
  if (host.empty()) return target_error(text, "the host before ':' is missing");
  if (port.empty()) return target_error(text, "the port after ':' is missing");
  auto ports = parse_port_range(port);
  if (!ports) return target_error(text, ports.error().message);
  if (ports->lo == 0) return target_error(text, "port 0 is no destination");

  std::vector<Prefix> prefixes;
  if (auto p = parse_prefix(host)) {
    prefixes.push_back(*p);
  } else if (host.find_first_not_of("0123456789./") == std::string::npos || host.find('/') != std::string::npos ||
             host.find(':') != std::string::npos) {
    return target_error(text, p.error().message);  // meant as an address: say what is wrong with it
  } else {
    auto r = resolve_host(text, host);
    if (!r) return r.error();
    prefixes = std::move(*r);
  }
  TcpTarget t;
  t.text = text;
  for (const Prefix& p : prefixes) {
    EgressRule r;
    r.verdict = Verdict::Deny;
    r.prefix = p;
    r.ports = *ports;
    r.proto = IPPROTO_TCP;
    r.text = text;
    t.dests.push_back(r);
  }
  return t;
}

Result<Toxic> parse_toxic_words(const std::string& text, Stream default_stream, double default_toxicity) {
  const std::string flag = "--toxic " + text + ": ";
  if (text.empty()) return input_error(EINVAL, "--toxic: empty (e.g. --toxic latency=200ms,jitter=20ms)");
  std::vector<std::pair<std::string, std::string>> words;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string w = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (w.empty()) return input_error(EINVAL, flag + "an empty item between commas");
    auto eq = w.find('=');
    std::string k = w.substr(0, eq), v = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (eq != std::string::npos && v.empty()) return input_error(EINVAL, flag + k + "= has no value");
    words.emplace_back(k, v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  Toxic t;
  t.stream = default_stream;
  t.toxicity = default_toxicity;
  const auto& [type, value] = words.front();
  if (!starts_toxic(type))
    return input_error(EINVAL, flag + "unknown toxic '" + type +
                                   "' (latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data, noop)");
  if (type != "noop" && value.empty())
    return input_error(EINVAL, flag + type + " needs a value (e.g. " +
                                   (type == "bandwidth"    ? "bandwidth=100KB/s"
                                    : type == "slicer"     ? "slicer=64B"
                                    : type == "limit_data" ? "limit_data=1MB"
                                                           : type + "=200ms") +
                                   ")");
  if (type == "noop" && !value.empty()) return input_error(EINVAL, flag + "noop takes no value");
  // Which extra keys each type takes (beyond direction and toxicity).
  std::set<std::string> extra;
  if (type == "latency") {
    auto v = duration_in(text, type, value, 1'000'000, "milliseconds");
    if (!v) return v.error();
    t.attributes = LatencyToxic{*v, 0};
    extra = {"jitter"};
  } else if (type == "bandwidth") {
    auto v = rate_kbps(text, value);
    if (!v) return v.error();
    if (*v == 0) return input_error(EINVAL, flag + "bandwidth=0 is no limit at all; give a rate above 0");
    t.attributes = BandwidthToxic{*v};
  } else if (type == "slow_close") {
    auto v = duration_in(text, type, value, 1'000'000, "milliseconds");
    if (!v) return v.error();
    t.attributes = SlowCloseToxic{*v};
  } else if (type == "timeout") {
    auto v = value == "0" ? Result<int64_t>(0) : duration_in(text, type, value, 1'000'000, "milliseconds");
    if (!v) return v.error();
    t.attributes = TimeoutToxic{*v};
  } else if (type == "reset_peer") {
    auto v = value == "0" ? Result<int64_t>(0) : duration_in(text, type, value, 1'000'000, "milliseconds");
    if (!v) return v.error();
    t.attributes = ResetPeerToxic{*v};
  } else if (type == "slicer") {
    auto v = bytes_of(text, type, value);
    if (!v) return v.error();
    t.attributes = SlicerToxic{*v, 0, 0};
    extra = {"variation", "delay"};
  } else if (type == "limit_data") {
    auto v = bytes_of(text, type, value);
    if (!v) return v.error();
    t.attributes = LimitDataToxic{*v};
  } else {
    t.attributes = NoopToxic{};
  }
  std::set<std::string> given;
  for (size_t i = 1; i < words.size(); ++i) {
    const auto& [k, v] = words[i];
    if (!given.insert(k).second) return input_error(EINVAL, flag + k + " is given twice");
    if (v.empty()) return input_error(EINVAL, flag + k + " needs a value (" + k + "=...)");
    if (k == "direction") {
      if (v != "upstream" && v != "downstream")
        return input_error(EINVAL, flag + "direction=" + v + ": upstream (client to server) or downstream");
      t.stream = v == "upstream" ? Stream::upstream : Stream::downstream;
    } else if (k == "toxicity") {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !std::isfinite(x) || x < 0 || x > 1)
        return input_error(EINVAL, flag + "toxicity=" + v + ": a share of connections from 0 to 1 (e.g. 0.3)");
      t.toxicity = x;
    } else if (!extra.contains(k)) {
      std::string allowed = "direction, toxicity";
      for (const auto& e : extra) allowed = e + ", " + allowed;
      return input_error(EINVAL, flag + "'" + k + "' does not apply to " + type + " (it takes " + allowed + ")");
    } else if (k == "jitter") {
      auto j = duration_in(text, k, v, 1'000'000, "milliseconds");
      if (!j) return j.error();
      std::get<LatencyToxic>(t.attributes).jitter_ms = *j;
    } else if (k == "variation") {
      auto b = bytes_of(text, k, v);
      if (!b) return b.error();
      std::get<SlicerToxic>(t.attributes).size_variation = *b;
    } else if (k == "delay") {
      auto d = duration_in(text, k, v, 1'000, "microseconds");
      if (!d) return d.error();
      std::get<SlicerToxic>(t.attributes).delay_us = *d;
    }
  }
  t.name = std::string(t.type()) + "_" + std::string(stream_name(t.stream));
  if (auto s = validate_toxic_strict(t); !s) return input_error(EINVAL, flag + s.error().message);
  return t;
}

std::string TcpFaultSpec::scope_text() const {
  if (!command.empty()) return "command " + command[0];
  if (!cgroup.empty()) return "cgroup " + cgroup;
  return "host-wide";
}

nlohmann::json TcpFaultSpec::toxics_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : http_faults) out.push_back(http_fault_to_json(f));
  for (const auto& t : toxics) out.push_back(toxic_to_json(t));
  return out;
}

std::string TcpFaultSpec::describe() const {
  std::string out;
  for (const auto& f : http_faults) {
    std::string what(http_fault_type_name(f.type));
    if (f.type == HttpFaultType::status) what += " " + std::to_string(f.status);
    if (f.type == HttpFaultType::delay) what += " " + std::to_string(f.delay_ms) + "ms";
    if (f.type == HttpFaultType::truncate) what += " after " + std::to_string(f.bytes) + " B";
    if (f.type == HttpFaultType::abort_stream) what += " after " + std::to_string(f.events) + " events";
    if (f.type == HttpFaultType::llm) what += " " + std::string(llm_preset_name(f.preset));
    std::string on = f.match.method.empty() ? "" : f.match.method + " ";
    on += f.match.path.empty() ? "every request" : f.match.path;
    out += (out.empty() ? "HTTP " : ", ") + what + " on " + on;
    if (f.percent < 100) out += " (" + std::to_string(int(std::lround(f.percent))) + "%)";
  }
  for (const auto& t : toxics) {
    nlohmann::json j = toxic_to_json(t);
    std::string attrs;
    for (const auto& [k, v] : j["attributes"].items()) attrs += (attrs.empty() ? "" : " ") + k + "=" + v.dump();
    out += (out.empty() ? "" : ", ") + std::string(t.type()) + (attrs.empty() ? "" : " " + attrs) + " " +
           std::string(stream_name(t.stream));
    if (t.toxicity < 1.0) out += " (" + std::to_string(int(std::lround(t.toxicity * 100))) + "% of connections)";
  }
  return out + (http() ? " to " : " on TCP to ") + target.text + (terminate_tls ? " (TLS terminated)" : "") + ", " +
         scope_text();
}

}  // namespace faultline
