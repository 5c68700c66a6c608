// The DLP engine: each detector in request shapes, JSON escapes, the same
// findings at any chunking, redaction at equal length, hints without secrets.
#include "userspace/guard/dlp_engine.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "selftests/lib/dlp_samples.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/policy/guard_section.h"

namespace faultline {

// Readable in a failed comparison: the kind and the raw span.
void PrintTo(const DlpFinding& f, std::ostream* os) { *os << f.kind() << "[" << f.begin << "," << f.end << ")"; }

namespace {

std::shared_ptr<const DlpEngine> all_detectors(std::vector<ContentRule> content = {}) {
  DlpEngine::Options o;
  o.types = all_dlp_types();
  o.content = std::move(content);
  auto e = DlpEngine::build(std::move(o));
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().describe());
  return *e;
}

std::vector<DlpFinding> scan_chunked(const std::shared_ptr<const DlpEngine>& e, std::string_view bytes, size_t chunk) {
  DlpStream s(e);
  for (size_t i = 0; i < bytes.size(); i += chunk) s.feed(bytes.substr(i, chunk));
  s.finish();
  return s.findings();
}

std::vector<std::string> kinds(const std::vector<DlpFinding>& fs) {
  std::vector<std::string> out;
  for (const DlpFinding& f : fs) out.push_back(f.kind());
  return out;
}

TEST(DlpEngine, EachDetectorFindsItsSecretInAJsonBody) {
  auto e = all_detectors();
  std::mt19937_64 rng(7);
  for (DlpType t : all_dlp_types()) {
    const std::string secret = dlp_samples::make(t, rng);
    const std::string body =
        nlohmann::json{{"model", "claude"},
                       {"messages", {{{"role", "user"}, {"content", "here: " + secret + " thanks"}}}}}
            .dump();
    auto fs = dlp_scan(e, body);
    ASSERT_EQ(kinds(fs), std::vector<std::string>{std::string(dlp_type_name(t))}) << body;
    // The span covers the secret as the body carries it (escaped or not).
    const std::string escaped = nlohmann::json(secret).dump();
    EXPECT_EQ(fs[0].end - fs[0].begin, escaped.size() - 2) << dlp_type_name(t);
    EXPECT_EQ(fs[0].hint.find(secret), std::string::npos);
  }
}

TEST(DlpEngine, UnicodeEscapesDoNotHideASecret) {
  auto e = all_detectors();
  std::mt19937_64 rng(8);
  const std::string key = dlp_samples::aws_key(rng);
  // "\u0041KIA...": the A written as an escape, and a '/' escaped in a URL beside it.
  const std::string body =
      "{\"k\":\"\\u00" + std::string(key[0] == 'A' ? "41" : "53") + key.substr(1) + "\",\"u\":\"http:\\/\\/x\"}";
  auto fs = dlp_scan(e, body);
  ASSERT_EQ(kinds(fs), std::vector<std::string>{"aws_access_key"});
  EXPECT_EQ(body.substr(fs[0].begin, 4), "\\u00");
  EXPECT_EQ(fs[0].end - fs[0].begin, 25u);
}

TEST(DlpEngine, TheSameFindingsAtAnyChunking) {
  auto e = all_detectors({{"codename", "Project Bluebird", false, "t", 1}});
  std::mt19937_64 rng(9);
  std::string body = "--boundary\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n";
  for (int round = 0; round < 3; ++round)
    for (DlpType t : all_dlp_types()) {
      const std::string s = dlp_samples::make(t, rng);
      body += round == 1 ? nlohmann::json(s).dump() : s;
      body += round == 2 ? "&x=1&" : " and project BLUEBIRD, ";
    }
  body += "\r\n--boundary--\r\n";
  const auto whole = dlp_scan(e, body);
  EXPECT_EQ(whole.size(), 3 * kDlpTypeCount + 1);
  EXPECT_EQ(scan_chunked(e, body, 1), whole);
  EXPECT_EQ(scan_chunked(e, body, 64 * 1024), whole);
  for (size_t chunk : {2, 3, 7, 64, 1000}) EXPECT_EQ(scan_chunked(e, body, chunk), whole) << chunk;
}

TEST(DlpEngine, RedactionMasksAtEqualLengthAndKeepsOnlyAWindow) {
  auto e = all_detectors();
  std::mt19937_64 rng(10);
  std::vector<std::string> secrets;
  std::string body;
  for (DlpType t : all_dlp_types()) {
    secrets.push_back(dlp_samples::make(t, rng));
    body += "{\"text\":" + nlohmann::json("x " + secrets.back() + " y").dump() + "}\n";
    body += std::string(9000, 'z') + "\n";
  }
  for (size_t chunk : {1, 333, 64 * 1024}) {
    DlpRedactor r(e);
    std::string out;
    size_t most_held = 0;
    for (size_t i = 0; i < body.size(); i += chunk) {
      out += r.feed(std::string_view(body).substr(i, chunk));
      most_held = std::max(most_held, r.held_bytes());
    }
    out += r.finish();
    ASSERT_EQ(out.size(), body.size());
    for (const std::string& s : secrets) {
      EXPECT_EQ(out.find(s), std::string::npos) << s;
      EXPECT_EQ(out.find(nlohmann::json(s).dump()), std::string::npos);
    }
    EXPECT_EQ(r.findings().size(), kDlpTypeCount);
    // Held back: the window (the longest lookahead and the lookbehind), not the body.
    EXPECT_LE(most_held, kDlpLookahead + kDlpLookbehind + chunk + 64) << chunk;
    EXPECT_NE(out.find(std::string(9000, 'z')), std::string::npos);
  }
}

TEST(DlpEngine, LookAlikesAreNotFindings) {
  auto e = all_detectors();
  const std::vector<std::string> negatives = {
      "AKIAIOSFODNN7EXAMPLE",                      // AWS's documentation key
      "550e8400-e29b-41d4-a716-446655440000",      // a UUID
      "da39a3ee5e6b4b0d3255bfef95601890afd80709",  // a git SHA
      "4111111111111112",                          // Luhn-invalid
      "1700000000000000",                          // a timestamp
      "000-12-3456 666-12-3456 912-12-3456",       // SSNs that cannot be
      "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  // a bad checksum
      "lodash@4.17.21",                            // a package version
      "user@localhost",                            // no TLD
      "eyJub3QiOiJhIGp3dCJ9.eyJ4IjoxfQ.c2ln",      // no alg in the header
      "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
  };
  for (const std::string& n : negatives) EXPECT_TRUE(dlp_scan(e, n).empty()) << n;
}

TEST(DlpValidators, Checks) {
  EXPECT_TRUE(luhn_valid("4111111111111111"));
  EXPECT_FALSE(luhn_valid("4111111111111112"));
  EXPECT_TRUE(ssn_valid("536-22-1234"));
  EXPECT_FALSE(ssn_valid("536-00-1234"));
  EXPECT_FALSE(ssn_valid("536-22-0000"));
  EXPECT_FALSE(ssn_valid("078-05-1120"));
  EXPECT_EQ(base62_crc32("").size(), 6u);
  EXPECT_TRUE(jwt_header_valid("eyJhbGciOiJIUzI1NiJ9"));  // {"alg":"HS256"}
  EXPECT_FALSE(jwt_header_valid("eyJ0eXAiOiJKV1QifQ"));   // {"typ":"JWT"}
  auto tlds = TldSet::load();
  ASSERT_TRUE(tlds.ok());
  EXPECT_TRUE(tlds->contains("COM"));
  EXPECT_FALSE(tlds->contains("localdomain"));
}

TEST(ContentPolicy, LinesAndTheirErrors) {
  auto ok = parse_content_policy("# secrets of ours\n\ncodename: Project Bluebird\nticket: re:FIN-[0-9]{4}\n", "p.txt");
  ASSERT_TRUE(ok.ok()) << ok.error().describe();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].label, "ticket");
  EXPECT_TRUE((*ok)[1].regex);
  EXPECT_EQ((*ok)[1].line, 4u);
  auto no_colon = parse_content_policy("a: b\njust text\n", "p.txt");
  ASSERT_FALSE(no_colon.ok());
  EXPECT_EQ(no_colon.error().message, "p.txt:2: expected 'label: literal' or 'label: re:REGEX'");
  auto empty = parse_content_policy("x: re:\n", "p.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "p.txt:1: label 'x' has an empty pattern");
  auto bad_regex = parse_content_policy("a: b\nbad: re:(unclosed\n", "p.txt");
  ASSERT_TRUE(bad_regex.ok());
  DlpEngine::Options o;
  o.content = *bad_regex;
  auto e = DlpEngine::build(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message.substr(0, 20), "p.txt:2: label 'bad'");
  EXPECT_TRUE(e.error().bad_input);
}

TEST(ContentPolicy, LiteralsAreCaseInsensitiveRegexesAsWritten) {
  auto rules = parse_content_policy("codename: Project Bluebird\nticket: re:FIN-[0-9]{4}\n", "p.txt");
  ASSERT_TRUE(rules.ok());
  DlpEngine::Options o;
  o.content = *rules;
  auto e = DlpEngine::build(o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(kinds(dlp_scan(*e, "about PROJECT bluebird")), std::vector<std::string>{"content:codename"});
  EXPECT_EQ(kinds(dlp_scan(*e, "see FIN-1234")), std::vector<std::string>{"content:ticket"});
  EXPECT_TRUE(dlp_scan(*e, "see fin-1234, project blue bird").empty());
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

TEST(DlpRules, DlpTypeMatchesTheFindingsFactAndTheSectionReadsIt) {
  GuardSectionParse p = parse_guard_text(
      "mode: enforce\nrules:\n  - {name: no-aws, action: deny, dlp_type: aws_access_key}\n"
      "  - {name: pii, action: approve, dlp_type: any}\n");
  ASSERT_TRUE(p.ok()) << p.errors[0].reason;
  RequestFacts f;
  f.host = "api.example.com";
  f.method = "POST";
  EXPECT_EQ(decide(p.policy, f).rule, "");  // no finding: the default
  f.dlp_findings = {"email"};
  EXPECT_EQ(decide(p.policy, f).rule, "pii");
  f.dlp_findings = {"email", "aws_access_key"};
  const GuardDecision d = decide(p.policy, f);
  EXPECT_EQ(d.rule, "no-aws");
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);

  GuardSectionParse bad = parse_guard_text("rules:\n  - {name: x, action: deny, dlp_type: aws_key}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.errors[0].reason.find("'aws_key': a detector"), std::string::npos) << bad.errors[0].reason;
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

// The guard's judge itself, fed a head and an empty body as the proxy does.
RequestVerdict judge_once(GuardJudge& judge, const std::string& host,
                          std::vector<std::pair<std::string, std::string>> headers,
                          std::string target = "/v1/messages") {
  static uint64_t id = 1000;
  RequestHead h;
  h.id = ++id;
  h.stage = RequestStage::inner;
  h.method = "GET";
  h.scheme = "https";
  h.host = host;
  h.port = 443;
  h.target = std::move(target);
  h.headers = std::move(headers);
  h.tls_terminated = true;
  RequestVerdict v = judge.judge(h, HeldRequest());
  if (v.kind != RequestVerdict::Kind::need_body) return v;
  return judge.judge_body(h.id, RequestBodyChunk{{}, true, false}, HeldRequest());
}

TEST(DlpJudge, AKeyPresentedToItsIssuerIsUseNotALeak) {
  auto policy = std::make_shared<GuardPolicy>();
  policy->mode = GuardMode::Enforce;
  GuardJudgeOptions o;
  o.terminate_tls = true;
  DlpEngine::Options eo;
  eo.types = all_dlp_types();
  o.dlp.engine = *DlpEngine::build(eo);
  o.dlp.dlp = true;
  GuardJudge judge(policy, o);
  std::mt19937_64 rng(3);
  const std::string key = dlp_samples::anthropic_key(rng);
  EXPECT_EQ(judge_once(judge, "api.anthropic.com", {{"x-api-key", key}}).kind, RequestVerdict::Kind::forward);
  const RequestVerdict elsewhere = judge_once(judge, "paste.example.com", {{"x-api-key", key}});
  ASSERT_EQ(elsewhere.kind, RequestVerdict::Kind::answer);
  EXPECT_NE(elsewhere.response.find("dlp-block"), std::string::npos);
  // In another header, to its issuer: still a finding (only credential headers are use).
  EXPECT_EQ(judge_once(judge, "api.anthropic.com", {{"x-note", key}}).kind, RequestVerdict::Kind::answer);
  // A look-alike of the domain is not the issuer.
  EXPECT_EQ(judge_once(judge, "evilanthropic.com", {{"x-api-key", key}}).kind, RequestVerdict::Kind::answer);
  const std::string jwt = dlp_samples::jwt(rng);
  EXPECT_EQ(judge_once(judge, "api.example.com", {{"authorization", "Bearer " + jwt}}).kind,
            RequestVerdict::Kind::forward);
  EXPECT_EQ(judge_once(judge, "api.example.com", {}, "/cb?token=" + jwt).kind, RequestVerdict::Kind::answer);
  EXPECT_EQ(judge.counts().denied, 4u);
}

}  // namespace
}  // namespace faultline
