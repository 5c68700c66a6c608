// `faultctl guard` flags: cxxopts tokenises, we explain; the policy is compiled
// once here, so that its errors come before anything is created.
#include "ctl/guard_args.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstring>
#include <cxxopts.hpp>
#include <utility>

#include "base/errno_names.h"
#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "ctl/guard_intent_judge.h"
#include "ctl/policy_faults.h"
#include "ctl/tls_flags.h"
#include "userspace/policy/policy_compiler.h"

namespace faultline {
namespace {

constexpr Example kGuardExamples[] = {
    {"any user: HTTP(S) through the guard's proxy; /secrets/ gets a 403",
     "faultctl guard --enforce --deny /secrets/ --terminate-tls --json-log activity.jsonl -- ./agent.sh"},
    {"an injected instruction in a prompt: the provider's error, none upstream",
     "faultctl guard --enforce --terminate-tls --prompt-guard -- claude -p hi"},
    {"keys, tokens and cards in a request are masked before they leave",
     "faultctl guard --enforce --terminate-tls --dlp --dlp-action redact -- claude -p hi"},
    {"Anthropic calls: tools sorted by name, prompt-cache breakpoints placed",
     "faultctl guard --terminate-tls --optimize-cache enforce -- claude -p hi"},
    {"any user: only two hosts; POSTs to prod wait for faultctl approvals",
     "faultctl guard --enforce --default-deny --terminate-tls --allow api.anthropic.com "
     "--approve 'POST api.prod.example.com' --allow api.prod.example.com -- claude -p hi"},
    {"root: its file changes said; .ssh/ and curl refused; 512 processes, 2 GB",
     "faultctl guard --enforce --watch-fs --enforce-fs --fs-deny .ssh/ --fs-deny-exec /usr/bin/curl "
     "--max-pids 512 --max-memory 2G -- ./agent.sh"},
    {"monitor: nothing is blocked; traffic outside 10/8 is logged as would-deny",
     "faultctl guard --default-deny --allow 10.0.0.0/8 --json-log guard.jsonl -- ./integration-tests.sh"},
    {"reach only the database and DNS; refuse the rest with ECONNREFUSED",
     "faultctl guard --enforce --default-deny --allow 10.0.0.5:5432/tcp --allow 10.0.0.53:53/udp "
     "--deny-errno ECONNREFUSED -- ./app"},
    {"what goes to 10.9.9.9:80 reaches a local stand-in instead",
     "faultctl guard --redirect 10.9.9.9:80=127.0.0.1:18080 -- curl http://10.9.9.9/"},
    {"drop the egress to a destination outside 10/8 once it has had 10 MB",
     "faultctl guard --enforce --allow 10.0.0.0/8 --exfil-cap 10MB -- ./batch-job"},
    {"the command runs in network namespace blue, under the same policy",
     "faultctl guard --netns blue --enforce --deny 10.0.0.0/8 -- ./app"},
    {"HTTPS (port 443 by default), not terminated: its connections wait 2 s",
     "faultctl guard --fault-host 127.0.0.1 --fault-delay 2s -- ./client"},
    {"TLS ended with the local CA (the command trusts it): 30% of /v1/ get 503",
     "faultctl guard --terminate-tls --fault-host localhost:8443 --fault-path /v1/ --fault-status 503 "
     "--fault-pct 30 -- curl https://localhost:8443/v1/items"},
    {"a plain-HTTP model API stand-in is overloaded; only 10/8 and lo reachable",
     "faultctl guard --enforce --default-deny --allow 10.0.0.0/8 --allow 127.0.0.0/8 --fault-host 127.0.0.1:8089 "
     "--fault-llm overloaded -- node agent.js"},
};

// The flags a policy file replaces: given with --policy, one of them is refused.
constexpr const char* kPolicyFlags[] = {"enforce",         "default-deny",     "allow",         "deny",
                                        "approve",         "deny-errno",       "exfil-cap",     "deny-model",
                                        "max-tokens",      "pg-deny-verb",     "pg-deny-table", "pg-deny-function",
                                        "pg-approve-verb", "pg-approve-table", "pg-allow-verb", "pg-allow-table",
                                        "k8s-deny",        "k8s-approve",      "k8s-allow"};

// The Postgres gate's rule flags: each value one SQL rule named after the flag.
struct PgRuleFlag {
  const char* flag;
  GuardVerdict action;
  enum class Field : uint8_t { Verb, Table, Function } field;
};
constexpr PgRuleFlag kPgRuleFlags[] = {
    {"pg-deny-verb", GuardVerdict::Deny, PgRuleFlag::Field::Verb},
    {"pg-deny-table", GuardVerdict::Deny, PgRuleFlag::Field::Table},
    {"pg-deny-function", GuardVerdict::Deny, PgRuleFlag::Field::Function},
    {"pg-approve-verb", GuardVerdict::Approve, PgRuleFlag::Field::Verb},
    {"pg-approve-table", GuardVerdict::Approve, PgRuleFlag::Field::Table},
    {"pg-allow-verb", GuardVerdict::Allow, PgRuleFlag::Field::Verb},
    {"pg-allow-table", GuardVerdict::Allow, PgRuleFlag::Field::Table},
};

// --pg-listen, --pg-upstream and the --pg-* rules.
Status parse_pg_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  const bool listen = r.count("pg-listen") > 0;
  if (listen != (r.count("pg-upstream") > 0))
    return bad(listen ? "--pg-listen needs --pg-upstream HOST:PORT (the server the gate relays to)"
                      : "--pg-upstream goes with --pg-listen ADDR:PORT (where the gate listens)");
  size_t rules = 0;
  for (const PgRuleFlag& f : kPgRuleFlags) {
    if (!r.count(f.flag)) continue;
    for (const auto& v : r[f.flag].as<std::vector<std::string>>()) {
      GuardRule rule;
      rule.name = std::string("--") + f.flag + " " + v;
      rule.action = f.action;
      if (f.field == PgRuleFlag::Field::Verb) {
        auto verb = parse_sql_verb(v);
        if (!verb) return bad(std::string("--") + f.flag + " " + verb.error().message);
        rule.sql_verb = std::move(*verb);
      } else {
        auto glob = parse_sql_glob(v);
        if (!glob) return bad(std::string("--") + f.flag + (v.empty() ? ": " : " ") + glob.error().message);
        (f.field == PgRuleFlag::Field::Table ? rule.sql_table : rule.sql_function) = std::move(*glob);
      }
      a.capture.policy.rules.push_back(std::move(rule));
      ++rules;
    }
  }
  if (!listen) {
    for (const char* f : {"pg-upstream-sslmode", "pg-upstream-ca"})
      if (r.count(f)) return bad(std::string("--") + f + " goes with --pg-listen and --pg-upstream");
    if (rules > 0 && r.count("clickhouse-host") == 0)
      return bad(
          "the --pg-* rules judge SQL statements: give --pg-listen and --pg-upstream (the Postgres gate) or "
          "--clickhouse-host (ClickHouse over HTTP)");
    return {};
  }
  a.pg.listen = r["pg-listen"].as<std::string>();
  a.pg.upstream = r["pg-upstream"].as<std::string>();
  if (a.pg.listen.empty()) return bad("--pg-listen: empty");
  if (a.pg.upstream.empty()) return bad("--pg-upstream: empty");
  if (r.count("pg-upstream-sslmode")) {
    auto mode = parse_pg_sslmode(r["pg-upstream-sslmode"].as<std::string>());
    if (!mode) return bad("--pg-upstream-sslmode " + mode.error().message);
    a.pg.sslmode = *mode;
  }
  if (r.count("pg-upstream-ca")) {
    a.pg.ca_file = r["pg-upstream-ca"].as<std::string>();
    if (a.pg.sslmode != PgGateOptions::SslMode::VerifyFull)
      return bad("--pg-upstream-ca " + a.pg.ca_file +
                 ": the CA checks the server's certificate, which only --pg-upstream-sslmode verify-full does");
    if (::access(a.pg.ca_file.c_str(), R_OK) != 0)
      return bad("--pg-upstream-ca " + a.pg.ca_file + ": " + std::strerror(errno));
  }
  if (a.capture.gateway) return bad("--pg-listen serves a guarded command, not --gateway");
  a.requests = true;
  return {};
}

// --clickhouse-host H: requests to H are ClickHouse's HTTP interface, their
// SQL judged by the SQL rules (the --pg-* flags, spec.guard's sql_* fields).
Status parse_clickhouse_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (!r.count("clickhouse-host")) return {};
  for (const auto& h : r["clickhouse-host"].as<std::vector<std::string>>()) {
    auto m = parse_host_matcher(h);
    if (!m) return bad("--clickhouse-host '" + h + "': " + m.error().message);
    a.capture.clickhouse_hosts.push_back(*m);
  }
  a.requests = true;
  return {};
}

// --k8s-kubeconfig FILE [--k8s-context NAME] (implies --terminate-tls): the
// user's kubeconfig read now; its credentials stay with the guard.
Status parse_kubeconfig_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (!r.count("k8s-kubeconfig")) {
    if (r.count("k8s-context")) return bad("--k8s-context applies to --k8s-kubeconfig");
    return {};
  }
  const std::string file = r["k8s-kubeconfig"].as<std::string>();
  if (file.empty()) return bad("--k8s-kubeconfig: empty file name");
  if (!a.faults.faults.empty())
    return bad("--k8s-kubeconfig with HTTP faults (--fault-*, --faults): not supported together yet");
  if (a.capture.gateway) return bad("--k8s-kubeconfig gives the command a kubeconfig: --gateway runs no command");
  std::string context;
  if (r.count("k8s-context")) {
    context = r["k8s-context"].as<std::string>();
    if (context.empty()) return bad("--k8s-context: empty name");
  }
  auto use = read_kubeconfig(file, context);
  if (!use) return bad("--k8s-kubeconfig " + use.error().describe());
  if (auto client = kubeconfig_upstream_client(*use); !client)
    return bad("--k8s-kubeconfig " + client.error().message);  // a PEM that is not one, a key not the certificate's
  if (use->authorization && a.capture.creds) {
    for (const HttpCredential& h : a.capture.creds->http)
      if (h.host == use->host && (!h.port || *h.port == use->port))
        return bad("--k8s-kubeconfig " + file + ": the server " + use->host + ":" + std::to_string(use->port) +
                   " has an entry in --creds too (" + h.where + "): keep one");
  }
  a.capture.kubeconfig = std::move(*use);
  a.capture.terminate_tls = true;  // the command's TLS ends at the guard, which holds the credentials
  a.requests = true;
  return {};
}

// --creds FILE (implies --terminate-tls), --creds-ttl D (1s to 24h).
Status parse_creds_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (!r.count("creds")) {
    if (r.count("creds-ttl")) return bad("--creds-ttl applies to --creds");
    return {};
  }
  const std::string file = r["creds"].as<std::string>();
  if (file.empty()) return bad("--creds: empty file name");
  if (!a.faults.faults.empty())
    return bad("--creds with HTTP faults (--fault-*, --faults): not supported together yet");
  auto creds = read_creds_file(file);
  if (!creds) return bad("--creds " + creds.error().describe());
  if (r.count("creds-ttl")) {
    const std::string v = r["creds-ttl"].as<std::string>();
    auto ns = with_flag("creds-ttl", parse_duration_ns(v));
    if (!ns) return ns.error();
    if (*ns < 1'000'000'000ULL || *ns > 86'400'000'000'000ULL) return bad("--creds-ttl " + v + ": between 1s and 24h");
    a.capture.creds_ttl = std::chrono::milliseconds(*ns / 1'000'000);
  }
  a.capture.creds = std::move(*creds);
  a.capture.terminate_tls = true;  // a header is set in the plaintext only
  a.requests = true;
  return {};
}

// --enforce-fs and its rules (root: a mount namespace and fanotify's
// permission events).
Status parse_fs_gate_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  const char* rules[] = {"fs-deny", "fs-deny-exec", "fs-default-deny", "fs-allow"};
  if (!r.count("enforce-fs")) {
    for (const char* f : rules)
      if (r.count(f)) return bad(std::string("--") + f + " goes with --enforce-fs");
    return {};
  }
  if (a.capture.gateway) return bad("--enforce-fs judges a guarded command's files: --gateway runs no command");
  if (::geteuid() != 0)
    return bad(
        "--enforce-fs needs root: the command gets a mount namespace of its own, watched with fanotify "
        "permission events (as a user, --block-dangerous judges its execs)");
  FsGateOptions& o = a.fs_gate;
  auto substrings = [&](const char* flag, std::vector<std::string>& out) -> Status {
    if (!r.count(flag)) return {};
    for (const auto& v : r[flag].as<std::vector<std::string>>()) {
      if (v.empty()) return bad(std::string("--") + flag + ": empty (it would match every path)");
      out.push_back(v);
    }
    return {};
  };
  FL_TRY(substrings("fs-deny", o.deny));
  FL_TRY(substrings("fs-allow", o.allow));
  if (r.count("fs-deny-exec")) {
    for (const auto& v : r["fs-deny-exec"].as<std::vector<std::string>>()) {
      auto d = denied_executable(v);
      if (!d) return bad("--fs-deny-exec " + d.error().describe());
      o.deny_exec.push_back(std::move(*d));
    }
  }
  o.default_deny = r.count("fs-default-deny") > 0;
  if (o.default_deny && o.allow.empty())
    return bad(
        "--fs-default-deny needs --fs-allow SUBSTR (at least the command's program and libraries: --fs-allow /usr/ "
        "--fs-allow /lib)");
  if (!o.default_deny && !o.allow.empty()) return bad("--fs-allow applies to --fs-default-deny");
  if (o.deny.empty() && o.deny_exec.empty() && !o.default_deny)
    return bad("--enforce-fs needs a rule: --fs-deny SUBSTR, --fs-deny-exec PATH or --fs-default-deny");
  a.enforce_fs = true;
  return {};
}

// --watch-fs, --watch-path; --max-memory, --max-pids, --max-cpu (root: they
// write the command's cgroup).
Status parse_watch_and_limit_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (r.count("watch-path") && !r.count("watch-fs")) return bad("--watch-path goes with --watch-fs");
  if (r.count("watch-fs")) {
    if (a.capture.gateway) return bad("--watch-fs watches a guarded command: --gateway runs no command");
    a.watch_fs.enabled = true;
    if (r.count("watch-path")) {
      a.watch_fs.path = r["watch-path"].as<std::string>();
      struct stat st {};
      if (a.watch_fs.path.empty()) return bad("--watch-path: empty");
      if (::stat(a.watch_fs.path.c_str(), &st) != 0)
        return bad("--watch-path " + a.watch_fs.path + ": " + std::strerror(errno));
      if (!S_ISDIR(st.st_mode)) return bad("--watch-path " + a.watch_fs.path + ": not a folder");
    }
  }
  FL_TRY(parse_fs_gate_flags(r, a));
  ResourceLimits& l = a.guard.limits;
  if (r.count("max-memory")) {
    auto b = with_flag("max-memory", parse_size_bytes(r["max-memory"].as<std::string>()));
    if (!b) return b.error();
    if (*b < (1u << 20)) return bad("--max-memory must be at least 1MiB (a command cannot start in less)");
    l.memory_bytes = *b;
  }
  if (r.count("max-pids")) {
    const std::string v = r["max-pids"].as<std::string>();
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > 4194304)
      return bad("--max-pids " + v + ": a whole number of processes from 1 to 4194304");
    l.pids = static_cast<uint32_t>(n);
  }
  if (r.count("max-cpu")) {
    const std::string v = r["max-cpu"].as<std::string>();
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || v.empty() || end != v.data() + v.size() - 1 || v.back() != '%' || n < 1 || n > 102400)
      return bad("--max-cpu " + v + ": a share of one CPU in whole percent, 1% to 102400% (150% is one and a half)");
    l.cpu_percent = static_cast<uint32_t>(n);
  }
  if (l.any()) {
    if (a.capture.gateway)
      return bad("--max-memory, --max-pids and --max-cpu limit a guarded command: --gateway runs none");
    if (::geteuid() != 0) {
      const char* flag = r.count("max-memory") ? "max-memory" : r.count("max-pids") ? "max-pids" : "max-cpu";
      return bad(std::string("--") + flag +
                 " sets a limit on the command's cgroup, which needs root (run faultctl guard as root, or "
                 "start the command under systemd-run --user -p MemoryMax=...)");
    }
  }
  return {};
}

// Flags the kernel side alone can honour: refused without root.
constexpr const char* kRootFlags[] = {"redirect", "exfil-cap", "deny-errno", "netns", "faults", "fault-host"};

// --policy FILE: a Policy's guard section for the request guard (or the bare
// section), and its one egress scope for the kernel's side.
Status apply_policy_file(const std::string& file, GuardArgs& a) {
  GuardOptions& g = a.guard;
  auto text = read_policy_text(file);
  if (!text) return bad("--policy " + text.error().describe());
  PolicyParse p = parse_policy_bounded(*text, {}, "faultctl guard", "--policy " + file);
  if (!p.ok() && p.policy.guard == std::nullopt) {
    // The bare section ({mode, default_allow, rules}) is no Policy document.
    // Its reader tells the two apart by the document's fields, so its error
    // is the one to show: a bare section's mistake, or the Policy's.
    auto bare = read_guard_policy_file(file);
    if (!bare) return bad("--policy " + bare.error().message);
    a.requests = true;
    a.capture.policy = std::move(*bare);
    a.capture.policy_file = file;
    return {};
  }
  if (!p.ok()) {
    std::string more = p.errors.size() > 1 ? " (and " + std::to_string(p.errors.size() - 1) +
                                                 " more: faultctl policy validate " + file + ")"
                                           : "";
    return bad("--policy " + p.errors[0].render(file) + more);
  }
  const Policy& pol = p.policy;
  if (pol.faults)
    return bad("--policy " + file +
               ": spec.faults: the guard applies the egress section only (run experiments with "
               "faultctl run)");
  if (pol.guard) {
    a.requests = true;
    a.capture.policy = *pol.guard;
    a.capture.policy_file = file;
    if (!pol.egress) return {};
  }
  if (!pol.egress || pol.egress->size() != 1)
    return bad("--policy " + file + ": spec.egress: the guard takes exactly one scope, found " +
               std::to_string(pol.egress ? pol.egress->size() : 0));
  const EgressScope& s = pol.egress->front();
  if (!s.host_wide)
    return bad("--policy " + file + ": spec.egress[0]: " + s.label() +
               ": the guard judges the command's own cgroup, not another; write the scope as all: true");
  for (size_t i = 0; i < s.rules.size(); ++i) {
    if (!s.rules[i].cidr)
      return bad("--policy " + file + ": spec.egress[0].rules[" + std::to_string(i) + "] " + s.rules[i].name +
                 " (host " + s.rules[i].host +
                 "): a guard does not learn addresses from DNS answers; host rules are enforced by an applied "
                 "policy (faultctl policy apply FILE, with a cgroup: scope for the command's cgroup), or write "
                 "the addresses as cidr rules here");
  }
  auto c = compile_policy(pol);
  if (!c) return bad("--policy " + file + ": " + c.error().message);
  const CompiledScope& cs = c->scopes.front();
  g.enforce = s.mode == PolicyMode::Enforce;
  g.default_deny = !s.default_allow;
  g.deny_errno = s.deny_errno;
  g.exfil_cap = s.exfil_cap;
  g.rules = cs.egress_rules();
  g.policy_name = pol.name;
  return {};
}

// The HTTP faults: the --fault-* flags (one fault, first) and --faults FILE.
Status parse_fault_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardFaults& gf = a.faults;
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  // --creds and --k8s-kubeconfig imply it
  gf.terminate_tls = r.count("terminate-tls") > 0 || r.count("creds") > 0 || r.count("k8s-kubeconfig") > 0;
  GuardFaultWords w;
  bool any = false;
  for (auto [flag, slot] : std::initializer_list<std::pair<const char*, std::optional<std::string>*>>{
           {"fault-host", &w.host},
           {"fault-path", &w.path},
           {"fault-status", &w.status},
           {"fault-delay", &w.delay},
           {"fault-truncate", &w.truncate},
           {"fault-llm", &w.llm},
           {"fault-llm-provider", &w.llm_provider},
           {"fault-pct", &w.pct},
           {"fault-attempts", &w.attempts}}) {
    if (r.count(flag)) {
      *slot = str(flag);
      any = true;
    }
  }
  w.reset = r.count("fault-reset") > 0;
  any = any || w.reset;
  if (any) {
    auto name = [](const std::string& field) { return "--fault-" + field; };
    auto f = guard_fault_from_words(w, gf.terminate_tls, 0, "", name);
    if (!f) return f.error();
    gf.faults.push_back(std::move(*f));
  }
  if (r.count("faults")) {
    const std::string file = str("faults");
    if (file.empty()) return bad("--faults: empty file name");
    auto more = parse_guard_faults_file(file, gf.terminate_tls, gf.faults.size());
    if (!more) return more.error();
    for (auto& f : *more) gf.faults.push_back(std::move(f));
  }
  if (gf.faults.empty()) {
    // Without faults, --terminate-tls is the request guard's (its path rules on HTTPS).
    if (r.count("upstream-ca") && !gf.terminate_tls) return bad("--upstream-ca applies to --terminate-tls");
    a.capture.terminate_tls = gf.terminate_tls;
    if (r.count("upstream-ca")) a.capture.upstream_ca = str("upstream-ca");
    gf.terminate_tls = false;
    return {};
  }
  FL_TRY(check_upstream_ca(gf.terminate_tls, r.count("upstream-ca") > 0,
                           r.count("upstream-ca") ? str("upstream-ca") : std::string()));
  if (r.count("upstream-ca")) gf.upstream_ca = str("upstream-ca");
  if (!a.guard.netns.empty())
    return bad(
        "--netns with HTTP faults: the faults' proxy runs in faultctl's network namespace, which a command in "
        "another cannot reach; run the guard inside that namespace instead (ip netns exec NS faultctl guard ...)");
  return {};
}

// "127.0.0.1:8080", "POST [::1]:443": an address (no prefix length) as a host
// rule of the request guard, when the kernel would not take it: as a user, for
// --approve, or with a method. Nothing for every other pattern.
std::optional<GuardRule> address_host_rule(const char* flag, GuardVerdict action, const std::string& text, bool root) {
  std::string rest = text;
  std::string method;
  if (const size_t sp = text.find(' '); sp != std::string::npos) {
    auto m = parse_method(text.substr(0, sp));
    if (!m) return std::nullopt;
    method = *m;
    rest = text.substr(text.find_first_not_of(' ', sp));
  }
  if (rest.empty() || rest.find('/') != std::string::npos) return std::nullopt;
  if (!(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '[')) return std::nullopt;
  if (root && action != GuardVerdict::Approve && method.empty()) return std::nullopt;
  auto host = parse_host_matcher(rest);
  if (!host) return std::nullopt;
  GuardRule rule;
  rule.name = std::string("--") + flag + " " + text;
  rule.action = action;
  rule.method = method;
  rule.host = std::move(*host);
  return rule;
}

// --dlp, --dlp-action, --dlp-host; --content-policy and its action and hosts:
// one engine, compiled now (a bad content-policy line is refused here).
Status parse_dlp_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardDlpOptions& d = a.capture.dlp;
  auto hosts = [&](const char* flag, std::vector<HostMatcher>& out) -> Status {
    if (!r.count(flag)) return {};
    for (const auto& h : r[flag].as<std::vector<std::string>>()) {
      auto m = parse_host_matcher(h);
      if (!m) return bad(std::string("--") + flag + " '" + h + "': " + m.error().message);
      out.push_back(*m);
    }
    return {};
  };
  d.dlp = r.count("dlp") > 0;
  for (const char* flag : {"dlp-action", "dlp-host"})
    if (r.count(flag) && !d.dlp) return bad(std::string("--") + flag + " applies to --dlp");
  if (r.count("dlp-action")) {
    const std::string v = r["dlp-action"].as<std::string>();
    if (v == "deny")
      d.action = DlpAction::deny;
    else if (v == "redact")
      d.action = DlpAction::redact;
    else if (v == "monitor")
      d.action = DlpAction::monitor;
    else
      return bad("--dlp-action '" + v + "': deny, redact or monitor");
  }
  FL_TRY(hosts("dlp-host", d.hosts));
  std::vector<ContentRule> content;
  if (r.count("content-policy")) {
    const std::string file = r["content-policy"].as<std::string>();
    if (file.empty()) return bad("--content-policy: empty file name");
    auto rules = read_content_policy(file);
    if (!rules) return bad("--content-policy " + rules.error().message);
    content = std::move(*rules);
    d.content = true;
  }
  for (const char* flag : {"content-policy-action", "content-policy-host"})
    if (r.count(flag) && !d.content) return bad(std::string("--") + flag + " applies to --content-policy");
  if (r.count("content-policy-action")) {
    const std::string v = r["content-policy-action"].as<std::string>();
    if (v == "deny")
      d.content_action = ContentAction::deny;
    else if (v == "approve")
      d.content_action = ContentAction::approve;
    else if (v == "monitor")
      d.content_action = ContentAction::monitor;
    else
      return bad("--content-policy-action '" + v + "': deny, approve or monitor");
  }
  FL_TRY(hosts("content-policy-host", d.content_hosts));
  for (const GuardRule& rule : a.capture.policy.rules)
    if (!rule.dlp_type.empty() && !d.dlp)
      return bad("rule " + rule.name + " matches dlp_type " + rule.dlp_type + ": it needs --dlp");
  if (r.count("honeytokens")) {
    if (a.capture.gateway) return bad("--honeytokens plants decoys in the guarded command: --gateway runs none");
    auto set = HoneytokenSet::generate();
    if (!set) return bad("--honeytokens: " + set.error().describe());
    for (ContentRule& rule : set->content_rules()) content.push_back(std::move(rule));
    a.capture.honeytokens = std::make_shared<const HoneytokenSet>(std::move(*set));
    d.honeytokens = true;
  }
  if (!d.dlp && !d.content && !d.honeytokens) return {};
  DlpEngine::Options o;
  if (d.dlp) o.types = all_dlp_types();
  o.content = std::move(content);
  auto engine = DlpEngine::build(std::move(o));
  if (!engine)
    return bad(engine.error().bad_input ? "--content-policy " + engine.error().message
                                        : "--dlp: " + engine.error().describe());
  d.engine = *engine;
  a.requests = true;
  return {};
}

// --prompt-guard, --prompt-guard-action, --prompt-guard-host: the rule database compiled now.
Status parse_prompt_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardPromptOptions& p = a.capture.prompt;
  const bool on = r.count("prompt-guard") > 0;
  for (const char* flag : {"prompt-guard-action", "prompt-guard-host"})
    if (r.count(flag) && !on) return bad(std::string("--") + flag + " applies to --prompt-guard");
  if (!on) return {};
  if (r.count("prompt-guard-action")) {
    const std::string v = r["prompt-guard-action"].as<std::string>();
    if (v == "deny")
      p.action = PromptAction::deny;
    else if (v == "approve")
      p.action = PromptAction::approve;
    else if (v == "monitor")
      p.action = PromptAction::monitor;
    else
      return bad("--prompt-guard-action '" + v + "': deny, approve or monitor");
  }
  if (r.count("prompt-guard-host"))
    for (const auto& h : r["prompt-guard-host"].as<std::vector<std::string>>()) {
      auto m = parse_host_matcher(h);
      if (!m) return bad("--prompt-guard-host '" + h + "': " + m.error().message);
      p.hosts.push_back(*m);
    }
  auto guard = PromptGuard::build();
  if (!guard) return bad("--prompt-guard: " + guard.error().describe());
  p.guard = *guard;
  a.requests = true;
  return {};
}

// --trace-tools: the DLP engine that masks the arguments in the log (--dlp's
// when it is on, else one with every detector, used for nothing else).
Status parse_trace_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (!r.count("trace-tools")) return {};
  const GuardDlpOptions& d = a.capture.dlp;
  if (d.engine && d.dlp) {
    a.capture.trace_tools = d.engine;
  } else {
    DlpEngine::Options o;
    o.types = all_dlp_types();
    auto engine = DlpEngine::build(std::move(o));
    if (!engine) return bad("--trace-tools: " + engine.error().describe());
    a.capture.trace_tools = *engine;
  }
  a.requests = true;
  return {};
}

// --circuit-breaker, --breaker-threshold, --breaker-window.
Status parse_breaker_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardArgs::Breaker& b = a.breaker;
  b.on = r.count("circuit-breaker") > 0;
  for (const char* flag : {"breaker-threshold", "breaker-window"})
    if (r.count(flag) && !b.on) return bad(std::string("--") + flag + " applies to --circuit-breaker");
  if (!b.on) return {};
  if (a.capture.gateway) return bad("--circuit-breaker ends the guarded command: --gateway runs none");
  if (r.count("breaker-threshold")) {
    auto n = parse_count_flag("breaker-threshold", r["breaker-threshold"].as<std::string>(), 1, 1'000'000);
    if (!n) return n.error();
    b.threshold = static_cast<uint32_t>(*n);
  }
  if (r.count("breaker-window")) {
    auto ns = with_flag("breaker-window", parse_duration_ns(r["breaker-window"].as<std::string>()));
    if (!ns) return ns.error();
    if (*ns < 1'000'000'000ULL || *ns > 86'400'000'000'000ULL)
      return bad("--breaker-window " + r["breaker-window"].as<std::string>() + ": between 1s and 24h");
    b.window = std::chrono::milliseconds(*ns / 1'000'000);
  }
  a.requests = true;
  return {};
}

// --integrity PATH (repeatable), --integrity-interval D (10ms to 24h).
Status parse_integrity_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (r.count("integrity-interval") && !r.count("integrity")) return bad("--integrity-interval applies to --integrity");
  if (!r.count("integrity")) return {};
  if (a.capture.gateway) return bad("--integrity watches files around a guarded command: --gateway runs none");
  for (const auto& p : r["integrity"].as<std::vector<std::string>>()) {
    if (p.empty()) return bad("--integrity: empty path");
    a.integrity.paths.push_back(p);
  }
  if (r.count("integrity-interval")) {
    const std::string v = r["integrity-interval"].as<std::string>();
    auto ns = with_flag("integrity-interval", parse_duration_ns(v));
    if (!ns) return ns.error();
    if (*ns < 10'000'000ULL || *ns > 86'400'000'000'000ULL)
      return bad("--integrity-interval " + v + ": between 10ms and 24h");
    a.integrity.interval = std::chrono::milliseconds(*ns / 1'000'000);
  }
  return {};
}

// --anomaly, --anomaly-learn D (100ms to 24h; default 3m).
Status parse_anomaly_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (r.count("anomaly-learn") && !r.count("anomaly")) return bad("--anomaly-learn applies to --anomaly");
  if (!r.count("anomaly")) return {};
  std::chrono::milliseconds learn{180'000};
  if (r.count("anomaly-learn")) {
    const std::string v = r["anomaly-learn"].as<std::string>();
    auto ns = with_flag("anomaly-learn", parse_duration_ns(v));
    if (!ns) return ns.error();
    if (*ns < 100'000'000ULL || *ns > 86'400'000'000'000ULL)
      return bad("--anomaly-learn " + v + ": between 100ms and 24h");
    learn = std::chrono::milliseconds(*ns / 1'000'000);
  }
  a.capture.anomaly = std::make_shared<AnomalyWatch>(learn);
  a.requests = true;
  return {};
}

// --intent-firewall, --intent-action deny|approve|monitor (default monitor;
// acts with --enforce only), --intent-judge-url URL --intent-judge-model M
// (both or neither), --intent-judge-key-env VAR, --intent-judge-timeout D
// (100ms to 120s; default 10s).
Status parse_intent_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  for (const char* flag :
       {"intent-action", "intent-judge-url", "intent-judge-model", "intent-judge-key-env", "intent-judge-timeout"})
    if (r.count(flag) && !r.count("intent-firewall"))
      return bad(std::string("--") + flag + " applies to --intent-firewall");
  if (!r.count("intent-firewall")) return {};
  if (r.count("intent-action")) {
    const std::string v = r["intent-action"].as<std::string>();
    if (v == "deny")
      a.capture.intent_action = IntentEnforce::deny;
    else if (v == "approve")
      a.capture.intent_action = IntentEnforce::approve;
    else if (v == "monitor")
      a.capture.intent_action = IntentEnforce::monitor;
    else
      return bad("--intent-action '" + v + "': deny, approve or monitor");
  }
  if (r.count("intent-judge-url") != r.count("intent-judge-model"))
    return bad("--intent-judge-url and --intent-judge-model go together: the judge's endpoint and its model");
  for (const char* flag : {"intent-judge-key-env", "intent-judge-timeout"})
    if (r.count(flag) && !r.count("intent-judge-url"))
      return bad(std::string("--") + flag + " applies to --intent-judge-url");
  IntentFirewall::Judge judge;
  if (r.count("intent-judge-url")) {
    IntentJudgeConfig c;
    c.url = r["intent-judge-url"].as<std::string>();
    c.model = r["intent-judge-model"].as<std::string>();
    if (c.model.empty() || c.model.size() > 256) return bad("--intent-judge-model: 1 to 256 characters");
    if (r.count("intent-judge-key-env")) c.key_env = r["intent-judge-key-env"].as<std::string>();
    if (c.key_env.empty()) return bad("--intent-judge-key-env: empty variable name");
    if (r.count("intent-judge-timeout")) {
      const std::string v = r["intent-judge-timeout"].as<std::string>();
      auto ns = with_flag("intent-judge-timeout", parse_duration_ns(v));
      if (!ns) return ns.error();
      if (*ns < 100'000'000ULL || *ns > 120'000'000'000ULL)
        return bad("--intent-judge-timeout " + v + ": between 100ms and 120s");
      c.timeout = std::chrono::milliseconds(*ns / 1'000'000);
    }
    auto j = make_intent_judge(c);
    if (!j) return j.error();
    judge = std::move(*j);
  }
  auto tlds = TldSet::load();
  if (!tlds) return bad("--intent-firewall: " + tlds.error().describe());
  a.capture.intent =
      std::make_shared<IntentFirewall>(std::make_shared<const TldSet>(std::move(*tlds)), std::move(judge));
  a.requests = true;
  return {};
}

// --wasm-policy FILE (repeatable: asked in order), --wasm-fail-closed: each
// module loaded and checked now, so a bad one stops the guard before it runs.
Status parse_wasm_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  if (r.count("wasm-fail-closed") && !r.count("wasm-policy")) return bad("--wasm-fail-closed applies to --wasm-policy");
  if (!r.count("wasm-policy")) return {};
  for (const auto& file : r["wasm-policy"].as<std::vector<std::string>>()) {
    if (file.empty()) return bad("--wasm-policy: empty file name");
    auto plugin = WasmPolicy::load(file);
    if (!plugin) return as_bad_input(plugin.error());
    a.capture.wasm.push_back(std::move(*plugin));
  }
  a.capture.wasm_fail_closed = r.count("wasm-fail-closed") > 0;
  a.requests = true;
  return {};
}

// --scan-responses, --block-responses: the answer's detectors, built now
// (with --prompt-guard's rules when it is on).
Status parse_response_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  const bool block = r.count("block-responses") > 0;
  if (!block && !r.count("scan-responses")) return {};
  auto guard = ResponseGuard::build(a.capture.prompt.guard);
  if (!guard)
    return bad(std::string(block ? "--block-responses" : "--scan-responses") + ": " + guard.error().describe());
  a.capture.responses.guard = *guard;
  a.capture.responses.block = block;
  a.requests = true;
  return {};
}

// --deny-model, --max-tokens (rules), --llm-host, --route-model and the budget.
Status parse_llm_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardCaptureOptions& cap = a.capture;
  bool any = false;
  if (r.count("deny-model")) {
    for (const auto& m : r["deny-model"].as<std::vector<std::string>>()) {
      if (m.empty() || m.size() > LlmRequestScanner::kMaxModelBytes)
        return bad("--deny-model '" + m + "': a model name");
      GuardRule rule;
      rule.name = "--deny-model " + m;
      rule.action = GuardVerdict::Deny;
      rule.reason = "model " + m + " is denied";
      rule.llm_model = m;
      cap.policy.rules.push_back(std::move(rule));
      any = true;
    }
  }
  if (r.count("max-tokens")) {
    auto n = parse_count_flag("max-tokens", r["max-tokens"].as<std::string>(), 1, 100'000'000);
    if (!n) return n.error();
    GuardRule rule;
    rule.name = "--max-tokens " + std::to_string(*n);
    rule.action = GuardVerdict::Deny;
    rule.reason = "asks for more than " + std::to_string(*n) + " output tokens";
    rule.llm_max_tokens_over = *n;
    cap.policy.rules.push_back(std::move(rule));
    any = true;
  }
  if (r.count("llm-host")) {
    for (const auto& h : r["llm-host"].as<std::vector<std::string>>()) {
      if (h.empty() || h.find_first_of("/ ") != std::string::npos) return bad("--llm-host '" + h + "': a host name");
      cap.llm_hosts.push_back(h);
    }
    any = true;
  }
  if (r.count("route-model")) {
    for (const auto& t : r["route-model"].as<std::vector<std::string>>()) {
      auto route = with_flag("route-model", parse_model_route(t));
      if (!route) return route.error();
      cap.routes.push_back(*route);
    }
    any = true;
  }
  if (r.count("optimize-cache")) {
    const std::string text = r["optimize-cache"].as<std::string>();
    auto mode = parse_cache_optimize_mode(text);
    if (!mode) return bad("--optimize-cache '" + text + "': off, monitor or enforce");
    cap.optimize_cache = *mode;
    any = any || *mode != CacheOptimizeMode::off;
  }
  if (r.count("llm-token-budget")) {
    auto n = parse_count_flag("llm-token-budget", r["llm-token-budget"].as<std::string>(), 1, 1'000'000'000'000);
    if (!n) return n.error();
    cap.budget.tokens = *n;
    any = true;
  }
  if (r.count("llm-request-budget")) {
    auto n = parse_count_flag("llm-request-budget", r["llm-request-budget"].as<std::string>(), 1, 1'000'000'000);
    if (!n) return n.error();
    cap.budget.requests = *n;
    any = true;
  }
  const bool budget = cap.budget.tokens || cap.budget.requests;
  if (r.count("llm-budget-window")) {
    if (!budget) return bad("--llm-budget-window applies to --llm-token-budget or --llm-request-budget");
    auto w = with_flag("llm-budget-window", parse_budget_window(r["llm-budget-window"].as<std::string>()));
    if (!w) return w.error();
    cap.budget.window = *w;
  }
  if (r.count("llm-default-reserve")) {
    if (!cap.budget.tokens) return bad("--llm-default-reserve applies to --llm-token-budget");
    auto n = parse_count_flag("llm-default-reserve", r["llm-default-reserve"].as<std::string>(), 1, 100'000'000);
    if (!n) return n.error();
    cap.budget.default_reserve = *n;
  }
  if (r.count("replay")) {
    cap.replay_dir = r["replay"].as<std::string>();
    if (cap.replay_dir.empty()) return bad("--replay: empty folder name");
    any = true;
  }
  if (r.count("cache")) {
    if (r.count("replay"))
      return bad(
          "--cache and --replay are exclusive: --replay answers from its folder for ever, --cache from memory "
          "for --cache-ttl");
    const std::string mode = r.count("cache-mode") ? r["cache-mode"].as<std::string>() : "exact";
    if (mode != "exact" && mode != "similar") return bad("--cache-mode '" + mode + "': exact or similar");
    if (r.count("cache-threshold")) {
      if (mode != "similar") return bad("--cache-threshold applies to --cache-mode similar");
      const std::string text = r["cache-threshold"].as<std::string>();
      double t = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), t);
      if (ec != std::errc() || end != text.data() + text.size() || !(t > 0 && t <= 1))
        return bad("--cache-threshold '" + text + "': a similarity above 0 and at most 1 (such as 0.92)");
      cap.cache_threshold = t;
    } else if (mode == "similar") {
      cap.cache_threshold = 0.92;
    }
    std::chrono::milliseconds ttl = std::chrono::minutes(10);
    if (r.count("cache-ttl")) {
      const std::string text = r["cache-ttl"].as<std::string>();
      auto ns = parse_duration_ns(text);
      if (!ns) return bad("--cache-ttl '" + text + "': " + ns.error().message);
      if (*ns < 1'000'000) return bad("--cache-ttl '" + text + "': at least 1ms");
      ttl = std::chrono::milliseconds(*ns / 1'000'000);
    }
    cap.cache_ttl = ttl;
    any = true;
  } else {
    for (const char* flag : {"cache-ttl", "cache-mode", "cache-threshold"})
      if (r.count(flag)) return bad(std::string("--") + flag + " applies to --cache");
  }
  if (any) a.requests = true;
  return {};
}

}  // namespace

Result<Parsed<GuardArgs>> parse_guard_args(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl guard", "Run a command in a fresh cgroup under an egress policy.");
  o.add_options()("enforce", "act on the verdicts (default: monitor, decide and log only)")(
      "default-deny", "deny what no rule allows (default: allow)")(
      "allow",
      "P: allow what matches: a host (api.example.com, *.example.com, host:port), a path (/v1/), "
      "'METHOD host/path', or a CIDR (root: a kernel rule), repeatable",
      cxxopts::value<std::vector<std::string>>())("deny", "P: deny what matches (the forms of --allow), repeatable",
                                                  cxxopts::value<std::vector<std::string>>())(
      "approve", "P: hold what matches until faultctl approvals approve|deny ID or --approve-timeout (no CIDR)",
      cxxopts::value<std::vector<std::string>>())(
      "approve-timeout", "a held request is denied after this long (default 120s)", cxxopts::value<std::string>())(
      "identity", "who the activity log and approvals name (default USER@HOST)", cxxopts::value<std::string>())(
      "no-proxy-loopback", "let the command reach localhost, 127.0.0.1 and ::1 without the guard (NO_PROXY)")(
      "deny-errno", "root: errno a connect the kernel denies gets (default EPERM)", cxxopts::value<std::string>())(
      "redirect",
      "root: DEST=TARGET: send what reaches DEST (CIDR[:PORT][/tcp|/udp]) to TARGET (ADDR:PORT), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "exfil-cap", "root: bytes to one destination no rule allows before its egress is dropped, e.g. 10MB",
      cxxopts::value<std::string>())(
      "pg-listen",
      "ADDR:PORT: a Postgres gate on loopback (127.0.0.1:5432; port 0 picks one) relaying to --pg-upstream; the "
      "command gets PGHOST and PGPORT; each statement is judged by the SQL rules",
      cxxopts::value<std::string>())("pg-upstream", "HOST:PORT: the PostgreSQL server behind --pg-listen",
                                     cxxopts::value<std::string>())(
      "pg-upstream-sslmode",
      "disable|require|verify-full: TLS from the gate to --pg-upstream (require: encrypted, the certificate "
      "unchecked; verify-full: checked against --pg-upstream-ca or the system's CAs, and the host's name); default "
      "disable",
      cxxopts::value<std::string>())("pg-upstream-ca",
                                     "FILE: PEM CA certificates for --pg-upstream-sslmode verify-full",
                                     cxxopts::value<std::string>())(
      "k8s-deny",
      "'VERB RESOURCE [NAME] [-n NAMESPACE]': deny Kubernetes API requests that match ('delete secrets -n prod'; "
      "'*' any verb or resource; globs), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "k8s-approve",
      "'VERB RESOURCE [NAME] [-n NAMESPACE]': hold matching Kubernetes requests until approved "
      "('create pods/exec'), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "k8s-allow", "'VERB RESOURCE [NAME] [-n NAMESPACE]': allow matching Kubernetes requests, repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "clickhouse-host",
      "H: requests to H (a host, *.suffix or host:port) are ClickHouse over HTTP: the SQL of ?query= and of the "
      "body's first 64 KiB is judged by the SQL rules (--pg-deny-verb, ...), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "pg-deny-verb", "V: deny statements doing V (DROP, TRUNCATE, DELETE, ...), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "pg-deny-table", "GLOB: deny statements naming a matching table ('prod.*', 'users'), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "pg-deny-function", "GLOB: deny statements calling a matching function (pg_sleep, 'dblink*'), repeatable",
      cxxopts::value<std::vector<std::string>>())("pg-approve-verb",
                                                  "V: hold statements doing V until approved, repeatable",
                                                  cxxopts::value<std::vector<std::string>>())(
      "pg-approve-table", "GLOB: hold statements naming a matching table until approved, repeatable",
      cxxopts::value<std::vector<std::string>>())("pg-allow-verb",
                                                  "V: allow statements doing only V (with --default-deny), repeatable",
                                                  cxxopts::value<std::vector<std::string>>())(
      "pg-allow-table", "GLOB: allow statements naming only matching tables (with --default-deny), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "json-log", "append every decision as a JSON line to FILE (the request guard: the hash-chained activity log)",
      cxxopts::value<std::string>())(
      "block-dangerous",
      "judge every exec of the command and of what it starts by the dangerous-command rules (rm -rf, git push "
      "--force, kubectl delete, production targets, ...): reported, and refused with EPERM when enforcing")(
      "approve-dangerous",
      "--block-dangerous, but a dangerous exec waits for faultctl approvals approve|deny ID (or --approve-timeout) "
      "when enforcing")(
      "approve-prompt",
      "with --approve-dangerous, where a held exec is also asked: auto (the terminal, when faultctl runs in its "
      "foreground), tty (the terminal, or refuse to start), off (faultctl approvals only)",
      cxxopts::value<std::string>())(
      "watch-fs",
      "say each file the command creates, modifies or deletes under --watch-path (the working folder by default), "
      "live and summed up at exit; as root only the command's processes count (fanotify), as a user anyone's "
      "(inotify)")("watch-path", "DIR: the folder --watch-fs watches (and everything below it)",
                   cxxopts::value<std::string>())(
      "enforce-fs",
      "root: judge every open and exec of the command (fanotify permission events on its own mounts) by "
      "--fs-deny, --fs-deny-exec and --fs-allow: reported, refused with EPERM with --enforce")(
      "fs-deny", "SUBSTR: with --enforce-fs, an open whose resolved path contains SUBSTR is denied, repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "fs-deny-exec",
      "PATH: with --enforce-fs, the program at PATH (and any copy of it, by content) is never run nor opened, "
      "repeatable",
      cxxopts::value<std::vector<std::string>>())("fs-default-deny",
                                                  "with --enforce-fs: an open no --fs-allow names is denied")(
      "fs-allow", "SUBSTR: with --fs-default-deny, an open whose resolved path contains SUBSTR is allowed, repeatable",
      cxxopts::value<std::vector<std::string>>())("max-memory",
                                                  "SIZE: root: the command's memory limit (2GB, 512MiB), on its cgroup",
                                                  cxxopts::value<std::string>())(
      "max-pids", "N: root: at most N processes and threads in the command's cgroup", cxxopts::value<std::string>())(
      "max-cpu", "P%: root: the command's CPU time at most P% of one CPU (150% is one and a half)",
      cxxopts::value<std::string>())("netns",
                                     "root: run the command in this network namespace: NAME (ip netns), PATH or pid:N",
                                     cxxopts::value<std::string>())(
      "policy",
      "the policy from a policy file (docs/policy.md): its guard section (or the bare {mode, default_allow, "
      "rules}; re-read on SIGHUP) and, as root, its one egress scope (all: true), instead of --enforce, "
      "--default-deny, --allow, --deny, --approve, --deny-errno and --exfil-cap",
      cxxopts::value<std::string>())(
      "fault-host", "HTTP fault: the host whose requests are faulted, NAME or ADDRESS[:PORT] (port 443 by default)",
      cxxopts::value<std::string>())(
      "fault-path", "HTTP fault: only requests under this path (a prefix of whole segments, or a glob)",
      cxxopts::value<std::string>())("fault-status", "HTTP fault: answer this status (200-599) instead of forwarding",
                                     cxxopts::value<std::string>())(
      "fault-delay", "HTTP fault: hold each request this long (1ms-60s)", cxxopts::value<std::string>())(
      "fault-reset", "HTTP fault: reset the connection (RST) once the request is read (TLS: once its ClientHello is)")(
      "fault-truncate", "HTTP fault: forward, then cut the response body after N bytes", cxxopts::value<std::string>())(
      "fault-llm",
      "HTTP fault: a model provider's failure: overloaded, rate-limit, server-error, bad-gateway, "
      "timeout, stream-cut",
      cxxopts::value<std::string>())(
      "fault-llm-provider", "HTTP fault: --fault-llm as anthropic or openai answers (default: from the host's name)",
      cxxopts::value<std::string>())("fault-pct", "HTTP fault: the share of matching requests faulted (default 100)",
                                     cxxopts::value<std::string>())(
      "fault-attempts",
      "HTTP fault: only the first N attempts of each request (1-100, the SDKs' x-stainless-retry-count)",
      cxxopts::value<std::string>())("faults",
                                     "HTTP faults from a YAML or JSON file: a list of {host, path, "
                                     "status|delay|reset|truncate|llm, llm-provider, pct, "
                                     "attempts}",
                                     cxxopts::value<std::string>())(
      "terminate-tls",
      "end the command's TLS with a leaf of the local CA, which the command is told to trust: the guard then "
      "judges HTTPS by path and method too (with --fault-*: the faulted hosts' TLS)")(
      "upstream-ca", "--terminate-tls: a PEM file of roots the upstream may also chain to",
      cxxopts::value<std::string>())(
      "creds",
      "FILE: credentials set by the guard on the command's HTTPS requests to their hosts, the secrets kept from "
      "the command (a JSON {\"credentials\": [{host, header, value, secret}]}; implies --terminate-tls)",
      cxxopts::value<std::string>())("creds-ttl", "how often --creds' secrets are read again (default 30s)",
                                     cxxopts::value<std::string>())(
      "k8s-kubeconfig",
      "FILE: the command gets a copy of this kubeconfig that trusts the guard's CA and holds no credentials (as "
      "KUBECONFIG); the guard presents the user's token or client certificate to the API server (implies "
      "--terminate-tls)",
      cxxopts::value<std::string>())("k8s-context", "--k8s-kubeconfig: the context to use (default: current-context)",
                                     cxxopts::value<std::string>())(
      "gateway",
      "no command: one guard for agents on other hosts, listening on --addr; each request needs a "
      "--gateway-token (Proxy-Authorization Basic ID:TOKEN or Bearer TOKEN) and is judged as its identity")(
      "gateway-token", "ID=TOKEN: an agent's token and the identity it names, repeatable (--gateway)",
      cxxopts::value<std::vector<std::string>>())(
      "addr", "--gateway: the address to listen on, ADDR:PORT ([::]:3128, 10.0.0.2:3128)",
      cxxopts::value<std::string>())(
      "llm-host",
      "H: the LLM host whose /v1/messages, /v1/chat/completions and /v1/responses calls are read (model, "
      "tokens, usage), repeatable; a host, *.suffix or host:port (default: any host on those paths)",
      cxxopts::value<std::vector<std::string>>())(
      "deny-model", "M: deny LLM calls asking for model M (exactly, or a prefix ending in *), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "max-tokens", "N: deny LLM calls asking for more than N output tokens", cxxopts::value<std::string>())(
      "route-model", "FROM=TO: send LLM calls asking for model FROM as TO (logged as such), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "optimize-cache",
      "off|monitor|enforce: on Anthropic Messages calls, order tools by name and place cache_control "
      "breakpoints (the last tool, the system prompt's end; at most 4 in all), never altering content; "
      "monitor logs what enforce would change (default off)",
      cxxopts::value<std::string>())(
      "replay", "DIR: record LLM answers in DIR on a miss, answer a repeated call from its recording (byte-exact)",
      cxxopts::value<std::string>())(
      "cache", "answer a repeated LLM call (same method, path and JSON body) from memory (not with --replay)")(
      "cache-ttl", "D: how long --cache keeps an answer (default 10m; 30s, 1h)", cxxopts::value<std::string>())(
      "cache-mode",
      "exact (default): the same call; similar: the same call but for a prompt at least --cache-threshold similar",
      cxxopts::value<std::string>())("cache-threshold",
                                     "S: --cache-mode similar's least similarity, above 0 and at most 1 (default 0.92)",
                                     cxxopts::value<std::string>())(
      "llm-token-budget", "N: output tokens per identity and window; calls that do not fit get 429",
      cxxopts::value<std::string>())("llm-request-budget", "N: LLM calls per identity and window",
                                     cxxopts::value<std::string>())(
      "llm-budget-window", "D: the budget's window, aligned to the epoch (default 1h; 30m, 1d, 90s)",
      cxxopts::value<std::string>())("llm-default-reserve",
                                     "N: what a call without max tokens reserves of the token budget (default 4096)",
                                     cxxopts::value<std::string>())(
      "llm-budget-shared",
      "one budget for every guard of the identity, kept by faultcp (needs --control-plane; fails closed when "
      "faultcp cannot be asked)")(
      "control-plane",
      "URL: faultcp (or FAULTLINE_CP): the workspace's guard policy is the policy (instead of --policy and the "
      "rule flags), held requests are decided there too, the activity is reported there",
      cxxopts::value<std::string>())("token", "T: --control-plane's token, an agent token (or FAULTLINE_CP_TOKEN)",
                                     cxxopts::value<std::string>())(
      "dlp",
      "scan each request's URL, headers and body for secrets and personal data (docs/detectors.md); a finding "
      "is the dlp_findings fact")("dlp-action",
                                  "deny|redact|monitor: what a --dlp finding gets (default deny: 403, rule dlp-block; "
                                  "redact: masked at equal length and forwarded; monitor: logged and forwarded)",
                                  cxxopts::value<std::string>())(
      "dlp-host", "H: scan only requests to H (a host, *.suffix or host:port), repeatable (default: all egress)",
      cxxopts::value<std::vector<std::string>>())(
      "content-policy", "FILE: your own patterns, a line each: 'label: literal' (any case) or 'label: re:REGEX'",
      cxxopts::value<std::string>())("content-policy-action",
                                     "deny|approve|monitor: what a --content-policy match gets (default deny)",
                                     cxxopts::value<std::string>())(
      "content-policy-host", "H: apply --content-policy only to requests to H, repeatable (default: all egress)",
      cxxopts::value<std::vector<std::string>>())(
      "trace-tools",
      "log each tool call an LLM answer decides (JSON and SSE): an activity line (kind tool_call) and its "
      "arguments, secrets masked, in the log")(
      "receipts",
      "check each LLM answer's completion claims (tests pass, the build succeeds, a key removed) against the tool "
      "calls the session made: verified, unverified (kind unverified-claim) or unknown")(
      "mirror",
      "flag a write (POST, PUT, PATCH, or a query string) to a host the session learned only from an LLM call's "
      "tool_result content (kind mirror)")(
      "honeytokens",
      "plant fresh decoy credentials (an AWS key pair, a GitHub token, an Anthropic key) in the command's "
      "environment and a decoy credentials file; any appearance in egress, raw or encoded, is critical (denied "
      "with --enforce)")(
      "anomaly",
      "learn the destinations (host:port) the session reaches, the tools its model calls, its token rate, and with "
      "--block-dangerous the programs it runs, during --anomaly-learn; after it, a new one (or a token rate over 3x "
      "the warm-up's) is flagged once (kind anomaly; monitor only)")(
      "intent-firewall",
      "take the session's mission from the first user turn of its LLM calls and flag each request, tool call and "
      "exec that does not serve it (kind off-mission-action; docs/detectors.md)")(
      "intent-action",
      "deny|approve|monitor: what an off-mission request gets with --enforce (default monitor: a finding only)",
      cxxopts::value<std::string>())(
      "intent-judge-url",
      "URL: a model endpoint (.../v1/messages or .../chat/completions) asked about the actions the heuristic "
      "leaves unclear; fails open",
      cxxopts::value<std::string>())("intent-judge-model", "M: the --intent-judge-url model",
                                     cxxopts::value<std::string>())(
      "intent-judge-key-env", "VAR: the variable holding the judge's API key (default FAULTLINE_INTENT_JUDGE_KEY)",
      cxxopts::value<std::string>())("intent-judge-timeout",
                                     "D: how long the judge may take per question (default 10s; 100ms to 120s)",
                                     cxxopts::value<std::string>())(
      "anomaly-learn", "D: the --anomaly warm-up (default 3m; 100ms to 24h)", cxxopts::value<std::string>())(
      "wasm-policy",
      "FILE.wasm: a WebAssembly policy plugin (repeatable, asked in order) run with no imports, bounded memory and "
      "fuel; it sees each request the rules allowed or held as JSON and can deny it (rule wasm:FILE)",
      cxxopts::value<std::vector<std::string>>())(
      "wasm-fail-closed",
      "deny (rule wasm-policy) a request whose --wasm-policy plugin traps, runs out of fuel or answers badly "
      "(default: a finding, and the request goes on)")(

      "integrity",
      "PATH: a file or folder tree (repeatable) whose files are hashed (SHA-256) at start and re-checked every "
      "--integrity-interval and at exit; a file created, modified or removed is an integrity finding (tamper risk "
      "60 for --circuit-breaker)",
      cxxopts::value<std::vector<std::string>>())("integrity-interval",
                                                  "D: how often --integrity re-checks (default 30s; 10ms to 24h)",
                                                  cxxopts::value<std::string>())(
      "circuit-breaker",
      "sum the risk of the findings (injection, exfil, honeytoken 100; tamper 60; a denial 25); crossing "
      "--breaker-threshold within --breaker-window revokes the egress and ends the command (exit 9) with --enforce")(
      "breaker-threshold", "N: the circuit breaker's threshold (default 100)", cxxopts::value<std::string>())(
      "breaker-window", "D: the circuit breaker's window (default 60s; 1s to 24h)", cxxopts::value<std::string>())(
      "scan-responses",
      "read each LLM answer (JSON and SSE) for a secret or injection text: a response_threat line, the answer "
      "forwarded unchanged")(
      "block-responses",
      "--scan-responses, and with --enforce a threat stops the answer: a JSON answer becomes the provider's "
      "error (x-should-retry: false), a stream ends with the provider's mid-stream error event")(
      "prompt-guard",
      "scan each LLM call's system, user and tool_result texts for prompt injection (docs/detectors.md)")(
      "prompt-guard-action",
      "deny|approve|monitor: what a --prompt-guard finding gets (default deny: the provider's error, rule "
      "prompt-guard)",
      cxxopts::value<std::string>())(
      "prompt-guard-host",
      "H: scan only LLM calls to H (a host, *.suffix or host:port), repeatable (default: every --llm-host)",
      cxxopts::value<std::vector<std::string>>())(
      "state-dir",
      "DIR: what outlives the guard (the LLM budget's window; with --control-plane the activity spool, "
      "the default activity log, the last policy)",
      cxxopts::value<std::string>())("h,help", "help");
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<GuardArgs>(
        HelpText{with_examples(o.help() + "\n  -- COMMAND ARGS   the command to guard\n", kGuardExamples)});
  GuardArgs args_out;
  GuardOptions& g = args_out.guard;
  GuardCaptureOptions& cap = args_out.capture;
  const bool root = ::geteuid() == 0;
  if (r->count("gateway")) {
    if (!cmd.empty()) return bad("--gateway runs no command (agents on other hosts send their requests to --addr)");
    for (const char* flag :
         {"redirect", "exfil-cap", "deny-errno", "netns", "faults", "fault-host", "no-proxy-loopback"})
      if (r->count(flag)) return bad(std::string("--") + flag + " applies to a guarded command, not to --gateway");
    if (!r->count("addr")) return bad("--gateway needs --addr ADDR:PORT to listen on");
    if (!r->count("gateway-token"))
      return bad("--gateway needs one --gateway-token ID=TOKEN at least (every request must carry a token)");
    cap.gateway = true;
    cap.listen = (*r)["addr"].as<std::string>();
    cap.command = "gateway";
    for (const auto& t : (*r)["gateway-token"].as<std::vector<std::string>>()) {
      auto token = parse_gateway_token(t);
      if (!token) return token.error();
      for (const auto& other : cap.gateway_tokens)
        if (other.token == token->token) return bad("--gateway-token: two identities share one token");
      cap.gateway_tokens.push_back(std::move(*token));
    }
    args_out.requests = true;
  } else {
    for (const char* flag : {"gateway-token", "addr"})
      if (r->count(flag)) return bad(std::string("--") + flag + " applies to --gateway");
    if (cmd.empty()) return bad("missing the command: faultctl guard [flags] -- COMMAND ARGS");
    g.command = cmd;
    cap.command = cmd[0];
  }
  if (r->count("control-plane")) {
    cap.cp_url = (*r)["control-plane"].as<std::string>();
    if (cap.cp_url.empty()) return bad("--control-plane: empty URL");
    // The workspace decides: a local rule could loosen it (an allow shadows its
    // default deny), and two sources would leave open which one holds.
    for (const char* flag : kPolicyFlags)
      if (r->count(flag))
        return bad(
            std::string("--") + flag +
            " with --control-plane (or FAULTLINE_CP): the workspace's guard policy is the policy (put it with PUT "
            "/v1/guardrails/policy); run without --control-plane for local rules");
    if (r->count("policy"))
      return bad("--policy with --control-plane (or FAULTLINE_CP): the workspace's guard policy is the policy");
    if (r->count("token")) cap.cp_token = (*r)["token"].as<std::string>();
    if (cap.cp_token.empty())
      return bad("--control-plane needs --token (or FAULTLINE_CP_TOKEN): an agent token of the workspace");
    args_out.requests = true;
  } else if (r->count("token")) {
    return bad("--token goes with --control-plane");
  }

  if (r->count("state-dir")) {
    cap.state_dir = (*r)["state-dir"].as<std::string>();
    if (cap.state_dir.empty()) return bad("--state-dir: empty");
  }
  if (r->count("policy")) {
    for (const char* flag : kPolicyFlags) {
      if (r->count(flag))
        return bad(std::string("--") + flag + " comes from the policy file with --policy; write it there");
    }
    const std::string file = (*r)["policy"].as<std::string>();
    if (file.empty()) return bad("--policy: empty file name");
    FL_TRY(apply_policy_file(file, args_out));
    if (!root && !g.rules.empty())
      return bad("--policy " + file + ": spec.egress: its rules are judged in the kernel, which needs root");
  }
  if (!root) {
    for (const char* flag : kRootFlags)
      if (r->count(flag))
        return bad(std::string("--") + flag + " acts in the kernel, which needs root (the request guard as " +
                   "a user takes --allow, --deny and --approve with hosts and paths)");
  }
  g.enforce = g.enforce || r->count("enforce") > 0;
  g.default_deny = g.default_deny || r->count("default-deny") > 0;
  if (r->count("enforce")) cap.policy.mode = GuardMode::Enforce;
  if (r->count("default-deny")) cap.policy.default_allow = false;
  for (const char* flag : {"deny", "approve", "allow"}) {
    if (!r->count(flag)) continue;
    const GuardVerdict action = std::string(flag) == "allow"  ? GuardVerdict::Allow
                                : std::string(flag) == "deny" ? GuardVerdict::Deny
                                                              : GuardVerdict::Approve;
    for (const auto& t : (*r)[flag].as<std::vector<std::string>>()) {
      // An address alone (127.0.0.1:8080, [::1]), with a method or not, is the
      // request's host when the kernel cannot take it: as a user, for --approve,
      // or after a method. A prefix (10.0.0.0/8) stays the kernel's.
      if (auto rule = address_host_rule(flag, action, t, root && !cap.gateway)) {
        cap.policy.rules.push_back(std::move(*rule));
        args_out.requests = true;
        continue;
      }
      // Address-shaped (a digit or '[' first, hex digits and address signs
      // only): the kernel rule's parser says what is wrong with it, rather
      // than it being taken as a host name ("300.1.1.1").
      if (action != GuardVerdict::Approve && !t.empty() &&
          (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '[') &&
          t.find_first_not_of("0123456789abcdefABCDEF:.[]/-tcpud") == std::string::npos) {
        if (auto kernel = parse_rule(action == GuardVerdict::Allow ? Verdict::Allow : Verdict::Deny, t); !kernel)
          return kernel.error();
      }
      auto pattern = parse_cli_pattern(action, t);
      if (!pattern) return bad(pattern.error().message);
      if (auto* cidr = std::get_if<CidrPattern>(&*pattern)) {
        if (cap.gateway)
          return bad(std::string("--") + flag + " " + t +
                     ": a CIDR is a kernel rule for a guarded command; a gateway judges requests by host");
        if (!root)
          return bad(std::string("--") + flag + " " + t +
                     ": a CIDR is judged by address in the kernel, which needs root; as a user, name the host");
        g.rules.push_back(cidr->rule);
      } else {
        cap.policy.rules.push_back(std::get<GuardRule>(std::move(*pattern)));
        args_out.requests = true;
      }
    }
  }
  if (g.rules.size() > 0xfffe) return bad("too many rules (at most 65534)");
  if (cap.gateway && !g.rules.empty())
    return bad("--gateway: the policy's egress rules are kernel rules for a guarded command; a gateway has none");
  if (r->count("approve-timeout")) {
    auto ns = with_flag("approve-timeout", parse_duration_ns((*r)["approve-timeout"].as<std::string>()));
    if (!ns) return ns.error();
    if (*ns < 1'000'000) return bad("--approve-timeout must be at least 1ms");
    cap.approve_timeout = std::chrono::milliseconds(*ns / 1'000'000);
    args_out.requests = true;
  }
  if (r->count("identity")) {
    cap.identity = (*r)["identity"].as<std::string>();
    if (cap.identity.empty()) return bad("--identity: empty");
    args_out.requests = true;
  } else {
    const passwd* pw = ::getpwuid(::geteuid());
    char host[256] = {};
    (void)::gethostname(host, sizeof host - 1);
    cap.identity = std::string(pw != nullptr ? pw->pw_name : std::to_string(::geteuid())) + "@" + host;
  }
  for (const char* flag : {"k8s-deny", "k8s-approve", "k8s-allow"}) {
    if (!r->count(flag)) continue;
    const GuardVerdict action = std::string(flag) == "k8s-allow"  ? GuardVerdict::Allow
                                : std::string(flag) == "k8s-deny" ? GuardVerdict::Deny
                                                                  : GuardVerdict::Approve;
    for (const auto& t : (*r)[flag].as<std::vector<std::string>>()) {
      auto rule = parse_k8s_pattern(action, std::string("--") + flag, t);
      if (!rule) return rule.error();
      cap.policy.rules.push_back(std::move(*rule));
      args_out.requests = true;
    }
  }
  FL_TRY(parse_pg_flags(*r, args_out));
  FL_TRY(parse_clickhouse_flags(*r, args_out));
  FL_TRY(parse_llm_flags(*r, args_out));
  FL_TRY(parse_dlp_flags(*r, args_out));
  FL_TRY(parse_prompt_flags(*r, args_out));
  FL_TRY(parse_trace_flags(*r, args_out));
  FL_TRY(parse_response_flags(*r, args_out));
  FL_TRY(parse_breaker_flags(*r, args_out));
  FL_TRY(parse_integrity_flags(*r, args_out));
  FL_TRY(parse_anomaly_flags(*r, args_out));
  FL_TRY(parse_wasm_flags(*r, args_out));
  FL_TRY(parse_intent_flags(*r, args_out));
  if (r->count("receipts")) {
    if (cap.responses.guard) {
      cap.receipts = cap.responses.guard;
    } else {
      auto g = ResponseGuard::build(cap.prompt.guard);
      if (!g) return bad("--receipts: " + g.error().describe());
      cap.receipts = *g;
    }
    args_out.requests = true;
  }
  if (r->count("mirror")) {
    auto watch = MirrorWatch::create();
    if (!watch) return bad("--mirror: " + watch.error().describe());
    cap.mirror = std::move(*watch);
    args_out.requests = true;
  }
  if (r->count("no-proxy-loopback")) {
    cap.no_proxy_loopback = true;
    args_out.requests = true;
  }
  if (r->count("redirect")) {
    for (const auto& t : (*r)["redirect"].as<std::vector<std::string>>()) {
      auto rule = parse_redirect(t);
      if (!rule) return rule.error();
      g.redirects.push_back(*rule);
    }
  }
  if (g.redirects.size() > 0xfffe) return bad("too many --redirect rules (at most 65534)");
  if (r->count("deny-errno")) {
    auto e = errno_from_name((*r)["deny-errno"].as<std::string>());
    if (!e) return bad("--deny-errno " + (*r)["deny-errno"].as<std::string>() + ": not a known errno name");
    g.deny_errno = *e;
  }
  if (r->count("exfil-cap")) {
    auto b = with_flag("exfil-cap", parse_size_bytes((*r)["exfil-cap"].as<std::string>()));
    if (!b) return b.error();
    if (*b == 0) return bad("--exfil-cap must be above 0");
    g.exfil_cap = *b;
  }
  if (r->count("json-log")) {
    g.json_log = (*r)["json-log"].as<std::string>();
    if (g.json_log.empty()) return bad("--json-log: empty file name");
  }
  if (r->count("netns")) {
    const std::string spec = (*r)["netns"].as<std::string>();
    if (spec.empty()) return bad("--netns: empty name");
    g.netns = spec;  // resolved by the guard before it makes anything
  }
  // Compile once now so overlap errors come before anything is created.
  for (auto v : {Verdict::Allow, Verdict::Deny}) {
    auto t = compile_rules(g.rules, v);
    if (!t) return bad(t.error().message);
  }
  if (auto t = compile_redirects(g.redirects); !t) return bad(t.error().message);
  FL_TRY(parse_fault_flags(*r, args_out));
  FL_TRY(parse_creds_flags(*r, args_out));
  FL_TRY(parse_kubeconfig_flags(*r, args_out));
  for (const char* flag : {"block-dangerous", "approve-dangerous"}) {
    if (!r->count(flag)) continue;
    if (cap.gateway) return bad(std::string("--") + flag + " judges the command's execs: --gateway runs no command");
    args_out.block_dangerous = true;
  }
  FL_TRY(parse_watch_and_limit_flags(*r, args_out));
  if (r->count("approve-dangerous")) {
    args_out.approve_dangerous = true;
    args_out.requests = true;  // its approval queue is the request guard's
  }
  if (r->count("approve-prompt")) {
    const auto v = (*r)["approve-prompt"].as<std::string>();
    if (!args_out.approve_dangerous) return bad("--approve-prompt asks about held execs: give --approve-dangerous");
    if (v == "auto")
      args_out.approve_prompt = GuardArgs::ApprovePrompt::Auto;
    else if (v == "tty")
      args_out.approve_prompt = GuardArgs::ApprovePrompt::Tty;
    else if (v == "off")
      args_out.approve_prompt = GuardArgs::ApprovePrompt::Off;
    else
      return bad("--approve-prompt " + v + ": expected auto, tty or off");
  }
  // As a user the request guard is all there is; as root it is asked for.
  if (cap.terminate_tls) args_out.requests = true;
  if (!root) args_out.requests = true;
  if (args_out.requests) {
    if (!args_out.faults.faults.empty())
      return bad(
          "--fault-* with the request guard (host and path rules, --approve, --identity, ...): not "
          "supported together yet; run the faults under a guard with CIDR rules only");
    if (!g.redirects.empty()) return bad("--redirect with the request guard: not supported together yet");
    if (!g.netns.empty())
      return bad(
          "--netns with the request guard: its proxy runs in faultctl's network namespace, which a "
          "command in another cannot reach; run the guard inside that namespace instead");
    FL_TRY(check_guard_policy_runnable(cap.policy, cap.terminate_tls));
    // --json-log is the request guard's activity log: one chained file.
    cap.json_log = std::exchange(g.json_log, std::string());
  }
  args_out.watch_fs.activity_log = !cap.json_log.empty() ? cap.json_log : g.json_log;
  // The proctor is configured by the environment (its key stays out of ps).
  auto proctor = proctor_config_from_env();
  if (!proctor) return proctor.error();
  cap.proctor = std::move(*proctor);
  if (r->count("llm-budget-shared")) {
    if (cap.cp_url.empty())
      return bad("--llm-budget-shared needs --control-plane URL --token T: faultcp keeps the shared budget");
    if (!cap.budget.tokens && !cap.budget.requests)
      return bad("--llm-budget-shared applies to --llm-token-budget or --llm-request-budget");
    cap.budget_shared = true;
  }
  if (!cap.state_dir.empty() && cap.cp_url.empty() && !cap.budget.tokens && !cap.budget.requests)
    return bad(
        "--state-dir keeps the LLM budget's window and the faultcp spool: it applies to "
        "--llm-token-budget, --llm-request-budget or --control-plane");
  return Parsed<GuardArgs>(std::move(args_out));
}

}  // namespace faultline
