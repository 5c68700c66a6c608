// The request guard's pieces started in the order a request meets them
// (activity log, judge, approvals socket, proxy) and stopped in reverse, so
// that no request is judged by a judge that is gone.
#include "userspace/guard_runtime/guard_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <thread>

#include "base/files.h"
#include "userspace/enforce/redirected_conns.h"
#include "userspace/guard/credential_judge.h"
#include "userspace/guard_runtime/guard_activity_reporter.h"
#include "userspace/guard_runtime/guard_approval_relay.h"
#include "userspace/guard_runtime/guard_policy_sync.h"
#include "userspace/guard_runtime/guard_proctor.h"
#include "userspace/guard_runtime/guard_remote_budget.h"
#include "userspace/policy/guard_section.h"
#include "userspace/policy/policy.h"
#include "userspace/proxy/http_answer.h"
#include "userspace/proxy/tls_setup.h"

namespace faultline {
namespace guard_capture_impl {

// One write per line: workers log concurrently, and the command shares stderr.
void write_line(const std::string& line) {
  const std::string s = line + "\n";
  (void)!::write(STDERR_FILENO, s.data(), s.size());
}

// SIGHUP -> one byte on a pipe -> the reload thread (a handler may do no more).
volatile sig_atomic_t g_reload_pipe = -1;
void on_sighup(int) {
  if (g_reload_pipe >= 0) {
    const char b = 1;
    (void)!::write(g_reload_pipe, &b, 1);
  }
}

// Where a connection the kernel redirected to the guard's proxy was going.
// One the command made to the proxy itself (its proxy variables; the redirect
// covers every TCP destination, the proxy's too) is a forward proxy client.
std::optional<SocketAddress> redirected_destination(int fd) {
  auto conn = find_redirected_conn(fd);
  if (!conn || !*conn) return std::nullopt;
  SocketAddress orig = socket_address((*conn)->orig.b, (*conn)->orig_port);
  SocketAddress local;
  local.length = sizeof local.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.length) == 0 &&
      endpoint_text(local) == endpoint_text(orig))
    return std::nullopt;
  return orig;
}

// The gateway's one unauthenticated answer: the CA agents must trust when it
// terminates TLS (a bootstrap: fetch it, then send requests with a token).
std::optional<std::string> gateway_own_answer(const std::string& ca_pem, std::string_view method,
                                              std::string_view target) {
  if (target != "/__faultline/ca.crt") return std::nullopt;
  if (method != "GET" && method != "HEAD") return std::nullopt;
  if (ca_pem.empty())
    return compose_http_response(404, {{"Content-Type", "text/plain"}},
                                 "this gateway does not terminate TLS (--terminate-tls): it has no CA to trust\n",
                                 false);
  return compose_http_response(200, {{"Content-Type", "application/x-pem-file"}}, ca_pem, false);
}

std::string policy_line(const GuardPolicy& p) {
  return std::string(p.mode == GuardMode::Enforce ? "enforce" : "monitor") + ", default " +
         (p.default_allow ? "allow" : "deny") + ", " + std::to_string(p.rules.size()) + " rule" +
         (p.rules.size() == 1 ? "" : "s");
}

Status make_state_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ec.value(), "--state-dir " + dir + ": " + ec.message());
  return ensure_private_dir(dir, false);
}

// --k8s-kubeconfig: the API server's upstream TLS as the kubeconfig says (its
// roots or none, the user's client certificate) for the terminated
// connections to it, and the command's copy written in the trust folder.
// Returns the copy's path.
Result<std::string> set_up_kubeconfig(const KubeconfigUse& k, const std::string& ca_cert, const std::string& dir,
                                      HttpTls& http_tls) {
  auto client = kubeconfig_upstream_client(k);
  if (!client) return input_error(EINVAL, "--k8s-kubeconfig " + client.error().message);
  UpstreamTlsClient entry{{k.host}, k.port, std::move(*client)};
  if (!k.tls_server_name.empty()) entry.hosts.push_back(k.tls_server_name);
  http_tls.upstream_clients.push_back(std::move(entry));
  auto pem = read_text_file(ca_cert);
  if (!pem) return make_error(pem.error().err, "the CA " + ca_cert + ": " + pem.error().describe());
  const std::string path = dir + "/kubeconfig";
  FL_TRY(write_file_atomic(path, child_kubeconfig(k, *pem)));
  // Readable like the trust files beside it (the command may run as another user): it holds no secret.
  if (::chmod(path.c_str(), 0644) != 0) return errno_error("cannot chmod 644 " + path);
  return path;
}

}  // namespace guard_capture_impl

using namespace guard_capture_impl;

std::string guard_ca_dir() {
  if (const char* e = std::getenv("FAULTLINE_CA_DIR"); e != nullptr && e[0] != '\0') return e;
  if (::geteuid() == 0) return kDefaultCaDir;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && x[0] == '/')
    return std::string(x) + "/faultline/ca";
  // A HOME that is not ours (setpriv, su without -) cannot hold it: the
  // guard's runtime folder can (a CA per boot where /tmp is cleared).
  const char* home = std::getenv("HOME");
  struct stat st {};
  if (home != nullptr && home[0] == '/' && ::stat(home, &st) == 0 && st.st_uid == ::geteuid())
    return std::string(home) + "/.local/share/faultline/ca";
  auto dir = guard_socket_dir(true);
  return (dir ? *dir : "/tmp/faultline-" + std::to_string(::geteuid())) + "/ca";
}

std::string guard_state_dir() {
  if (const char* e = std::getenv("FAULTLINE_STATE_DIR"); e != nullptr && e[0] != '\0') return e;
  if (::geteuid() == 0) return "/var/lib/faultline/guard";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/')
    return std::string(x) + "/faultline/guard";
  const char* home = std::getenv("HOME");
  struct stat st {};
  if (home != nullptr && home[0] == '/' && ::stat(home, &st) == 0 && st.st_uid == ::geteuid())
    return std::string(home) + "/.local/state/faultline/guard";
  auto dir = guard_socket_dir(true);
  return (dir ? *dir : "/tmp/faultline-" + std::to_string(::geteuid())) + "/state";
}

Result<GuardPolicy> read_guard_policy_file(const std::string& file) {
  auto text = read_policy_text(file);
  if (!text) return input_error(text.error().err, text.error().describe());
  GuardSectionParse p = parse_guard_text(*text);
  if (!p.ok()) {
    std::string more = p.errors.size() > 1 ? " (and " + std::to_string(p.errors.size() - 1) +
                                                 " more: faultctl policy validate " + file + ")"
                                           : "";
    return input_error(EINVAL, p.errors[0].render(file) + more);
  }
  return p.policy;
}

Status check_guard_policy_runnable(const GuardPolicy& policy, bool terminate_tls) {
  for (const GuardRule& r : policy.rules) {
    if (!terminate_tls && needs_plaintext(r)) {
      const std::string what = r.needs_llm_facts()   ? "an LLM call's model or max tokens"
                               : !r.dlp_type.empty() ? "a DLP finding (dlp_type) of the request's bytes"
                               : r.is_k8s() ? "a Kubernetes request's verb, resource, namespace or name (its path)"
                                            : "the request's path or method";
      return input_error(EINVAL, "rule " + r.name + ": matches on " + what +
                                     ", which HTTPS shows only when its TLS is terminated: add --terminate-tls (the "
                                     "command then trusts the local CA), or match on the host alone");
    }
  }
  return {};
}

Result<std::unique_ptr<GuardCapture>> GuardCapture::start(GuardCaptureOptions options, std::ostream& log) {
  std::unique_ptr<GuardCapture> c(new GuardCapture);
  // The inherited sockets are owned from here on, whatever happens next.
  std::vector<UniqueFd> inherited;
  for (int fd : options.inherited_listeners) inherited.emplace_back(fd);
  options.inherited_listeners.clear();
  c->options_ = std::move(options);
  if (!c->options_.line_log) c->options_.line_log = write_line;
  const GuardCaptureOptions& o = c->options_;
  const std::function<void(const std::string&)> say = o.line_log;

  HttpTls http_tls;
  http_tls.mode = HttpTlsMode::sni;
  std::string ca_pem;
  std::vector<std::pair<std::string, std::string>> trust_env;
  if (o.terminate_tls) {
    auto folder = TempFolder::create("faultline-guard-tls");
    if (!folder) return folder.error();
    c->trust_dir_.emplace(std::move(*folder));
    TerminationOptions t;
    t.ca = CaFiles{guard_ca_dir()};
    t.trust_dir = c->trust_dir_->path();
    t.upstream.upstream_ca_file = o.upstream_ca;
    auto setup = set_up_termination(t);
    if (!setup) return setup.error();
    http_tls.mode = HttpTlsMode::terminate;
    http_tls.server = setup->server;
    http_tls.client = setup->client;
    trust_env = setup->env;
    trust_env.emplace_back("GIT_SSL_CAINFO", setup->trust.bundle);
    if (o.kubeconfig) {
      auto kube = set_up_kubeconfig(*o.kubeconfig, t.ca.cert(), c->trust_dir_->path(), http_tls);
      if (!kube) return kube.error();
      trust_env.emplace_back("KUBECONFIG", *kube);
    }
    if (o.gateway) {
      auto pem = read_text_file(t.ca.cert());
      if (!pem) return make_error(pem.error().err, "the CA " + t.ca.cert() + ": " + pem.error().describe());
      ca_pem = std::move(*pem);
    }
    log << "faultline guard: HTTPS is terminated with " << (setup->ca_created ? "the new " : "") << "local CA "
        << setup->ca.subject << " (" << t.ca.dir << "); the command trusts it through";
    for (const auto& [k, v] : trust_env) log << " " << k;
    log << "\n";
  }

  // With faultcp: the workspace's section is the policy (the flags refused
  // local rules), and the activity log defaults to one in the state folder so
  // that the chain faultcp holds continues across restarts of the guard.
  std::shared_ptr<const CpLink> link;
  std::optional<WorkspaceGuardPolicy> workspace;
  ActivityWriter::Options wo;
  if (!o.cp_url.empty()) {
    auto l = CpLink::create(o.cp_url, o.cp_token,
                            {.token_hint = "an agent token of the workspace: POST /v1/agents/register with an "
                                           "enrollment token",
                             .max_body = 1024 * 1024});
    if (!l) return l.error();
    link = std::make_shared<const CpLink>(std::move(*l));
    GuardCaptureOptions& m = c->options_;
    if (m.state_dir.empty()) m.state_dir = guard_state_dir();
    FL_TRY(make_state_dir(m.state_dir));
    auto w = fetch_workspace_guard_policy(*link, m.state_dir + "/cp-guard-policy.json", o.terminate_tls);
    if (!w) return w.error();
    workspace = std::move(*w);
    if (workspace->policy) m.policy = *workspace->policy;
    if (m.json_log.empty()) m.json_log = m.state_dir + "/activity-" + activity_file_word(o.identity) + ".jsonl";
    auto reporter = GuardActivityReporter::open(link, m.state_dir, o.identity, say);
    if (!reporter) return reporter.error();
    c->reporter_ = std::move(*reporter);
    const size_t spooled = c->reporter_->spooled_at_start();
    wo.on_append = [r = c->reporter_.get()](const ActivityEntry& e, const std::string& line) { r->add(e, line); };
    log << "faultline guard: faultcp " << link->text() << ": "
        << (workspace->policy
                ? "the workspace's guard policy v" + std::to_string(workspace->version) +
                      (workspace->from == "faultcp" ? "" : " (faultcp unreachable: cached in " + workspace->from + ")")
                : std::string("no workspace guard policy yet (monitor, default allow until one is put)"))
        << "; held requests are posted there too; activity reported (spool " << m.state_dir << ", " << spooled
        << " line" << (spooled == 1 ? "" : "s") << " from before)\n";
  }
  std::shared_ptr<ActivityWriter> activity;
  wo.on_error = [say](const Error& e) { say("faultline guard: activity log: " + e.describe()); };
  if (!o.json_log.empty()) {
    auto w = ActivityWriter::open(o.json_log, wo);
    if (!w) return make_error(w.error().err, "--json-log " + o.json_log + ": " + w.error().describe());
    activity = std::make_shared<ActivityWriter>(std::move(*w));
    c->activity_ = activity;
  }
  if (o.budget_shared) {
    auto store = std::make_shared<RemoteBudgetStore>(link, o.budget, say);
    auto now = store->fetch(o.identity);
    if (!now)
      return make_error(now.error().err, "--llm-budget-shared: faultcp " + link->text() +
                                             " did not answer for the budget: " + now.error().describe());
    c->shared_budget_ = store;
    log << "faultline guard: LLM budget for " << o.identity << ", shared by its guards through faultcp " << link->text()
        << ": "
        << (o.budget.tokens ? std::to_string(*o.budget.tokens) + " output tokens" : std::string("no token limit"))
        << ", " << (o.budget.requests ? std::to_string(*o.budget.requests) + " calls" : std::string("no call limit"))
        << " per " << o.budget.window.count() << "s window (used " << now->tokens << " tokens, " << now->requests
        << " calls; a call faultcp cannot be asked about is denied)\n";
  } else if (o.budget.tokens || o.budget.requests) {
    const std::string dir = o.state_dir.empty() ? guard_state_dir() : o.state_dir;
    // ~/.local/state may not exist yet: its parents too (an existing one is left as it is).
    for (size_t i = 1; i <= dir.size(); ++i)
      if (i == dir.size() || dir[i] == '/') (void)::mkdir(dir.substr(0, i).c_str(), 0700);
    auto store = LocalBudgetStore::open(o.budget, dir);
    if (!store) return make_error(store.error().err, "the LLM budget: " + store.error().describe());
    c->budget_ = std::move(*store);
    const BudgetCharge now = c->budget_->charged(o.identity);
    log << "faultline guard: LLM budget for " << o.identity << ": "
        << (o.budget.tokens ? std::to_string(*o.budget.tokens) + " output tokens" : std::string("no token limit"))
        << ", " << (o.budget.requests ? std::to_string(*o.budget.requests) + " calls" : std::string("no call limit"))
        << " per " << o.budget.window.count() << "s window (used " << now.tokens << " tokens, " << now.requests
        << " calls; state " << c->budget_->state_path() << ")\n";
  }
  GuardJudgeOptions jo;
  if (!o.replay_dir.empty()) {
    if (::mkdir(o.replay_dir.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_error("--replay " + o.replay_dir + ": cannot make the folder");
    if (::access(o.replay_dir.c_str(), W_OK | X_OK) != 0)
      return errno_error("--replay " + o.replay_dir + ": not a folder this user can write to");
    jo.replay = std::make_shared<ReplayStore>(o.replay_dir);
    log << "faultline guard: --replay " << o.replay_dir
        << ": LLM calls with a recording there are answered from it (nothing upstream), the others recorded\n";
  }
  if (o.cache_ttl) {
    jo.replay = std::make_shared<ReplayStore>(*o.cache_ttl);
    if (o.cache_threshold) jo.replay->set_similar(*o.cache_threshold);
    log << "faultline guard: --cache: a repeated LLM call (same method, path and JSON body) is answered from "
           "memory for "
        << o.cache_ttl->count() << "ms after its answer came ";
    if (o.cache_threshold)
      log << "(similar: also a call alike but for a prompt at least " << *o.cache_threshold << " similar)\n";
    else
      log << "(exact match only)\n";
  }
  jo.llm_hosts = o.llm_hosts;
  jo.routes = o.routes;
  jo.optimize_cache = o.optimize_cache;
  jo.dlp = o.dlp;
  jo.prompt = o.prompt;
  jo.trace_tools = o.trace_tools;
  jo.responses = o.responses;
  jo.breaker = o.breaker;
  jo.anomaly = o.anomaly;
  jo.wasm = o.wasm;
  jo.wasm_fail_closed = o.wasm_fail_closed;
  jo.clickhouse_hosts = o.clickhouse_hosts;
  jo.mirror = o.mirror;
  jo.intent = o.intent;
  jo.intent_action = o.intent_action;
  jo.receipts = o.receipts;
  jo.budget = c->shared_budget_ ? c->shared_budget_ : std::shared_ptr<BudgetStore>(c->budget_);
  jo.budget_limits = o.budget;
  jo.identity = o.identity;
  jo.terminate_tls = o.terminate_tls;
  jo.approve_timeout = o.approve_timeout;
  jo.approval_prefix = std::to_string(::getpid());
  jo.activity = activity;
  jo.log = say;
  c->judge_ = std::make_shared<GuardJudge>(std::make_shared<const GuardPolicy>(o.policy), std::move(jo));
  std::vector<std::shared_ptr<ApprovalListener>> listeners;
  if (o.proctor) {
    auto proctor = GuardProctor::create(*o.proctor, c->judge_->approvals(), link, say);
    if (!proctor) return proctor.error();
    c->proctor_ = std::move(*proctor);
    log << "faultline guard: the proctor (" << o.proctor->model << " at " << o.proctor->url
        << ") reviews each held request first: it may approve or deny it, else it waits for a person\n";
  }
  if (link) {
    c->relay_ = std::make_shared<GuardApprovalRelay>(link, c->judge_->approvals(), say);
    listeners.push_back(c->relay_);
    c->policy_sync_ = std::make_unique<GuardPolicySync>(link, c->judge_, workspace->version,
                                                        o.state_dir + "/cp-guard-policy.json", o.terminate_tls, say);
  }
  // faultcp hears of a hold first, so that a proctor's quick decision
  // withdraws a copy that exists.
  if (c->proctor_) listeners.push_back(c->proctor_);
  if (listeners.size() == 1) c->judge_->approvals().set_listener(listeners.front());
  if (listeners.size() > 1) c->judge_->approvals().set_listener(std::make_shared<ApprovalListeners>(listeners));

  auto dir = guard_socket_dir(true);
  if (!dir) return make_error(dir.error().err, "the approvals socket's folder: " + dir.error().describe());
  auto sock = ApprovalSocket::start(guard_socket_path(*dir, ::getpid()), c->judge_->approvals(),
                                    GuardAbout{::getpid(), o.identity, o.command}, &c->judge_->exec_grants());
  if (!sock) return make_error(sock.error().err, "the approvals socket: " + sock.error().describe());
  c->approvals_ = std::move(*sock);

  ProxyOptions po;
  po.workers = 1;
  auto reg = ProxyRegistry::start(po);
  if (!reg) return reg.error();
  c->proxies_ = std::move(*reg);
  ProxyConfig pc;
  pc.name = "guard";
  pc.listen = o.listen.empty() ? "127.0.0.1:0" : o.listen;
  std::shared_ptr<RequestJudge> judge = c->judge_;
  std::optional<CredsFile> creds = o.creds;
  if (o.kubeconfig && o.kubeconfig->authorization) {
    if (!creds) creds.emplace();
    creds->http.push_back(*o.kubeconfig->authorization);
  }
  if (creds) {
    // The secrets are read now, before the command starts: an env source is
    // gone from the environment it inherits.
    c->creds_ = CredentialStore::start(*creds, o.creds_ttl, say);
    judge = std::make_shared<CredentialJudge>(c->judge_, c->creds_);
  }
  if (o.kubeconfig) {
    const KubeconfigUse& k = *o.kubeconfig;
    log << "faultline guard: --k8s-kubeconfig " << k.file << " (context " << k.context
        << "): the command's KUBECONFIG is a copy that trusts the guard's CA and holds no credentials; the guard "
           "presents "
        << kubeconfig_credentials_text(k) << " to " << k.server << ", verified "
        << (k.insecure         ? std::string("not at all (insecure-skip-tls-verify)")
            : k.ca_pem.empty() ? std::string("with the system's CAs")
                               : std::string("with the kubeconfig's certificate-authority"))
        << "\n"
        << std::flush;
  }
  if (o.creds) {
    std::string hosts;
    for (const HttpCredential& h : o.creds->http)
      hosts += (hosts.empty() ? "" : ", ") + h.host + (h.port ? ":" + std::to_string(*h.port) : "") + " (" + h.header +
               " from " + secret_source_text(h.secret) + ")";
    log << "faultline guard: --creds: the guard sets " << hosts
        << " on the allowed HTTPS requests to those hosts, replacing the command's own; the secrets are read again "
           "every "
        << o.creds_ttl.count() / 1000 << "s; a request whose secret is missing is denied (rule creds)\n"
        << std::flush;
  }
  pc.forward = ForwardProxy{judge, {}, {}, {}};
  if (o.gateway) {
    pc.forward->authenticate = [tokens = o.gateway_tokens](std::string_view authorization) {
      return gateway_identity(tokens, authorization);
    };
    pc.forward->own_answer = [ca_pem](std::string_view method, std::string_view target) {
      return gateway_own_answer(ca_pem, method, target);
    };
  }
  if (o.transparent) pc.original_destination = redirected_destination;
  Result<ProxyInfo> info = make_error(EINVAL, "no proxy");
  if (!inherited.empty()) {
    // A successor: the predecessor's sockets, with HTTP and its TLS mode from
    // the first connection it accepts.
    ProxyInfo adopt;
    adopt.config = pc;
    adopt.http = true;
    adopt.http_tls = http_tls;
    info = c->proxies_->adopt(adopt, std::move(inherited));
  } else {
    info = c->proxies_->create(pc);
  }
  if (!info) return info.error();
  FL_TRY(c->proxies_->set_http_tls(pc.name, http_tls));
  auto bound = parse_address_port(info->listen_bound);
  if (!bound) return bound.error();
  c->port_ = bound->second;
  c->address_ = info->listen_bound;
  if (o.transparent) {
    auto redirect_to = [&](const std::string& dest, const std::string& listen) -> Status {
      auto r = parse_redirect(dest + "=" + listen);
      if (!r) return r.error();
      r->text = dest + " (the guard's transparent capture)";
      c->redirects_.push_back(*r);
      return {};
    };
    FL_TRY(redirect_to("0.0.0.0/0:1-65535/tcp", info->listen_bound));
    // IPv6 where loopback has it; without, the command's IPv6 TCP stays fenced.
    ProxyConfig v6 = pc;
    v6.name = "guard-v6";
    v6.listen = "[::1]:0";
    if (auto info6 = c->proxies_->create(v6)) {
      FL_TRY(c->proxies_->set_http_tls(v6.name, http_tls));
      FL_TRY(redirect_to("[::/0]:1-65535/tcp", info6->listen_bound));
    }
  }

  const std::string url = "http://" + info->listen_bound;
  for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) c->env_.emplace_back(k, url);
  // An inherited NO_PROXY would let the command around the guard: replaced.
  const std::string no_proxy = o.no_proxy_loopback ? "localhost,127.0.0.1,::1" : "";
  c->env_.emplace_back("NO_PROXY", no_proxy);
  c->env_.emplace_back("no_proxy", no_proxy);
  for (auto& kv : trust_env) c->env_.push_back(std::move(kv));
  if (o.honeytokens && !o.gateway) FL_TRY(c->plant_honeytokens(*o.honeytokens, log));

  if (o.gateway) {
    log << "faultline guard: gateway: " << policy_line(o.policy) << ", " << o.gateway_tokens.size()
        << " token(s); agents send requests through http://" << info->listen_bound
        << " with Proxy-Authorization (Basic ID:TOKEN or Bearer TOKEN; 407 without)"
        << (o.terminate_tls ? "; the CA to trust: http://" + info->listen_bound + "/__faultline/ca.crt" : "") << "\n"
        << "faultline guard: approvals: faultctl approvals list (socket " << c->approvals_->path() << ")\n"
        << std::flush;
  } else {
    log << "faultline guard: " << policy_line(o.policy) << ", identity " << o.identity << "; the command's HTTP and "
        << "HTTPS go through the guard's proxy " << info->listen_bound
        << " (HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy)"
        << (o.no_proxy_loopback ? ", loopback excepted (NO_PROXY)" : "") << "\n"
        << "faultline guard: approvals: faultctl approvals list (socket " << c->approvals_->path() << ")\n";
    if (::geteuid() != 0)
      log << "faultline guard: not root: a process that ignores the proxy variables is NOT seen by the guard "
             "(run as root to capture such egress)\n";
    log << std::flush;
  }
  if (o.dlp.engine)
    log << "faultline guard: " << (o.dlp.dlp ? "--dlp" : "") << (o.dlp.dlp && o.dlp.content ? " and " : "")
        << (o.dlp.content ? "--content-policy" : "") << " scan each request's URL, headers and body"
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls (without it a tunnel is judged by its host)")
        << "\n"
        << std::flush;

  if (o.trace_tools)
    log << "faultline guard: --trace-tools: each tool call an LLM answer decides is logged (kind tool_call), its "
           "arguments with secrets masked\n"
        << std::flush;
  if (o.responses.guard)
    log << "faultline guard: " << (o.responses.block ? "--block-responses" : "--scan-responses")
        << " reads each LLM answer for a secret or injection text (response_threat; "
        << (!o.responses.block                    ? "forwarded unchanged"
            : o.policy.mode == GuardMode::Enforce ? "a JSON answer becomes the provider's error, a stream ends with "
                                                    "its error event"
                                                  : "monitor: would block, forwarded")
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls") << ")\n"
        << std::flush;
  if (o.receipts)
    log << "faultline guard: --receipts: each LLM answer's claims (tests pass, the build succeeds, a key removed) "
           "are checked against the session's tool runs (verified, unverified, unknown)"
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls") << "\n"
        << std::flush;
  if (o.mirror)
    log << "faultline guard: --mirror: a write (POST, PUT, PATCH, or a query string) to a host the session "
           "learned only from tool_result content is flagged (kind mirror)"
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls") << "\n"
        << std::flush;
  if (o.intent)
    log << "faultline guard: --intent-firewall: the mission is the first user turn of the session's LLM calls; "
           "requests, tool calls and execs that do not serve it are flagged (kind off-mission-action; "
        << (o.intent_action == IntentEnforce::monitor ? "monitor"
            : o.intent_action == IntentEnforce::deny  ? "--intent-action deny"
                                                      : "--intent-action approve")
        << (o.intent->has_judge() ? "; unclear ones asked of the judge model" : "")
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls") << ")\n"
        << std::flush;
  if (o.prompt.guard)
    log << "faultline guard: --prompt-guard scans each LLM call's system, user and tool_result texts for "
           "injection ("
        << (o.prompt.action == PromptAction::deny      ? "deny"
            : o.prompt.action == PromptAction::approve ? "approve"
                                                       : "monitor")
        << (o.terminate_tls ? "" : "; HTTPS only with --terminate-tls") << ")\n"
        << std::flush;

  if (!o.policy_file.empty()) {
    int fds[2];
    c->reload_stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (c->reload_stop_ && ::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      c->reload_pipe_[0] = UniqueFd(fds[0]);
      c->reload_pipe_[1] = UniqueFd(fds[1]);
      g_reload_pipe = fds[1];
      struct sigaction sa {};
      sa.sa_handler = on_sighup;
      sa.sa_flags = SA_RESTART;
      ::sigaction(SIGHUP, &sa, nullptr);
      c->reload_thread_ = std::thread([self = c.get(), fd = fds[0], stop = c->reload_stop_.get()] {
        for (;;) {
          pollfd p[2] = {{fd, POLLIN, 0}, {stop, POLLIN, 0}};
          if (::poll(p, 2, -1) < 0) continue;
          if (p[1].revents != 0) return;  // the destructor: no reload after it began
          char buf[64];
          while (::read(fd, buf, sizeof buf) > 0) {
          }
          self->reload();
        }
      });
    }
  }
  return c;
}

void GuardCapture::reload() {
  auto p = read_guard_policy_file(options_.policy_file);
  Status ok = p ? check_guard_policy_runnable(*p, options_.terminate_tls) : Status(p.error());
  if (!ok) {
    options_.line_log("faultline guard: SIGHUP: the policy stays as it was: " + ok.error().message);
    return;
  }
  options_.line_log("faultline guard: SIGHUP: policy reloaded from " + options_.policy_file + ": " + policy_line(*p));
  judge_->reload(std::make_shared<const GuardPolicy>(std::move(*p)));
}

GuardCapture::~GuardCapture() {
  // SIGHUP no longer reaches this object, and the reload thread has ended
  // (a reload under way finishes first) before anything it uses goes.
  if (!options_.policy_file.empty()) {
    ::signal(SIGHUP, SIG_IGN);
    g_reload_pipe = -1;
  }
  if (reload_thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(reload_stop_.get(), &one, sizeof one);
    reload_thread_.join();
  }
  // The proxy first (no new requests), then the approvals API; the judge
  // (its last activity lines) before the reporter that sends them.
  proxies_.reset();
  approvals_.reset();
  if (budget_) {
    if (auto st = budget_->flush(); !st)
      options_.line_log("faultline guard: the LLM budget's state: " + st.error().describe());
  }
  policy_sync_.reset();
  if (proctor_) proctor_->stop();
  if (relay_) relay_->stop();
  judge_.reset();
  relay_.reset();
  // Every line queued for the writer's thread is written (and handed to the
  // reporter) before the reporter stops.
  if (activity_) (void)activity_->flush();
  activity_.reset();
  reporter_.reset();
}

Result<std::vector<UniqueFd>> GuardCapture::listeners() const {
  auto all = proxies_->listeners();
  if (!all) return all.error();
  std::vector<UniqueFd> out;
  for (auto& h : *all)
    for (auto& fd : h.listeners) out.push_back(std::move(fd));
  return out;
}

void GuardCapture::release_listeners() { proxies_->release_listeners(); }

uint64_t GuardCapture::open_connections() const { return proxies_->open_connections(); }

void GuardCapture::print_summary(std::ostream& log) const {
  const GuardCounts n = judge_->counts();
  const auto pol = judge_->policy();
  log << "faultline guard: requests summary (" << policy_line(*pol) << ", identity " << options_.identity << ")\n"
      << "  requests " << n.requests << "  allowed " << n.allowed << "  denied " << n.denied << "  held " << n.held
      << "  approved " << n.approved << "\n";
  if (pol->mode == GuardMode::Monitor)
    log << "  monitor: would have denied " << n.would_deny << ", would have held " << n.would_hold << "\n";
  if (n.llm_calls > 0)
    log << "  llm calls " << n.llm_calls << "  tokens in " << n.llm_in << "  out " << n.llm_out << "\n";
  if (!options_.json_log.empty()) log << "  activity log: " << options_.json_log << "\n";
}

namespace guard_capture_impl {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

}  // namespace guard_capture_impl

Status GuardCapture::plant_honeytokens(const HoneytokenSet& set, std::ostream& log) {
  using guard_capture_impl::env_set;
  std::vector<std::string> planted, skipped;
  // Real AWS credentials, in any of the places the AWS tools read, are never
  // shadowed: the decoys would take their place for the command.
  const char* home = std::getenv("HOME");
  const bool aws_file =
      home != nullptr && home[0] == '/' && ::access((std::string(home) + "/.aws/credentials").c_str(), F_OK) == 0;
  if (aws_file || env_set("AWS_ACCESS_KEY_ID") || env_set("AWS_SECRET_ACCESS_KEY") || env_set("AWS_PROFILE") ||
      env_set("AWS_SHARED_CREDENTIALS_FILE")) {
    skipped.push_back("the AWS pair (AWS credentials are configured: never shadowed)");
  } else {
    auto dir = TempFolder::create("faultline-guard-decoy");
    if (!dir) return dir.error();
    decoy_dir_.emplace(std::move(*dir));
    const std::string file = decoy_dir_->path() + "/credentials";
    FL_TRY(write_file_atomic(file, set.aws_credentials_file()));
    (void)::chmod(file.c_str(), 0644);  // readable by a command run as another user
    env_.emplace_back("AWS_ACCESS_KEY_ID", set.value("aws_access_key"));
    env_.emplace_back("AWS_SECRET_ACCESS_KEY", set.value("aws_secret_key"));
    env_.emplace_back("AWS_SHARED_CREDENTIALS_FILE", file);
    planted.push_back("AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SHARED_CREDENTIALS_FILE=" + file);
  }
  if (env_set("GITHUB_TOKEN") || env_set("GH_TOKEN")) {
    skipped.push_back("GITHUB_TOKEN (a GitHub token is set)");
  } else {
    env_.emplace_back("GITHUB_TOKEN", set.value("github_token"));
    planted.push_back("GITHUB_TOKEN");
  }
  // A name no tool authenticates with, so it never replaces the agent's own key.
  if (env_set("ANTHROPIC_ADMIN_KEY")) {
    skipped.push_back("ANTHROPIC_ADMIN_KEY (set)");
  } else {
    env_.emplace_back("ANTHROPIC_ADMIN_KEY", set.value("anthropic_key"));
    planted.push_back("ANTHROPIC_ADMIN_KEY");
  }
  std::string p, k;
  for (const auto& s : planted) p += (p.empty() ? "" : ", ") + s;
  for (const auto& s : skipped) k += (k.empty() ? "" : "; ") + s;
  log << "faultline guard: --honeytokens: decoys planted in " << (p.empty() ? "nothing" : p)
      << (k.empty() ? "" : "; not planted: " + k)
      << "; any of them in a request (raw, JSON-escaped, URL-encoded, base64) is critical\n"
      << std::flush;
  return {};
}

}  // namespace faultline
