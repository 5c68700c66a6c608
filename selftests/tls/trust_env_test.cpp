// The trust files and variables a wrapped command gets: the bundle holds the
// system store and our CA, SSL_CERT_FILE never names our CA alone.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "base/files.h"
#include "userspace/proxy/tls_ca.h"
#include "userspace/proxy/tls_trust_env.h"

namespace {

TEST(TrustEnv, BundleIsSystemStorePlusOurCa) {
  char tmpl[] = "/tmp/fl-trust-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto ca = faultline::CertificateAuthority::generate();
  ASSERT_TRUE(ca.ok());
  auto files = faultline::write_trust_files(dir, ca->cert_pem());
  ASSERT_TRUE(files.ok()) << files.error().describe();
  auto system = faultline::read_system_trust_store();
  ASSERT_TRUE(system.ok()) << system.error().describe();
  auto bundle = faultline::read_text_file(files->bundle);
  ASSERT_TRUE(bundle.ok());
  EXPECT_EQ(bundle->find(*system), 0u) << "the bundle starts with the system store";
  EXPECT_NE(bundle->find(ca->cert_pem()), std::string::npos) << "the bundle holds our CA";
  auto certs = faultline::describe_pem_certificates(*bundle);
  auto sys_certs = faultline::describe_pem_certificates(*system);
  ASSERT_TRUE(certs.ok() && sys_certs.ok());
  EXPECT_EQ(certs->size(), sys_certs->size() + 1);
  auto ours = faultline::read_text_file(files->ca_pem);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(*ours, ca->cert_pem());
  for (const auto& p : {files->ca_pem, files->bundle}) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u) << p;
  }

  std::map<std::string, std::string> env;
  for (const auto& [k, v] : faultline::trust_environment(*files)) env[k] = v;
  EXPECT_EQ(env.size(), 4u);
  EXPECT_EQ(env["NODE_EXTRA_CA_CERTS"], files->ca_pem);
  EXPECT_EQ(env["SSL_CERT_FILE"], files->bundle);
  EXPECT_EQ(env["REQUESTS_CA_BUNDLE"], files->bundle);
  EXPECT_EQ(env["CURL_CA_BUNDLE"], files->bundle);
  std::filesystem::remove_all(dir);
}

TEST(TrustEnv, NoCertificateIsRefused) {
  auto r = faultline::write_trust_files("/tmp", "not a certificate");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no CA certificate"), std::string::npos) << r.error().message;
}

}  // namespace
