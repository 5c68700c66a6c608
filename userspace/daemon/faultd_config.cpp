// Flags and the config file of faultd, judged before anything starts.
#include "userspace/daemon/faultd_config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/units.h"
#include "userspace/guard_runtime/guard_capture.h"
#include "userspace/net/address.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

// /metrics and the Toxiproxy API serve on loopback only: they have no authentication.
Result<std::string> loopback_address(const std::string& value, const std::string& where, const char* what) {
  if (value == "off") return std::string();
  const size_t colon = value.rfind(':');
  const std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    return input_error(0, where + ": '" + value + "' is not HOST:PORT (or off)");
  if (host.rfind("127.", 0) != 0 && host != "[::1]")
    return input_error(0, where + ": '" + value + "' is not a loopback address (127.x.x.x or [::1]): " + what +
                              " has no authentication");
  return value;
}

Result<std::string> metrics_address(const std::string& value, const std::string& where) {
  return loopback_address(value, where, "/metrics");
}

Result<std::string> toxiproxy_address(const std::string& value, const std::string& where) {
  return loopback_address(value, where, "the Toxiproxy API");
}

Result<unsigned> proxy_workers(const std::string& value, const std::string& where) {
  if (value.empty() || value.size() > 3 || value.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(value) > 256)
    return input_error(0, where + ": '" + value + "' is not a number of workers (0-256; 0: one per CPU)");
  return static_cast<unsigned>(std::stoul(value));
}

Result<uint64_t> toxic_max(const std::string& value, const std::string& where) {
  auto d = parse_duration_ns(value);
  if (!d) return input_error(0, where + ": " + d.error().message);
  if (*d < 1'000'000'000ULL || *d > 24ULL * 3600 * 1'000'000'000ULL)
    return input_error(0, where + ": '" + value + "' is outside 1s-24h");
  return *d;
}

Result<uint64_t> restart_drain(const std::string& value, const std::string& where) {
  auto d = parse_duration_ns(value);
  if (!d) return input_error(0, where + ": " + d.error().message);
  if (*d > 3600ULL * 1'000'000'000ULL) return input_error(0, where + ": '" + value + "' is over 1h");
  return *d;
}

Result<std::string> socket_path(const std::string& value, const std::string& where) {
  if (value.empty() || value[0] != '/') return input_error(0, where + ": '" + value + "' is not an absolute path");
  if (value.size() > 107) return input_error(0, where + ": a unix socket path is at most 107 bytes");
  return value;
}

// The gateway listens for other hosts: any address of this host, never a name.
Result<std::string> gateway_address(const std::string& value, const std::string& where) {
  auto a = parse_address_port(value);
  if (!a || a->second == 0)
    return input_error(0, where + ": '" + value +
                              "' is not ADDR:PORT (an IPv4 address, or an IPv6 one in brackets, and a port 1-65535)");
  return value;
}

Result<GuardPolicy> guard_policy_file(const std::string& file, const std::string& where) {
  if (file.empty()) return input_error(0, where + ": empty (a policy file's path)");
  auto p = read_guard_policy_file(file);
  if (!p) return input_error(0, where + " " + file + ": " + p.error().message);
  return *p;
}

Result<std::string> absolute_file(const std::string& value, const std::string& where) {
  if (value.empty() || value[0] != '/') return input_error(0, where + ": '" + value + "' is not an absolute path");
  return value;
}

// KEY=VALUE with faultcp's rules (cp/api/agent_selector.h): refused here, by
// flag, rather than by faultcp at registration.
Result<std::pair<std::string, std::string>> agent_label(const std::string& flag) {
  const auto eq = flag.find('=');
  if (eq == std::string::npos) return input_error(0, "--label " + flag + ": expected KEY=VALUE");
  const std::string key = flag.substr(0, eq), value = flag.substr(eq + 1);
  auto ok = [](char c, bool in_key) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || (in_key && c == '/');
  };
  if (key.empty() || key.size() > 63 || !std::isalnum(static_cast<unsigned char>(key[0])) ||
      !std::all_of(key.begin(), key.end(), [&](char c) { return ok(c, true); }))
    return input_error(
        0, "--label " + flag + ": KEY is 1-63 of letters, digits and . _ - /, starting with a letter or digit");
  if (value.size() > 63 || !std::all_of(value.begin(), value.end(), [&](char c) { return ok(c, false); }))
    return input_error(0, "--label " + flag + ": VALUE is 0-63 of letters, digits and . _ -");
  return std::make_pair(key, value);
}

// The gateway's flags over what the config file set, then what they need of
// each other: tokens with a gateway, nothing of the guard without one, and a
// policy that can run without TLS termination unless it is on.
Status guard_flags(FaultdConfig& c, const std::optional<std::string>& gateway, const std::optional<std::string>& policy,
                   const std::optional<std::string>& tokens, const std::optional<std::string>& json_log,
                   bool terminate_tls) {
  if (gateway) {
    auto a = gateway_address(*gateway, "--guard-gateway");
    if (!a) return a.error();
    c.guard_gateway = *a;
  }
  if (policy) {
    auto p = guard_policy_file(*policy, "--guard-policy");
    if (!p) return p.error();
    c.guard_policy_file = *policy;
    c.guard_policy = *p;
  }
  if (tokens) {
    auto t = read_gateway_tokens_file(*tokens, "--guard-tokens");
    if (!t) return t.error();
    c.guard_tokens_file = *tokens;
    c.guard_tokens = *t;
  }
  if (json_log) {
    auto f = absolute_file(*json_log, "--guard-json-log");
    if (!f) return f.error();
    c.guard_json_log = *f;
  }
  if (terminate_tls) c.guard_terminate_tls = true;
  if (c.guard_gateway.empty()) {
    for (const auto& [flag, given] : {std::pair<const char*, bool>{"--guard-policy", !c.guard_policy_file.empty()},
                                      {"--guard-tokens", !c.guard_tokens_file.empty()},
                                      {"--guard-terminate-tls", c.guard_terminate_tls},
                                      {"--guard-json-log", !c.guard_json_log.empty()}})
      if (given) return input_error(0, std::string(flag) + " configures the guard's gateway: give --guard-gateway too");
    return {};
  }
  if (c.guard_tokens.empty())
    return input_error(0, "--guard-gateway " + c.guard_gateway +
                              " needs --guard-tokens FILE (ID=TOKEN lines, mode 0600): every agent's request "
                              "carries a token");
  if (auto st = check_guard_policy_runnable(c.guard_policy, c.guard_terminate_tls); !st) {
    std::string why = st.error().message;
    if (auto at = why.find("add --terminate-tls"); at != std::string::npos)
      why.replace(at, 19, "add --guard-terminate-tls");
    return input_error(0, "--guard-policy " + c.guard_policy_file + ": " + why);
  }
  return {};
}

}  // namespace

std::string default_faultd_socket() {
  if (const char* env = std::getenv("FAULTLINE_FAULTD_SOCKET"); env && *env) return env;
  return state_root() + "/faultd.sock";
}

std::string faultd_usage() {
  return "usage: faultd [--config FILE] [--foreground] [--socket PATH] [--metrics HOST:PORT|off]\n"
         "             [--toxiproxy HOST:PORT|off] [--proxy-workers N] [--toxic-max-duration D]\n"
         "             [--restart-drain D] [--control-plane URL [--enroll-token TOKEN]\n"
         "             [--control-plane-ca FILE] [--agent-state FILE] [--label KEY=VALUE]...]\n"
         "             [--guard-gateway ADDR:PORT --guard-tokens FILE [--guard-policy FILE]\n"
         "             [--guard-terminate-tls] [--guard-json-log FILE]]\n"
         "  the Faultline host agent: the local API (JSON over HTTP/1.1 on a unix\n"
         "  socket, root only) and Prometheus /metrics on loopback\n"
         "  --config FILE      a JSON object with the same settings: {\"socket\": PATH,\n"
         "                     \"metrics\": \"127.0.0.1:9469\" | \"off\", \"foreground\": true};\n"
         "                     flags given as well win over it\n"
         "  --foreground       stay attached to the terminal, log to stderr (systemd runs\n"
         "                     it so); else detach once serving and log to syslog\n"
         "  --socket PATH      the local API (default: " +
         default_faultd_socket() +
         ")\n"
         "  --metrics ADDR     where /metrics listens (default 127.0.0.1:9469); off: nowhere\n"
         "  --toxiproxy ADDR   where Toxiproxy's REST API listens (default 127.0.0.1:8474,\n"
         "                     loopback only); off: no API and no proxies\n"
         "  --proxy-workers N  io_uring event loops of the proxies (default 0: one per CPU)\n"
         "  --toxic-max-duration D\n"
         "                     a toxic, or a proxy taken down, ends after D (default 1h,\n"
         "                     1s-24h): no fault outlives its bound\n"
         "  --restart-drain D  on SIGHUP (systemctl reload) a new faultd takes over the\n"
         "                     listeners and the proxies; the old one relays the\n"
         "                     connections it has for at most D (default 30s, up to 1h)\n"
         "  --control-plane URL\n"
         "                     take experiments from faultcp at URL (http:// or https://):\n"
         "                     register, long-poll for work, run it, report\n"
         "  --enroll-token TOKEN\n"
         "                     the enrollment token (flcp_enr_...) to register with, once;\n"
         "                     FAULTLINE_ENROLL_TOKEN too (keeps it out of ps)\n"
         "  --control-plane-ca FILE\n"
         "                     PEM CA an https --control-plane is checked against (instead\n"
         "                     of the system trust store)\n"
         "  --agent-state FILE the agent id and token, and the experiments under way\n"
         "                     (default <state dir>/cp-agent.json, mode 0600)\n"
         "  --label KEY=VALUE  a label of this agent (repeatable, at most 32), sent when it\n"
         "                     registers; experiments and policies select agents by label.\n"
         "                     KEY: 1-63 of A-Z a-z 0-9 . _ - / (first a letter or digit);\n"
         "                     VALUE: 0-63 of A-Z a-z 0-9 . _ -\n"
         "  --guard-gateway ADDR:PORT\n"
         "                     the AI-agent guard as a gateway for agents on other hosts:\n"
         "                     a forward proxy (HTTP and CONNECT) on ADDR:PORT, each\n"
         "                     request judged by the guard policy as the identity of its\n"
         "                     Proxy-Authorization token (407 without one)\n"
         "  --guard-tokens FILE the gateway's tokens, one ID=TOKEN a line (# comments);\n"
         "                     refused unless only its owner may read it (chmod 600)\n"
         "  --guard-policy FILE the guard section of a policy file (spec.guard, or the bare\n"
         "                     {mode, default_allow, rules}); none: monitor, default allow\n"
         "  --guard-terminate-tls\n"
         "                     terminate the agents' TLS with the local CA (served to them\n"
         "                     at http://ADDR:PORT/__faultline/ca.crt, no token needed)\n"
         "  --guard-json-log FILE\n"
         "                     the gateway's activity log (one hash-chained JSON line per\n"
         "                     decision; faultctl activity verify FILE)\n"
         "\n"
         "EXAMPLES\n"
         "  # in the foreground, with the defaults\n"
         "  faultd --foreground\n"
         "  # no metrics, a private socket\n"
         "  faultd --foreground --metrics off --socket /tmp/faultd.sock\n"
         "  # Toxiproxy's API on another port, one proxy worker\n"
         "  faultd --foreground --toxiproxy 127.0.0.1:18474 --proxy-workers 1\n"
         "  # an agent of a control plane, enrolled once with a token\n"
         "  FAULTLINE_ENROLL_TOKEN=flcp_enr_... faultd --control-plane https://cp.example.com:8470\n"
         "  # the guard's gateway on 10.0.0.1:3128 for the agents of tokens.txt (mode 0600)\n"
         "  faultd --guard-gateway 10.0.0.1:3128 --guard-tokens /etc/faultline/tokens.txt \\\n"
         "         --guard-policy /etc/faultline/guard.yaml --guard-terminate-tls\n";
}

Result<FaultdConfig> read_config_file(const std::string& path, FaultdConfig base) {
  std::ifstream in(path);
  if (!in) return as_bad_input(errno_error("--config " + path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return input_error(0, "--config " + path + ": not valid JSON");
  if (!j.is_object()) return input_error(0, "--config " + path + ": not a JSON object");
  for (const auto& [key, value] : j.items()) {
    const std::string where = path + ": \"" + key + "\"";
    if (key == "socket") {
      if (!value.is_string()) return input_error(0, where + " must be a string (a path)");
      auto p = socket_path(value.get<std::string>(), where);
      if (!p) return p.error();
      base.socket_path = *p;
    } else if (key == "metrics") {
      if (!value.is_string()) return input_error(0, where + " must be a string (HOST:PORT or off)");
      auto a = metrics_address(value.get<std::string>(), where);
      if (!a) return a.error();
      base.metrics_address = *a;
    } else if (key == "foreground") {
      if (!value.is_boolean()) return input_error(0, where + " must be true or false");
      base.foreground = value.get<bool>();
    } else if (key == "toxiproxy") {
      if (!value.is_string()) return input_error(0, where + " must be a string (HOST:PORT or off)");
      auto a = toxiproxy_address(value.get<std::string>(), where);
      if (!a) return a.error();
      base.toxiproxy_address = *a;
    } else if (key == "proxy_workers") {
      if (!value.is_number_unsigned()) return input_error(0, where + " must be a whole number (0-256)");
      auto w = proxy_workers(std::to_string(value.get<uint64_t>()), where);
      if (!w) return w.error();
      base.proxy_workers = *w;
    } else if (key == "toxic_max_duration") {
      if (!value.is_string()) return input_error(0, where + " must be a duration string (\"30m\")");
      auto d = toxic_max(value.get<std::string>(), where);
      if (!d) return d.error();
      base.toxic_max_ns = *d;
    } else if (key == "restart_drain") {
      if (!value.is_string()) return input_error(0, where + " must be a duration string (\"30s\")");
      auto d = restart_drain(value.get<std::string>(), where);
      if (!d) return d.error();
      base.restart_drain_ns = *d;
    } else if (key == "guard_gateway") {
      if (!value.is_string()) return input_error(0, where + " must be a string (ADDR:PORT)");
      auto a = gateway_address(value.get<std::string>(), where);
      if (!a) return a.error();
      base.guard_gateway = *a;
    } else if (key == "guard_policy") {
      if (!value.is_string()) return input_error(0, where + " must be a string (a policy file)");
      auto p = guard_policy_file(value.get<std::string>(), where);
      if (!p) return p.error();
      base.guard_policy_file = value.get<std::string>();
      base.guard_policy = *p;
    } else if (key == "guard_tokens") {
      if (!value.is_string()) return input_error(0, where + " must be a string (a tokens file)");
      auto t = read_gateway_tokens_file(value.get<std::string>(), where);
      if (!t) return t.error();
      base.guard_tokens_file = value.get<std::string>();
      base.guard_tokens = *t;
    } else if (key == "guard_terminate_tls") {
      if (!value.is_boolean()) return input_error(0, where + " must be true or false");
      base.guard_terminate_tls = value.get<bool>();
    } else if (key == "guard_json_log") {
      if (!value.is_string()) return input_error(0, where + " must be a string (a file)");
      auto f = absolute_file(value.get<std::string>(), where);
      if (!f) return f.error();
      base.guard_json_log = *f;
    } else {
      return input_error(0, path + ": unknown field \"" + key +
                                "\" (socket, metrics, foreground, toxiproxy, proxy_workers, toxic_max_duration, "
                                "restart_drain, guard_gateway, guard_policy, guard_tokens, guard_terminate_tls, "
                                "guard_json_log)");
    }
  }
  return base;
}

Result<FaultdArgs> parse_faultd_args(const std::vector<std::string>& args) {
  FaultdArgs out;
  out.config.socket_path = default_faultd_socket();
  std::optional<std::string> config_file, socket, metrics, toxiproxy, workers, toxic_max_flag, drain_flag;
  std::optional<std::string> control_plane, enroll_token, control_plane_ca, agent_state;
  std::optional<std::string> guard_gateway, guard_policy, guard_tokens, guard_json_log;
  bool foreground = false;
  bool guard_terminate_tls = false;
  std::vector<std::string> label_flags;
  const std::map<std::string, std::optional<std::string>*> valued = {{"--config", &config_file},
                                                                     {"--socket", &socket},
                                                                     {"--metrics", &metrics},
                                                                     {"--toxiproxy", &toxiproxy},
                                                                     {"--proxy-workers", &workers},
                                                                     {"--toxic-max-duration", &toxic_max_flag},
                                                                     {"--restart-drain", &drain_flag},
                                                                     {"--control-plane", &control_plane},
                                                                     {"--enroll-token", &enroll_token},
                                                                     {"--control-plane-ca", &control_plane_ca},
                                                                     {"--agent-state", &agent_state},
                                                                     {"--guard-gateway", &guard_gateway},
                                                                     {"--guard-policy", &guard_policy},
                                                                     {"--guard-tokens", &guard_tokens},
                                                                     {"--guard-json-log", &guard_json_log}};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> Result<std::string> {
      if (i + 1 >= args.size()) return input_error(0, std::string(flag) + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      out.help = faultd_usage();
      return out;
    }
    if (a == "--foreground") {
      foreground = true;
    } else if (a == "--guard-terminate-tls") {
      guard_terminate_tls = true;
    } else if (a == "--label" || a.rfind("--label=", 0) == 0) {
      if (a == "--label") {
        auto v = value("--label");
        if (!v) return v.error();
        label_flags.push_back(*v);
      } else {
        label_flags.push_back(a.substr(8));
      }
    } else if (auto slot = valued.find(a.substr(0, a.find('='))); slot != valued.end()) {
      if (a.find('=') != std::string::npos) {
        *slot->second = a.substr(a.find('=') + 1);
      } else {
        auto v = value(a.c_str());
        if (!v) return v.error();
        *slot->second = *v;
      }
    } else {
      return input_error(0, "unknown argument '" + a + "' (see faultd --help)");
    }
  }
  if (config_file) {
    auto c = read_config_file(*config_file, out.config);
    if (!c) return c.error();
    out.config = *c;
  }
  if (socket) {
    auto p = socket_path(*socket, "--socket");
    if (!p) return p.error();
    out.config.socket_path = *p;
  }
  if (metrics) {
    auto m = metrics_address(*metrics, "--metrics");
    if (!m) return m.error();
    out.config.metrics_address = *m;
  }
  if (toxiproxy) {
    auto a = toxiproxy_address(*toxiproxy, "--toxiproxy");
    if (!a) return a.error();
    out.config.toxiproxy_address = *a;
  }
  if (workers) {
    auto w = proxy_workers(*workers, "--proxy-workers");
    if (!w) return w.error();
    out.config.proxy_workers = *w;
  }
  if (toxic_max_flag) {
    auto d = toxic_max(*toxic_max_flag, "--toxic-max-duration");
    if (!d) return d.error();
    out.config.toxic_max_ns = *d;
  }
  if (drain_flag) {
    auto d = restart_drain(*drain_flag, "--restart-drain");
    if (!d) return d.error();
    out.config.restart_drain_ns = *d;
  }
  if (foreground) out.config.foreground = true;
  if (auto st = guard_flags(out.config, guard_gateway, guard_policy, guard_tokens, guard_json_log, guard_terminate_tls);
      !st)
    return st.error();
  if (!control_plane) {
    for (const auto& [flag, given] : {std::pair<const char*, bool>{"--enroll-token", enroll_token.has_value()},
                                      {"--control-plane-ca", control_plane_ca.has_value()},
                                      {"--agent-state", agent_state.has_value()},
                                      {"--label", !label_flags.empty()}})
      if (given)
        return input_error(0, std::string(flag) + " configures the control-plane agent: give --control-plane too");
    return out;
  }
  if (!enroll_token)
    if (const char* env = std::getenv("FAULTLINE_ENROLL_TOKEN"); env && *env) enroll_token = env;
  if (control_plane->rfind("http://", 0) != 0 && control_plane->rfind("https://", 0) != 0)
    return input_error(0, "--control-plane '" + *control_plane + "' is not an http:// or https:// URL");
  out.config.control_plane = *control_plane;
  if (enroll_token) {
    if (enroll_token->rfind("flcp_enr_", 0) != 0)
      return input_error(0, "--enroll-token: not an enrollment token (they start flcp_enr_)");
    out.config.enroll_token = *enroll_token;
  }
  if (control_plane_ca) {
    if (::access(control_plane_ca->c_str(), R_OK) != 0)
      return input_error(0, "--control-plane-ca " + *control_plane_ca + ": cannot be read");
    out.config.control_plane_ca = *control_plane_ca;
  }
  for (const auto& l : label_flags) {
    auto got = agent_label(l);
    if (!got) return got.error();
    if (out.config.labels.count(got->first))
      return input_error(0, "--label " + l + ": the key " + got->first + " is given twice");
    out.config.labels.insert(*got);
  }
  if (out.config.labels.size() > 32) return input_error(0, "--label: at most 32 labels");
  if (agent_state) {
    if (agent_state->empty() || (*agent_state)[0] != '/')
      return input_error(0, "--agent-state '" + *agent_state + "' is not an absolute path");
    out.config.agent_state = *agent_state;
  }
  return out;
}

}  // namespace faultline
