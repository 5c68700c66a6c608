// The security primitives of cp/auth: scrypt hashes, token prefixes and
// hashes, the login rate limiter's window. No database.
#include <gtest/gtest.h>

#include "cp/auth/crypto.h"
#include "cp/auth/rate_limiter.h"
#include "cp/auth/tokens.h"

namespace {

using namespace faultline::cp;

TEST(Scrypt, VerifiesTheRightPasswordOnlyAndCarriesItsParameters) {
  auto h = hash_password("correct horse battery", {.log_n = 10, .r = 8, .p = 1});
  ASSERT_TRUE(h.ok()) << h.error().describe();
  EXPECT_EQ(h->rfind("scrypt$10$8$1$", 0), 0u) << *h;
  EXPECT_TRUE(verify_password("correct horse battery", *h));
  EXPECT_FALSE(verify_password("correct horse batterY", *h));
  EXPECT_FALSE(verify_password("", *h));
  auto again = hash_password("correct horse battery", {.log_n = 10});
  EXPECT_NE(*again, *h) << "no salt";
  // Hashes we cannot read, or whose cost nobody set, verify nothing.
  EXPECT_FALSE(verify_password("x", "plain"));
  EXPECT_FALSE(verify_password("x", "scrypt$40$8$1$AAAA$AAAA"));
  EXPECT_FALSE(verify_password("x", "scrypt$10$8$1$!!$AAAA"));
}

TEST(Scrypt, TheDefaultCostIsMemoryHard) {
  ScryptParams defaults;
  EXPECT_GE(128ULL * defaults.r << defaults.log_n, 32ULL << 20) << "under 32 MiB per hash";
}

TEST(Tokens, CarryTheirKindInAVisiblePrefixAndAreStoredAsSha256) {
  for (auto kind : {TokenKind::Session, TokenKind::Api, TokenKind::Enrollment, TokenKind::Agent}) {
    auto t = mint_token(kind);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(token_kind_of(t->secret), kind) << t->secret;
    EXPECT_EQ(t->hash, sha256_hex(t->secret));
    EXPECT_EQ(t->hash.size(), 64u);
    EXPECT_EQ(t->secret.rfind(t->hint, 0), 0u) << "the hint is the token's start";
    EXPECT_LT(t->hint.size() + 30, t->secret.size()) << "the hint gives most of the token away";
  }
  EXPECT_EQ(token_kind_of("flcp_api_"), std::nullopt);
  EXPECT_EQ(token_kind_of("ghp_abc"), std::nullopt);
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(RateLimiter, RefusesOverTheLimitUntilTheWindowPasses) {
  RateLimiter limiter({.max_events = 3, .window = std::chrono::milliseconds(1000)});
  const auto t0 = RateLimiter::Clock::now();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(limiter.blocked_for("k", t0).count(), 0);
    limiter.record("k", t0 + std::chrono::milliseconds(i * 100));
  }
  EXPECT_EQ(limiter.blocked_for("k", t0 + std::chrono::milliseconds(300)).count(), 700);
  EXPECT_EQ(limiter.blocked_for("other", t0).count(), 0) << "keys are apart";
  EXPECT_EQ(limiter.blocked_for("k", t0 + std::chrono::milliseconds(1000)).count(), 0) << "the first event aged out";
  limiter.clear("k");
  EXPECT_EQ(limiter.blocked_for("k", t0 + std::chrono::milliseconds(300)).count(), 0);
}

}  // namespace
