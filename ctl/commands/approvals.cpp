// faultctl approvals list | approve ID | deny ID [--reason R] | revoke ID|all:
// the requests this user's running guards hold, decided over each guard's
// unix socket, and the command lines --approve-dangerous granted "always".
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <charconv>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/unique_fd.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "userspace/guard/approval_socket.h"
#include "userspace/guardrails/http.h"

namespace faultline {
namespace approvals_command_impl {

constexpr const char* kApprovalsUsage =
    "usage: faultctl approvals list [--json]\n"
    "       faultctl approvals approve ID\n"
    "       faultctl approvals deny ID [--reason R]\n"
    "       faultctl approvals revoke GRANT-ID|all\n"
    "  the requests held by this user's running guards (faultctl guard --approve P;\n"
    "  faultctl mcp-guard --approve-tool T holds MCP tool calls; faultctl guard\n"
    "  --approve-dangerous holds execs, and lists the command lines answered\n"
    "  \"always\" at its terminal: PID.gN, ended by revoke; all: every guard's),\n"
    "  found by their sockets in $XDG_RUNTIME_DIR/faultline (root: /run/faultline,\n"
    "  else /tmp/faultline-UID). ID is as listed (PID.N: the guard's pid, then the\n"
    "  request's number). A decision reaches the held request at once; deny's\n"
    "  reason is shown to the client. Exit 0 done, 1 no such held request or no\n"
    "  guard answered, 2 bad input.\n";

constexpr Example kApprovalsExamples[] = {
    {"what waits for a decision", "faultctl approvals list"},
    {"let it through", "faultctl approvals approve 4123.1"},
    {"refuse it, saying why", "faultctl approvals deny 4123.2 --reason 'not during the freeze'"},
    {"ask again for a command granted always", "faultctl approvals revoke 4123.g1"},
};

struct ApprovalsArgs {
  std::string verb;  // list, approve, deny, revoke
  std::string id;
  std::string reason;
  bool json = false;
};

Result<Parsed<ApprovalsArgs>> parse_approvals_args(const std::vector<std::string>& args) {
  auto help = [] { return Parsed<ApprovalsArgs>(HelpText{with_examples(kApprovalsUsage, kApprovalsExamples)}); };
  if (args.empty()) return bad("give a subcommand: list, approve ID, deny ID [--reason R] or revoke GRANT-ID|all");
  ApprovalsArgs a;
  a.verb = args[0];
  if (a.verb == "-h" || a.verb == "--help") return help();
  if (a.verb != "list" && a.verb != "approve" && a.verb != "deny" && a.verb != "revoke")
    return bad("unknown subcommand '" + a.verb + "' (list, approve ID, deny ID [--reason R], revoke GRANT-ID|all)");
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help") return help();
    if (w == "--json" && a.verb == "list") {
      a.json = true;
    } else if (w == "--reason" && a.verb == "deny") {
      if (i + 1 >= args.size()) return bad("--reason needs a value");
      a.reason = args[++i];
    } else if (w.rfind("--reason=", 0) == 0 && a.verb == "deny") {
      a.reason = w.substr(9);
    } else if (!w.empty() && w[0] == '-') {
      return bad("unknown flag '" + w + "' for " + a.verb);
    } else if (a.verb != "list" && a.id.empty()) {
      a.id = w;
    } else {
      return bad("unexpected '" + w + "'");
    }
  }
  if (a.verb != "list" && a.id.empty()) return bad(a.verb + ": give the ID (faultctl approvals list)");
  if (a.verb == "revoke") {
    const auto dot = a.id.find(".g");
    if (a.id != "all" && (dot == std::string::npos || dot == 0 || dot + 2 == a.id.size()))
      return bad("revoke " + a.id + ": a grant's ID is PID.gN, as faultctl approvals list shows it, or all");
  } else if (a.verb != "list" && a.id.find('.') == std::string::npos) {
    return bad(a.verb + " " + a.id + ": an ID is PID.N, as faultctl approvals list shows it");
  }
  return Parsed<ApprovalsArgs>(std::move(a));
}

// One request to a guard's socket; nothing when no guard listens there.
std::optional<Result<HttpResponse>> call_guard(const std::string& path, const std::string& method,
                                               const std::string& target, const std::string& body) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return std::nullopt;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return std::nullopt;
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: guard\r\nContent-Type: application/json\r\n" +
                          "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = ::send(fd.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Result<HttpResponse>(errno_error("send to " + path));
    sent += size_t(n);
  }
  HttpResponseReader reader;
  const uint64_t deadline = monotonic_ns() + 5'000'000'000ULL;
  char buf[16 * 1024];
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) return Result<HttpResponse>(make_error(ETIMEDOUT, path + ": no answer in 5 s"));
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, int((deadline - now) / 1'000'000) + 1) <= 0) continue;
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Result<HttpResponse>(errno_error("recv from " + path));
    if (n == 0) {
      if (auto st = reader.close(); !st) return Result<HttpResponse>(st.error());
      return Result<HttpResponse>(reader.take());
    }
    auto done = reader.feed(std::string_view(buf, size_t(n)));
    if (!done) return Result<HttpResponse>(done.error());
    if (*done) return Result<HttpResponse>(reader.take());
  }
}

// Every guard socket of this user: guard-<pid>.sock in the runtime folder.
std::vector<std::pair<int, std::string>> guard_sockets(const std::string& dir) {
  std::vector<std::pair<int, std::string>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("guard-", 0) != 0 || n.size() < 12 || n.substr(n.size() - 5) != ".sock") continue;
    const std::string pid = n.substr(6, n.size() - 11);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoi(pid), dir + "/" + n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string error_of(const HttpResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return "HTTP " + std::to_string(r.status.code);
}

}  // namespace approvals_command_impl

using namespace approvals_command_impl;

int cmd_approvals(const std::vector<std::string>& args) {
  const std::string who = "faultctl approvals";
  return run_command(who, parse_approvals_args(args), kRootNever, [&](const ApprovalsArgs& a) -> int {
    auto dir = guard_socket_dir(false);
    if (!dir) {
      std::cerr << who << ": no running guard of this user (" << dir.error().describe() << ")\n";
      return a.verb == "list" ? int(kExitCompleted) : int(kExitFailure);
    }
    if (a.verb == "list") {
      nlohmann::json all = nlohmann::json::array();
      nlohmann::json grants = nlohmann::json::array();
      size_t guards = 0;
      for (const auto& [pid, path] : guard_sockets(*dir)) {
        auto r = call_guard(path, "GET", "/v1/approvals", "");
        if (!r || !*r || (*r)->status.code != 200) continue;  // a socket left by a guard that is gone
        auto j = nlohmann::json::parse((*r)->body, nullptr, false);
        if (!j.is_object() || !j["approvals"].is_array()) continue;
        ++guards;
        for (auto& p : j["approvals"]) all.push_back(p);
        if (j.contains("grants") && j["grants"].is_array())
          for (auto& g : j["grants"]) grants.push_back(g);
      }
      if (a.json) {
        std::cout << all.dump() << "\n";
        return int(kExitCompleted);
      }
      for (const auto& g : grants)
        std::cout << g.value("id", "") << "  always allowed: " << g.value("command", "") << "  rule "
                  << g.value("rule", "") << "  since " << g.value("created", "") << "\n";
      if (all.empty()) {
        std::cout << "nothing waits for approval (" << guards << " running guard" << (guards == 1 ? "" : "s") << ")\n";
        return int(kExitCompleted);
      }
      for (const auto& p : all) {
        std::cout << p.value("id", "") << "  " << p.value("identity", "") << "  " << p.value("method", "") << " "
                  << p.value("host", "") << p.value("path", "") << "  rule " << p.value("rule", "")
                  << (p.value("reason", "").empty() ? "" : " (" + p.value("reason", "") + ")") << "  until "
                  << p.value("deadline", "") << "\n";
      }
      return int(kExitCompleted);
    }
    if (a.verb == "revoke" && a.id == "all") {
      size_t revoked = 0, guards = 0;
      for (const auto& [pid, path] : guard_sockets(*dir)) {
        auto r = call_guard(path, "POST", "/v1/grants/all/revoke", "");
        if (!r || !*r || (*r)->status.code != 200) continue;  // gone, or a guard that holds no execs
        ++guards;
        auto j = nlohmann::json::parse((*r)->body, nullptr, false);
        if (j.is_object() && j["revoked"].is_number_unsigned()) revoked += j["revoked"].get<size_t>();
      }
      std::cout << "revoked " << revoked << " grant" << (revoked == 1 ? "" : "s") << " (" << guards << " guard"
                << (guards == 1 ? "" : "s") << " holding execs)\n";
      return int(kExitCompleted);
    }
    // PID.N: the guard's socket is named by its pid.
    const std::string pid = a.id.substr(0, a.id.find('.'));
    int pid_number = 0;
    const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), pid_number);
    if (pid.empty() || ec != std::errc() || end != pid.data() + pid.size() || pid_number <= 0) {
      std::cerr << who << ": " << a.id << ": an ID is PID.N, as faultctl approvals list shows it\n";
      return int(kExitBadInput);
    }
    const std::string path = guard_socket_path(*dir, pid_number);
    const std::string body = a.reason.empty() ? "" : nlohmann::json{{"reason", a.reason}}.dump();
    const std::string target =
        a.verb == "revoke" ? "/v1/grants/" + a.id + "/revoke" : "/v1/approvals/" + a.id + "/" + a.verb;
    auto r = call_guard(path, "POST", target, body);
    if (!r) {
      std::cerr << who << ": " << a.id << ": no running guard of pid " << pid << " (" << path << ")\n";
      return int(kExitFailure);
    }
    if (!*r) {
      std::cerr << who << ": " << a.id << ": " << r->error().describe() << "\n";
      return int(kExitFailure);
    }
    if ((*r)->status.code != 200) {
      std::cerr << who << ": " << a.id << ": " << error_of(**r) << "\n";
      return int(kExitFailure);
    }
    std::cout << a.id << ": "
              << (a.verb == "approve" ? "approved"
                  : a.verb == "deny"  ? "denied"
                                      : "revoked, asked again next time")
              << "\n";
    return int(kExitCompleted);
  });
}

}  // namespace faultline
