// faultctl mcp-guard [flags] -- CMD: the MCP server CMD as our child, its
// stdin and stdout ours to relay (or a remote server, --upstream-url); the
// agent talks to our stdin and stdout (or over HTTP, --listen). Every message
// goes through the MCP gate (userspace/guard/mcp_gate.h). Also `mcp-guard pins ...`.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/child.h"
#include "base/clock.h"
#include "base/files.h"
#include "base/units.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/mcp_fault_proxy.h"
#include "ctl/mcp_guard_args.h"
#include "ctl/mcp_http_listener.h"
#include "ctl/mcp_http_upstream.h"
#include "ctl/mcp_install.h"
#include "userspace/guard/approval_socket.h"
#include "userspace/guard/mcp_gate.h"
#include "userspace/guard_runtime/cp_link.h"
#include "userspace/guard_runtime/guard_activity_reporter.h"
#include "userspace/guard_runtime/guard_capture.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace mcp_guard_command_impl {

std::string policy_text(const GuardPolicy& p) {
  size_t mcp = 0;
  for (const auto& r : p.rules) mcp += r.is_mcp() ? 1 : 0;
  return std::string(p.mode == GuardMode::Enforce ? "enforce" : "monitor") + ", default " +
         (p.default_allow ? "allow" : "deny") + ", " + std::to_string(mcp) + " tool rule" + (mcp == 1 ? "" : "s");
}

std::atomic<int> g_mcp_signal{0};
void remember_mcp_signal(int sig) { g_mcp_signal.store(sig); }
std::atomic<bool> g_mcp_reload{false};
void remember_mcp_reload(int) { g_mcp_reload.store(true); }

// SIGHUP with --policy: the file read again; a bad one leaves the policy as it was.
void reload_policy(McpGate& gate, const std::string& file) {
  auto p = read_guard_policy_file(file);
  if (!p) {
    std::cerr << "faultline mcp-guard: SIGHUP: the policy stays as it was: " + p.error().message + "\n";
    return;
  }
  std::cerr << "faultline mcp-guard: SIGHUP: policy reloaded from " + file + ": " + policy_text(*p) + "\n";
  gate.reload(std::move(*p));
}

// One direction's writer: whole lines, one at a time; after a failure (the
// reader went away) the rest are dropped.
class LineWriter {
 public:
  LineWriter(int fd, std::string who) : fd_(fd), who_(std::move(who)) {}
  void write(const std::string& line) {
    std::lock_guard lock(mu_);
    if (fd_ < 0) return;
    if (auto st = write_all(fd_, line + "\n", who_); !st) {
      std::cerr << "faultline mcp-guard: " << st.error().describe() << "\n";
      fd_ = -1;
    }
  }
  // No more lines (the server's stdin: it sees EOF once our copy is closed).
  void close_fd() {
    std::lock_guard lock(mu_);
    if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
    fd_ = -1;
  }

 private:
  std::mutex mu_;
  int fd_;
  std::string who_;
};

std::string state_dir_of(const McpGuardArgs& a) { return a.state_dir.empty() ? guard_state_dir() : a.state_dir; }

Status make_private_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ec.value(), "--state-dir " + dir + ": " + ec.message());
  return ensure_private_dir(dir, false);
}

int run_pins(const McpGuardArgs& a) {
  McpPinStore store(mcp_pins_file(state_dir_of(a)));
  if (a.pins_verb == "list") {
    auto pins = store.list();
    if (!pins) return report_error("faultctl mcp-guard pins", pins.error());
    if (a.json) {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [server, sp] : *pins)
        for (const auto& [tool, p] : sp.tools)
          out[server][tool] = {{"hash", p.hash}, {"since", p.since}, {"pending", p.pending}};
      std::cout << out.dump(2) << "\n";
      return kExitCompleted;
    }
    if (pins->empty()) std::cout << "no pins in " << store.file() << "\n";
    for (const auto& [server, sp] : *pins) {
      std::cout << server << "\n";
      for (const auto& [tool, p] : sp.tools) {
        const std::string state = p.pending.empty() ? "pinned"
                                  : p.hash.empty()
                                      ? "new (pending: faultctl mcp-guard pins accept " + server + " " + tool + ")"
                                      : "changed (pending " + p.pending.substr(0, 12) +
                                            ": faultctl mcp-guard pins accept " + server + " " + tool + ")";
        std::cout << "  " << tool << "  " << (p.hash.empty() ? std::string("-") : p.hash.substr(0, 12)) << "  "
                  << p.since << "  " << state << "\n";
      }
    }
    return kExitCompleted;
  }
  if (a.pins_verb == "accept") {
    auto accepted = store.accept(a.server, a.tool);
    if (!accepted) return report_error("faultctl mcp-guard pins accept", accepted.error());
    for (const auto& t : *accepted) std::cout << "pinned " << a.server << " " << t << "\n";
    return kExitCompleted;
  }
  if (auto st = store.reset(a.server); !st) return report_error("faultctl mcp-guard pins reset", st.error());
  std::cout << "forgot the pins of " << a.server << ": its next tools/list is pinned afresh\n";
  return kExitCompleted;
}

int run_install(const McpGuardArgs& a) {
  McpInstallOptions o;
  o.verb = a.install_verb;
  o.apply = a.apply;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == 0) return report_error("faultctl mcp-guard " + o.verb, bad("HOME is not set"));
  o.home = home;
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  o.config_home = xdg != nullptr && *xdg == '/' ? std::string(xdg) : o.home + "/.config";
  std::error_code ec;
  o.project = a.project.empty() ? std::filesystem::current_path(ec).string() : a.project;
  o.faultctl = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (o.faultctl.empty()) o.faultctl = "faultctl";
  o.guard_flags = a.guard_flags;
  o.state_dir = state_dir_of(a);
  return run_mcp_install(o);
}

// Reads one fd to its end, line by line, into `on_line`.
void pump(int fd, const std::function<void(const McpLineReader::Line&)>& on_line) {
  McpLineReader reader;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (const auto& line : reader.feed(std::string_view(buf, static_cast<size_t>(n)))) on_line(line);
  }
  if (auto last = reader.finish()) on_line(*last);
}

// The server's side: a command on our stdio (its pipes, its reader thread)
// or a remote server over HTTP.
struct ServerSide {
  std::optional<HeldChild> child;
  UniqueFd out_r;  // the child's stdout, read by `reader`
  std::unique_ptr<LineWriter> writer;
  std::thread reader;
  std::unique_ptr<McpHttpUpstream> remote;

  void signal(int sig) const {
    if (child) ::kill(child->pid(), sig);
  }
  // The exit code once the server is gone: the child's, or 1 when the
  // remote's stream ended.
  std::optional<int> poll_exit() {
    if (child) return child->poll_exit();
    if (remote && remote->gone()) return 1;
    return std::nullopt;
  }
  // No more lines for the server: the child sees its stdin end; the remote
  // session ends.
  void close() {
    if (writer) writer->close_fd();
    if (remote) remote->stop();
  }
  void join() {
    close();
    if (reader.joinable()) reader.join();  // the child's stdout ends with it (unless it left a child holding it)
  }
};

// Starts the command with its stdin and stdout as pipes of ours.
Status start_child(const McpGuardArgs& a, ServerSide& side, McpGate& gate) {
  int to_server[2] = {-1, -1}, from_server[2] = {-1, -1};
  if (::pipe2(to_server, O_CLOEXEC) != 0) return errno_error("pipe");
  UniqueFd in_r(to_server[0]);
  side.writer = std::make_unique<LineWriter>(to_server[1], "the server's stdin");
  if (::pipe2(from_server, O_CLOEXEC) != 0) return errno_error("pipe");
  UniqueFd out_w(from_server[1]);
  side.out_r = UniqueFd(from_server[0]);
  const int in_fd = in_r.get(), out_fd = out_w.get();
  auto child = HeldChild::spawn(
      a.command, [in_fd, out_fd] { return ::dup2(in_fd, STDIN_FILENO) >= 0 && ::dup2(out_fd, STDOUT_FILENO) >= 0; },
      "faultctl mcp-guard");
  if (!child) return child.error();
  side.child.emplace(std::move(*child));
  FL_TRY(side.child->release());
  side.reader = std::thread(
      [&gate, fd = side.out_r.get()] { pump(fd, [&gate](const McpLineReader::Line& l) { gate.from_server(l); }); });
  return {};
}

// The client on our stdin and stdout, until stdin ends or the server exits.
int serve_stdio(const McpGuardArgs& a, ServerSide& side, McpGate& gate) {
  McpLineReader client;
  std::optional<int> code;
  bool client_open = true;
  uint64_t closed_at_ns = 0;  // when the client closed: the server gets 10 s to exit, then SIGTERM, then SIGKILL
  int stop_signal = 0;
  char buf[65536];
  while (!code) {
    if (int sig = g_mcp_signal.exchange(0); sig != 0) {
      if (!side.child) return 0;  // a remote server: the guard ends as asked
      side.signal(sig);
    }
    if (g_mcp_reload.exchange(false)) reload_policy(gate, a.policy_file);
    code = side.poll_exit();
    if (code || !client_open) {
      if (code) continue;
      if (!side.child) return 0;
      const uint64_t waited_ns = monotonic_ns() - closed_at_ns;
      const int due = waited_ns > 15'000'000'000ULL ? SIGKILL : waited_ns > 10'000'000'000ULL ? SIGTERM : 0;
      if (due != 0 && due != stop_signal) {
        std::cerr << "faultline mcp-guard: the server did not exit after its stdin closed: "
                  << (due == SIGKILL ? "SIGKILL" : "SIGTERM") << "\n";
        side.signal(due);
        stop_signal = due;
      }
      sleep_ms(20);
      continue;
    }
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&p, 1, 50);
    if (ready <= 0) continue;
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (auto last = client.finish()) gate.from_client(*last);
      client_open = false;
      closed_at_ns = monotonic_ns();
      // The end of the session: what is held is settled now (timed out), then
      // the server sees its stdin end, as MCP's shutdown asks.
      for (const auto& held : gate.approvals().list())
        (void)gate.approvals().decide(held.id, false, "the client closed the session");
      side.close();
      continue;
    }
    for (const auto& line : client.feed(std::string_view(buf, static_cast<size_t>(n)))) gate.from_client(line);
  }
  return *code;
}

// The client over Streamable HTTP, until a signal or the server's end.
int serve_http(const McpGuardArgs& a, ServerSide& side, McpGate& gate, McpHttpListener& listener) {
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return report_error("faultctl mcp-guard", errno_error("eventfd"));
  std::optional<int> code;
  listener.every(std::chrono::milliseconds(50), [&] {
    if (code) return;
    if (int sig = g_mcp_signal.exchange(0); sig != 0) {
      if (side.child) {
        side.signal(sig);
      } else {
        code = 0;
      }
    }
    if (g_mcp_reload.exchange(false)) reload_policy(gate, a.policy_file);
    if (!code) code = side.poll_exit();
    if (code) {
      const uint64_t one = 1;
      (void)!::write(stop.get(), &one, sizeof one);
    }
  });
  if (auto st = listener.run(stop.get()); !st) return report_error("faultctl mcp-guard --listen", st.error());
  for (const auto& held : gate.approvals().list()) (void)gate.approvals().decide(held.id, false, "the guard is ending");
  return code.value_or(0);
}

// --control-plane: the reporter of this server's chain, over the link the
// guard's own reporter uses (userspace/guard_runtime/guard_activity_reporter.h).
Result<std::unique_ptr<GuardActivityReporter>> start_reporter(const McpGuardArgs& a, const std::string& state_dir,
                                                              const std::string& chain) {
  auto link = CpLink::create(a.cp_url, a.cp_token,
                             {.token_hint = "an agent token of the workspace: POST /v1/agents/register with an "
                                            "enrollment token",
                              .max_body = 1024 * 1024});
  if (!link) return link.error();
  return GuardActivityReporter::open(std::make_shared<const CpLink>(std::move(*link)), state_dir, chain,
                                     [](const std::string& line) { std::cerr << line + "\n"
                                                                             << std::flush; });
}

// What the finance pack judges, for the start line: "finance: max order 5000, ...".
std::string finance_text(const McpGuardArgs& a, const std::string& ledger) {
  const FinanceLimits& l = a.finance;
  std::string s;
  const auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (l.max_order_value) add("orders over " + format_finance_amount(*l.max_order_value) + " denied");
  if (l.approve_over) add("over " + format_finance_amount(*l.approve_over) + " held");
  if (l.daily_limit) add("daily limit " + format_finance_amount(*l.daily_limit) + " (UTC day)");
  if (l.max_orders_per_hour) add("at most " + std::to_string(*l.max_orders_per_hour) + " orders an hour");
  if (l.outlier_factor) add("outliers over " + format_finance_amount(*l.outlier_factor) + "x the median held");
  if (l.deny_account_danger) add("withdrawals, transfers and account settings denied");
  if (l.market_hours) add("orders outside NYSE hours held");
  return "finance: actions inspected" + (s.empty() ? std::string(", no limits") : "; " + s) + "; ledger " + ledger;
}

int run_guard(McpGuardArgs& a) {
  ::signal(SIGPIPE, SIG_IGN);
  const std::string state_dir = state_dir_of(a);
  if (auto st = make_private_dir(state_dir); !st) return report_error("faultctl mcp-guard", st.error());
  // With faultcp: this server's own chain (mcp_chain_identity()), its log
  // by default in the state folder, each line spooled and reported.
  std::unique_ptr<GuardActivityReporter> reporter;
  ActivityWriter::Options wo;
  const std::string chain = a.cp_url.empty() ? a.identity : mcp_chain_identity(a.identity, a.server_name);
  if (!a.cp_url.empty()) {
    auto r = start_reporter(a, state_dir, chain);
    if (!r) return report_error("faultctl mcp-guard", r.error());
    reporter = std::move(*r);
    if (a.json_log.empty()) a.json_log = state_dir + "/activity-" + activity_file_word(chain) + ".jsonl";
    wo.on_append = [rp = reporter.get()](const ActivityEntry& e, const std::string& line) { rp->add(e, line); };
  }
  std::shared_ptr<ActivityWriter> activity;
  if (!a.json_log.empty()) {
    auto w = ActivityWriter::open(a.json_log, wo);
    if (!w) {
      std::cerr << "faultctl mcp-guard: --json-log " << a.json_log << ": " << w.error().describe() << "\n";
      return w.error().bad_input ? int(kExitBadInput) : 1;
    }
    activity = std::make_shared<ActivityWriter>(std::move(*w));
  }
  size_t http_rules = 0;
  for (const auto& r : a.policy.rules) http_rules += r.is_mcp() ? 0 : 1;

  // Declared before the gate, which writes to them until it is gone.
  McpGate* gate_ptr = nullptr;
  std::unique_ptr<McpHttpListener> listener;
  if (!a.listen.empty()) {
    McpHttpListenerOptions lo;
    lo.address = a.listen;
    lo.allow_remote = a.allow_remote;
    lo.to_gate = [&gate_ptr](const McpLineReader::Line& l) { gate_ptr->from_client(l); };
    lo.log = [](const std::string& line) { std::cerr << line + "\n" << std::flush; };
    auto l = McpHttpListener::create(std::move(lo));
    if (!l) return report_error("faultctl mcp-guard", l.error());
    listener = std::move(*l);
  }
  LineWriter client_writer(STDOUT_FILENO, "stdout (the client)");
  ServerSide side;

  std::unique_ptr<McpTrace> trace;
  if (!a.trace.empty()) {
    auto t = McpTrace::open(a.trace);
    if (!t) return report_error("faultctl mcp-guard", t.error());
    trace = std::move(*t);
  }
  // What goes on each side's wire, traced.
  const McpFaultProxy::Send send_server = [&side, &trace](const std::string& line) {
    if (trace) trace->record("server", line);
    if (side.remote) {
      side.remote->send(line);
    } else if (side.writer) {
      side.writer->write(line);
    }
  };
  const McpFaultProxy::Send send_client = [&listener, &client_writer, &trace](const std::string& line) {
    if (trace) trace->record("client", line);
    if (listener) {
      listener->to_client(line);
    } else {
      client_writer.write(line);
    }
  };
  McpFaultProxy faults(a.fault, [](const std::string& line) { std::cerr << line + "\n" << std::flush; });

  McpGateOptions go;
  go.server_name = a.server_name;
  go.identity = a.identity;
  go.activity_identity = chain;
  go.dry_run = a.dry_run;
  go.approval_prefix = std::to_string(::getpid());
  go.approve_timeout = a.approve_timeout;
  go.activity = activity;
  go.pins = std::make_shared<McpPinStore>(mcp_pins_file(state_dir));
  go.inspect_actions = a.inspect_actions;
  go.finance_limits = a.finance;
  if (a.inspect_actions) {
    auto ledger = FinanceLedger::open(mcp_finance_file(state_dir, a.server_name));
    if (!ledger) return report_error("faultctl mcp-guard", ledger.error());
    go.finance_ledger = std::move(*ledger);
  }
  const std::string finance_line =
      a.inspect_actions ? finance_text(a, go.finance_ledger ? go.finance_ledger->path() : "") : "";
  go.log = [](const std::string& line) { std::cerr << line + "\n" << std::flush; };
  go.to_server = [&faults, &send_server, &send_client](const std::string& line) {
    faults.to_server(line, send_server, send_client);
  };
  go.to_client = send_client;
  McpGate gate(std::move(go), a.policy);
  gate_ptr = &gate;

  std::unique_ptr<ApprovalSocket> approvals;
  if (auto dir = guard_socket_dir(true); dir) {
    auto sock = ApprovalSocket::start(guard_socket_path(*dir, ::getpid()), gate.approvals(),
                                      GuardAbout{::getpid(), a.identity, "mcp-guard " + a.server_name});
    if (!sock) return report_error("faultctl mcp-guard: the approvals socket", sock.error());
    approvals = std::move(*sock);
  } else {
    return report_error("faultctl mcp-guard: the approvals socket", dir.error());
  }

  std::string what;
  if (!a.upstream_url.empty()) {
    McpHttpUpstreamOptions uo;
    uo.url = a.upstream_url;
    uo.transport = a.upstream_sse ? McpUpstreamTransport::Sse : McpUpstreamTransport::Streamable;
    for (const auto& h : a.upstream_headers) {
      // The values from the environment now: secrets from here on, never printed.
      const size_t colon = h.find(':');
      auto value = expand_header_env(h.substr(colon + 1));
      if (!value) {
        std::cerr << "faultctl mcp-guard: --upstream-header " << h.substr(0, colon) << ": " << value.error().message
                  << "\n";
        return kExitBadInput;
      }
      const size_t start = value->find_first_not_of(' ');
      uo.headers.push_back(h.substr(0, colon) + ": " + (start == std::string::npos ? "" : value->substr(start)));
    }
    uo.on_message = [&gate](const McpLineReader::Line& l) { gate.from_server(l); };
    uo.log = [](const std::string& line) { std::cerr << line + "\n" << std::flush; };
    auto remote = McpHttpUpstream::start(std::move(uo));
    if (!remote) return report_error("faultctl mcp-guard", remote.error());
    side.remote = std::move(*remote);
    // The URL without its query (a token may ride there) and header values never shown.
    what = a.upstream_url.substr(0, a.upstream_url.find_first_of("?#")) + " over " +
           (a.upstream_sse ? "HTTP+SSE" : "Streamable HTTP") +
           (a.upstream_headers.empty() ? "" : ", " + std::to_string(a.upstream_headers.size()) + " header(s) of yours");
  } else {
    if (auto st = start_child(a, side, gate); !st) {
      side.join();
      std::cerr << "faultctl mcp-guard: " << st.error().describe() << "\n";
      return side.child ? 127 : 1;
    }
    what = a.command[0] + ", pid " + std::to_string(side.child->pid());
  }
  std::cerr << "faultline mcp-guard: server " << a.server_name << " (" << what << "): " << policy_text(a.policy)
            << (a.dry_run ? ", dry run" : "") << "; identity " << a.identity << "; pins " << mcp_pins_file(state_dir)
            << "; approvals " << approvals->path() << (a.json_log.empty() ? "" : "; activity " + a.json_log)
            << (listener ? "; clients at http://" + listener->address() + "/mcp" : "") << "\n";
  if (reporter)
    std::cerr << "faultline mcp-guard: faultcp " << a.cp_url.substr(0, a.cp_url.find_first_of("?#"))
              << ": activity reported as " << chain << " (spool " << state_dir << ", " << reporter->spooled_at_start()
              << " line" << (reporter->spooled_at_start() == 1 ? "" : "s") << " from before)\n";
  if (!finance_line.empty()) std::cerr << "faultline mcp-guard: " << finance_line << "\n";
  if (!a.fault.tool.empty())
    std::cerr << "faultline mcp-guard: fault: allowed tools/call " << a.fault.tool << " -> "
              << (a.fault.error_text.empty() ? "delayed " + format_duration(a.fault.delay_ns)
                                             : "error \"" + a.fault.error_text + "\"")
              << (a.fault.pct < 100 ? " (" + std::to_string(a.fault.pct) + "% of them)" : "")
              << "; FAULTLINE_DISABLED or the kill file " << kill_file_path() << " end it\n";
  if (http_rules > 0)
    std::cerr << "faultline mcp-guard: " << http_rules << " rule" << (http_rules == 1 ? "" : "s")
              << " of the policy match HTTP requests (no mcp_tool or mcp_args): not used here\n";

  struct sigaction sa {
  }, old_int{}, old_term{}, hup{}, old_hup{};
  sa.sa_handler = remember_mcp_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  if (!a.policy_file.empty()) {
    hup.sa_handler = remember_mcp_reload;
    sigaction(SIGHUP, &hup, &old_hup);
  }
  int code = listener ? serve_http(a, side, gate, *listener) : serve_stdio(a, side, gate);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (!a.policy_file.empty()) sigaction(SIGHUP, &old_hup, nullptr);
  if (side.child && !side.child->poll_exit()) {
    // The guard ends before its server (a signal with --listen kept it): the
    // server sees its stdin end, then SIGTERM.
    side.close();
    for (int i = 0; i < 100 && !side.child->poll_exit(); ++i) sleep_ms(20);
    if (!side.child->poll_exit()) side.signal(SIGTERM);
  }
  side.join();
  const McpGateCounts c = gate.counts();
  std::cerr << "faultline mcp-guard: server " << a.server_name << (side.child ? " exited " : " session ended, exit ")
            << code << "; " << c.calls << " tools/call: " << c.allowed << " allowed, " << c.denied << " denied, "
            << c.held << " held (" << c.approved << " approved), " << c.would_deny << " would deny, " << c.would_hold
            << " would hold, " << c.dry_run << " dry run, " << faults.faulted() << " faulted; " << c.rug_pulls
            << " rug pull finding" << (c.rug_pulls == 1 ? "" : "s") << "; " << c.bad_lines << " bad line"
            << (c.bad_lines == 1 ? "" : "s") << "\n";
  if (activity) (void)activity->sync();
  return code;
}

}  // namespace mcp_guard_command_impl

using namespace mcp_guard_command_impl;

int cmd_mcp_guard(const std::vector<std::string>& args) {
  return run_command("faultctl mcp-guard", parse_mcp_guard_args(args), kRootNever, [](McpGuardArgs& a) -> int {
    if (!a.pins_verb.empty()) return run_pins(a);
    if (!a.install_verb.empty()) return run_install(a);
    return run_guard(a);
  });
}

}  // namespace faultline
