// Redaction: secret shapes that must go, and look-alikes that must stay.
#include "base/redact.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/run/redaction.h"

namespace faultline {
namespace {

struct Case {
  const char* in;
  const char* want;
};

// Each secret is replaced by [REDACTED]; everything around it stays.
const Case kSecrets[] = {
    {"http://admin:hunter2@127.0.0.1:8080/health", "http://admin:[REDACTED]@127.0.0.1:8080/health"},
    {"https://user:p%40ss@example.test/x?y=1", "https://user:[REDACTED]@example.test/x?y=1"},
    {"postgres://app:s3cr3t@db.internal:5432/prod", "postgres://app:[REDACTED]@db.internal:5432/prod"},
    {"https://ghp_abcdef@github.test/repo", "https://[REDACTED]@github.test/repo"},
    {"http://h/health?token=abc123", "http://h/health?token=[REDACTED]"},
    {"http://h/x?a=1&api_key=K1&b=2", "http://h/x?a=1&api_key=[REDACTED]&b=2"},
    {"http://h/x?access_token=T&password=P", "http://h/x?access_token=[REDACTED]&password=[REDACTED]"},
    {"http://h/x?X-Amz-Signature=deadbeef#frag", "http://h/x?X-Amz-Signature=[REDACTED]#frag"},
    {"http://h/x?apiKey=1234", "http://h/x?apiKey=[REDACTED]"},
    {"http://h/x?client_secret=zz&scope=read", "http://h/x?client_secret=[REDACTED]&scope=read"},
    {"Authorization: Bearer eyJhbGciOi.x.y", "Authorization: [REDACTED]"},
    {"authorization:Basic dXNlcjpwYXNz", "authorization:[REDACTED]"},
    {"Cookie: session=abc; theme=dark", "Cookie: [REDACTED]"},
    {"X-Api-Key: 0123456789", "X-Api-Key: [REDACTED]"},
    {"Proxy-Authorization: Digest abc", "Proxy-Authorization: [REDACTED]"},
    {"sent Bearer abc.def.ghi to the API", "sent Bearer [REDACTED] to the API"},
    {"API_KEY=sk-live-123 ./app", "API_KEY=[REDACTED] ./app"},
    {"env DB_PASSWORD=hunter2 PORT=80 ./srv", "env DB_PASSWORD=[REDACTED] PORT=80 ./srv"},
    {"AWS_SECRET_ACCESS_KEY=abc/def", "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
    {"GITHUB_TOKEN=ghp_x curl", "GITHUB_TOKEN=[REDACTED] curl"},
    {"--password=hunter2 --user=bob", "--password=[REDACTED] --user=bob"},
    {"SECRET='two words' next", "SECRET='[REDACTED]' next"},
    {"PRIVATE_KEY=\"-----BEGIN\" x", "PRIVATE_KEY=\"[REDACTED]\" x"},
    {"OPENAI_API_KEY=sk-abc", "OPENAI_API_KEY=[REDACTED]"},
    {"SESSION_ID=42", "SESSION_ID=[REDACTED]"},
    {"passwd=x", "passwd=[REDACTED]"},
    {"MYSQL_PWD=root", "MYSQL_PWD=[REDACTED]"},
    {"SIGNING_KEY=k", "SIGNING_KEY=[REDACTED]"},
    {"accessToken=abc", "accessToken=[REDACTED]"},
    {"faultctl run loss --health-url http://u:p@h/ --json",
     "faultctl run loss --health-url http://u:[REDACTED]@h/ --json"},
};

// Look-alikes: none of these holds a secret, and none may change.
const char* const kLookAlikes[] = {
    "http://127.0.0.1:8080/health",
    "http://h/x?page=2&sort=name",
    "http://h/x?keyword=token-bucket",
    "KEYBOARD=us make",
    "MONKEY=1",
    "PASSTHROUGH=1 ./app",
    "SORT_KEY=name",
    "TOKENIZER_THREADS=4",
    "Content-Type: application/json",
    "Host: example.test",
    "tcp_retransmits at 4.0/s over the last 3.0s, above 1.0/s",
    "the token bucket is empty",
    "faultctl run loss --target 10.0.0.2 --percent 30 --duration 30s",
    "health check: connect: Connection refused",
    "a=b c=d",
    "ftp://example.test/pub/file",
    "https://example.test:8443/?q=password+reset",
};

TEST(Redact, EverySecretShapeGoes) {
  Redactor r;
  for (const auto& c : kSecrets) EXPECT_EQ(r.text(c.in), c.want) << "input: " << c.in;
}

TEST(Redact, LookAlikesStay) {
  Redactor r;
  for (const char* s : kLookAlikes) EXPECT_EQ(r.text(s), s) << "input: " << s;
}

TEST(Redact, SecretNames) {
  for (const char* n : {"Authorization", "API_KEY", "db-password", "accessToken", "x-api-key", "Cookie", "TOKEN",
                        "client_secret", "SESSION_ID", "apikey"})
    EXPECT_TRUE(Redactor::secret_name(n)) << n;
  for (const char* n : {"KEYBOARD", "monkey", "passthrough", "sort_key", "tokenizer", "keyword", "host", "status"})
    EXPECT_FALSE(Redactor::secret_name(n)) << n;
}

TEST(Redact, OperatorPatternsAddToTheDefaults) {
  auto r = Redactor::make({"acct-[0-9]+", "internal\\.example"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->text("user acct-1234 at internal.example TOKEN=x"), "user [REDACTED] at [REDACTED] TOKEN=[REDACTED]");
}

TEST(Redact, BadPatternIsBadInputNamingIt) {
  auto r = Redactor::make({"(unclosed"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().bad_input);
  EXPECT_NE(r.error().message.find("--redact-pattern '(unclosed'"), std::string::npos) << r.error().message;
}

TEST(Redact, NoRedactPassesEverything) {
  auto r = Redactor::make({}, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text("API_KEY=x http://u:p@h/"), "API_KEY=x http://u:p@h/");
}

TEST(Redact, JsonValuesUnderSecretKeysAndInsideStrings) {
  Redactor r;
  nlohmann::json in = {{"health_url", "http://u:p@h/?token=t"},
                       {"headers", {{"Authorization", "Bearer x"}, {"Accept", "*/*"}}},
                       {"password", 1234},
                       {"list", {"API_KEY=v", "plain"}},
                       {"percent", 30}};
  nlohmann::json out = redact_json(r, in);
  EXPECT_EQ(out["health_url"], "http://u:[REDACTED]@h/?token=[REDACTED]");
  EXPECT_EQ(out["headers"]["Authorization"], "[REDACTED]");
  EXPECT_EQ(out["headers"]["Accept"], "*/*");
  EXPECT_EQ(out["password"], "[REDACTED]");
  EXPECT_EQ(out["list"][0], "API_KEY=[REDACTED]");
  EXPECT_EQ(out["list"][1], "plain");
  EXPECT_EQ(out["percent"], 30);
}

}  // namespace
}  // namespace faultline
