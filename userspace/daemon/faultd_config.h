// faultd's settings: flags, and the same settings in a JSON config file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/guard_runtime/guard_gateway.h"

namespace faultline {

inline constexpr const char* kDefaultMetricsAddress = "127.0.0.1:9469";
inline constexpr const char* kDefaultToxiproxyAddress = "127.0.0.1:8474";
inline constexpr uint64_t kDefaultToxicMaxNs = 3600ULL * 1'000'000'000ULL;  // 1h

struct FaultdConfig {
  std::string socket_path;                               // the local API; default <state dir>/faultd.sock
  std::string metrics_address = kDefaultMetricsAddress;  // empty: no /metrics ("--metrics off")
  bool foreground = false;                               // else detach once serving
  // Toxiproxy's REST API and the proxies it makes; empty: neither ("--toxiproxy off").
  std::string toxiproxy_address = kDefaultToxiproxyAddress;
  unsigned proxy_workers = 0;                  // io_uring event loops of the proxies; 0: one per CPU
  uint64_t toxic_max_ns = kDefaultToxicMaxNs;  // a toxic (or a proxy taken down) ends after this
  // SIGHUP (systemctl reload): how long the old process relays the connections
  // it had, after its successor took the listeners, before it closes the rest.
  uint64_t restart_drain_ns = 30'000'000'000ULL;
  // The control plane (faultcp) this faultd takes experiments from; empty: none.
  std::string control_plane;                  // --control-plane URL
  std::string enroll_token;                   // --enroll-token, or FAULTLINE_ENROLL_TOKEN
  std::string control_plane_ca;               // --control-plane-ca FILE
  std::string agent_state;                    // --agent-state FILE; empty: <state dir>/cp-agent.json
  std::map<std::string, std::string> labels;  // --label KEY=VALUE (repeatable), sent at registration
  // The guard's gateway (docs/guard.md, "Gateway mode"): a forward proxy on
  // guard_gateway for agents on other hosts, each request with a token of
  // guard_tokens; empty: none. The files are read when the flags are parsed
  // (and again by a SIGHUP successor, which parses them anew).
  std::string guard_gateway;      // --guard-gateway ADDR:PORT
  std::string guard_policy_file;  // --guard-policy FILE: its guard section ("" monitor, default allow)
  GuardPolicy guard_policy;       // read from guard_policy_file
  std::string guard_tokens_file;  // --guard-tokens FILE: ID=TOKEN lines, mode 0600 or stricter
  std::vector<GatewayToken> guard_tokens;
  bool guard_terminate_tls = false;  // --guard-terminate-tls: the CA at /__faultline/ca.crt
  std::string guard_json_log;        // --guard-json-log FILE: the activity log ("" none)
};

// The local API's socket: FAULTLINE_FAULTD_SOCKET when set, else
// <state dir>/faultd.sock (/run/faultline/faultd.sock).
[[nodiscard]] std::string default_faultd_socket();

// What the command line asked: the settings, or the help text.
struct FaultdArgs {
  FaultdConfig config;
  std::optional<std::string> help;
};

// faultd [--config FILE] [--foreground] [--socket PATH] [--metrics ADDR|off]
// [--toxiproxy ADDR|off] [--proxy-workers N] [--toxic-max-duration D] [--restart-drain D]
// [--guard-gateway ADDR:PORT --guard-tokens FILE [--guard-policy FILE]
// [--guard-terminate-tls] [--guard-json-log FILE]]:
// the file first, then the flags over it. Bad input names the flag or the
// file's field (an error with bad_input set: exit 2).
[[nodiscard]] Result<FaultdArgs> parse_faultd_args(const std::vector<std::string>& args);

// The config file, a JSON object: {"socket": PATH, "metrics": "HOST:PORT" | "off",
// "foreground": bool, "toxiproxy": "HOST:PORT" | "off", "proxy_workers": N,
// "toxic_max_duration": "1h", "restart_drain": "30s", "guard_gateway": "ADDR:PORT",
// "guard_policy": FILE, "guard_tokens": FILE, "guard_terminate_tls": bool,
// "guard_json_log": FILE}; what it sets replaces base's (the guard's files are
// read by parse_faultd_args, after the flags). Unknown fields are refused, by
// name.
[[nodiscard]] Result<FaultdConfig> read_config_file(const std::string& path, FaultdConfig base);

[[nodiscard]] std::string faultd_usage();

}  // namespace faultline
