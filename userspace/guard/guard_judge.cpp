// Head -> facts -> decide() -> forward, a final denial, or a hold; each
// decision logged once. Runs on the proxy's workers: no waiting here, a hold is
// completed later by the approval queue's settle.
#include "userspace/guard/guard_judge.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "userspace/guard/honeytokens.h"
#include "userspace/proxy/http_answer.h"

namespace faultline {
namespace guard_judge_impl {

// A replayed stream's longest pause between two pieces: a recording of a
// stalled stream does not hold its client for ever.
constexpr uint64_t kMaxReplayGapMs = 60'000;

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
  return iends_with(host, ".anthropic.com") || iends_with(host, ".openai.com") || iends_with(host, ".openai.azure.com");
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

// "GET http://h:p/x", "CONNECT h:443", "GET https://h:p/x" (terminated),
// "TCP 10.0.0.5:5432"; a redirected connection names where it really goes.
std::string request_text(const RequestHead& head) {
  std::string text;
  if (head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni)
    text = std::string(head.stage == RequestStage::tls_sni ? "TLS SNI " : "CONNECT ") + host_port(head);
  else if (head.stage == RequestStage::stream)
    text = "TCP " + host_port(head);
  else
    text = head.method + " " + head.scheme + "://" + host_port(head) + head.target;
  if (head.transparent) text += " (redirected, to " + head.destination + ")";
  if (!head.identity.empty()) text += " [" + head.identity + "]";
  return text;
}

// A field whose value is `value` (both names and values in any case).
bool header_is(const RequestHead& head, std::string_view name, std::string_view value) {
  return std::any_of(head.headers.begin(), head.headers.end(),
                     [&](const auto& h) { return h.first == name && iequals(h.second, value); });
}

bool has_header(const RequestHead& head, std::string_view name) {
  return std::any_of(head.headers.begin(), head.headers.end(), [&](const auto& h) { return h.first == name; });
}

// --llm-host: a host (any port), *.suffix (strict subdomains), or host:port.
bool llm_host_matches(std::string_view want, const RequestHead& head) {
  if (want.size() > 2 && want.substr(0, 2) == "*.") return iends_with(head.host, want.substr(1));
  if (iequals(want, head.host)) return true;
  return iequals(want, host_port(head));
}

// The request rewrite as the proxy's body transformer.
class RewriteTransformer final : public ByteTransformer {
 public:
  RewriteTransformer(LlmEndpoint endpoint, std::vector<LlmModelRoute> routes, bool inject)
      : rewriter_(endpoint, std::move(routes), inject) {}
  std::string feed(std::string_view bytes) override { return rewriter_.feed(bytes); }
  std::string finish() override { return rewriter_.finish(); }

 private:
  LlmRequestRewriter rewriter_;
};

// A body rewritten whole before it goes (--optimize-cache): the client's
// bytes are replaced by it.
class WholeBodyTransformer final : public ByteTransformer {
 public:
  explicit WholeBodyTransformer(std::string body) : body_(std::move(body)) {}
  std::string feed(std::string_view) override { return {}; }
  std::string finish() override { return std::move(body_); }

 private:
  std::string body_;
};

// The client's view of a chat stream whose usage chunk the guard asked for.
class StreamFilterTransformer final : public ByteTransformer {
 public:
  std::string feed(std::string_view bytes) override { return filter_.feed(bytes); }
  std::string finish() override { return filter_.finish(); }

 private:
  LlmStreamFilter filter_;
};

// --dlp-action redact: the body upstream with each finding masked.
class RedactTransformer final : public ByteTransformer {
 public:
  explicit RedactTransformer(std::shared_ptr<const DlpEngine> engine) : redactor_(std::move(engine)) {}
  std::string feed(std::string_view bytes) override { return redactor_.feed(bytes); }
  std::string finish() override { return redactor_.finish(); }

 private:
  DlpRedactor redactor_;
};

// Two rewrites one after the other (the redaction, then the LLM rewrite).
class ChainTransformer final : public ByteTransformer {
 public:
  ChainTransformer(std::shared_ptr<ByteTransformer> first, std::shared_ptr<ByteTransformer> second)
      : first_(std::move(first)), second_(std::move(second)) {}
  std::string feed(std::string_view bytes) override { return second_->feed(first_->feed(bytes)); }
  std::string finish() override {
    std::string out = second_->feed(first_->finish());
    return out + second_->finish();
  }

 private:
  std::shared_ptr<ByteTransformer> first_, second_;
};

bool host_in(const std::vector<HostMatcher>& hosts, const RequestHead& head) {
  return hosts.empty() ||
         std::any_of(hosts.begin(), hosts.end(), [&](const HostMatcher& m) { return m.matches(head.host, head.port); });
}

// A credential presented to its own issuer is how it is used, not a leak: a
// provider's key in a credential header (or, for Google, the URL's key=) of a
// request to the provider's own domain; a JWT in Authorization (a bearer
// token is presented to the host it is sent to). Anywhere else, it is a finding.
bool presented_to_issuer(const DlpFinding& f, std::string_view where, std::string_view host) {
  if (!f.type) return false;
  static constexpr std::string_view kCredentialHeaders[] = {"header authorization", "header x-api-key",
                                                            "header x-goog-api-key", "header api-key"};
  const bool credential_header =
      std::find(std::begin(kCredentialHeaders), std::end(kCredentialHeaders), where) != std::end(kCredentialHeaders);
  if (*f.type == DlpType::jwt) return where == "header authorization";
  if (!credential_header && !(where == "url" && *f.type == DlpType::google_api_key)) return false;
  std::vector<std::string_view> domains;
  switch (*f.type) {
    case DlpType::aws_access_key:
      domains = {"amazonaws.com"};
      break;
    case DlpType::anthropic_key:
      domains = {"anthropic.com"};
      break;
    case DlpType::openai_key:
      domains = {"openai.com"};
      break;
    case DlpType::github_token:
      domains = {"github.com", "githubusercontent.com"};
      break;
    case DlpType::npm_token:
      domains = {"npmjs.org", "npmjs.com"};
      break;
    case DlpType::slack_token:
      domains = {"slack.com"};
      break;
    case DlpType::google_api_key:
      domains = {"googleapis.com"};
      break;
    default:
      return false;
  }
  return std::any_of(domains.begin(), domains.end(), [&](std::string_view d) {
    return iequals(host, d) ||
           (host.size() > d.size() && host[host.size() - d.size() - 1] == '.' && iends_with(host, d));
  });
}

// Text from an upstream on one log line: control bytes (a model's newlines
// between JSON tokens, an ESC) shown escaped, so no line can be forged.
std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string masked(std::string text, const DlpFinding& f) {
  for (uint64_t i = f.begin; i < f.end && i < text.size(); ++i) text[i] = '*';
  return text;
}

// The first route whose `from` is the model, as the rewriter takes it.
const LlmModelRoute* route_for(const std::vector<LlmModelRoute>& routes, const std::optional<std::string>& model) {
  if (!model) return nullptr;
  for (const LlmModelRoute& r : routes)
    if (r.from == *model) return &r;
  return nullptr;
}

}  // namespace guard_judge_impl

using namespace guard_judge_impl;

struct GuardJudge::LlmCall {
  RequestHead head;
  LlmEndpoint endpoint = LlmEndpoint::None;
  std::shared_ptr<const GuardPolicy> policy;  // the version its head was judged under
  LlmRequestScanner scan;
  LlmRequestFacts facts;
  std::string rule;  // the rule that let it through ("" the default)
  std::optional<BudgetReservation> reservation;
  std::unique_ptr<LlmUsageReader> usage;
  std::string model;        // as sent upstream (routed)
  std::string routed_from;  // --route-model applied: the model asked for
  // --replay: the body as the client sent it (held whole: body_whole), the
  // recording being made on a miss, or the file a hit was answered from.
  std::string body;
  bool body_whole = false;
  std::unique_ptr<ReplayRecording> recording;
  std::chrono::steady_clock::time_point forwarded_at;
  std::string replayed_from;
  // --prompt-guard covers it: its body is kept whole and scanned at its end.
  bool prompt_scope = false;
  PromptScan prompt;
  std::string prompt_unscanned;  // why the prompt could not be read whole ("" it was)
  // --scan-responses without blocking: the answer read beside the forward.
  std::unique_ptr<ResponseGuardStream> response_watch;
  // --receipts: the tool runs of its history, and its answer read for claims.
  std::vector<ToolRun> runs;
  std::unique_ptr<ResponseGuardStream> receipt_watch;
};

struct GuardJudge::DlpCall {
  RequestHead head;
  RequestHead shown;  // the head with a secret of its URL masked: what logs and records carry
  std::shared_ptr<const GuardPolicy> policy;
  bool dlp_scope = false;      // --dlp covers its host
  bool content_scope = false;  // --content-policy covers its host
  bool honey_scope = false;    // --honeytokens: all egress
  using Found = DlpFound;
  std::vector<Found> head_found;
  std::unique_ptr<DlpStream> body;
  bool over_cap = false;

  [[nodiscard]] bool counts(const DlpFinding& f) const {
    if (f.type) return dlp_scope;
    return honeytoken_kind(f.label).empty() ? content_scope : honey_scope;
  }
  // Every finding in scope, the body's last.
  [[nodiscard]] std::vector<Found> found() const {
    std::vector<Found> out;
    for (const Found& f : head_found)
      if (counts(f.finding)) out.push_back(f);
    for (const DlpFinding& f : body->findings())
      if (counts(f)) out.push_back({"body", f});
    return out;
  }
};

struct GuardJudge::ClickHouseCall {
  RequestHead head;
  std::shared_ptr<const GuardPolicy> policy;  // the version its head was judged under
  ClickHouseRequestSql sql;
};

RequestFacts request_facts(const RequestHead& head) {
  RequestFacts f;
  f.host = head.host;
  f.port = head.port;
  f.tls_terminated = head.tls_terminated;
  if (head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni ||
      head.stage == RequestStage::stream) {
    f.method = "CONNECT";  // a tunnel or a stream: host and port only, no path
  } else {
    f.method = head.method;
    f.path = head.target;
    f.k8s = k8s_request_facts(f.method, f.path);
  }
  return f;
}

DenialFormat denial_format_for_request(std::string_view host, std::string_view path, bool has_anthropic_version) {
  if (!model_host(host) && !model_path(path)) return DenialFormat::Plain;
  return denial_format_for(infer_llm_provider(host, path, has_anthropic_version));
}

GuardJudge::GuardJudge(std::shared_ptr<const GuardPolicy> policy, GuardJudgeOptions options)
    : policy_(with_rule_index(std::move(policy))),
      options_(std::move(options)),
      exec_grants_(options_.approval_prefix),
      approvals_(options_.approval_prefix, options_.approve_timeout) {
  if (options_.budget && options_.budget->waits()) budget_thread_ = std::make_unique<TaskThread>();
  if (options_.intent && options_.intent->has_judge()) intent_thread_ = std::make_unique<TaskThread>();
}

GuardJudge::~GuardJudge() {
  intent_stopping_.store(true);
  intent_thread_.reset();
}

void GuardJudge::reload(std::shared_ptr<const GuardPolicy> policy) {
  policy_.store(with_rule_index(std::move(policy)));
}

GuardCounts GuardJudge::counts() const {
  return {requests_.load(),   allowed_.load(),    denied_.load(),    held_.load(),   approved_.load(),
          would_deny_.load(), would_hold_.load(), llm_calls_.load(), llm_in_.load(), llm_out_.load()};
}

std::string GuardJudge::activity_reason(const GuardDecision& d) {
  if (d.rule.starts_with("wasm:") || d.rule == "wasm-policy" || d.rule == "dlp-block") return d.reason;
  return "";
}

void GuardJudge::record(const RequestHead& head, GuardVerdict verdict, const std::string& rule, const std::string& what,
                        std::optional<ActivityLlm> llm, std::string_view kind, const std::string& reason) {
  if (options_.activity) {
    ActivityEntry e;
    e.identity = head.identity.empty() ? options_.identity : head.identity;
    e.kind = std::string(kind);
    e.method = head.method;
    e.host = head.port == 80 || head.port == 443 ? head.host : host_port(head);
    e.path = head.target;
    e.verdict = std::string(guard_verdict_name(verdict));
    e.rule = rule;
    // A plugin's reason is its author's text: what it echoes of the request
    // is masked like any log line (and the writer redacts it like the path).
    if (!reason.empty()) e.reason = masked_text(reason);
    e.llm = std::move(llm);
    options_.activity->post(std::move(e));  // written on the writer's thread; its errors go to its on_error
  }
  if (options_.log && !what.empty()) options_.log("faultline guard: " + request_text(head) + " -> " + what);
}

namespace {

std::string exec_rule(const ExecJudgement& j) { return j.risks.empty() ? "exec-unreadable" : j.risks.front().rule; }

}  // namespace

std::string GuardJudge::hold_exec(const ExecJudgement& j, ApprovalSettle settle) {
  static std::atomic<uint64_t> n{0};
  PendingApproval p;
  p.subject = ApprovalSubject::Exec;
  p.denial_id = "exec_" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1));
  p.identity = options_.identity;
  p.method = "EXEC";
  p.path = exec_command_text(j);
  p.rule = exec_rule(j);
  p.reason = j.risks.empty() ? "its words could not be read" : j.risks.front().reason;
  return approvals_.add(std::move(p), std::move(settle));
}

void GuardJudge::record_exec(const ExecJudgement& j, GuardVerdict verdict) {
  if (verdict == GuardVerdict::Deny) risk(RiskKind::tamper, "a dangerous exec: " + exec_command_text(j));
  if (!options_.activity) return;
  ActivityEntry e;
  e.identity = options_.identity;
  e.kind = "exec";
  e.method = "EXEC";
  e.path = exec_command_text(j);
  e.verdict = std::string(guard_verdict_name(verdict));
  e.rule = exec_rule(j);
  if (auto st = options_.activity->append(std::move(e)); !st && options_.log)
    options_.log("faultline guard: activity log: " + st.error().describe());
}

void GuardJudge::revoke(const std::string& why) {
  {
    std::lock_guard lock(revoked_mu_);
    revoked_why_ = why;
  }
  revoked_.store(true);
}

RequestVerdict GuardJudge::revoked_answer(const RequestHead& head) {
  std::string why;
  {
    std::lock_guard lock(revoked_mu_);
    why = revoked_why_;
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  denied_.fetch_add(1, std::memory_order_relaxed);
  drop_call(head.id);
  (void)take_dlp(head.id, true);
  Denial dn;
  dn.rule = "circuit-breaker";
  dn.reason = "the circuit breaker tripped: the session's egress is revoked (" + why + ")";
  dn.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
  record(head, GuardVerdict::Deny, "circuit-breaker", "deny (circuit breaker tripped: egress revoked)");
  return RequestVerdict::answer(
      denial_response(dn, denial_format_for_request(head.host, head.target, has_header(head, "anthropic-version")),
                      false),
      true);
}

void GuardJudge::risk(RiskKind kind, const std::string& what) {
  if (!options_.breaker || !options_.breaker->add(kind, what)) return;
  const CircuitBreaker& b = *options_.breaker;
  const bool enforce = policy_.load()->mode == GuardMode::Enforce;
  const std::string said = "score " + std::to_string(b.score()) + " of " + std::to_string(b.threshold()) + " within " +
                           std::to_string(b.window().count() / 1000) + "s, last " + risk_kind_name(kind) + ": " + what;
  if (enforce) revoke(said);
  if (options_.activity) {
    ActivityEntry e;
    e.identity = options_.identity;
    e.kind = "breaker";
    e.method = "BREAKER";
    e.path = said;
    e.verdict = std::string(guard_verdict_name(enforce ? GuardVerdict::Deny : GuardVerdict::Allow));
    e.rule = "circuit-breaker";
    options_.activity->post(std::move(e));
  }
  if (options_.log)
    options_.log(std::string("faultline guard: CIRCUIT BREAKER ") +
                 (enforce ? "tripped (" + said +
                                "): the egress is revoked, the command's process group is ended (SIGTERM, then SIGKILL)"
                          : "would trip (" + said + "; monitor: nothing revoked or ended)"));
}

void GuardJudge::record_integrity(const std::string& method, const std::string& path, const std::string& what) {
  if (options_.activity) {
    ActivityEntry e;
    e.identity = options_.identity;
    e.kind = "integrity";
    e.method = method;
    e.path = path;
    e.verdict = std::string(guard_verdict_name(GuardVerdict::Allow));
    e.rule = "integrity";
    options_.activity->post(std::move(e));
  }
  risk(RiskKind::tamper, "integrity: " + what);
}

void GuardJudge::note_exec(const ExecJudgement& j) {
  if (j.words.empty()) return;
  if (options_.intent)
    (void)consider_action({IntentActionKind::exec, j.words.front(), "", masked_text(exec_command_text(j))},
                          std::nullopt);
  if (options_.anomaly && options_.anomaly->new_program(j.words.front()))
    record_anomaly("EXEC", "", j.words.front(),
                   "a program not run in the warm-up: " + j.words.front() + ", pid " + std::to_string(j.pid));
}

void GuardJudge::record_anomaly(const std::string& method, const std::string& host, const std::string& path,
                                const std::string& said) {
  if (options_.activity) {
    ActivityEntry e;
    e.identity = options_.identity;
    e.kind = "anomaly";
    e.method = method;
    e.host = host;
    e.path = path;
    e.verdict = std::string(guard_verdict_name(GuardVerdict::Allow));
    e.rule = "anomaly";
    options_.activity->post(std::move(e));
  }
  if (options_.log) options_.log("faultline guard: anomaly: " + said + " (monitor: not stopped)");
}

RequestVerdict GuardJudge::deny_credential(const RequestHead& head, const std::string& why) {
  denied_.fetch_add(1, std::memory_order_relaxed);
  Denial denial;
  denial.rule = "creds";
  denial.reason = why;
  denial.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
  record(head, GuardVerdict::Deny, "creds", "deny (creds: " + why + ")");
  return RequestVerdict::answer(
      denial_response(denial, denial_format_for_request(head.host, head.target, has_header(head, "anthropic-version")),
                      false),
      true);
}

RequestVerdict GuardJudge::judge(const RequestHead& head, HeldRequest later) {
  if (revoked_.load()) return revoked_answer(head);
  const std::string destination =
      (head.host.find(':') != std::string::npos ? "[" + head.host + "]" : head.host) + ":" + std::to_string(head.port);
  if (options_.anomaly && !head.host.empty() && options_.anomaly->new_host(destination))
    record_anomaly("HOST", destination, "", "a destination not seen in the warm-up: " + destination);
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
  std::shared_ptr<DlpCall> dlp = start_dlp(head, policy);
  const bool llm = is_llm_call(head);
  std::shared_ptr<ClickHouseCall> ch = llm ? nullptr : start_clickhouse(head, policy);
  // A client that waits for 100 Continue before its body is denied on its
  // head when the head alone is denied by a named rule (enforce): the body
  // cannot undo that, and the client is spared sending it. Otherwise the
  // proxy says 100 Continue when the body is asked for (HttpSession).
  if ((llm || dlp || ch) && policy->mode == GuardMode::Enforce && header_is(head, "expect", "100-continue")) {
    const RequestFacts facts = request_facts(head);
    const GuardDecision d = decide(*policy, facts);
    if (d.verdict == GuardVerdict::Deny && !d.rule.empty()) {
      if (dlp) (void)take_dlp(head.id, true);
      SqlFacts unsent;  // a ClickHouse request's body, never sent: no statement, its denial in ClickHouse's text
      unsent.parsed = true;
      return decide_request(head, facts, *policy, std::move(later), nullptr, dlp, ch ? &unsent : nullptr);
    }
  }
  if (llm) {  // decided once its body's facts are read (judge_body)
    auto call = std::make_shared<LlmCall>();
    call->head = dlp ? dlp->shown : head;
    call->endpoint = llm_endpoint_for_target(head.target);
    call->policy = policy;
    call->prompt_scope =
        options_.prompt.guard && (options_.prompt.hosts.empty() || host_in(options_.prompt.hosts, head));
    std::lock_guard lock(calls_mu_);
    calls_[head.id] = std::move(call);
    return RequestVerdict::need_body();
  }
  if (ch && !dlp && ch->sql.settled()) {  // the query parameter alone settles it (INSERT ... FORMAT F)
    const SqlFacts sql = ch->sql.facts(false);
    return decide_request(head, request_facts(head), *policy, std::move(later), nullptr, nullptr, &sql);
  }
  if (ch) {  // decided once its SQL is read (judge_body)
    std::lock_guard lock(clickhouse_mu_);
    clickhouse_calls_[head.id] = std::move(ch);
    return RequestVerdict::need_body();
  }
  if (dlp) return RequestVerdict::need_body();  // decided once its body is scanned
  if ((head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni) &&
      !options_.clickhouse_hosts.empty() && host_in(options_.clickhouse_hosts, head)) {
    SqlFacts unread;  // a ClickHouse host's tunnel the guard does not terminate
    unread.error = "it is inside TLS the guard does not terminate (--terminate-tls)";
    return decide_request(head, request_facts(head), *policy, std::move(later), nullptr, nullptr, &unread);
  }
  return decide_request(head, request_facts(head), *policy, std::move(later), nullptr);
}

std::shared_ptr<GuardJudge::ClickHouseCall> GuardJudge::start_clickhouse(
    const RequestHead& head, std::shared_ptr<const GuardPolicy> policy) const {
  if (options_.clickhouse_hosts.empty() || !host_in(options_.clickhouse_hosts, head)) return nullptr;
  if (head.stage != RequestStage::request && head.stage != RequestStage::inner) return nullptr;
  const bool encoded = std::any_of(head.headers.begin(), head.headers.end(), [](const auto& h) {
    return h.first == "content-encoding" && !iequals(h.second, "identity");
  });
  return std::make_shared<ClickHouseCall>(
      ClickHouseCall{head, std::move(policy), ClickHouseRequestSql(head.target, encoded)});
}

std::shared_ptr<GuardJudge::ClickHouseCall> GuardJudge::take_clickhouse(uint64_t id, bool erase) {
  std::lock_guard lock(clickhouse_mu_);
  auto it = clickhouse_calls_.find(id);
  if (it == clickhouse_calls_.end()) return nullptr;
  std::shared_ptr<ClickHouseCall> c = it->second;
  if (erase) clickhouse_calls_.erase(it);
  return c;
}

RequestVerdict GuardJudge::judge_clickhouse_body(const std::shared_ptr<ClickHouseCall>& ch,
                                                 const RequestBodyChunk& chunk, std::shared_ptr<DlpCall> dlp,
                                                 HeldRequest later) {
  const bool settled = ch->sql.feed(chunk.bytes);
  // A DLP scan reads the body to its end (or the proxy's hold); the SQL alone
  // is decided once settled, and the rest of the body streams.
  if (!chunk.end && (dlp || !settled)) return RequestVerdict::need_body();
  (void)take_clickhouse(ch->head.id, true);
  const SqlFacts sql = ch->sql.facts(chunk.end && !chunk.over_cap);
  if (dlp)
    return decide_request(dlp->shown, request_facts(dlp->head), *dlp->policy, std::move(later), nullptr, dlp, &sql);
  return decide_request(ch->head, request_facts(ch->head), *ch->policy, std::move(later), nullptr, nullptr, &sql);
}

std::shared_ptr<GuardJudge::DlpCall> GuardJudge::start_dlp(const RequestHead& head,
                                                           std::shared_ptr<const GuardPolicy> policy) {
  const GuardDlpOptions& o = options_.dlp;
  if (!o.engine || (head.stage != RequestStage::request && head.stage != RequestStage::inner)) return nullptr;
  auto c = std::make_shared<DlpCall>();
  c->dlp_scope = o.dlp && host_in(o.hosts, head);
  c->content_scope = o.content && host_in(o.content_hosts, head);
  c->honey_scope = o.honeytokens;
  if (!c->dlp_scope && !c->content_scope && !c->honey_scope) return nullptr;
  c->head = head;
  c->shown = head;
  c->policy = std::move(policy);
  // The URL and each header's value, each a stream of its own.
  for (DlpFinding& f : dlp_scan(o.engine, head.target)) {
    if (f.type) c->shown.target = masked(c->shown.target, f);
    if (!f.type && !honeytoken_kind(f.label).empty()) {
      // A decoy's match is known by where it ended only: its query (or, in
      // the path, the whole target) is masked, so no line carries it.
      const size_t q = head.target.find('?');
      const size_t from = q != std::string::npos && f.end > q ? q + 1 : 1;
      for (size_t i = from; i < c->shown.target.size(); ++i) c->shown.target[i] = '*';
    }
    if (!presented_to_issuer(f, "url", head.host)) c->head_found.push_back({"url", std::move(f)});
  }
  for (const auto& [name, value] : head.headers)
    for (DlpFinding& f : dlp_scan(o.engine, value))
      if (!presented_to_issuer(f, "header " + name, head.host))
        c->head_found.push_back({"header " + name, std::move(f)});
  c->body = std::make_unique<DlpStream>(o.engine);
  std::lock_guard lock(dlp_mu_);
  dlp_calls_[head.id] = c;
  return c;
}

std::shared_ptr<GuardJudge::DlpCall> GuardJudge::take_dlp(uint64_t id, bool erase) {
  std::lock_guard lock(dlp_mu_);
  auto it = dlp_calls_.find(id);
  if (it == dlp_calls_.end()) return nullptr;
  std::shared_ptr<DlpCall> c = it->second;
  if (erase) dlp_calls_.erase(it);
  return c;
}

bool GuardJudge::is_llm_call(const RequestHead& head) const {
  if (head.stage != RequestStage::request && head.stage != RequestStage::inner) return false;
  if (head.method != "POST" || llm_endpoint_for_target(head.target) == LlmEndpoint::None) return false;
  if (options_.llm_hosts.empty()) return true;
  return std::any_of(options_.llm_hosts.begin(), options_.llm_hosts.end(),
                     [&](const std::string& h) { return llm_host_matches(h, head); });
}

std::shared_ptr<GuardJudge::LlmCall> GuardJudge::take_call(uint64_t id) {
  std::lock_guard lock(calls_mu_);
  auto it = calls_.find(id);
  return it == calls_.end() ? nullptr : it->second;
}

void GuardJudge::drop_call(uint64_t id) {
  std::shared_ptr<LlmCall> call;
  std::optional<BudgetReservation> reservation;
  {
    std::lock_guard lock(calls_mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    call = std::move(it->second);
    calls_.erase(it);
    reservation = call->reservation;  // read under the lock forward_llm sets it under
  }
  // Nothing of it reached the upstream: what it reserved is given back.
  if (reservation && options_.budget) (void)options_.budget->release(*reservation);
}

RequestVerdict GuardJudge::judge_body(uint64_t request_id, const RequestBodyChunk& chunk, HeldRequest later) {
  if (chunk.end && revoked_.load()) {
    std::shared_ptr<DlpCall> d = take_dlp(request_id, false);
    std::shared_ptr<LlmCall> c = take_call(request_id);
    std::shared_ptr<ClickHouseCall> h = take_clickhouse(request_id, true);
    if (d || c || h) return revoked_answer(d ? d->shown : c ? c->head : h->head);
  }
  std::shared_ptr<DlpCall> dlp = take_dlp(request_id, chunk.end);
  if (dlp) {
    if (!chunk.bytes.empty()) dlp->body->feed(chunk.bytes);
    if (chunk.end) {
      dlp->body->finish();  // what was held is scanned whole; past the cap, nothing more is seen
      dlp->over_cap = chunk.over_cap;
    }
  }
  std::shared_ptr<LlmCall> call = take_call(request_id);
  if (!call) {
    if (std::shared_ptr<ClickHouseCall> ch = take_clickhouse(request_id, false))
      return judge_clickhouse_body(ch, chunk, std::move(dlp), std::move(later));
    if (!dlp) return RequestVerdict::forward();
    if (!chunk.end) return RequestVerdict::need_body();
    RequestFacts facts = request_facts(dlp->head);
    return decide_request(dlp->shown, facts, *dlp->policy, std::move(later), nullptr, dlp);
  }
  if (!chunk.bytes.empty()) {
    (void)call->scan.feed(chunk.bytes);
    if (options_.replay || options_.optimize_cache != CacheOptimizeMode::off || call->prompt_scope || options_.mirror ||
        options_.receipts || (options_.intent && !options_.intent->has_mission()))
      call->body.append(chunk.bytes);
  }
  if (!chunk.end) return RequestVerdict::need_body();
  if (!chunk.over_cap) (void)call->scan.finish();
  call->body_whole = !chunk.over_cap;
  if (options_.receipts && call->body_whole)
    if (auto runs = tool_runs(call->endpoint, call->body)) call->runs = std::move(*runs);
  if (options_.mirror && call->body_whole)
    if (auto segments = prompt_segments(call->endpoint, call->body)) options_.mirror->learn(*segments);
  if (options_.intent && call->body_whole && !options_.intent->has_mission()) capture_mission(*call);
  if (call->prompt_scope) {
    if (chunk.over_cap) {
      call->prompt_unscanned = "the body is longer than the proxy holds, so the prompt was not scanned whole";
    } else if (auto scan = options_.prompt.guard->scan_request(call->endpoint, call->body); scan) {
      call->prompt = std::move(*scan);
    } else {
      call->prompt_unscanned = "the prompt could not be read: " + scan.error().describe();
    }
    if (!options_.replay) std::string().swap(call->body);  // kept only for --replay's key
  }
  RequestFacts facts = request_facts(call->head);
  call->facts = call->scan.facts();
  // Over the cap the facts are unknown: rules that need them fail safe.
  facts.llm_facts_unparseable = chunk.over_cap || call->scan.state() == LlmScanState::unparseable;
  if (!facts.llm_facts_unparseable) {
    facts.llm_model = call->facts.model;
    facts.llm_max_tokens = call->facts.max_tokens;
  } else if (options_.log) {
    options_.log("faultline guard: " + request_text(call->head) + ": llm facts unknown: " +
                 (chunk.over_cap ? std::string("the body is over the proxy's hold")
                                 : std::string(call->scan.why_unparseable())));
  }
  return decide_request(call->head, facts, *call->policy, std::move(later), call, dlp);
}

RequestVerdict GuardJudge::decide_request(const RequestHead& head_in, const RequestFacts& facts_in,
                                          const GuardPolicy& policy, HeldRequest later, std::shared_ptr<LlmCall> call,
                                          std::shared_ptr<DlpCall> dlp, const SqlFacts* clickhouse) {
  const RequestHead& head = dlp ? dlp->shown : head_in;  // a secret of the URL is never logged
  RequestFacts facts = facts_in;
  const GuardDlpOptions& dlp_opt = options_.dlp;
  std::vector<DlpFound> found;  // in scope
  std::string detector_types, content_labels, found_text, honey_kinds;
  bool in_url = false;
  if (dlp) {
    found = dlp->found();
    // Honeytokens first, apart: critical, never a content-policy match.
    std::vector<DlpFound> honey;
    std::erase_if(found, [&](const DlpFound& f) {
      if (f.finding.type || honeytoken_kind(f.finding.label).empty()) return false;
      honey.push_back(f);
      return true;
    });
    for (const DlpFound& f : honey) {
      const std::string kind(honeytoken_kind(f.finding.label));
      if ((", " + honey_kinds + ",").find(", " + kind + ",") == std::string::npos)
        honey_kinds += (honey_kinds.empty() ? "" : ", ") + kind;
      if (options_.log)
        options_.log("faultline guard: " + request_text(head) + " -> HONEYTOKEN (critical): the decoy " + kind +
                     " in " + f.where);
    }
    for (const DlpFound& f : found) {
      const std::string kind = f.finding.type ? f.finding.kind() : f.finding.label;
      std::string& list = f.finding.type ? detector_types : content_labels;
      if ((", " + list + ",").find(", " + kind + ",") == std::string::npos) list += (list.empty() ? "" : ", ") + kind;
      if (f.finding.type) {
        if (std::find(facts.dlp_findings.begin(), facts.dlp_findings.end(), kind) == facts.dlp_findings.end())
          facts.dlp_findings.push_back(kind);
        in_url |= f.where == "url";
      }
      found_text += (found_text.empty() ? "" : "; ") + f.finding.kind() + " " + f.finding.hint + " in " + f.where;
    }
    if (options_.log && !found_text.empty())
      options_.log("faultline guard: " + request_text(head) + " dlp: " + found_text);
  }
  GuardDecision d = decide(policy, facts);
  if (clickhouse) d = decide_sql_request(policy, *clickhouse, std::move(d));
  const bool enforce = policy.mode == GuardMode::Enforce;
  const bool named_deny = d.verdict == GuardVerdict::Deny && !d.rule.empty();
  if (dlp && dlp->dlp_scope && dlp_opt.dlp && !named_deny) {
    std::string why;
    if (!detector_types.empty() && dlp_opt.action == DlpAction::deny)
      why = "DLP: " + detector_types + " in the request";
    else if (in_url && dlp_opt.action == DlpAction::redact)
      why = "DLP: " + detector_types + " in the URL, which the proxy cannot rewrite";
    else if (dlp->over_cap && dlp_opt.action != DlpAction::monitor)
      why = "DLP: the body is longer than the proxy holds, so it was not scanned whole";
    if (!why.empty()) d = GuardDecision{GuardVerdict::Deny, "dlp-block", why, enforce, false};
  }
  if (!honey_kinds.empty()) {
    // A decoy nothing legitimate holds: whatever the policy said, a denial.
    const std::string why = "a honeytoken (decoy credential) in the request: " + honey_kinds;
    d = GuardDecision{GuardVerdict::Deny, "honeytoken", why, enforce, false};
    std::istringstream kinds(honey_kinds);
    for (std::string k; std::getline(kinds, k, ',');) {
      if (!k.empty() && k.front() == ' ') k.erase(0, 1);
      record(head, enforce ? GuardVerdict::Deny : GuardVerdict::Allow, "honeytoken/" + k, "", std::nullopt,
             "honeytoken");
    }
    risk(RiskKind::honeytoken, honey_kinds + " in " + request_text(head));
  }
  if (!detector_types.empty()) risk(RiskKind::exfil, "DLP: " + detector_types + " in " + request_text(head));
  if (dlp && dlp->content_scope && !content_labels.empty() && d.verdict != GuardVerdict::Deny) {
    const std::string why = "content policy: " + content_labels;
    if (dlp_opt.content_action == ContentAction::deny)
      d = GuardDecision{GuardVerdict::Deny, "content-policy", why, enforce, false};
    else if (dlp_opt.content_action == ContentAction::approve && d.verdict == GuardVerdict::Allow)
      d = GuardDecision{GuardVerdict::Approve, "content-policy", why, enforce, false};
  }
  if (call && call->prompt_scope) d = judge_prompt(head, *call, d, enforce);
  if (!options_.wasm.empty() && d.verdict != GuardVerdict::Deny) d = judge_wasm(head, facts, d, enforce);
  if (options_.mirror && (head.stage == RequestStage::request || head.stage == RequestStage::inner)) {
    const std::string learned = options_.mirror->judge(head.method, head.host, head.port, head.target);
    if (!learned.empty())
      record(head, GuardVerdict::Allow, "mirror",
             "mirror: a write to " + learned +
                 ", a host the session learned only from tool_result content (flagged, not blocked)",
             std::nullopt, "mirror");
  }
  if (options_.intent && !call && head.stage != RequestStage::stream) d = judge_request_intent(head, d, enforce);
  if (d.verdict == GuardVerdict::Deny && d.rule != "honeytoken" && d.rule != "dlp-block" && d.rule != "prompt-guard")
    risk(RiskKind::block, (d.rule.empty() ? "the default" : "rule " + d.rule) + ": " + request_text(head));
  requests_.fetch_add(1, std::memory_order_relaxed);
  const std::string rule_text = d.rule.empty() ? "the default" : "rule " + d.rule;
  const std::string why = rule_text + (d.reason.empty() ? "" : ": " + d.reason);
  std::optional<ActivityLlm> asked;  // the model the call asked for, on its decision's line
  std::string model_text;
  if (call && facts.llm_model) {
    asked = ActivityLlm{*facts.llm_model};
    model_text = " model " + *facts.llm_model;
  }
  if (call) call->rule = d.rule;
  if (d.verdict == GuardVerdict::Allow || !d.enforced) {
    const bool enforce = policy.mode == GuardMode::Enforce;
    // A budget that waits on the network (faultcp's) is asked on the budget
    // thread, the call held meanwhile: the proxy's worker never waits.
    if (call && options_.budget && options_.budget->waits() && budget_thread_) {
      const bool dlp_forward = !detector_types.empty() || !content_labels.empty();
      budget_thread_->post([this, head, head_copy = RequestHead(head_in), d, call, enforce, why, asked, model_text,
                            later, dlp, found, dlp_forward] {
        RequestVerdict v = allow_request(head, d, why, asked, model_text, call, enforce);
        if (dlp_forward) apply_dlp_forward(head_copy, *dlp, found, enforce, v);
        (void)later.complete(std::move(v));
      });
      return RequestVerdict::hold();
    }
    const bool dlp_forward = !detector_types.empty() || !content_labels.empty();
    RequestVerdict v = allow_request(head, d, why, asked, model_text, std::move(call), enforce);
    if (dlp_forward) apply_dlp_forward(head_in, *dlp, found, enforce, v);
    return v;
  }
  Denial denial;
  denial.rule = d.rule;
  denial.reason = d.reason.empty() ? (d.rule.empty() ? "not allowed by default" : "denied by rule") : d.reason;
  denial.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
  const DenialFormat format =
      clickhouse ? DenialFormat::ClickHouse
      : d.k8s    ? DenialFormat::Kubernetes
                 : denial_format_for_request(head.host, head.target, has_header(head, "anthropic-version"));
  if (d.verdict == GuardVerdict::Deny) {
    denied_.fetch_add(1, std::memory_order_relaxed);
    if (call) drop_call(head.id);
    record(head, d.verdict, d.rule, "deny (" + why + ")" + model_text, asked, "request", activity_reason(d));
    return RequestVerdict::answer(denial_response(denial, format, false), true);
  }
  // Approve: held until a person, the timeout or the client's leaving settles it.
  held_.fetch_add(1, std::memory_order_relaxed);
  PendingApproval p;
  p.request_id = head.id;
  p.denial_id = denial.request_id;
  p.identity = head.identity.empty() ? options_.identity : head.identity;
  p.method = head.method;
  p.host = host_port(head);
  p.path = head.target;
  p.rule = d.rule;
  p.reason = d.reason;
  // The settle runs on the deciding thread; `this` outlives it (the queue is
  // a member, and its destructor settles what is left).
  const std::string id = approvals_.add(std::move(p), [this, head, later, denial, format, rule = d.rule, call](
                                                          ApprovalOutcome o, const std::string& reason) {
    switch (o) {
      case ApprovalOutcome::Approved:
        approved_.fetch_add(1, std::memory_order_relaxed);
        record(head, GuardVerdict::Allow, rule, "approved" + (reason.empty() ? "" : " (" + reason + ")"));
        if (call && budget_thread_) {
          // The budget waits on the network: not on the deciding thread.
          budget_thread_->post([this, head, later, call] {
            (void)later.complete(forward_llm(call, true));
            record_llm_extras(head, *call);
          });
          return;
        }
        (void)later.complete(call ? forward_llm(call, true) : RequestVerdict::forward());
        if (call) record_llm_extras(head, *call);
        return;
      case ApprovalOutcome::Denied:
      case ApprovalOutcome::TimedOut: {
        denied_.fetch_add(1, std::memory_order_relaxed);
        if (call) drop_call(head.id);
        Denial dn = denial;
        // The proctor's reason names it ("the proctor (MODEL): ..."); a person's is theirs.
        if (o == ApprovalOutcome::Denied && reason.rfind("the proctor (", 0) == 0)
          dn.reason = "denied by " + reason;
        else if (o == ApprovalOutcome::Denied)
          dn.reason = "denied by a person" + (reason.empty() ? "" : ": " + reason);
        else
          dn.reason = "no approval within the timeout" + (denial.reason.empty() ? "" : ": " + denial.reason);
        record(head, GuardVerdict::Deny, rule,
               (o == ApprovalOutcome::Denied ? "denied (" : "timed out (") + dn.reason + ")");
        (void)later.complete(RequestVerdict::answer(denial_response(dn, format, false), true));
        return;
      }
      case ApprovalOutcome::Withdrawn:
        if (call) drop_call(head.id);
        if (options_.log)
          options_.log("faultline guard: " + request_text(head) + " -> withdrawn (the client went away)");
        return;
    }
  });
  record(head, d.verdict, d.rule,
         "held for approval " + id + " (" + why + "): faultctl approvals approve " + id + " | deny " + id);
  return RequestVerdict::hold();
}

GuardDecision GuardJudge::judge_wasm(const RequestHead& head, const RequestFacts& facts, GuardDecision d,
                                     bool enforce) {
  const std::string& identity = head.identity.empty() ? options_.identity : head.identity;
  const std::string input = wasm_facts_json(facts, identity, d, enforce);
  for (const std::shared_ptr<const WasmPolicy>& plugin : options_.wasm) {
    const WasmDecision w = plugin->decide(input);
    const std::string rule = "wasm:" + plugin->name();
    if (w.end == WasmEnd::answered) {
      if (w.verdict.allow) continue;
      const std::string why =
          w.verdict.reason.empty() ? "denied by the policy plugin " + plugin->name() : w.verdict.reason;
      return GuardDecision{GuardVerdict::Deny, rule, why, enforce, false};
    }
    // A plugin that failed: a finding, and the request goes on (or not).
    const std::string failure = "the policy plugin " + plugin->name() + " failed: " + w.why;
    record(head, options_.wasm_fail_closed && enforce ? GuardVerdict::Deny : GuardVerdict::Allow, rule,
           "wasm: " + failure +
               (options_.wasm_fail_closed ? " (--wasm-fail-closed: denied)" : " (failing open: not stopped)"),
           std::nullopt, "wasm", failure);
    if (options_.wasm_fail_closed) return GuardDecision{GuardVerdict::Deny, "wasm-policy", failure, enforce, false};
  }
  return d;
}

RequestVerdict GuardJudge::allow_request(const RequestHead& head, const GuardDecision& d, const std::string& why,
                                         const std::optional<ActivityLlm>& asked, const std::string& model_text,
                                         std::shared_ptr<LlmCall> call, bool enforce) {
  const std::string rule_text = d.rule.empty() ? "the default" : "rule " + d.rule;
  // An LLM call meets its budget first: a budget denial is its one decision line.
  RequestVerdict v = call ? forward_llm(call, enforce) : RequestVerdict::forward();
  if (v.kind == RequestVerdict::Kind::answer && !(call && !call->replayed_from.empty())) return v;
  allowed_.fetch_add(1, std::memory_order_relaxed);
  if (d.verdict == GuardVerdict::Allow) {
    record(head, d.verdict, d.rule, "allow (" + rule_text + ")" + model_text, asked);
  } else {
    (d.verdict == GuardVerdict::Deny ? would_deny_ : would_hold_).fetch_add(1, std::memory_order_relaxed);
    record(head, d.verdict, d.rule,
           std::string(d.verdict == GuardVerdict::Deny ? "would deny" : "would hold for approval") + " (" + why +
               "; monitor: forwarded)" + model_text,
           asked, "request", activity_reason(d));
  }
  if (call) record_llm_extras(head, *call);
  return v;
}

RequestVerdict GuardJudge::forward_llm(const std::shared_ptr<LlmCall>& call, bool enforce) {
  const RequestHead& head = call->head;
  const LlmRequestFacts& facts = call->facts;
  const bool parsed = call->scan.state() != LlmScanState::unparseable && call->scan.object_ended();
  // The rewriter adds include_usage to a chat stream that did not set
  // stream_options, and the client's view of its answer is filtered.
  const bool inject = parsed && call->endpoint == LlmEndpoint::OpenAIChat && facts.stream.value_or(false) &&
                      !facts.stream_options_present;
  // A replayed call never reaches the upstream: it reserves nothing.
  if (options_.replay)
    if (auto answer = replay_or_record(call, inject)) return std::move(*answer);
  if (options_.budget) {
    // Reserve the call's ceiling now, so parallel calls cannot overshoot;
    // settled to the billed output when its usage comes.
    // The budget is the request's identity's: in gateway mode, its token's.
    const std::string& who = head.identity.empty() ? options_.identity : head.identity;
    auto admission = options_.budget->reserve(who, budget_ceiling(facts, options_.budget_limits));
    const std::string why = !admission ? admission.error().describe() : admission->reason;
    if (admission && admission->admitted) {
      // Kept only while the call is: a client that left meanwhile (withdrawn,
      // drop_call) gets its reservation back here, under the same lock.
      bool tracked = false;
      {
        std::lock_guard lock(calls_mu_);
        tracked = calls_.contains(head.id);
        if (tracked) call->reservation = admission->reservation;
      }
      if (!tracked) (void)options_.budget->release(admission->reservation);
    } else if (enforce) {
      denied_.fetch_add(1, std::memory_order_relaxed);
      drop_call(head.id);
      Denial dn;
      dn.cause = DenialCause::Budget;
      dn.reason = why;
      dn.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
      record(head, GuardVerdict::Deny, "budget", "deny (budget: " + why + ")");
      return RequestVerdict::answer(
          denial_response(dn, denial_format_for_request(head.host, head.target, has_header(head, "anthropic-version")),
                          false),
          true);
    } else if (options_.log) {
      options_.log("faultline guard: " + request_text(head) + " -> would deny (budget: " + why +
                   "; monitor: forwarded)");
    }
  }
  RequestVerdict v = RequestVerdict::forward(true);
  // Answers stay readable for their usage: no compression.
  v.set_headers.emplace_back("Accept-Encoding", "identity");
  call->model = facts.model.value_or("");
  const LlmModelRoute* route = parsed ? route_for(options_.routes, facts.model) : nullptr;
  if (route || inject) v.request_body = std::make_shared<RewriteTransformer>(call->endpoint, options_.routes, inject);
  if (parsed && call->body_whole && call->endpoint == LlmEndpoint::AnthropicMessages &&
      options_.optimize_cache != CacheOptimizeMode::off) {
    CacheOptimization opt = optimize_anthropic_cache(call->body);
    const bool act = options_.optimize_cache == CacheOptimizeMode::enforce;
    if (!opt.changes.empty()) {
      std::string said;
      for (const std::string& c : opt.changes) said += (said.empty() ? "" : "; ") + c;
      if (options_.log)
        options_.log("faultline guard: " + request_text(head) + ": optimize-cache" + (act ? ": " : " would: ") + said);
      if (act) {
        // A route still applies, to the optimized body.
        std::string body = std::move(opt.body);
        if (route) {
          RewriteTransformer rw(call->endpoint, options_.routes, false);
          body = rw.feed(body) + rw.finish();
        }
        v.request_body = std::make_shared<WholeBodyTransformer>(std::move(body));
      }
    } else if (!opt.skipped.empty() && options_.log) {
      options_.log("faultline guard: " + request_text(head) + ": optimize-cache: left as it is (" + opt.skipped + ")");
    }
  }
  if (inject) v.response_body = std::make_shared<StreamFilterTransformer>();
  if (route) {
    call->model = route->to;
    call->routed_from = route->from;
  }
  // Tool calls are read for --trace-tools, --intent-firewall and --anomaly.
  call->usage = std::make_unique<LlmUsageReader>(
      call->endpoint, options_.trace_tools != nullptr || options_.intent != nullptr || options_.anomaly != nullptr);
  call->forwarded_at = std::chrono::steady_clock::now();
  if (options_.receipts) {
    ResponseGuardStream::Options o;
    o.guard = options_.receipts;
    o.endpoint = call->endpoint;
    call->receipt_watch = std::make_unique<ResponseGuardStream>(std::move(o));
  }
  if (options_.responses.guard) {
    ResponseGuardStream::Options o;
    o.guard = options_.responses.guard;
    o.endpoint = call->endpoint;
    o.block = options_.responses.block && enforce;
    o.denial.rule = "response-guard";
    o.denial.request_id = "req_" + options_.approval_prefix + "_" + std::to_string(head.id);
    // The answer's own provider: its envelope is what the client's SDK parses.
    o.format = call->endpoint == LlmEndpoint::AnthropicMessages ? DenialFormat::Anthropic : DenialFormat::OpenAI;
    // The head and model by value: the stream may outlive the call's entry.
    o.report = [this, head = RequestHead(head), model = call->model, enforce](
                   const std::vector<ResponseThreat>& threats, bool blocked) {
      record_response_threats(head, model, threats, blocked, enforce);
    };
    if (o.block) {
      auto stream = std::make_shared<ResponseGuardStream>(std::move(o));
      // After the usage filter, so the client's view is what is judged.
      v.response_body = v.response_body ? std::make_shared<ChainTransformer>(v.response_body, stream)
                                        : std::shared_ptr<ByteTransformer>(stream);
    } else {
      call->response_watch = std::make_unique<ResponseGuardStream>(std::move(o));
    }
  }
  return v;
}

void GuardJudge::record_response_threats(const RequestHead& head, const std::string& model,
                                         const std::vector<ResponseThreat>& threats, bool blocked, bool enforce) {
  const std::string then = blocked ? " (--block-responses: the answer was stopped with the provider's error)"
                           : !options_.responses.block ? " (--scan-responses: forwarded unchanged)"
                           : enforce                   ? " (seen after the answer had gone: forwarded)"
                                                       : " (monitor: would block; forwarded)";
  if (!threats.empty())
    risk(RiskKind::response_threat, threats.front().kind + " in the answer to " + request_text(head));
  for (const ResponseThreat& t : threats)
    record(head, blocked ? GuardVerdict::Deny : GuardVerdict::Allow, "response-guard/" + t.kind,
           "response_threat: " + t.kind + (t.secret ? " " + t.detail : "") + " in " + t.where +
               (t.secret ? "" : " (" + t.detail + ")") + then,
           ActivityLlm{model}, "response_threat");
}

std::optional<RequestVerdict> GuardJudge::replay_or_record(const std::shared_ptr<LlmCall>& call, bool filter) {
  const RequestHead& head = call->head;
  if (!call->body_whole) {
    if (options_.log)
      options_.log("faultline guard: " + request_text(head) + ": " + store_flag() +
                   ": the body is over the proxy's hold, neither answered from nor kept");
    return std::nullopt;
  }
  const std::string key = llm_replay_key(head.method, head.target, call->body);
  auto found = options_.replay->find(key);
  if (!found) {  // a broken recording is left alone (not overwritten) and the call forwarded
    if (options_.log)
      options_.log("faultline guard: " + request_text(head) + ": " + store_flag() + ": " + found.error().describe() +
                   " (forwarded, not recorded)");
    return std::nullopt;
  }
  std::optional<double> similarity;  // a --cache-mode similar hit: how similar
  if (!*found && options_.replay->similar_threshold()) {
    auto in = llm_similarity_input(head.method, head.target, call->body);
    if (in) {
      if (auto hit = options_.replay->find_similar(*in)) {
        *found = std::move(hit->recording);
        similarity = hit->score;
      }
    }
    if (!*found) {
      call->recording = std::make_unique<ReplayRecording>();
      call->recording->similar = std::move(in);
    }
  }
  if (!*found) {
    if (!call->recording) call->recording = std::make_unique<ReplayRecording>();
    call->recording->key = key;
    call->recording->method = head.method;
    call->recording->target = head.target;
    return std::nullopt;
  }
  // The answer as the upstream sent it; a chat stream the guard asked usage
  // for is filtered as it was then, piece by piece. An event stream keeps its
  // timing: each piece after the first waits the gap it arrived after.
  std::vector<std::pair<uint64_t, std::string>> pieces;  // (ms after the piece before, bytes)
  std::optional<LlmStreamFilter> f;
  if (filter) f.emplace();
  const bool paced = replay_is_event_stream(**found);
  uint64_t last_at = 0;
  for (const ReplayChunk& c : (*found)->chunks) {
    std::string bytes = f ? f->feed(c.bytes) : c.bytes;
    if (bytes.empty()) continue;  // its time counts toward the next piece's gap
    const uint64_t gap =
        pieces.empty() || c.at_ms < last_at ? 0 : std::min<uint64_t>(c.at_ms - last_at, kMaxReplayGapMs);
    last_at = c.at_ms;
    if (!pieces.empty() && (!paced || gap == 0))
      pieces.back().second += bytes;
    else
      pieces.emplace_back(gap, std::move(bytes));
  }
  if (f) {
    std::string tail = f->finish();
    if (pieces.empty()) pieces.emplace_back(0, std::string());
    pieces.back().second += tail;
  }
  if (pieces.empty()) pieces.emplace_back(0, std::string());
  call->model = call->facts.model.value_or("");
  call->replayed_from = options_.replay->path_for((*found)->key);
  if (similarity) {
    char score[16];
    std::snprintf(score, sizeof score, "%.3f", *similarity);
    call->replayed_from += std::string(" (similar ") + score + ")";
  }
  drop_call(head.id);  // nothing reserved, nothing to read
  RequestVerdict v = RequestVerdict::answer(std::move(pieces.front().second), true);
  v.answer_after.assign(std::make_move_iterator(pieces.begin() + 1), std::make_move_iterator(pieces.end()));
  return v;
}

void GuardJudge::record_llm_extras(const RequestHead& head, const LlmCall& call) {
  if (!call.routed_from.empty())
    record(head, GuardVerdict::Allow, call.rule, "route-model " + call.routed_from + " -> " + call.model,
           ActivityLlm{call.model}, "route");
  if (!call.replayed_from.empty()) {
    const bool cache = options_.replay->memory_only();
    record(head, GuardVerdict::Allow, call.rule, (cache ? "cache hit " : "replayed ") + call.replayed_from,
           ActivityLlm{call.model}, cache ? "cache-hit" : "replayed");
  }
}

std::string GuardJudge::store_flag() const { return options_.replay->memory_only() ? "--cache" : "--replay"; }

void GuardJudge::save_recording(LlmCall& call) {
  std::unique_ptr<ReplayRecording> rec = std::move(call.recording);
  if (!replay_answer_complete(rec->bytes())) {
    if (options_.log)
      options_.log("faultline guard: " + request_text(call.head) + " -> not kept (" + store_flag() +
                   ": not a whole 2xx answer)");
    return;
  }
  const std::string path = options_.replay->path_for(rec->key);
  // Once per new key, on the worker: an atomic write (and its fsync).
  if (auto st = options_.replay->save(std::move(*rec)); !st) {
    if (options_.log) options_.log("faultline guard: " + store_flag() + ": " + st.error().describe());
    return;
  }
  if (options_.replay->memory_only())
    record(call.head, GuardVerdict::Allow, call.rule,
           "cached for " + std::to_string(options_.replay->ttl().count()) + "ms in " + path, ActivityLlm{call.model},
           "cached");
  else
    record(call.head, GuardVerdict::Allow, call.rule, "recorded " + path, ActivityLlm{call.model}, "recorded");
}

void GuardJudge::on_response_bytes(uint64_t request_id, std::string_view bytes, bool end) {
  std::shared_ptr<LlmCall> call = take_call(request_id);
  if (!call || !call->usage) return;
  for (ResponseGuardStream* watch : {call->response_watch.get(), call->receipt_watch.get()}) {
    if (watch == nullptr) continue;
    if (!bytes.empty()) (void)watch->feed(bytes);
    if (end) (void)watch->finish();
  }
  if (!bytes.empty()) {
    call->usage->feed(bytes);
    if (call->recording) {
      const auto at = std::chrono::steady_clock::now() - call->forwarded_at;
      call->recording->chunks.push_back(
          {uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(at).count()), std::string(bytes)});
    }
  }
  if (!end) return;
  {
    std::lock_guard lock(calls_mu_);
    calls_.erase(request_id);
  }
  if (call->recording) save_recording(*call);
  LlmUsageReader& r = *call->usage;
  r.finish();
  if (options_.trace_tools) record_tool_calls(*call);
  if (options_.intent || options_.anomaly) note_tool_calls(*call);
  if (call->receipt_watch) record_receipts(*call);
  const std::optional<LlmUsage> u = r.usage();
  if (options_.budget && call->reservation) {
    if (u)
      (void)options_.budget->settle(*call->reservation, u->output);
    else if (r.status() == 0)  // nothing came back: taken as not having reached the upstream
      (void)options_.budget->release(*call->reservation);
    // else: an answer without usage stays charged at its reservation
  }
  if (!u) return;
  if (options_.anomaly)
    if (auto drift = options_.anomaly->note_tokens(u->input + u->output))
      record_anomaly("TOKENS", "", *drift, "a token rate over the warm-up's: " + *drift);
  llm_calls_.fetch_add(1, std::memory_order_relaxed);
  llm_in_.fetch_add(u->input, std::memory_order_relaxed);
  llm_out_.fetch_add(u->output, std::memory_order_relaxed);
  const std::string model = u->model.empty() ? call->model : u->model;
  ActivityLlm a{model, u->input, u->output, u->cache_read, u->reasoning};
  record(call->head, GuardVerdict::Allow, call->rule, "", a, "llm");
  if (options_.log)
    options_.log("llm: " + model + " in=" + std::to_string(u->input) + " out=" + std::to_string(u->output) +
                 (u->cache_read ? " cache=" + std::to_string(u->cache_read) : "") +
                 (u->reasoning ? " reasoning=" + std::to_string(u->reasoning) : ""));
}

void GuardJudge::apply_dlp_forward(const RequestHead& head, const DlpCall& dlp, const std::vector<DlpFound>& found,
                                   bool enforce, RequestVerdict& v) {
  const GuardDlpOptions& o = options_.dlp;
  bool detectors = false;
  for (const DlpFound& f : found) detectors |= f.finding.type.has_value();
  if (detectors && o.action == DlpAction::redact && enforce) {
    // The body through the redactor (before any LLM rewrite); each header
    // holding a secret sent with it masked.
    bool in_body = false;
    std::map<std::string, std::string> headers;
    for (const DlpFound& f : found) {
      if (!f.finding.type) continue;
      if (f.where == "body") {
        in_body = true;
      } else if (f.where.starts_with("header ")) {
        const std::string name = f.where.substr(7);
        if (!headers.contains(name))
          for (const auto& [n, value] : head.headers)
            if (n == name) headers[name] = value;
        headers[name] = masked(headers[name], f.finding);
      }
    }
    if (in_body) {
      std::shared_ptr<ByteTransformer> redact = std::make_shared<RedactTransformer>(o.engine);
      v.request_body = v.request_body ? std::make_shared<ChainTransformer>(redact, v.request_body) : redact;
    }
    for (auto& [name, value] : headers) v.set_headers.emplace_back(name, value);
    record(dlp.shown, GuardVerdict::Allow, "dlp-redact", "redacted (DLP: masked at equal length, forwarded)",
           std::nullopt, "dlp");
    return;
  }
  if (detectors)
    record(dlp.shown, GuardVerdict::Allow, "dlp-monitor",
           o.action == DlpAction::monitor
               ? "forwarded (--dlp-action monitor)"
               : "would " + std::string(o.action == DlpAction::redact ? "redact" : "deny") + " (monitor: forwarded)",
           std::nullopt, "dlp");
  if (std::any_of(found.begin(), found.end(), [](const DlpFound& f) { return !f.finding.type; }))
    record(dlp.shown, GuardVerdict::Allow, "content-monitor", "forwarded (content policy)", std::nullopt, "dlp");
}

GuardDecision GuardJudge::judge_prompt(const RequestHead& head, const LlmCall& call, GuardDecision d, bool enforce) {
  const GuardPromptOptions& o = options_.prompt;
  std::string why;
  if (!call.prompt.findings.empty()) {
    std::string where;
    for (const InjectionFinding& f : call.prompt.findings) {
      const std::string s(prompt_source_name(f.source));
      if ((", " + where + ",").find(", " + s + ",") == std::string::npos) where += (where.empty() ? "" : ", ") + s;
    }
    why = "prompt injection: " + call.prompt.families() + " (in " + where + ")";
    risk(RiskKind::injection, why + " in " + request_text(head));
  } else if (!call.prompt_unscanned.empty() && o.action != PromptAction::monitor) {
    why = "prompt guard: " + call.prompt_unscanned;
  }
  if (why.empty()) return d;
  if (d.verdict != GuardVerdict::Deny) {
    if (o.action == PromptAction::deny)
      d = GuardDecision{GuardVerdict::Deny, "prompt-guard", why, enforce, false};
    else if (o.action == PromptAction::approve && d.verdict == GuardVerdict::Allow)
      d = GuardDecision{GuardVerdict::Approve, "prompt-guard", why, enforce, false};
  }
  // One line per finding: its family in the rule, what was done in the verdict.
  const bool acted = d.rule == "prompt-guard" && d.enforced;
  for (const InjectionFinding& f : call.prompt.findings)
    record(head, acted ? d.verdict : GuardVerdict::Allow,
           "prompt-guard/" + std::string(injection_family_name(f.family)),
           "prompt-guard: " + std::string(injection_family_name(f.family)) + " in " +
               std::string(prompt_source_name(f.source)) + " text (read as " + f.view + ")" +
               (acted                               ? ""
                : o.action == PromptAction::monitor ? " (--prompt-guard-action monitor: forwarded)"
                                                    : " (monitor: forwarded)"),
           std::nullopt, "prompt_injection");
  return d;
}

void GuardJudge::record_receipts(const LlmCall& call) {
  for (const Receipt& r : check_claims(call.receipt_watch->scanner().answer_text(), call.runs)) {
    const bool unverified = r.verdict == ReceiptVerdict::unverified;
    const std::string verdict(receipt_verdict_name(r.verdict));
    record(call.head, GuardVerdict::Allow, unverified ? "unverified-claim" : "receipts/" + verdict,
           std::string(unverified ? "unverified-claim" : "receipt") + ": '" + r.claim + "' " + verdict + " (" + r.why +
               ")",
           ActivityLlm{call.model}, unverified ? "unverified-claim" : "receipt");
  }
}

std::string GuardJudge::masked_text(std::string text) const {
  const std::shared_ptr<const DlpEngine>& engine = options_.trace_tools ? options_.trace_tools : options_.dlp.engine;
  if (!engine) return text;
  for (const DlpFinding& f : dlp_scan(engine, text))
    if (f.type) text = masked(std::move(text), f);
  return text;
}

void GuardJudge::record_tool_calls(const LlmCall& call) {
  for (const LlmToolCall& t : call.usage->tool_calls()) {
    // The arguments as the log shows them: every finding masked, never the secret.
    std::string args = masked_text(t.arguments);
    if (args.size() > 2048) args = args.substr(0, 2048) + "...";
    const std::string name = one_line(t.name.substr(0, 256));
    record(call.head, GuardVerdict::Allow, "tool:" + name,
           "tool_call " + name + (t.id.empty() ? "" : " (" + one_line(t.id.substr(0, 256)) + ")") + " " +
               one_line(args) + (t.truncated ? " (arguments cut at 64 KiB)" : ""),
           ActivityLlm{call.model}, "tool_call");
  }
}

void GuardJudge::withdrawn(uint64_t request_id) {
  (void)take_dlp(request_id, true);
  (void)take_clickhouse(request_id, true);
  (void)approvals_.withdraw(request_id);
  drop_call(request_id);  // a body stage the client left
}

void GuardJudge::note_tool_calls(const LlmCall& call) {
  for (const LlmToolCall& t : call.usage->tool_calls()) {
    const std::string name = one_line(t.name.substr(0, 256));
    if (options_.anomaly && options_.anomaly->new_tool(t.name))
      record_anomaly("TOOL", "", name, "a tool not called in the warm-up: " + name);
    if (options_.intent)
      (void)consider_action({IntentActionKind::tool_call, name, "", masked_text(t.arguments.substr(0, 4096))},
                            call.head);
  }
}

void GuardJudge::capture_mission(const LlmCall& call) {
  auto segments = prompt_segments(call.endpoint, call.body);
  if (!segments) return;
  for (const PromptSegment& s : *segments) {
    if (s.source != PromptSource::user) continue;
    if (options_.intent->offer_mission(s.text) && options_.log)
      options_.log("faultline guard: intent-firewall: the mission (the first user turn): '" +
                   one_line(masked_text(s.text.substr(0, 200))) + (s.text.size() > 200 ? "...'" : "'"));
    return;
  }
}

GuardDecision GuardJudge::judge_request_intent(const RequestHead& head, GuardDecision d, bool enforce) {
  const bool tunnel = head.stage == RequestStage::connect || head.stage == RequestStage::tls_sni;
  const IntentAction a{IntentActionKind::request, tunnel ? "CONNECT" : head.method, host_port(head),
                       tunnel ? "" : head.target};
  const std::optional<IntentJudgement> j = consider_action(a, head);
  if (!j || j->verdict != IntentVerdict::off_mission) return d;
  const IntentEnforce act = options_.intent_action;
  const std::string why = "off-mission: " + j->why;
  if (act == IntentEnforce::deny && d.verdict != GuardVerdict::Deny)
    d = GuardDecision{GuardVerdict::Deny, "intent-firewall", why, enforce, false};
  else if (act == IntentEnforce::approve && d.verdict == GuardVerdict::Allow)
    d = GuardDecision{GuardVerdict::Approve, "intent-firewall", why, enforce, false};
  const bool acted = d.rule == "intent-firewall" && d.enforced;
  const std::string then =
      acted                           ? (d.verdict == GuardVerdict::Deny ? " (--intent-action deny: denied)"
                                                                         : " (--intent-action approve: held for approval)")
      : act == IntentEnforce::monitor ? " (flagged, not stopped)"
      : d.rule == "intent-firewall"
          ? " (monitor: would " + std::string(act == IntentEnforce::deny ? "deny" : "hold") + "; not stopped)"
          : " (flagged; the policy decides it)";
  record_off_mission(a, head, acted ? d.verdict : GuardVerdict::Allow, j->why, then);
  return d;
}

std::optional<IntentJudgement> GuardJudge::consider_action(const IntentAction& a, std::optional<RequestHead> head) {
  std::optional<IntentJudgement> j = options_.intent->consider(a);
  if (!j) return j;
  if (j->verdict == IntentVerdict::off_mission && a.kind != IntentActionKind::request)
    record_off_mission(a, head, GuardVerdict::Allow, j->why, " (flagged, not stopped)");
  if (j->verdict != IntentVerdict::unclear || !intent_thread_) return j;
  intent_thread_->post([this, a, head = std::move(head)] {
    if (intent_stopping_.load()) return;
    const Result<IntentJudgement> r = options_.intent->ask_judge(a);
    if (!r) {
      if (options_.log)
        options_.log("faultline guard: intent-firewall: the judge gave no verdict on " + one_line(a.describe()) + ": " +
                     r.error().describe() + " (failing open: not flagged)");
      return;
    }
    if (r->verdict == IntentVerdict::off_mission) {
      record_off_mission(a, head, GuardVerdict::Allow, "the judge model says: " + r->why,
                         " (after the fact: not stopped)");
    } else if (options_.log) {
      options_.log("faultline guard: intent-firewall: the judge model says " + one_line(a.describe()) +
                   " serves the mission (" + one_line(r->why) + ")");
    }
  });
  return j;
}

void GuardJudge::record_off_mission(const IntentAction& a, const std::optional<RequestHead>& head, GuardVerdict verdict,
                                    const std::string& why, const std::string& then) {
  const std::string said = "off-mission-action: " + one_line(why) + then;
  if (a.kind == IntentActionKind::request && head) {
    record(*head, verdict, "intent-firewall", said, std::nullopt, "off-mission-action");
    return;
  }
  std::string what = one_line(a.kind == IntentActionKind::tool_call ? a.verb + " " + a.detail : a.detail);
  if (what.size() > 512) what = what.substr(0, 512) + "...";
  if (options_.activity) {
    ActivityEntry e;
    e.identity = head && !head->identity.empty() ? head->identity : options_.identity;
    e.kind = "off-mission-action";
    e.method = a.kind == IntentActionKind::tool_call ? "TOOL" : "EXEC";
    if (head) e.host = head->port == 80 || head->port == 443 ? head->host : host_port(*head);
    e.path = what;
    e.verdict = std::string(guard_verdict_name(verdict));
    e.rule = "intent-firewall";
    options_.activity->post(std::move(e));
  }
  if (options_.log)
    options_.log("faultline guard: " + std::string(a.kind == IntentActionKind::tool_call ? "tool_call " : "exec ") +
                 what + " -> " + said);
}

}  // namespace faultline
