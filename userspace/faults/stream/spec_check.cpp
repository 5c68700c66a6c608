// TCP stream fault checks shared by faultctl, faultcp and faultd (moved here
// from ctl/tcp_args.cpp, whose flag parser now calls them).
#include "userspace/faults/stream/spec_check.h"

#include <cctype>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "base/units.h"
#include "userspace/faults/stream/experiment.h"

namespace faultline {

Result<std::vector<Toxic>> parse_toxics(const std::vector<std::string>& texts, Stream default_stream,
                                        double default_toxicity) {
  std::vector<Toxic> out;
  std::map<std::string, int> taken;
  for (const auto& w : texts) {
    auto x = parse_toxic_words(w, default_stream, default_toxicity);
    if (!x) return x.error();
    // Two toxics of one type and stream: the second is "<type>_<stream>_2".
    if (int n = ++taken[x->name]; n > 1) x->name += "_" + std::to_string(n);
    out.push_back(std::move(*x));
  }
  if (out.size() > StreamCaps::kMaxToxics)
    return input_error(EINVAL, "--toxic: at most " + std::to_string(StreamCaps::kMaxToxics) + " toxics");
  return out;
}

Status validate(const TcpFaultSpec& s) {
  if (s.duration_ns == 0) return input_error(EINVAL, "--duration is required (at most 1h), e.g. --duration 1m");
  if (s.duration_ns > StreamCaps::kMaxDurationNs) return input_error(EINVAL, "--duration is over the cap of 1h");
  if (s.duration_ns < StreamCaps::kMinDurationNs) return input_error(EINVAL, "--duration must be at least 100ms");
  if (!s.cgroup.empty() && !s.command.empty())
    return input_error(EINVAL, "give one scope: --cgroup PATH or -- COMMAND ARGS (neither: host-wide)");
  if (s.drain_ns > StreamCaps::kMaxDrainNs) return input_error(EINVAL, "--drain is over the cap of 10m");
  if (s.toxics.size() > StreamCaps::kMaxToxics)
    return input_error(EINVAL, "--toxic: at most " + std::to_string(StreamCaps::kMaxToxics) + " toxics");
  return {};
}

namespace {

Error bad_flag(std::string message) { return input_error(EINVAL, std::move(message)); }

}  // namespace

Status check_upstream_ca_flags(bool terminate, bool given, const std::string& file) {
  if (!given) return {};
  if (!terminate)
    return bad_flag("--upstream-ca needs --terminate-tls: without termination the client verifies the upstream itself");
  if (file.empty()) return bad_flag("--upstream-ca: empty file name");
  return {};
}

bool target_is_tls(const TcpTarget& target, bool declared) {
  if (declared) return true;
  if (target.dests.empty()) return false;
  for (const auto& d : target.dests)
    if (d.ports.lo != 443 || d.ports.hi != 443) return false;
  return true;
}

Status check_fault_on_tls(const HttpFault& f, const std::string& fault_flag, const std::string& target) {
  const std::string why = needs_plaintext(f);
  if (why.empty()) return {};
  return bad_flag(fault_flag + " on " + target + ": " + why +
                  ", which TLS hides without --terminate-tls (matched by SNI: delay and reset only)");
}

Status http_fault_from_flags(const HttpFlagValues& v, TcpFaultSpec& s) {
  auto has = [&](const char* f) { return v.has(f); };
  auto str = [&](const char* f) { return v.one(f); };
  HttpFault f;
  int kinds = 0;
  for (const char* k : {"status", "delay", "reset", "truncate", "abort-stream", "llm"}) kinds += has(k) ? 1 : 0;
  if (kinds != 1)
    return bad_flag(
        "give exactly one fault: --status N, --delay D, --reset, --truncate N, --abort-stream N or --llm PRESET");
  // A whole-number flag within its row's range in the http table.
  auto count = [&](const char* flag) -> Result<int64_t> {
    const FieldRange& range = *find_flag(http_experiment_fields(), flag)->range;
    const auto lo = static_cast<int64_t>(range.lo), hi = static_cast<int64_t>(range.hi);
    const std::string n = str(flag);
    if (n.empty() || n.size() > 18 || n.find_first_not_of("0123456789") != std::string::npos || std::stoll(n) < lo ||
        std::stoll(n) > hi)
      return bad_flag(std::string("--") + flag + " " + n + ": a whole number from " + std::to_string(lo) + " to " +
                      std::to_string(hi));
    return std::stoll(n);
  };
  if (has("status")) {
    f.type = HttpFaultType::status;
    auto n = count("status");
    if (!n) return n.error();
    f.status = *n;
    if (has("body")) f.body = str("body");
    if (has("content-type")) f.content_type = str("content-type");
  } else if (has("delay")) {
    f.type = HttpFaultType::delay;
    auto d = parse_duration_ns(str("delay"));
    if (!d) return bad_flag("--delay: " + d.error().message);
    if (*d == 0 || *d > StreamCaps::kMaxHttpDelayNs || *d % 1'000'000 != 0)
      return bad_flag("--delay " + str("delay") + ": whole milliseconds, from 1ms to 60s");
    f.delay_ms = int64_t(*d / 1'000'000);
    if (has("delay-at")) {
      const std::string at = str("delay-at");
      if (at != "request" && at != "response") return bad_flag("--delay-at " + at + ": request or response");
      f.where = at == "request" ? DelayPoint::request : DelayPoint::response;
    }
  } else if (has("reset")) {
    f.type = HttpFaultType::reset;
  } else if (has("truncate")) {
    f.type = HttpFaultType::truncate;
    auto n = count("truncate");
    if (!n) return n.error();
    f.bytes = *n;
  } else if (has("abort-stream")) {
    f.type = HttpFaultType::abort_stream;
    auto n = count("abort-stream");
    if (!n) return n.error();
    f.events = *n;
  } else {
    f.type = HttpFaultType::llm;
    auto j = nlohmann::json{{"type", "llm"}, {"attributes", {{"preset", str("llm")}}}};
    if (has("llm-provider")) j["attributes"]["provider"] = str("llm-provider");
    auto parsed = http_fault_from_json(j);
    if (!parsed)
      return bad_flag("--llm " + str("llm") + (has("llm-provider") ? " --llm-provider " + str("llm-provider") : "") +
                      ": " + parsed.error().message);
    f.preset = parsed->preset;
    f.provider = parsed->provider;
    f.events = parsed->events;
    f.delay_ms = parsed->delay_ms;
    if (has("retry-after")) {
      auto n = count("retry-after");
      if (!n) return n.error();
      f.retry_after_s = *n;
    }
  }
  for (const auto& [flag, applies] :
       std::vector<std::pair<const char*, bool>>{{"body", f.type == HttpFaultType::status},
                                                 {"content-type", f.type == HttpFaultType::status},
                                                 {"delay-at", f.type == HttpFaultType::delay},
                                                 {"llm-provider", f.type == HttpFaultType::llm},
                                                 {"retry-after", f.type == HttpFaultType::llm}}) {
    if (has(flag) && !applies)
      return bad_flag(std::string("--") + flag + " does not apply to a " + std::string(http_fault_type_name(f.type)) +
                      " fault");
  }
  if (has("method")) f.match.method = str("method");
  if (has("path")) f.match.path = str("path");
  if (has("host")) f.match.host = str("host");
  for (const char* flag : {"header-equals", "header-contains"}) {
    if (!has(flag)) continue;
    for (const std::string& word : v.given.at(flag)) {
      const size_t eq = word.find('=');
      const std::string name = word.substr(0, eq);
      // A header name is an HTTP token (RFC 9110 5.1): letters, digits and !#$%&'*+-.^_`|~
      const bool token = !name.empty() && name.find_first_not_of(
                                              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789!#$%&'*+-.^_`|~") == std::string::npos;
      if (eq == std::string::npos || !token)
        return bad_flag(std::string("--") + flag + " " + word + ": expected NAME=VALUE, NAME a header name");
      HeaderMatch h;
      for (char c : name) h.name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      h.has_equals = std::string_view(flag) == "header-equals";
      (h.has_equals ? h.equals : h.contains) = word.substr(eq + 1);
      f.match.headers.push_back(std::move(h));
    }
  }
  if (has("percent")) {
    auto p = parse_percent(str("percent"));
    if (!p) return bad_flag("--percent: " + p.error().message);
    f.percent = *p;
  }
  if (has("attempts")) {
    auto n = count("attempts");
    if (!n) return n.error();
    f.attempts = *n;
  }
  f.name = f.type == HttpFaultType::llm ? "llm_" + std::string(llm_preset_name(f.preset))
                                        : std::string(http_fault_type_name(f.type));
  if (auto ok = validate_http_fault(f); !ok) return input_error(EINVAL, ok.error().message);
  s.terminate_tls = has("terminate-tls");
  if (s.terminate_tls && has("tls"))
    return bad_flag("--tls and --terminate-tls: pick one (--tls passes TLS through, --terminate-tls ends it)");
  if (auto ca =
          check_upstream_ca_flags(s.terminate_tls, has("upstream-ca"), has("upstream-ca") ? str("upstream-ca") : "");
      !ca)
    return ca.error();
  if (has("upstream-ca")) s.upstream_ca = str("upstream-ca");
  if (!s.terminate_tls && target_is_tls(s.target, has("tls"))) {
    // The flag that asks for the plaintext, in the order needs_plaintext() judges.
    std::string flag;
    if (f.type == HttpFaultType::abort_stream)
      flag = "--abort-stream";
    else if (f.type != HttpFaultType::delay && f.type != HttpFaultType::reset)
      flag = "--" + std::string(http_fault_type_name(f.type));
    else if (f.where == DelayPoint::response)
      flag = "--delay-at response";
    else
      for (const char* k : {"method", "path", "header-equals", "header-contains", "attempts"})
        if (flag.empty() && has(k)) flag = std::string("--") + k;
    if (auto t = check_fault_on_tls(f, flag, s.target.text); !t) return t.error();
  }
  s.http_faults.push_back(std::move(f));
  return {};
}

}  // namespace faultline
