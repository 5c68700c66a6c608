// The guard's rules: each matcher, the decision order, unknown LLM facts, and
// the command line's patterns (their shapes and their refusals).
#include "userspace/guard/guard_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "userspace/guard/guard_policy.h"

namespace faultline {
namespace {

HostMatcher host(std::string_view text) {
  auto m = parse_host_matcher(text);
  EXPECT_TRUE(m.ok()) << text << ": " << (m.ok() ? "" : m.error().message);
  return m.ok() ? *m : HostMatcher{};
}

RequestFacts request(std::string method, std::string host_name, uint16_t port, std::string path) {
  RequestFacts f;
  f.method = std::move(method);
  f.host = std::move(host_name);
  f.port = port;
  f.path = std::move(path);
  return f;
}

GuardRule rule(std::string name, GuardVerdict action) {
  GuardRule r;
  r.name = std::move(name);
  r.action = action;
  return r;
}

TEST(GuardHost, ExactIsCaseInsensitiveAndIgnoresTrailingDot) {
  const HostMatcher m = host("API.Example.com");
  EXPECT_TRUE(m.matches("api.example.com", 443));
  EXPECT_TRUE(m.matches("API.EXAMPLE.COM.", 80));
  EXPECT_FALSE(m.matches("x.api.example.com", 443));
  EXPECT_FALSE(m.matches("example.com", 443));
}

TEST(GuardHost, WildcardMatchesStrictSubdomainsOnly) {
  const HostMatcher m = host("*.example.com");
  EXPECT_TRUE(m.matches("a.example.com", 443));
  EXPECT_TRUE(m.matches("a.b.Example.COM", 443));
  EXPECT_FALSE(m.matches("example.com", 443)) << "the apex is not a subdomain";
  EXPECT_FALSE(m.matches("badexample.com", 443)) << "a suffix without its dot is another name";
  EXPECT_FALSE(m.matches(".example.com", 443));
  EXPECT_FALSE(m.matches("example.com.evil.net", 443));
}

TEST(GuardHost, PortIsMatchedWhenGiven) {
  const HostMatcher m = host("api.example.com:8443");
  EXPECT_TRUE(m.matches("api.example.com", 8443));
  EXPECT_FALSE(m.matches("api.example.com", 443));
  const HostMatcher w = host("*.example.com:443");
  EXPECT_TRUE(w.matches("a.example.com", 443));
  EXPECT_FALSE(w.matches("a.example.com", 80));
  const HostMatcher v6 = host("[::1]:443");
  EXPECT_TRUE(v6.matches("::1", 443));
  EXPECT_TRUE(v6.matches("[::1]", 443));
  EXPECT_EQ(v6.text(), "[::1]:443");
  EXPECT_EQ(w.text(), "*.example.com:443");
}

TEST(GuardHost, BadHostsSayWhy) {
  for (std::string_view bad :
       {"", "*", "*.", "a.*.com", "ex*ample.com", "api.example.com:0", "api.example.com:99999", "api.example.com:x",
        "https://api.example.com", "a..b", "-a.com", "a b.com", "::1:443", "[::1", "[::1]x"}) {
    auto m = parse_host_matcher(bad);
    EXPECT_FALSE(m.ok()) << "'" << bad << "' was accepted";
    if (!m.ok())
      EXPECT_NE(m.error().message.find("'" + std::string(bad) + "'"), std::string::npos) << m.error().message;
  }
}

TEST(GuardRuleMatch, PathIsASubstringAndMethodIsExact) {
  GuardPolicy p;
  GuardRule r = rule("no-secrets", GuardVerdict::Deny);
  r.path = "/secrets/";
  r.method = "POST";
  p.rules.push_back(r);
  EXPECT_EQ(decide(p, request("post", "h.example", 80, "/v1/secrets/x?y=1")).verdict, GuardVerdict::Deny);
  EXPECT_EQ(decide(p, request("GET", "h.example", 80, "/v1/secrets/x")).verdict, GuardVerdict::Allow);
  EXPECT_EQ(decide(p, request("POST", "h.example", 80, "/v1/secret/x")).verdict, GuardVerdict::Allow);
}

TEST(GuardRuleMatch, MatchersAreAnded) {
  GuardPolicy p;
  GuardRule r = rule("prod-writes", GuardVerdict::Deny);
  r.host = host("*.example.com");
  r.method = "DELETE";
  r.path = "/prod/";
  p.rules.push_back(r);
  EXPECT_EQ(decide(p, request("DELETE", "a.example.com", 443, "/prod/1")).verdict, GuardVerdict::Deny);
  EXPECT_EQ(decide(p, request("DELETE", "example.com", 443, "/prod/1")).verdict, GuardVerdict::Allow);
  EXPECT_EQ(decide(p, request("GET", "a.example.com", 443, "/prod/1")).verdict, GuardVerdict::Allow);
  EXPECT_EQ(decide(p, request("DELETE", "a.example.com", 443, "/dev/1")).verdict, GuardVerdict::Allow);
}

TEST(GuardRuleMatch, LlmModelAndMaxTokens) {
  GuardPolicy p;
  GuardRule opus = rule("no-opus", GuardVerdict::Deny);
  opus.llm_model = "claude-opus-*";
  GuardRule big = rule("big-answers", GuardVerdict::Approve);
  big.llm_max_tokens_over = 4096;
  p.rules = {opus, big};
  RequestFacts f = request("POST", "api.anthropic.com", 443, "/v1/messages");
  f.llm_model = "claude-opus-4";
  f.llm_max_tokens = 100;
  EXPECT_EQ(decide(p, f).rule, "no-opus");
  f.llm_model = "claude-sonnet-4";
  EXPECT_EQ(decide(p, f).verdict, GuardVerdict::Allow);
  f.llm_max_tokens = 4096;
  EXPECT_EQ(decide(p, f).verdict, GuardVerdict::Allow) << "4096 is not over 4096";
  f.llm_max_tokens = 4097;
  EXPECT_EQ(decide(p, f).verdict, GuardVerdict::Approve);
  // No LLM facts at all (not an LLM request): the rules needing them do not match.
  EXPECT_EQ(decide(p, request("GET", "example.com", 443, "/")).verdict, GuardVerdict::Allow);
}

TEST(GuardDecide, DenyThenApproveThenAllowThenDefault) {
  GuardPolicy p;
  p.default_allow = false;
  GuardRule allow = rule("allow-all-example", GuardVerdict::Allow);
  allow.host = host("*.example.com");
  GuardRule approve = rule("approve-writes", GuardVerdict::Approve);
  approve.method = "POST";
  GuardRule deny = rule("deny-admin", GuardVerdict::Deny);
  deny.path = "/admin";
  p.rules = {allow, approve, deny};  // written in the opposite order of precedence

  GuardDecision d = decide(p, request("POST", "a.example.com", 443, "/admin/x"));
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "deny-admin");
  d = decide(p, request("POST", "a.example.com", 443, "/x"));
  EXPECT_EQ(d.verdict, GuardVerdict::Approve);
  EXPECT_EQ(d.rule, "approve-writes");
  d = decide(p, request("GET", "a.example.com", 443, "/x"));
  EXPECT_EQ(d.verdict, GuardVerdict::Allow);
  EXPECT_EQ(d.rule, "allow-all-example");
  d = decide(p, request("GET", "other.net", 443, "/x"));
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "");
  EXPECT_NE(d.reason.find("default"), std::string::npos) << d.reason;
  EXPECT_FALSE(d.enforced);
  p.mode = GuardMode::Enforce;
  EXPECT_TRUE(decide(p, request("GET", "other.net", 443, "/x")).enforced);
}

TEST(GuardDecide, FirstRuleOfAnActionInOrderWritten) {
  GuardPolicy p;
  GuardRule a = rule("first", GuardVerdict::Deny);
  a.path = "/a";
  a.reason = "the first";
  GuardRule b = rule("second", GuardVerdict::Deny);
  b.path = "/a/b";
  p.rules = {a, b};
  const GuardDecision d = decide(p, request("GET", "h", 80, "/a/b"));
  EXPECT_EQ(d.rule, "first");
  EXPECT_EQ(d.reason, "the first");
}

TEST(GuardDecide, UnknownLlmFactsFailSafe) {
  GuardPolicy p;
  p.mode = GuardMode::Enforce;
  GuardRule deny = rule("no-opus", GuardVerdict::Deny);
  deny.host = host("api.anthropic.com");
  deny.llm_model = "claude-opus-4";
  deny.reason = "too expensive";
  GuardRule allow = rule("sonnet-ok", GuardVerdict::Allow);
  allow.llm_model = "claude-sonnet-4";
  p.rules = {allow, deny};
  RequestFacts f = request("POST", "api.anthropic.com", 443, "/v1/messages");
  f.llm_facts_unparseable = true;
  GuardDecision d = decide(p, f);
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "no-opus");
  EXPECT_TRUE(d.llm_facts_unknown);
  EXPECT_EQ(d.reason, "llm facts unknown: body is not JSON; too expensive");
  // Its other matchers still decide: another host is not denied by it.
  f.host = "api.openai.com";
  d = decide(p, f);
  EXPECT_EQ(d.verdict, GuardVerdict::Allow);
  EXPECT_EQ(d.rule, "") << "an allow rule never matches on unknown facts";
  // Monitor reports what enforce would do.
  p.mode = GuardMode::Monitor;
  f.host = "api.anthropic.com";
  d = decide(p, f);
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_FALSE(d.enforced);
}

TEST(GuardDecide, AKnownMatchIsPreferredToAnUnknownOne) {
  GuardPolicy p;
  GuardRule by_model = rule("by-model", GuardVerdict::Deny);
  by_model.llm_model = "x";
  GuardRule by_path = rule("by-path", GuardVerdict::Deny);
  by_path.path = "/v1/";
  p.rules = {by_model, by_path};
  RequestFacts f = request("POST", "h", 443, "/v1/messages");
  f.llm_facts_unparseable = true;
  const GuardDecision d = decide(p, f);
  EXPECT_EQ(d.rule, "by-path");
  EXPECT_FALSE(d.llm_facts_unknown);
}

// The rule index (with_rule_index()) reads only the rules a request's host
// can meet, and of the host-less ones only those whose path the request's
// path holds; its decision must be the plain walk's for any policy and
// request. Random policies over a small world of names, so that hosts,
// suffixes, ports, paths (nested, repeated, differing in case only, absent as
// in a tunnel), methods and unknown LLM facts collide often.
TEST(GuardDecide, TheRuleIndexDecidesAsTheWalkOverEveryRule) {
  std::mt19937 rng(20261207);
  auto pick = [&](auto const& list) { return list[rng() % list.size()]; };
  const std::vector<std::string> names = {
      "api.example.com", "example.com", "a.b.example.com", "b.example.com", "x.test",
      "10.0.0.5",        "::1",         "b.example.com."};
  const std::vector<std::string> host_patterns = {"api.example.com", "*.example.com", "*.b.example.com",
                                                  "example.com:443", "*.test",        "x.test:8080",
                                                  "10.0.0.5",        "[::1]:443"};
  const std::vector<std::string> paths = {"/v1/", "/secrets/", "/v1/messages", "?q=", "/"};
  const std::vector<std::string> request_paths = {
      "/v1/", "/secrets/", "/v1/messages", "?q=", "/", "/SECRETS/", "", "/v1/messages?q=/secrets/"};
  const std::vector<std::string> methods = {"GET", "POST", "DELETE"};
  const std::vector<std::string> models = {"claude-opus-*", "gpt-4o"};
  const std::vector<uint16_t> ports = {443, 80, 8080};
  int compared = 0, by_rule = 0, path_indexed = 0;
  for (int round = 0; round < 300; ++round) {
    GuardPolicy p;
    p.mode = rng() % 2 ? GuardMode::Enforce : GuardMode::Monitor;
    p.default_allow = rng() % 2;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      GuardRule r = rule("r" + std::to_string(i), static_cast<GuardVerdict>(rng() % 3));
      if (rng() % 3 != 0) r.host = host(pick(host_patterns));
      if (rng() % 3 == 0) r.path = pick(paths);
      if (rng() % 4 == 0) r.method = pick(methods);
      if (rng() % 6 == 0) r.llm_model = pick(models);
      if (rng() % 8 == 0) r.llm_max_tokens_over = 1000;
      if (!r.has_matcher()) r.method = pick(methods);
      p.rules.push_back(std::move(r));
    }
    const auto indexed = with_rule_index(std::make_shared<const GuardPolicy>(p));
    ASSERT_TRUE(indexed->index && indexed->index->covers(indexed->rules));
    const size_t path_rules =
        std::count_if(p.rules.begin(), p.rules.end(), [](const GuardRule& r) { return !r.host && !r.path.empty(); });
    ASSERT_EQ(indexed->index->path_rules(), path_rules) << "the host-less path rules are in the path database";
    path_indexed += path_rules > 0;
    for (int q = 0; q < 50; ++q) {
      std::string path = pick(request_paths);
      if (!path.empty()) path += (rng() % 2 ? pick(request_paths) : "") + "x";
      RequestFacts f = request(pick(methods), pick(names), pick(ports), path);
      if (rng() % 3 == 0) f.llm_model = rng() % 2 ? "claude-opus-4" : "gpt-4o";
      if (rng() % 3 == 0) f.llm_max_tokens = rng() % 2000;
      f.llm_facts_unparseable = !f.llm_model && rng() % 4 == 0;
      const GuardDecision want = decide(p, f), got = decide(*indexed, f);
      ASSERT_EQ(guard_verdict_name(got.verdict), guard_verdict_name(want.verdict)) << f.host << f.path;
      ASSERT_EQ(got.rule, want.rule) << f.method << " " << f.host << ":" << f.port << f.path;
      ASSERT_EQ(got.reason, want.reason);
      ASSERT_EQ(got.llm_facts_unknown, want.llm_facts_unknown);
      ++compared;
      by_rule += !want.rule.empty();
    }
  }
  EXPECT_EQ(compared, 300 * 50);
  EXPECT_GT(by_rule, compared / 3) << "the world is too sparse: most decisions were the default";
  EXPECT_GT(path_indexed, 150) << "too few policies had host-less path rules for the path database to be tried";
}

TEST(GuardDecide, ACopiedPolicyDoesNotUseAnotherVectorsIndex) {
  GuardPolicy p;
  GuardRule r = rule("api", GuardVerdict::Deny);
  r.host = host("api.example.com");
  p.rules.push_back(r);
  const auto indexed = with_rule_index(std::make_shared<const GuardPolicy>(p));
  GuardPolicy copy = *indexed;  // carries the index, not its vector
  EXPECT_FALSE(copy.index->covers(copy.rules));
  copy.rules.front().host = host("other.example.com");
  EXPECT_EQ(decide(copy, request("GET", "other.example.com", 443, "/")).rule, "api");
  EXPECT_EQ(decide(copy, request("GET", "api.example.com", 443, "/")).rule, "");
  EXPECT_EQ(with_rule_index(indexed), indexed) << "an indexed policy is shared as it is";
}

TEST(GuardRule, NeedsPlaintext) {
  GuardRule r = rule("r", GuardVerdict::Deny);
  r.host = host("*.example.com:443");
  EXPECT_FALSE(needs_plaintext(r));
  for (auto set : {+[](GuardRule& x) { x.path = "/p"; }, +[](GuardRule& x) { x.method = "GET"; },
                   +[](GuardRule& x) { x.llm_model = "m"; }, +[](GuardRule& x) { x.llm_max_tokens_over = 1; }}) {
    GuardRule copy = r;
    set(copy);
    EXPECT_TRUE(needs_plaintext(copy));
  }
}

GuardRule as_rule(const Result<CliPattern>& p) {
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  if (!p.ok() || !std::holds_alternative<GuardRule>(*p)) {
    ADD_FAILURE() << "not a request rule";
    return {};
  }
  return std::get<GuardRule>(*p);
}

TEST(GuardPattern, PathHostAndMethod) {
  const GuardRule path = as_rule(parse_cli_pattern(GuardVerdict::Deny, "/secrets/"));
  EXPECT_EQ(path.path, "/secrets/");
  EXPECT_FALSE(path.host);
  EXPECT_EQ(path.action, GuardVerdict::Deny);
  EXPECT_EQ(path.name, "--deny /secrets/");

  const GuardRule exact = as_rule(parse_cli_pattern(GuardVerdict::Allow, "api.example.com"));
  ASSERT_TRUE(exact.host);
  EXPECT_EQ(exact.host->text(), "api.example.com");
  EXPECT_FALSE(needs_plaintext(exact));

  const GuardRule wild = as_rule(parse_cli_pattern(GuardVerdict::Allow, "*.Example.com:8443"));
  ASSERT_TRUE(wild.host);
  EXPECT_TRUE(wild.host->wildcard);
  EXPECT_EQ(wild.host->port, 8443);

  const GuardRule post = as_rule(parse_cli_pattern(GuardVerdict::Approve, "POST /v1/prod/"));
  EXPECT_EQ(post.method, "POST");
  EXPECT_EQ(post.path, "/v1/prod/");
  EXPECT_EQ(post.action, GuardVerdict::Approve);

  const GuardRule del = as_rule(parse_cli_pattern(GuardVerdict::Deny, "delete *.example.com"));
  EXPECT_EQ(del.method, "DELETE");
  ASSERT_TRUE(del.host);
  EXPECT_TRUE(del.path.empty());

  const GuardRule method_only = as_rule(parse_cli_pattern(GuardVerdict::Deny, "DELETE"));
  EXPECT_EQ(method_only.method, "DELETE");
  EXPECT_FALSE(method_only.host);

  const GuardRule host_path = as_rule(parse_cli_pattern(GuardVerdict::Deny, "api.example.com/v1/admin"));
  ASSERT_TRUE(host_path.host);
  EXPECT_EQ(host_path.host->name, "api.example.com");
  EXPECT_EQ(host_path.path, "/v1/admin");
}

TEST(GuardPattern, CidrsStayKernelRules) {
  for (std::string_view cidr : {"10.0.0.0/8", "10.0.0.5", "10.0.0.5:5432/tcp", "fd00::/8", "[2001:db8::1]:443"}) {
    auto p = parse_cli_pattern(GuardVerdict::Deny, cidr);
    ASSERT_TRUE(p.ok()) << cidr << ": " << p.error().message;
    ASSERT_TRUE(std::holds_alternative<CidrPattern>(*p)) << cidr << " was read as a request rule";
    EXPECT_EQ(std::get<CidrPattern>(*p).rule.verdict, Verdict::Deny);
  }
  auto allow = parse_cli_pattern(GuardVerdict::Allow, "192.168.0.0/16");
  ASSERT_TRUE(allow.ok());
  EXPECT_EQ(std::get<CidrPattern>(*allow).rule.verdict, Verdict::Allow);
}

TEST(GuardPattern, BadPatternsAreOneLineNamingThem) {
  struct Case {
    GuardVerdict action;
    std::string_view pattern;
    std::string_view why;  // a part of the message
  };
  for (const Case& c : std::initializer_list<Case>{
           {GuardVerdict::Deny, "", "empty"},
           {GuardVerdict::Deny, "   ", "empty"},
           {GuardVerdict::Approve, "10.0.0.0/8", "approval"},
           {GuardVerdict::Deny, "POST 10.0.0.0/8", "no method"},
           {GuardVerdict::Deny, "P0ST /x", "method"},
           {GuardVerdict::Deny, "POST /x /y", "one method and one pattern"},
           {GuardVerdict::Allow, "ex*ample.com", "wildcard"},
           {GuardVerdict::Allow, "api.example.com:70000", "port"},
           {GuardVerdict::Allow, "https://api.example.com/", "scheme"},
           {GuardVerdict::Allow, "a..b/x", "empty label"},
       }) {
    auto p = parse_cli_pattern(c.action, c.pattern);
    ASSERT_FALSE(p.ok()) << "'" << c.pattern << "' was accepted";
    const std::string& m = p.error().message;
    EXPECT_TRUE(p.error().bad_input);
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.rfind("--" + std::string(guard_verdict_name(c.action)) + " '" + std::string(c.pattern) + "': ", 0), 0u)
        << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace faultline
