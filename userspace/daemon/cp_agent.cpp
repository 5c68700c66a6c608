// The agent: one thread long-polls and starts runs, one delivers reports (so a
// slow or absent faultcp never holds a run's loop), each run on its own thread.
#include "userspace/daemon/cp_agent.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "base/files.h"
#include "cp/proto/agent_wire.h"
#include "loader/bpffs.h"
#include "userspace/ops/abort_faults.h"
#include "userspace/ops/features_report.h"
#include "userspace/ops/status_report.h"
#include "userspace/policy/policy_apply.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

constexpr uint64_t kPollTimeoutMs = 40'000;  // faultcp holds a poll 25 s
constexpr uint64_t kCallTimeoutMs = 10'000;  // every other call
constexpr uint64_t kRetryMs = 500;           // after a failed call, doubling
constexpr uint64_t kMaxRetryMs = 5'000;
constexpr uint64_t kProgressEveryMs = 5'000;  // a run's progress, at most this often
constexpr uint64_t kStopReportMs = 3'000;     // faultd stopping: reports still tried this long

std::string trimmed_file(const std::string& path) {
  auto t = read_text_file(path);
  if (!t) return "";
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The device of the IPv4 default route, from /proc/net/route ("" if none).
std::string default_route_device() {
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string dev, dest;
    if (ss >> dev >> dest && dest == "00000000") return dev;
  }
  return "";
}

nlohmann::json host_facts(const std::string& version, const std::map<std::string, std::string>& labels) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  utsname u{};
  ::uname(&u);
  nlohmann::json features = nlohmann::json::object();
  std::ostringstream text;
  if (write_features(true, text) == 0) {
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (!j.is_discarded() && j.dump().size() < 15 * 1024) features = j;
  }
  return {{"hostname", std::string(host)},
          {"kernel", std::string(u.release)},
          {"instance_id", trimmed_file("/etc/machine-id")},
          {"device", default_route_device()},
          {"version", version.empty() ? "unknown" : version},
          {"features", features},
          {"labels", labels}};
}

// The packet faults still on whose owner was the faultd of that pid (gone now).
std::vector<std::string> faults_owned_by(uint32_t pid) {
  std::vector<std::string> ids;
  if (pid == 0 || pid == static_cast<uint32_t>(::getpid())) return ids;
  std::ostringstream out;
  if (write_status(true, out) != 0) return ids;
  auto j = nlohmann::json::parse(out.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("faults") || !j["faults"].is_array()) return ids;
  for (const auto& f : j["faults"])
    if (f.value("owner_pid", 0u) == pid && f.contains("id"))
      ids.push_back(f["id"].is_number() ? std::to_string(f["id"].get<uint64_t>()) : f["id"].get<std::string>());
  return ids;
}

std::string status_text(const Result<HttpAnswer>& a) {
  if (!a) return a.error().describe();
  std::string body = a->response.body.substr(0, 300);
  return "HTTP " + std::to_string(a->response.status.code) + " " + body;
}

// faultcp's answer on an agent route: a protobuf message (what this agent asks
// for), or JSON from a faultcp that answers only JSON.
std::optional<nlohmann::json> answer_json(const HttpAnswer& a, cp::wire::Decoded (*decode)(std::string_view)) {
  auto type = a.response.header("content-type");
  if (type && cp::wire::is_protobuf_type(*type)) {
    auto d = decode(a.response.body);
    if (auto* j = std::get_if<nlohmann::json>(&d)) return std::move(*j);
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(a.response.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

HttpCall agent_call(const std::string& method, const std::string& token, std::string body) {
  HttpCall c;
  c.method = method;
  c.headers = {{"Authorization", "Bearer " + token}, {"Accept", std::string(cp::wire::kProtobufType)}};
  if (!body.empty()) c.headers.emplace_back("Content-Type", std::string(cp::wire::kProtobufType));
  c.body = std::move(body);
  return c;
}

bool is_2xx(const Result<HttpAnswer>& a) { return a && a->response.status.code / 100 == 2; }
// faultcp judged the report and will not take it however often it is sent.
bool is_refusal(const Result<HttpAnswer>& a) {
  if (!a) return false;
  const int c = a->response.status.code;
  return c == 400 || c == 404 || c == 409 || c == 413;
}

}  // namespace

std::string default_agent_state_path() { return state_root() + "/cp-agent.json"; }

ControlPlaneAgent::ControlPlaneAgent(AgentSettings s, HttpUrl base, HttpClient client, Log log)
    : s_(std::move(s)), base_(std::move(base)), client_(std::move(client)), log_(std::move(log)) {}

Result<std::unique_ptr<ControlPlaneAgent>> ControlPlaneAgent::start(AgentSettings s, Log log) {
  auto url = parse_http_url(s.control_plane);
  if (!url) return input_error(0, "--control-plane " + s.control_plane + ": " + url.error().message);
  if (url->path.find('?') != std::string::npos)
    return input_error(0, "--control-plane " + s.control_plane + ": give faultcp's base URL, without a query");
  while (!url->path.empty() && url->path.back() == '/') url->path.pop_back();
  if (!s.ca_file.empty() && !url->tls)
    return input_error(0,
                       "--control-plane-ca is for an https:// --control-plane; " + s.control_plane + " is plain http");
  HttpClientOptions o;
  o.tls = url->tls;
  o.ca_file = s.ca_file;
  o.ca_flag = "--control-plane-ca";
  o.max_body = 1024 * 1024;
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  if (s.state_path.empty()) s.state_path = default_agent_state_path();
  // The state file's folder: private (it holds a token); the state folder is made if missing.
  const std::string folder = std::filesystem::path(s.state_path).parent_path().string();
  if (auto st = ensure_private_dir(folder, folder == state_root()); !st) return st.error();
  auto state = load_agent_state(s.state_path);
  if (!state) return as_bad_input(state.error());
  if (state->agent_id != 0 && state->control_plane != s.control_plane) {
    if (!state->runs.empty() || !state->outbox.empty())
      return input_error(0, "the agent state " + s.state_path + " belongs to the control plane " +
                                state->control_plane +
                                " and still holds its experiments; start faultd with that "
                                "--control-plane until they are reported, or move the file away");
    *state = AgentState{};
  }
  if (state->agent_id == 0 && s.enroll_token.empty())
    return input_error(0, "--enroll-token (or FAULTLINE_ENROLL_TOKEN) is needed: this faultd has not registered with " +
                              s.control_plane + " yet");
  std::unique_ptr<ControlPlaneAgent> a(
      new ControlPlaneAgent(std::move(s), std::move(*url), std::move(*client), std::move(log)));
  a->stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!a->stop_fd_) return errno_error("eventfd");
  a->state_ = std::move(*state);
  // Nothing runs unless its claim can be written first: try the file now.
  if (auto st = save_agent_state(a->s_.state_path, a->state_); !st) return st.error();
  a->reconcile();
  a->poller_ = std::thread([p = a.get()] { p->poll_loop(); });
  a->reporter_ = std::thread([p = a.get()] { p->report_loop(); });
  return a;
}

ControlPlaneAgent::~ControlPlaneAgent() { stop(); }

// A previous faultd's experiments: none is started again. One that was on
// when it died has its fault ended now (if it has not expired) and is
// reported failed; its final report, if it was written, is still queued.
void ControlPlaneAgent::reconcile() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, run] : state_.runs) {
    std::string detail;
    if (run.phase == "claimed") {
      detail = "faultd stopped before it started the experiment; it is not run again";
    } else {
      detail = "faultd was stopped mid-run (killed or crashed); the experiment is not run again";
      std::vector<std::string> ids;
      if (!run.fault_id.empty()) ids.push_back(run.fault_id);
      for (const auto& f : faults_owned_by(run.owner_pid))
        if (std::find(ids.begin(), ids.end(), f) == ids.end()) ids.push_back(f);
      if (ids.empty()) detail += "; no fault of it was on any more";
      for (const auto& fault_id : ids) {
        std::ostringstream out, err;
        const int code = abort_fault(fault_id, out, err);
        detail += code == 0   ? "; its fault " + fault_id + " was ended when faultd started again"
                  : code == 2 ? "; its fault " + fault_id + " had already ended"
                              : "; ending its fault " + fault_id + " failed: " + err.str();
      }
    }
    log_("faultd: control plane: experiment " + std::to_string(id) + ": " + detail);
    AgentReport r{id, "failed", detail, {{"outcome", "failed"}, {"reconciled", true}}};
    state_.outbox.push_back(std::move(r));
  }
  state_.runs.clear();
  save();
}

void ControlPlaneAgent::stop() {
  if (stopping_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof one);
  if (poller_.joinable()) poller_.join();
  std::map<int64_t, std::unique_ptr<RemoteExperiment>> runs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs.swap(active_);
  }
  for (auto& [id, run] : runs) run->stop("faultd is stopping");
  runs.clear();  // joins: each run ends its fault and queues its report
  runs_over_.store(true);
  changed_.notify_all();
  if (reporter_.joinable()) reporter_.join();
}

bool ControlPlaneAgent::sleep_ms(uint64_t ms) {
  pollfd p{stop_fd_.get(), POLLIN, 0};
  (void)::poll(&p, 1, static_cast<int>(ms));
  return !stopping_.load();
}

void ControlPlaneAgent::save() {
  if (auto st = save_agent_state(s_.state_path, state_); !st)
    log_("faultd: control plane: cannot write the agent state: " + st.error().describe());
}

Result<HttpAnswer> ControlPlaneAgent::send(const std::string& method, const std::string& path, const std::string& token,
                                           const std::string& body, uint64_t timeout_ms) const {
  HttpUrl u = base_;
  u.path = base_.path + path;
  HttpCall c = agent_call(method, token, body);
  c.cancel_fd = stop_fd_.get();
  return client_.call(u, c, timeout_ms * 1'000'000ULL);
}

Status ControlPlaneAgent::enroll() {
  const nlohmann::json facts = host_facts(s_.version, s_.labels);
  auto a = send("POST", "/v1/agents/register", s_.enroll_token, cp::wire::encode_register(facts), kCallTimeoutMs);
  if (!is_2xx(a)) return make_error(EPROTO, "registering with " + s_.control_plane + ": " + status_text(a));
  const auto j = answer_json(*a, cp::wire::decode_register_reply).value_or(nlohmann::json::object());
  if (!j.contains("agent_id") || !j["agent_id"].is_number_integer() || !j.contains("token") || !j["token"].is_string())
    return make_error(EPROTO, "registering with " + s_.control_plane +
                                  ": not an answer faultcp gives: " + a->response.body.substr(0, 200));
  std::lock_guard<std::mutex> lock(mu_);
  state_.control_plane = s_.control_plane;
  state_.agent_id = j["agent_id"].get<int64_t>();
  state_.token = j["token"].get<std::string>();
  save();
  log_("faultd: control plane: registered with " + s_.control_plane + " as agent " + std::to_string(state_.agent_id) +
       " (" + facts.value("hostname", "") + ")");
  return {};
}

void ControlPlaneAgent::poll_loop() {
  uint64_t retry = 0;
  auto failed = [&](const std::string& why) {
    if (why != last_error_) log_("faultd: control plane: " + why + " (retrying)");
    last_error_ = why;
    retry = retry == 0 ? kRetryMs : std::min(retry * 2, kMaxRetryMs);
  };
  while (!stopping_.load()) {
    if (retry != 0 && !sleep_ms(retry)) break;
    int64_t agent_id = 0;
    std::string token;
    {
      std::lock_guard<std::mutex> lock(mu_);
      agent_id = state_.agent_id;
      token = state_.token;
      // Runs that ended: their threads are joined here.
      for (auto it = active_.begin(); it != active_.end();) {
        if (it->second->finished()) {
          it->second->join();
          it = active_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (agent_id == 0) {
      if (auto st = enroll(); !st) {
        failed(st.error().describe());
        continue;
      }
      retry = 0;
      continue;
    }
    auto a = send("GET", "/v1/agents/" + std::to_string(agent_id) + "/next", token, "", kPollTimeoutMs);
    if (stopping_.load()) break;
    if (!is_2xx(a)) {
      failed("polling " + s_.control_plane + ": " + status_text(a));
      continue;
    }
    auto j = answer_json(*a, cp::wire::decode_next_reply);
    if (!j) {
      failed("polling " + s_.control_plane + ": the answer is not a NextReply (nor a JSON object)");
      continue;
    }
    if (!last_error_.empty()) log_("faultd: control plane: " + s_.control_plane + " answers again");
    last_error_.clear();
    retry = 0;
    handle(*j);
  }
}

void ControlPlaneAgent::handle(const nlohmann::json& answer) {
  if (answer.contains("policy") && answer["policy"].is_object()) take_policy(answer["policy"]);
  const bool kill = answer.value("kill", false);
  std::vector<int64_t> stops;
  if (answer.contains("stop") && answer["stop"].is_array())
    for (const auto& s : answer["stop"])
      if (s.is_number_integer()) stops.push_back(s.get<int64_t>());
  std::vector<RemoteExperiment*> ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The kill switch ends every run of this agent at once, listed or not.
    if (kill)
      for (auto& [id, run] : active_) {
        if (!run->finished()) ending.push_back(run.get());
        run->stop("the control plane's kill switch");
      }
    for (int64_t id : stops) {
      auto it = active_.find(id);
      if (it != active_.end() && !it->second->finished()) {
        it->second->stop(kill ? "the control plane's kill switch" : "aborted through the control plane");
        ending.push_back(it->second.get());
        continue;
      }
      const bool queued = std::any_of(state_.outbox.begin(), state_.outbox.end(),
                                      [&](const AgentReport& r) { return r.experiment_id == id; });
      if (!queued && it == active_.end()) queue_report(AgentReport{id, "stopped", "not running on this host", {}});
    }
  }
  if (!stops.empty()) {
    // faultcp repeats a stop until it is confirmed: wait for the runs to end
    // and the reports to go, rather than poll it in a tight loop.
    std::unique_lock<std::mutex> lock(mu_);
    changed_.notify_all();
    changed_.wait_for(lock, std::chrono::milliseconds(kStopReportMs), [&] {
      if (stopping_.load()) return true;
      for (int64_t id : stops) {
        auto it = active_.find(id);
        if (it != active_.end() && !it->second->finished()) return false;
        for (const auto& r : state_.outbox)
          if (r.experiment_id == id) return false;
      }
      return true;
    });
    return;
  }
  if (answer.contains("experiment") && answer["experiment"].is_object()) begin(answer["experiment"]);
}

void ControlPlaneAgent::take_policy(const nlohmann::json& given) {
  const int64_t version = given.value("version", int64_t{0});
  if (version <= 0) return;
  const bool selected = given.value("selected", false);
  int64_t running = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running = state_.policy_version;
  }
  std::string status = selected ? "applied" : "not-selected", detail;
  const BpffsLayout layout = bpffs_layout();
  if (selected) {
    PolicyParse parsed = parse_policy(given.value("text", ""));
    Status done;
    if (!parsed.ok()) {
      done = input_error(0, parsed.errors[0].render("policy"));
    } else if (auto outcome = apply_policy(layout, parsed.policy, false); !outcome) {
      done = outcome.error();
    } else {
      running = version;
      detail = outcome->changed ? "generation " + std::to_string(outcome->generation) : "already live";
    }
    if (!done) {
      status = "failed";
      detail = done.error().describe().substr(0, 4000);
    }
  } else if (running != 0) {
    // Left out now: what this agent applied for the control plane goes.
    if (auto outcome = delete_policy(layout, false); !outcome) {
      status = "failed";
      detail = "removing policy version " + std::to_string(running) + ": " + outcome.error().describe().substr(0, 3900);
    } else {
      running = 0;
    }
  }
  log_("faultd: control plane: policy version " + std::to_string(version) + ": " + status +
       (detail.empty() ? "" : " (" + detail + ")"));
  int64_t agent_id = 0;
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.policy_version != running) {
      state_.policy_version = running;
      save();
    }
    agent_id = state_.agent_id;
    token = state_.token;
  }
  nlohmann::json report{{"version", version}, {"status", status}, {"detail", detail}};
  if (running != 0) report["running_version"] = running;
  auto a = send("POST", "/v1/agents/" + std::to_string(agent_id) + "/policy", token,
                cp::wire::encode_policy_report(report), kCallTimeoutMs);
  // Not taken: faultcp gives the version again at the next poll, and applying
  // the same file again changes nothing.
  if (!is_2xx(a)) log_("faultd: control plane: the policy report was not taken: " + status_text(a));
}

void ControlPlaneAgent::begin(const nlohmann::json& experiment) {
  const int64_t id = experiment.value("id", int64_t{0});
  if (id <= 0) return;
  std::string token;
  int64_t agent_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_.runs.count(id) || active_.count(id)) return;  // never twice
    state_.runs[id] = AgentRun{"claimed", "", static_cast<uint32_t>(::getpid())};
    if (auto st = save_agent_state(s_.state_path, state_); !st) {
      state_.runs.erase(id);
      queue_report(AgentReport{id,
                               "failed",
                               "faultd cannot write its state (" + st.error().describe() +
                                   "), so it cannot promise to run the experiment at most once; not run",
                               {{"outcome", "failed"}}});
      return;
    }
    token = state_.token;
    agent_id = state_.agent_id;
  }
  const std::string events = "/v1/agents/" + std::to_string(agent_id) + "/events";
  auto a =
      send("POST", events, token, cp::wire::encode_event({{"experiment_id", id}, {"type", "running"}}), kCallTimeoutMs);
  std::lock_guard<std::mutex> lock(mu_);
  if (!is_2xx(a)) {
    state_.runs.erase(id);
    if (is_refusal(a)) {
      log_("faultd: control plane: experiment " + std::to_string(id) + " not started: " + status_text(a));
      save();
      return;
    }
    // faultcp may or may not have taken "running": say it did not run, either way.
    queue_report(AgentReport{id,
                             "failed",
                             "faultd could not confirm the start with the control plane (" + status_text(a) +
                                 "); the experiment was not run",
                             {{"outcome", "failed"}}});
    return;
  }
  state_.runs[id].phase = "running";
  save();
  const std::string record_dir = state_root() + "/cp-records/" + std::to_string(id);
  if (experiment.contains("spec") && experiment["spec"].contains("hypothesis")) {
    (void)ensure_private_dir(state_root() + "/cp-records", true);
  }
  log_("faultd: control plane: experiment " + std::to_string(id) +
       " starts: " + experiment.value("spec", nlohmann::json::object()).dump());
  RemoteExperiment::Hooks hooks;
  hooks.started = [this, id](const std::string& fault_id, uint64_t) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = state_.runs.find(id);
    if (it == state_.runs.end()) return;
    it->second.fault_id = fault_id;
    save();
  };
  hooks.line = [this, id](const nlohmann::json& line) {
    if (line.value("event", "") != "progress") return;
    std::lock_guard<std::mutex> l(mu_);
    progress_[id] = line;
  };
  hooks.ended = [this, id](const RemoteEnding& e) { end_run(id, e); };
  active_[id] =
      RemoteExperiment::start(id, experiment.value("spec", nlohmann::json::object()), record_dir, std::move(hooks));
}

void ControlPlaneAgent::end_run(int64_t id, const RemoteEnding& e) {
  std::lock_guard<std::mutex> lock(mu_);
  log_("faultd: control plane: experiment " + std::to_string(id) + " " + e.type +
       (e.detail.empty() ? "" : ": " + e.detail));
  state_.runs.erase(id);
  progress_.erase(id);
  queue_report(AgentReport{id, e.type, e.detail.substr(0, 4000), e.record});
}

void ControlPlaneAgent::queue_report(AgentReport r) {
  state_.outbox.push_back(std::move(r));
  save();
  changed_.notify_all();
}

void ControlPlaneAgent::report_loop() {
  uint64_t retry = 0;
  uint64_t stop_deadline = 0;
  std::map<int64_t, uint64_t> progress_sent;
  for (;;) {
    std::optional<AgentReport> next;
    std::optional<std::pair<int64_t, nlohmann::json>> progress;
    int64_t agent_id = 0;
    std::string token;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const uint64_t now = monotonic_ns() / 1'000'000;
      if (runs_over_.load() && stop_deadline == 0) stop_deadline = now + kStopReportMs;
      if (runs_over_.load() && (state_.outbox.empty() || now >= stop_deadline)) break;
      if (state_.agent_id != 0 && !state_.outbox.empty()) {
        next = state_.outbox.front();
      } else {
        for (auto& [id, line] : progress_) {
          if (now < progress_sent[id] + kProgressEveryMs) continue;
          progress = std::make_pair(id, line);
          break;
        }
      }
      if (progress) progress_.erase(progress->first);
      if (!next && !progress) {
        changed_.wait_for(lock, std::chrono::milliseconds(stopping_.load() ? 50 : 1000));
        continue;
      }
      agent_id = state_.agent_id;
      token = state_.token;
    }
    if (retry != 0) (void)sleep_ms(retry);  // no wait once stopping: the last tries go at once
    const std::string path = "/v1/agents/" + std::to_string(agent_id) + "/events";
    if (progress) {
      progress_sent[progress->first] = monotonic_ns() / 1'000'000;
      // Best effort: a progress report lost is replaced by the next one.
      (void)send(
          "POST", path, token,
          cp::wire::encode_event(
              {{"experiment_id", progress->first}, {"type", "progress"}, {"record", {{"progress", progress->second}}}}),
          kCallTimeoutMs);
      continue;
    }
    nlohmann::json body{{"experiment_id", next->experiment_id}, {"type", next->type}};
    if (!next->detail.empty()) body["detail"] = next->detail;
    if (!next->record.empty()) body["record"] = next->record;
    HttpUrl u = base_;
    u.path = base_.path + path;
    const HttpCall c = agent_call("POST", token, cp::wire::encode_event(body));
    auto a = client_.call(u, c, kCallTimeoutMs * 1'000'000ULL);  // not cancelled by a stop: it is the last word
    std::lock_guard<std::mutex> lock(mu_);
    if (is_2xx(a) || is_refusal(a)) {
      if (!is_2xx(a))
        log_("faultd: control plane: the report of experiment " + std::to_string(next->experiment_id) + " (" +
             next->type + ") was refused: " + status_text(a));
      auto it = std::find_if(state_.outbox.begin(), state_.outbox.end(), [&](const AgentReport& r) {
        return r.experiment_id == next->experiment_id && r.type == next->type;
      });
      if (it != state_.outbox.end()) state_.outbox.erase(it);
      save();
      changed_.notify_all();
      retry = 0;
    } else {
      retry = retry == 0 ? kRetryMs : std::min(retry * 2, kMaxRetryMs);
    }
  }
}

}  // namespace faultline
