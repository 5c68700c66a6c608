// Flags and the config file of faultd, judged before anything starts.
#include "userspace/daemon/faultd_config.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

// /metrics serves on loopback only: it has no authentication.
Result<std::string> metrics_address(const std::string& value, const std::string& where) {
  if (value == "off") return std::string();
  const size_t colon = value.rfind(':');
  const std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    return input_error(0, where + ": '" + value + "' is not HOST:PORT (or off)");
  if (host.rfind("127.", 0) != 0 && host != "[::1]")
    return input_error(0, where + ": '" + value +
                                   "' is not a loopback address (127.x.x.x or [::1]): /metrics has no authentication");
  return value;
}

Result<std::string> socket_path(const std::string& value, const std::string& where) {
  if (value.empty() || value[0] != '/') return input_error(0, where + ": '" + value + "' is not an absolute path");
  if (value.size() > 107) return input_error(0, where + ": a unix socket path is at most 107 bytes");
  return value;
}

}  // namespace

std::string default_faultd_socket() {
  if (const char* env = std::getenv("FAULTLINE_FAULTD_SOCKET"); env && *env) return env;
  return state_root() + "/faultd.sock";
}

std::string faultd_usage() {
  return "usage: faultd [--config FILE] [--foreground] [--socket PATH] [--metrics HOST:PORT|off]\n"
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
         "\n"
         "EXAMPLES\n"
         "  # in the foreground, with the defaults\n"
         "  faultd --foreground\n"
         "  # no metrics, a private socket\n"
         "  faultd --foreground --metrics off --socket /tmp/faultd.sock\n";
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
    } else {
      return input_error(0, path + ": unknown field \"" + key + "\" (socket, metrics, foreground)");
    }
  }
  return base;
}

Result<FaultdArgs> parse_faultd_args(const std::vector<std::string>& args) {
  FaultdArgs out;
  out.config.socket_path = default_faultd_socket();
  std::optional<std::string> config_file, socket, metrics;
  bool foreground = false;
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
    } else if (a == "--config" || a == "--socket" || a == "--metrics") {
      auto v = value(a.c_str());
      if (!v) return v.error();
      (a == "--config" ? config_file : a == "--socket" ? socket : metrics) = *v;
    } else if (a.rfind("--config=", 0) == 0 || a.rfind("--socket=", 0) == 0 || a.rfind("--metrics=", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string flag = a.substr(0, eq), v = a.substr(eq + 1);
      (flag == "--config" ? config_file : flag == "--socket" ? socket : metrics) = v;
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
  if (foreground) out.config.foreground = true;
  return out;
}

}  // namespace faultline
