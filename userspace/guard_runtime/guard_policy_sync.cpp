// GET /v1/guardrails/policy, then ?since_version=N&wait=30s in a loop: each new
// version checked as a --policy file would be, then one atomic reload.
#include "userspace/guard_runtime/guard_policy_sync.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/files.h"
#include "userspace/guard_runtime/guard_capture.h"
#include "userspace/policy/guard_section.h"

namespace faultline {
namespace guard_policy_sync_impl {

constexpr uint64_t kPolicyPollTimeoutMs = 40'000;  // faultcp holds it 30 s
constexpr uint64_t kPolicyRetryMs = 1'000;

// faultcp's {version, policy} as a runnable policy, or why not.
Result<WorkspaceGuardPolicy> read_policy_version(const nlohmann::json& j, bool terminate_tls, const std::string& from) {
  WorkspaceGuardPolicy w;
  w.from = from;
  if (!j.contains("version") || !j["version"].is_number_unsigned())
    return input_error(0, from + ": no version in faultcp's answer");
  w.version = j["version"].get<uint64_t>();
  if (!j.contains("policy") || j["policy"].is_null()) return w;
  GuardSectionParse p = parse_guard_text(j["policy"].dump());
  if (!p.ok())
    return input_error(
        0, "the workspace's guard policy v" + std::to_string(w.version) + ": " + p.errors[0].render("faultcp"));
  if (auto st = check_guard_policy_runnable(p.policy, terminate_tls); !st)
    return input_error(0, "the workspace's guard policy v" + std::to_string(w.version) + ": " + st.error().message);
  w.policy = std::move(p.policy);
  return w;
}

void write_policy_cache(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  (void)write_file_atomic(path, j.dump() + "\n");
}

std::string synced_policy_words(const GuardPolicy& p) {
  return std::string(p.mode == GuardMode::Enforce ? "enforce" : "monitor") + ", default " +
         (p.default_allow ? "allow" : "deny") + ", " + std::to_string(p.rules.size()) + " rule" +
         (p.rules.size() == 1 ? "" : "s");
}

}  // namespace guard_policy_sync_impl

using namespace guard_policy_sync_impl;

Result<WorkspaceGuardPolicy> fetch_workspace_guard_policy(const CpLink& link, const std::string& cache_path,
                                                          bool terminate_tls) {
  auto a = link.call("GET", "/v1/guardrails/policy");
  if (a && a->response.status.code == 404) {
    // No section put yet, or a URL that is not faultcp's (a front proxy's 404
    // looks the same): a policy this guard saw before is never replaced by
    // "none" on the word of a 404 (fail closed); the cache is kept and run.
    if (!cache_path.empty() && ::access(cache_path.c_str(), F_OK) == 0) {
      if (auto text = read_text_file(cache_path); text) {
        auto j = nlohmann::json::parse(*text, nullptr, false);
        if (j.is_object() && j.contains("policy") && !j["policy"].is_null())
          return read_policy_version(j, terminate_tls, cache_path + " (faultcp answered 404 for the policy)");
      }
    }
    write_policy_cache(cache_path, {{"version", 0}, {"policy", nullptr}});
    return WorkspaceGuardPolicy{0, std::nullopt, "faultcp"};
  }
  if (a && a->response.status.code == 200) {
    auto j = answer_object(*a);
    if (!j) return make_error(EPROTO, "faultcp's guard policy is not JSON");
    auto w = read_policy_version(*j, terminate_tls, "faultcp");
    if (w) write_policy_cache(cache_path, {{"version", w->version}, {"policy", (*j)["policy"]}});
    return w;
  }
  if (a && (a->response.status.code == 401 || a->response.status.code == 403))
    return input_error(0, "faultcp " + link.text() + " refuses the token: " + answer_problem(a));
  // Unreachable (or failing): the last version this guard saw, if any.
  const std::string why = "faultcp " + link.text() + " does not answer (" + answer_problem(a) + ")";
  if (cache_path.empty() || ::access(cache_path.c_str(), F_OK) != 0)
    return make_error(EHOSTUNREACH, why + " and no workspace policy is cached in the state folder");
  auto text = read_text_file(cache_path);
  if (!text) return make_error(EHOSTUNREACH, why + "; the cache: " + text.error().describe());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(EHOSTUNREACH, why + "; the cache " + cache_path + " is not JSON");
  return read_policy_version(j, terminate_tls, cache_path);
}

GuardPolicySync::GuardPolicySync(std::shared_ptr<const CpLink> link, std::shared_ptr<GuardJudge> judge, uint64_t since,
                                 std::string cache_path, bool terminate_tls, Log log)
    : link_(std::move(link)),
      judge_(std::move(judge)),
      version_(since),
      cache_path_(std::move(cache_path)),
      terminate_tls_(terminate_tls),
      log_(std::move(log)),
      stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { run(); });
}

GuardPolicySync::~GuardPolicySync() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

void GuardPolicySync::run() {
  std::string last_problem;
  for (;;) {
    pollfd p{stop_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) return;
    auto a = link_->call("GET", "/v1/guardrails/policy?since_version=" + std::to_string(version_) + "&wait=30s", "", "",
                         kPolicyPollTimeoutMs, stop_.get());
    if (::poll(&p, 1, 0) > 0) return;
    auto j = a && a->response.status.code == 200 ? answer_object(*a) : std::nullopt;
    if (!j) {
      if (const std::string now = answer_problem(a); now != last_problem) {
        last_problem = now;
        log_("faultline guard: faultcp: the policy poll failed (" + now + "); the policy stays as it is, retrying");
      }
      if (::poll(&p, 1, static_cast<int>(kPolicyRetryMs)) > 0) return;
      continue;
    }
    last_problem.clear();
    if (!j->value("changed", false)) continue;
    auto w = read_policy_version(*j, terminate_tls_, "faultcp");
    if (j->contains("version") && (*j)["version"].is_number_unsigned()) version_ = (*j)["version"].get<uint64_t>();
    if (!w) {
      log_("faultline guard: faultcp: the policy stays as it was: " + w.error().message);
      continue;
    }
    if (!w->policy) continue;
    write_policy_cache(cache_path_, {{"version", w->version}, {"policy", (*j)["policy"]}});
    judge_->reload(std::make_shared<const GuardPolicy>(*w->policy));
    log_("faultline guard: faultcp: the workspace's guard policy v" + std::to_string(w->version) +
         " is live: " + synced_policy_words(*w->policy));
  }
}

}  // namespace faultline
