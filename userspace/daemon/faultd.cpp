// Listeners, the stop and restart signals as an fd the server watches, the
// ready line, and the handover to a successor.
#include "userspace/daemon/faultd.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stop_token>
#include <thread>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/files.h"
#include "base/unique_fd.h"
#include "userspace/daemon/cp_agent.h"
#include "userspace/daemon/faultd_api.h"
#include "userspace/daemon/proxy_faults.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/guard_runtime/guard_capture.h"
#include "userspace/net/http_server.h"
#include "userspace/ops/features_report.h"
#include "userspace/policy/policy_apply.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

// Reaps expired learned addresses (reap_learned_addresses) every minute on a
// thread of its own, until destroyed.
class LearnedAddressReaper {
 public:
  LearnedAddressReaper()
      : thread_([](std::stop_token stop) {
          std::mutex mu;
          std::condition_variable_any cv;
          std::unique_lock lock(mu);
          while (!cv.wait_for(lock, stop, std::chrono::minutes(1), [] { return false; }) && !stop.stop_requested())
            (void)reap_learned_addresses(bpffs_layout());
        }) {}

 private:
  std::jthread thread_;
};

constexpr int kHandoverVersion = 1;
constexpr int kSuccessorStartMs = 15'000;

int fail(const FaultdHooks& hooks, const Error& e) {
  hooks.log("faultd: " + e.describe());
  return e.bad_input ? kExitBadInput : kExitFailure;
}

// A successor's inherited state, taken once (the variable is cleared, so a
// later restart of this process starts from its own state).
Result<std::optional<nlohmann::json>> take_handover() {
  const char* env = std::getenv(kFaultdHandoverEnv);
  if (env == nullptr) return std::optional<nlohmann::json>{};
  const int fd = std::atoi(env);
  ::unsetenv(kFaultdHandoverEnv);
  UniqueFd memfd(fd);
  if (fd <= 2 || ::lseek(fd, 0, SEEK_SET) != 0) return make_error(EBADF, "the handover state is not readable");
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return errno_error("reading the handover state");
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kHandoverVersion)
    return make_error(EINVAL, "the handover state is not one this faultd reads");
  return std::optional<nlohmann::json>(std::move(j));
}

int inherited_fd(const nlohmann::json& state, const char* key) {
  return state.contains(key) && state[key].is_number_integer() ? state[key].get<int>() : -1;
}

// Starts a successor with the listeners and the state; returns its pid once it
// serves, or why it did not.
Result<pid_t> start_successor(const FaultdHooks& hooks, HttpServer& server, ProxyFaults* proxies, GuardCapture* gateway,
                              const std::string& gateway_address, const std::vector<std::string>& names) {
  nlohmann::json state{{"version", kHandoverVersion}};
  std::vector<int> pass;
  const std::vector<int> fds = server.listener_fds();
  for (size_t i = 0; i < fds.size() && i < names.size(); ++i) {
    state[names[i]] = fds[i];
    pass.push_back(fds[i]);
  }
  std::optional<ProxyFaults::Handover> ph;
  if (proxies != nullptr) {
    auto h = proxies->handover();
    if (!h) return h.error();
    ph = std::move(*h);
    state["proxies"] = ph->state;
    state["proxy_workers"] = proxies->registry().io_paths().workers;
    for (const auto& fd : ph->fds) pass.push_back(fd.get());
  }
  // The guard's gateway: its listening sockets (the successor's gateway is
  // made on them when its address is the same; the policy and the tokens are
  // read anew from the files).
  std::vector<UniqueFd> gateway_fds;
  if (gateway != nullptr) {
    auto fds = gateway->listeners();
    if (!fds) return fds.error();
    gateway_fds = std::move(*fds);
    state["guard_gateway"] = {{"address", gateway_address}, {"listeners", nlohmann::json::array()}};
    for (const auto& fd : gateway_fds) {
      state["guard_gateway"]["listeners"].push_back(fd.get());
      pass.push_back(fd.get());
    }
  }
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return errno_error("pipe");
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  state["ready"] = ready_w.get();
  pass.push_back(ready_w.get());
  UniqueFd memfd(::memfd_create("faultd-handover", MFD_CLOEXEC));
  if (!memfd) return errno_error("memfd_create");
  const std::string text = state.dump();
  if (::write(memfd.get(), text.data(), text.size()) != ssize_t(text.size()))
    return errno_error("writing the handover");
  pass.push_back(memfd.get());

  // Everything the child needs is made before fork: after it, only calls that
  // are safe in a copy of a threaded process (fcntl, execve).
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with(std::string(kFaultdHandoverEnv) + "=")) continue;
    env_text.emplace_back(*e);
  }
  env_text.push_back(std::string(kFaultdHandoverEnv) + "=" + std::to_string(memfd.get()));
  std::vector<char*> envp, argv;
  for (auto& s : env_text) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = hooks.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return errno_error("fork");
  if (pid == 0) {
    for (int fd : pass) (void)::fcntl(fd, F_SETFD, 0);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    ::_exit(127);
  }
  ready_w.reset();
  memfd.reset();
  pollfd p{ready_r.get(), POLLIN, 0};
  char byte = 0;
  if (::poll(&p, 1, kSuccessorStartMs) == 1 && ::read(ready_r.get(), &byte, 1) == 1) return pid;
  int status = 0;
  std::string why = "it did not say it serves within " + std::to_string(kSuccessorStartMs / 1000) + " s";
  if (::waitpid(pid, &status, WNOHANG) == pid)
    why = WIFEXITED(status) ? "it exited with code " + std::to_string(WEXITSTATUS(status)) : "it was killed";
  else
    ::kill(pid, SIGKILL), (void)::waitpid(pid, &status, 0);
  return make_error(ECHILD, "the new faultd did not start: " + why);
}

}  // namespace

// The guard's gateway (--guard-gateway): a GuardCapture in gateway mode, its
// start lines in faultd's log. A successor adopts its predecessor's
// listening sockets when the address is the one it was given.
Result<std::unique_ptr<GuardCapture>> start_gateway(const FaultdConfig& config, const FaultdHooks& hooks,
                                                    const nlohmann::json& state) {
  std::vector<int> inherited;
  if (state.contains("guard_gateway") && state["guard_gateway"].is_object()) {
    const nlohmann::json& g = state["guard_gateway"];
    for (const auto& fd : g.value("listeners", nlohmann::json::array()))
      if (fd.is_number_integer()) inherited.push_back(fd.get<int>());
    if (config.guard_gateway.empty() || g.value("address", std::string()) != config.guard_gateway) {
      for (int fd : inherited) ::close(fd);
      if (!inherited.empty())
        hooks.log("faultd: the guard's gateway was on " + g.value("address", std::string()) + "; " +
                  (config.guard_gateway.empty() ? std::string("none now") : "now on " + config.guard_gateway) +
                  ": its old listener is closed");
      inherited.clear();
    }
  }
  if (config.guard_gateway.empty()) return std::unique_ptr<GuardCapture>();
  if (!inherited.empty())
    hooks.log("faultd: the guard's gateway takes over the listener on " + config.guard_gateway +
              " from the previous faultd; its policy and tokens are read anew");
  GuardCaptureOptions g;
  g.policy = config.guard_policy;
  char host[256] = {};
  (void)::gethostname(host, sizeof host - 1);
  g.identity = std::string("faultd@") + host;
  g.terminate_tls = config.guard_terminate_tls;
  g.json_log = config.guard_json_log;
  g.command = "faultd";
  g.gateway = true;
  g.listen = config.guard_gateway;
  g.gateway_tokens = config.guard_tokens;
  g.inherited_listeners = std::move(inherited);
  g.line_log = hooks.log;
  std::ostringstream said;
  auto started = GuardCapture::start(std::move(g), said);
  std::istringstream lines(said.str());
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) hooks.log(line);
  if (!started)
    return make_error(started.error().err,
                      "--guard-gateway " + config.guard_gateway + ": " + started.error().describe());
  return std::move(*started);
}

int serve_faultd(const FaultdConfig& config, const FaultdHooks& hooks) {
  // SIGTERM, SIGINT and SIGHUP become readable on an fd; SIGPIPE is ignored (a
  // client that hangs up mid-reply is only a closed connection).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &signals, nullptr) != 0) return fail(hooks, errno_error("sigprocmask"));
  ::signal(SIGPIPE, SIG_IGN);
  UniqueFd sigfd(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd) return fail(hooks, errno_error("signalfd"));

  auto inherited = take_handover();
  if (!inherited) return fail(hooks, inherited.error());
  const nlohmann::json state = inherited->value_or(nlohmann::json::object());
  const bool successor = inherited->has_value();

  const std::string dir = std::filesystem::path(config.socket_path).parent_path().string();
  if (dir == state_root() && !successor) {
    if (auto st = ensure_private_dir(dir, true); !st) return fail(hooks, st.error());
  }
  auto server = HttpServer::create();
  if (!server) return fail(hooks, server.error());
  server->set_log([&hooks](const HttpExchange& x) {
    std::string who = x.peer.has_credentials
                          ? "pid " + std::to_string(x.peer.pid) + " uid " + std::to_string(x.peer.uid)
                          : x.peer.address;
    hooks.log("faultd: " + std::string(x.method) + " " + std::string(x.path) + " " + std::to_string(x.status) + " (" +
              who + ")");
  });
  // The proxies and Toxiproxy's API, unless --toxiproxy off (a successor keeps
  // what its predecessor had: the listening sockets cannot change across it).
  std::unique_ptr<ProxyFaults> proxies;
  const bool with_proxies = successor ? inherited_fd(state, "toxiproxy") >= 0 : !config.toxiproxy_address.empty();
  if (with_proxies) {
    ProxyOptions po;
    po.workers = successor ? state.value("proxy_workers", config.proxy_workers) : config.proxy_workers;
    auto started = ProxyFaults::start(po, config.toxic_max_ns, hooks.log);
    if (!started) return fail(hooks, started.error());
    proxies = std::move(*started);
    if (successor) {
      if (auto st = proxies->adopt(state.value("proxies", nlohmann::json::array())); !st)
        return fail(hooks, st.error());
    }
  }
  // Serving runs, faultd keeps the programs its runs attached (and the maps)
  // when their last fault ends: the next run does not load them again. Given
  // back when it stops, once every run's thread is done (this is destroyed
  // after `runs`): an idle state is then torn down as any faultctl would.
  struct IdleStateRelease {
    ~IdleStateRelease() {
      NetfaultEngine::keep_idle_state(false);
      (void)NetfaultEngine().reap();
    }
  } release_idle_state;
  NetfaultEngine::keep_idle_state(true);
  // The programs of the host's namespace loaded and verified now, not at the
  // first run (hundreds of milliseconds of the verifier's time).
  if (auto ms = NetfaultEngine().prepare_host(); ms) {
    hooks.log("faultd: packet programs loaded and verified ahead of the first run (" + std::to_string(*ms) + " ms)");
  } else {
    hooks.log("faultd: packet programs not loaded ahead (" + ms.error().describe() + "); the first run loads them");
  }
  // Runs served for faultctl, each on its own thread once its connection is taken over.
  auto runs = std::make_unique<RunService>(*server, hooks.log);
  const HttpRouter api = local_api_router(proxies.get(), runs.get());
  const HttpRouter metrics = metrics_router(proxies.get());
  // The listeners, in the order a handover names them.
  std::vector<std::string> names;
  auto listen = [&](const char* name, auto bind, HttpHandler handler) -> Result<std::string> {
    names.push_back(name);
    if (successor) {
      const int fd = inherited_fd(state, name);
      if (fd < 0) return make_error(EINVAL, std::string("the handover has no ") + name + " listener");
      return server->adopt_listener(UniqueFd(fd), std::move(handler));
    }
    // Kept by the service manager from the previous start: still listening.
    if (auto kept = hooks.listeners.find(name); kept != hooks.listeners.end())
      return server->adopt_listener(UniqueFd(kept->second), std::move(handler));
    return bind(std::move(handler));
  };
  auto api_at = listen(
      "api",
      [&](HttpHandler h) -> Result<std::string> {
        FL_TRY(server->listen_unix(config.socket_path, 0600, std::move(h)));
        return config.socket_path;
      },
      root_only(same_state_only(api.handler())));
  if (!api_at) return fail(hooks, api_at.error());
  std::string where = "API on " + *api_at;
  if (successor ? inherited_fd(state, "metrics") >= 0 : !config.metrics_address.empty()) {
    auto bound = listen(
        "metrics", [&](HttpHandler h) { return server->listen_tcp(config.metrics_address, std::move(h)); },
        metrics.handler());
    if (!bound) return fail(hooks, bound.error());
    where += ", metrics on http://" + *bound + "/metrics";
  } else {
    where += ", metrics off";
  }
  if (proxies) {
    auto bound = listen(
        "toxiproxy", [&](HttpHandler h) { return server->listen_tcp(config.toxiproxy_address, std::move(h)); },
        proxies->toxiproxy_handler());
    if (!bound) return fail(hooks, bound.error());
    const ProxyIoPaths io = proxies->registry().io_paths();
    where += ", Toxiproxy API on http://" + *bound + " (" + std::to_string(io.workers) + " proxy workers, " +
             (io.buffer_ring ? "buffer ring" : "plain receive") + ", " +
             (io.multishot_accept ? "multishot accept" : "one accept per connection") + ")";
  } else {
    where += ", Toxiproxy API off";
  }
  // The guard's gateway for agents on other hosts.
  auto gateway = start_gateway(config, hooks, state);
  if (!gateway) return fail(hooks, gateway.error());
  if (*gateway) where += ", guard gateway on " + (*gateway)->proxy_address();
  // Probe the kernel once now: /v1/features answers from the cache.
  {
    std::ostringstream discard;
    (void)write_features(true, discard);
  }
  // The control plane's agent: the state file read and reconciled now (bad
  // input is said before faultd counts as started); it polls on its own threads.
  std::unique_ptr<ControlPlaneAgent> agent;
  auto start_agent = [&]() -> Status {
    if (config.control_plane.empty()) return {};
    auto a = ControlPlaneAgent::start(AgentSettings{config.control_plane, config.enroll_token, config.control_plane_ca,
                                                    config.agent_state, hooks.version, config.labels},
                                      hooks.log);
    if (!a) return a.error();
    agent = std::move(*a);
    return {};
  };
  if (auto st = start_agent(); !st) return fail(hooks, st.error());
  if (agent) where += ", agent of " + config.control_plane;
  if (successor) where += "; took over from the previous faultd";
  // The service manager keeps the listeners across a stop and a start (a
  // successor's are the same sockets, kept already).
  bool listeners_stored = !hooks.listeners.empty();
  if (hooks.store_listener && !successor) {
    const std::vector<int> fds = server->listener_fds();
    for (size_t i = 0; i < fds.size() && i < names.size(); ++i) {
      if (hooks.store_listener(names[i], fds[i])) listeners_stored = true;
    }
    if (listeners_stored) where += "; listeners kept by the service manager across restarts";
  }
  // Host rules of an applied policy: the learned addresses whose every name
  // has expired are deleted every minute (the programs ignore them already).
  LearnedAddressReaper reaper;
  hooks.ready(where);
  if (successor) {
    const int ready = inherited_fd(state, "ready");
    const char ok = 1;
    if (ready >= 0) {
      (void)!::write(ready, &ok, 1);
      ::close(ready);
    }
  }

  for (;;) {
    auto st = server->run(sigfd.get());
    if (!st) {
      hooks.stopping();
      return fail(hooks, st.error());
    }
    signalfd_siginfo si{};
    if (::read(sigfd.get(), &si, sizeof si) != sizeof si) continue;
    if (si.ssi_signo != SIGHUP) break;
    if (hooks.argv.empty()) {
      hooks.log("faultd: SIGHUP ignored (no command line to restart with)");
      continue;
    }
    hooks.log("faultd: SIGHUP: starting a new faultd and handing it the listeners");
    // One agent polls at a time: this one ends its runs (reported failed) and
    // the successor takes over the state file.
    if (agent) agent->stop(), agent.reset();
    auto next = start_successor(hooks, *server, proxies.get(), gateway->get(), config.guard_gateway, names);
    if (!next) {
      hooks.log("faultd: restart failed, still serving: " + next.error().describe());
      if (auto st = start_agent(); !st)
        hooks.log("faultd: the control-plane agent did not start again: " + st.error().describe());
      continue;
    }
    // The successor accepts from here on; we relay what we have.
    server->release_listeners();
    if (proxies) proxies->release_listeners();
    if (*gateway) (*gateway)->release_listeners();
    if (hooks.handed_over) hooks.handed_over(*next);
    auto open_connections = [&] {
      return (proxies ? proxies->registry().open_connections() : 0) + (*gateway ? (*gateway)->open_connections() : 0);
    };
    const uint64_t open = open_connections();
    hooks.log("faultd: pid " + std::to_string(*next) + " took over; relaying " + std::to_string(open) +
              " open connections here for at most " + std::to_string(config.restart_drain_ns / 1'000'000'000ULL) +
              " s" + (runs && runs->active() > 0 ? " and watching " + std::to_string(runs->active()) + " runs" : ""));
    const uint64_t deadline = monotonic_ns() + config.restart_drain_ns;
    bool stop_now = false;
    // Runs still on are watched here until they end or the drain does; then
    // their faults are left on in the kernel, to end at their expiry.
    auto busy = [&] { return open_connections() > 0 || (runs && runs->active() > 0); };
    while (busy() && monotonic_ns() < deadline && !stop_now) {
      pollfd p{sigfd.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) == 1 && ::read(sigfd.get(), &si, sizeof si) == sizeof si &&
          (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT))
        stop_now = true;
    }
    const uint64_t left = open_connections();
    if (runs) runs->leave_all();
    hooks.log("faultd: drained; " + std::to_string(left) + " connections still open are closed; exiting");
    return kExitCompleted;
  }
  hooks.stopping();
  if (*gateway) {
    std::ostringstream summary;
    (*gateway)->print_summary(summary);
    std::istringstream lines(summary.str());
    for (std::string line; std::getline(lines, line);) hooks.log(line);
    gateway->reset();
  }
  // A stop never ends a run's fault: it stays on in the kernel until its expiry.
  if (runs) runs->leave_all();
  // The service manager holds the listeners for the next start: connections
  // wait in their queues meanwhile, and the API socket's file stays.
  if (listeners_stored) server->release_listeners();
  if (agent) agent->stop();
  return kExitCompleted;
}

}  // namespace faultline
