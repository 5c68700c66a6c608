// The local CA: files and their modes, loading refuses what is not private or
// does not match, rotation keeps the previous certificate, leaves verify
// against the CA with the SAN of their host.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "userspace/proxy/tls_ca.h"
#include "userspace/proxy/tls_leaf_cache.h"

namespace {

namespace fs = std::filesystem;
using faultline::CaFiles;
using faultline::CertificateAuthority;

class CaDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fl-ca-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    files_.dir = root_ + "/var/lib/faultline/ca";
  }
  void TearDown() override { fs::remove_all(root_); }

  static unsigned mode_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::string root_;
  CaFiles files_;
};

// Verifies leaf_pem against ca_pem for `host`, as a client would: the chain and the host name.
int verify_leaf(const std::string& ca_pem, const std::string& leaf_pem, const std::string& host) {
  BIO* cb = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  BIO* lb = BIO_new_mem_buf(leaf_pem.data(), static_cast<int>(leaf_pem.size()));
  X509* ca = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  X509* leaf = PEM_read_bio_X509(lb, nullptr, nullptr, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  const int ok = X509_verify_cert(ctx);
  const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  X509_free(leaf);
  BIO_free(cb);
  BIO_free(lb);
  return err;
}

TEST_F(CaDir, CreatedOnFirstUseWithPrivateModes) {
  auto opened = faultline::open_or_create_ca(files_);
  ASSERT_TRUE(opened.ok()) << opened.error().describe();
  EXPECT_TRUE(opened->created);
  EXPECT_EQ(mode_of(files_.dir), 0700u);
  EXPECT_EQ(mode_of(files_.key()), 0600u);
  EXPECT_EQ(mode_of(files_.cert()), 0600u);
  const auto info = opened->ca.info();
  EXPECT_EQ(info.key_type, "EC P-256");
  EXPECT_NE(info.subject.find("CN=Faultline local CA"), std::string::npos) << info.subject;
  EXPECT_EQ(info.sha256_fingerprint.size(), 32u * 3 - 1) << info.sha256_fingerprint;
  EXPECT_LT(info.not_before, info.not_after);

  auto again = faultline::open_or_create_ca(files_);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->ca.info().sha256_fingerprint, info.sha256_fingerprint);
}

TEST_F(CaDir, FirstUsesAtOnceMakeOneCa) {
  std::vector<std::string> fingerprints(8);
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    threads.emplace_back([&, i] {
      auto opened = faultline::open_or_create_ca(files_);
      if (opened)
        fingerprints[i] = opened->ca.info().sha256_fingerprint;
      else
        errors[i] = opened.error().describe();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < fingerprints.size(); ++i) {
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(fingerprints[i], fingerprints[0]) << "thread " << i;
  }
  auto loaded = CertificateAuthority::load(files_);
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  EXPECT_EQ(loaded->info().sha256_fingerprint, fingerprints[0]);
}

TEST_F(CaDir, LoadRefusesAKeyOthersCanRead) {
  ASSERT_TRUE(faultline::open_or_create_ca(files_).ok());
  ASSERT_EQ(::chmod(files_.key().c_str(), 0644), 0);
  auto r = CertificateAuthority::load(files_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("mode 0644 lets others read it"), std::string::npos) << r.error().message;
}

TEST_F(CaDir, LoadRefusesAFolderOthersCanWrite) {
  ASSERT_TRUE(faultline::open_or_create_ca(files_).ok());
  ASSERT_EQ(::chmod(files_.dir.c_str(), 0777), 0);
  auto r = CertificateAuthority::load(files_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("others can write to it"), std::string::npos) << r.error().message;
}

TEST_F(CaDir, HalfACaIsRefusedNotReplaced) {
  ASSERT_TRUE(faultline::open_or_create_ca(files_).ok());
  fs::remove(files_.key());
  auto r = faultline::open_or_create_ca(files_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ca.pem but no ca.key"), std::string::npos) << r.error().message;
  EXPECT_TRUE(fs::exists(files_.cert()));
}

TEST_F(CaDir, KeyOfAnotherCaIsRefused) {
  auto a = CertificateAuthority::generate();
  auto b = CertificateAuthority::generate();
  ASSERT_TRUE(a.ok() && b.ok());
  auto mixed = CertificateAuthority::from_pem(a->cert_pem(), b->key_pem());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("does not belong to the CA certificate"), std::string::npos)
      << mixed.error().message;
  auto garbage = CertificateAuthority::from_pem("not pem", a->key_pem());
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("not a PEM certificate"), std::string::npos) << garbage.error().message;
}

TEST_F(CaDir, RotateKeepsThePreviousCertificate) {
  auto first = faultline::open_or_create_ca(files_);
  ASSERT_TRUE(first.ok());
  const std::string old_fp = first->ca.info().sha256_fingerprint;
  const std::string old_key = first->ca.key_pem();
  auto rotated = faultline::rotate_ca(files_);
  ASSERT_TRUE(rotated.ok()) << rotated.error().describe();
  EXPECT_NE(rotated->info().sha256_fingerprint, old_fp);
  EXPECT_NE(rotated->info().subject, first->ca.info().subject);
  auto prev = faultline::previous_ca_pem(files_);
  ASSERT_TRUE(prev.ok());
  auto described = faultline::describe_pem_certificates(*prev);
  ASSERT_TRUE(described.ok());
  ASSERT_EQ(described->size(), 1u);
  EXPECT_EQ((*described)[0].sha256_fingerprint, old_fp);
  EXPECT_EQ(mode_of(files_.previous_cert()), 0600u);
  // Clients are told to trust both during the overlap: the current one first.
  auto trusted = faultline::ca_certificates_to_trust(files_);
  ASSERT_TRUE(trusted.ok());
  auto both = faultline::describe_pem_certificates(*trusted);
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].sha256_fingerprint, rotated->info().sha256_fingerprint);
  EXPECT_EQ((*both)[1].sha256_fingerprint, old_fp);
  // The old key is gone: the folder holds the new one only.
  auto loaded = CertificateAuthority::load(files_);
  ASSERT_TRUE(loaded.ok());
  EXPECT_NE(loaded->key_pem(), old_key);
  EXPECT_EQ(loaded->info().sha256_fingerprint, rotated->info().sha256_fingerprint);
}

TEST_F(CaDir, RotateWithoutACaSaysSo) {
  auto r = faultline::rotate_ca(files_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().describe().find(files_.dir), std::string::npos) << r.error().describe();
}

TEST(Leaf, VerifiesAgainstTheCaForItsHostOnly) {
  auto ca = CertificateAuthority::generate();
  ASSERT_TRUE(ca.ok());
  for (const std::string host : {"api.example.test", "127.0.0.1", "::1"}) {
    auto leaf = ca->mint_leaf(host);
    ASSERT_TRUE(leaf.ok()) << host << ": " << leaf.error().describe();
    EXPECT_EQ(verify_leaf(ca->cert_pem(), (*leaf)->cert_pem(), host), X509_V_OK) << host;
    EXPECT_EQ(verify_leaf(ca->cert_pem(), (*leaf)->cert_pem(), "other.example.test"), X509_V_ERR_HOSTNAME_MISMATCH)
        << host;
  }
  auto other = CertificateAuthority::generate();
  ASSERT_TRUE(other.ok());
  auto leaf = ca->mint_leaf("api.example.test");
  ASSERT_TRUE(leaf.ok());
  EXPECT_NE(verify_leaf(other->cert_pem(), (*leaf)->cert_pem(), "api.example.test"), X509_V_OK);
}

TEST(Leaf, ShortValidityAndUpperCaseFolded) {
  auto ca = CertificateAuthority::generate();
  ASSERT_TRUE(ca.ok());
  auto leaf = ca->mint_leaf("MiXeD.Example.Test");
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ((*leaf)->host(), "mixed.example.test");
  const auto left = (*leaf)->not_after() - std::chrono::system_clock::now();
  EXPECT_GT(left, std::chrono::hours(23));
  EXPECT_LE(left, std::chrono::hours(24) + std::chrono::minutes(1));
}

TEST(Leaf, BadHostsAreRefusedByName) {
  auto ca = CertificateAuthority::generate();
  ASSERT_TRUE(ca.ok());
  struct Case {
    std::string host, error_has;
  };
  for (const auto& c : std::vector<Case>{{"", "empty host name"},
                                         {"a,DNS:evil.test", "not a host name or IP address (character ',')"},
                                         {"*.example.test", "character '*'"},
                                         {"a..b", "empty label"},
                                         {std::string(254, 'a'), "at most 253"}}) {
    auto r = ca->mint_leaf(c.host);
    ASSERT_FALSE(r.ok()) << c.host;
    EXPECT_TRUE(r.error().bad_input);
    EXPECT_NE(r.error().message.find(c.error_has), std::string::npos) << r.error().message;
  }
}

TEST(LeafCacheTest, CachedLeafIsTheSameAndLruIsBounded) {
  auto ca = CertificateAuthority::generate();
  ASSERT_TRUE(ca.ok());
  faultline::LeafCache cache(std::make_shared<CertificateAuthority>(std::move(*ca)), {.capacity = 2});
  auto a1 = cache.get("a.test");
  auto a2 = cache.get("A.TEST");
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());
  ASSERT_TRUE(cache.get("b.test").ok());
  ASSERT_TRUE(cache.get("a.test").ok());  // a is now the most recent
  ASSERT_TRUE(cache.get("c.test").ok());  // evicts b
  auto s = cache.stats();
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.mints, 3u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.evictions, 1u);
  auto a3 = cache.get("a.test");
  ASSERT_TRUE(a3.ok());
  EXPECT_EQ(a3->get(), a1->get());
  ASSERT_TRUE(cache.get("b.test").ok());
  EXPECT_EQ(cache.stats().mints, 4u);
}

TEST(LeafCacheTest, LeafNearItsEndIsMintedAgain) {
  faultline::CaValidity short_leaves;
  short_leaves.leaf = std::chrono::minutes(30);
  auto ca = CertificateAuthority::generate(short_leaves);
  ASSERT_TRUE(ca.ok());
  faultline::LeafCache cache(std::make_shared<CertificateAuthority>(std::move(*ca)),
                             {.renew_before = std::chrono::hours(1)});
  auto a = cache.get("a.test");
  auto b = cache.get("a.test");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(cache.stats().mints, 2u);
}

}  // namespace
