// Head -> facts -> decide() -> forward, a final denial, or a hold; each
// decision logged once. Runs on the proxy's workers: no waiting here, a hold is
// completed later by the approval queue's settle.
#include "userspace/guard/guard_judge.h"

#include <algorithm>
#include <cctype>

#include "userspace/proxy/http_answer.h"

namespace faultline {
namespace guard_judge_impl {

bool iends_with(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The model providers' own hosts (their SDKs' default base URLs).
bool model_host(std::string_view host) {
  for (std::string_view h : {"api.anthropic.com", "api.openai.com"})
    if (iequals(host, h)) return true;
  return iends_with(host, ".anthropic.com") || iends_with(host, ".openai.com") ||
         iends_with(host, ".openai.azure.com");
}

// The model APIs' endpoints, wherever they are served (a gateway, a stand-in).
bool model_path(std::string_view path) {
  const std::string_view p = path.substr(0, path.find('?'));
  for (std::string_view e : {"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/completions"})
    if (p.size() >= e.size() && p.substr(p.size() - e.size()) == e) return true;
  return false;
}

std::string host_port(const RequestHead& head) {
  const bool v6 = head.host.find(':') != std::string::npos;
  return (v6 ? "[" + head.host + "]" : head.host) + ":" + std::to_string(head.port);
}

// "GET http://h:p/x", "CONNECT h:443", "GET https://h:p/x" (terminated).
std::string request_text(const RequestHead& head) {
  if (head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni)
    return std::string(head.stage == RequestStage::tls_sni ? "TLS SNI " : "CONNECT ") + host_port(head);
  return head.method + " " + head.scheme + "://" + host_port(head) + head.target;
}

bool has_header(const RequestHead& head, std::string_view name) {
  return std::any_of(head.headers.begin(), head.headers.end(), [&](const auto& h) { return h.first == name; });
}

}  // namespace guard_judge_impl

using namespace guard_judge_impl;

RequestFacts request_facts(const RequestHead& head) {
  RequestFacts f;
  f.host = head.host;
  f.port = head.port;
  f.tls_terminated = head.tls_terminated;
  if (head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni) {
    f.method = "CONNECT";  // a tunnel: host and port only, no path
  } else {
    f.method = head.method;
    f.path = head.target;
  }
  return f;
}

DenialFormat denial_format_for_request(std::string_view host, std::string_view path, bool has_anthropic_version) {
  if (!model_host(host) && !model_path(path)) return DenialFormat::Plain;
  return denial_format_for(infer_llm_provider(host, path, has_anthropic_version));
}

GuardJudge::GuardJudge(std::shared_ptr<const GuardPolicy> policy, GuardJudgeOptions options)
    : policy_(std::move(policy)),
      options_(std::move(options)),
      approvals_(options_.approval_prefix, options_.approve_timeout) {}

void GuardJudge::reload(std::shared_ptr<const GuardPolicy> policy) { policy_.store(std::move(policy)); }

GuardCounts GuardJudge::counts() const {
  return {requests_.load(), allowed_.load(), denied_.load(), held_.load(),
          approved_.load(), would_deny_.load(), would_hold_.load()};
}

void GuardJudge::record(const RequestHead& head, GuardVerdict verdict, const std::string& rule,
                        const std::string& what) {
  if (options_.activity) {
    ActivityEntry e;
    e.identity = options_.identity;
    e.kind = "request";
    e.method = head.method;
    e.host = head.port == 80 || head.port == 443 ? head.host : host_port(head);
    e.path = head.target;
    e.verdict = std::string(guard_verdict_name(verdict));
    e.rule = rule;
    if (auto st = options_.activity->append(std::move(e)); !st && options_.log)
      options_.log("faultline guard: activity log: " + st.error().describe());
  }
  if (options_.log) options_.log("faultline guard: " + request_text(head) + " -> " + what);
}

RequestVerdict GuardJudge::judge(const RequestHead& head, HeldRequest later) {
  // One decision per tunnel: with termination its inner requests are judged;
  // without, the CONNECT is, and its SNI only when it names another host.
  if (head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni) {
    if (options_.terminate_tls) return RequestVerdict::forward();
    const std::string peer = endpoint_text(head.peer);
    std::lock_guard lock(tunnels_mu_);
    if (head.stage == RequestStage::connect) {
      if (tunnel_hosts_.size() > 4096) tunnel_hosts_.clear();  // tunnels without a ClientHello
      tunnel_hosts_[peer] = head.host;
    } else {
      auto it = tunnel_hosts_.find(peer);
      const bool same = it != tunnel_hosts_.end() && iequals(it->second, head.host);
      if (it != tunnel_hosts_.end()) tunnel_hosts_.erase(it);
      if (same) return RequestVerdict::forward();
    }
  }
  const std::shared_ptr<const GuardPolicy> policy = policy_.load();  // this request's one version
  const GuardDecision d = decide(*policy, request_facts(head));
  requests_.fetch_add(1, std::memory_order_relaxed);
  const std::string rule_text = d.rule.empty() ? "the default" : "rule " + d.rule;
  const std::string why = rule_text + (d.reason.empty() ? "" : ": " + d.reason);
  if (d.verdict == GuardVerdict::Allow) {
    allowed_.fetch_add(1, std::memory_order_relaxed);
    record(head, d.verdict, d.rule, "allow (" + rule_text + ")");
    return RequestVerdict::forward();
  }
  if (!d.enforced) {
    (d.verdict == GuardVerdict::Deny ? would_deny_ : would_hold_).fetch_add(1, std::memory_order_relaxed);
    allowed_.fetch_add(1, std::memory_order_relaxed);
    record(head, d.verdict, d.rule,
           std::string(d.verdict == GuardVerdict::Deny ? "would deny" : "would hold for approval") + " (" + why +
               "; monitor: forwarded)");
    return RequestVerdict::forward();
  }
  Denial denial;
  denial.rule = d.rule;
  denial.reason = d.reason.empty() ? (d.rule.empty() ? "not allowed by default" : "denied by rule") : d.reason;
  denial.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
  const DenialFormat format = denial_format_for_request(head.host, head.target, has_header(head, "anthropic-version"));
  if (d.verdict == GuardVerdict::Deny) {
    denied_.fetch_add(1, std::memory_order_relaxed);
    record(head, d.verdict, d.rule, "deny (" + why + ")");
    return RequestVerdict::answer(denial_response(denial, format, false), true);
  }
  // Approve: held until a person, the timeout or the client's leaving settles it.
  held_.fetch_add(1, std::memory_order_relaxed);
  PendingApproval p;
  p.request_id = head.id;
  p.denial_id = denial.request_id;
  p.identity = options_.identity;
  p.method = head.method;
  p.host = host_port(head);
  p.path = head.target;
  p.rule = d.rule;
  p.reason = d.reason;
  // The settle runs on the deciding thread; `this` outlives it (the queue is
  // a member, and its destructor settles what is left).
  const std::string id = approvals_.add(
      std::move(p), [this, head, later, denial, format, rule = d.rule](ApprovalOutcome o, const std::string& reason) {
        switch (o) {
          case ApprovalOutcome::Approved:
            approved_.fetch_add(1, std::memory_order_relaxed);
            record(head, GuardVerdict::Allow, rule, "approved" + (reason.empty() ? "" : " (" + reason + ")"));
            (void)later.complete(RequestVerdict::forward());
            return;
          case ApprovalOutcome::Denied:
          case ApprovalOutcome::TimedOut: {
            denied_.fetch_add(1, std::memory_order_relaxed);
            Denial dn = denial;
            if (o == ApprovalOutcome::Denied)
              dn.reason = "denied by a person" + (reason.empty() ? "" : ": " + reason);
            else
              dn.reason = "no approval within the timeout" + (denial.reason.empty() ? "" : ": " + denial.reason);
            record(head, GuardVerdict::Deny, rule, (o == ApprovalOutcome::Denied ? "denied (" : "timed out (") + dn.reason + ")");
            (void)later.complete(RequestVerdict::answer(denial_response(dn, format, false), true));
            return;
          }
          case ApprovalOutcome::Withdrawn:
            if (options_.log) options_.log("faultline guard: " + request_text(head) + " -> withdrawn (the client went away)");
            return;
        }
      });
  record(head, d.verdict, d.rule,
         "held for approval " + id + " (" + why + "): faultctl approvals approve " + id + " | deny " + id);
  return RequestVerdict::hold();
}

void GuardJudge::withdrawn(uint64_t request_id) { (void)approvals_.withdraw(request_id); }

}  // namespace faultline
