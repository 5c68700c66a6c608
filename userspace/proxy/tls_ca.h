// The local certificate authority of TLS termination: an EC P-256 key and a
// self-signed certificate in a root-only folder, created on first use, rotated
// on demand; and the leaf certificates it signs, one per server name.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

struct x509_st;
struct evp_pkey_st;

namespace faultline {

// Where the CA lives unless told otherwise: root's, next to faultd's state.
inline constexpr const char* kDefaultCaDir = "/var/lib/faultline/ca";

// The CA folder: FAULTLINE_CA_DIR if set, else kDefaultCaDir.
[[nodiscard]] std::string default_ca_dir();

// The files of a CA folder (mode 0700, ours): ca.key (0600), ca.pem (0600: the
// folder is the boundary; `faultctl ca export` shares the certificate), and after
// a rotation ca-previous.pem, the certificate of the CA before it.
struct CaFiles {
  std::string dir;
  [[nodiscard]] std::string key() const { return dir + "/ca.key"; }
  [[nodiscard]] std::string cert() const { return dir + "/ca.pem"; }
  [[nodiscard]] std::string previous_cert() const { return dir + "/ca-previous.pem"; }
};

// What `faultctl ca show` prints of a certificate.
struct CertificateInfo {
  std::string subject;             // RFC 2253: "CN=Faultline local CA ...,O=Faultline"
  std::string sha256_fingerprint;  // "AB:CD:..." (32 bytes), as openssl x509 -fingerprint prints it
  std::string not_before;          // RFC 3339, UTC
  std::string not_after;
  std::string key_type;  // "EC P-256"
  std::string serial;    // hex
};

// A minted certificate with its private key, ready for a TLS server context.
// Immutable and shared (the leaf cache hands out shared_ptrs to it).
class LeafCertificate {
 public:
  LeafCertificate(x509_st* cert, evp_pkey_st* key, std::string host, std::chrono::system_clock::time_point not_after);
  ~LeafCertificate();
  LeafCertificate(const LeafCertificate&) = delete;
  LeafCertificate& operator=(const LeafCertificate&) = delete;

  [[nodiscard]] x509_st* cert() const { return cert_; }
  [[nodiscard]] evp_pkey_st* key() const { return key_; }
  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] std::chrono::system_clock::time_point not_after() const { return not_after_; }
  [[nodiscard]] std::string cert_pem() const;

 private:
  x509_st* cert_;
  evp_pkey_st* key_;
  std::string host_;
  std::chrono::system_clock::time_point not_after_;
};

// How long certificates last. The CA's is long enough not to surprise anyone
// (rotate ends it early); a leaf's is a day, re-minted by the cache before it ends.
struct CaValidity {
  std::chrono::hours ca{24 * 365 * 2};
  std::chrono::seconds leaf{std::chrono::hours(24)};
  std::chrono::seconds backdate{std::chrono::hours(1)};  // notBefore in the past: clients with a clock behind
};

class CertificateAuthority {
 public:
  CertificateAuthority(CertificateAuthority&&) noexcept;
  CertificateAuthority& operator=(CertificateAuthority&&) noexcept;
  ~CertificateAuthority();

  // A new CA in memory (nothing written): a fresh key and a self-signed certificate.
  [[nodiscard]] static Result<CertificateAuthority> generate(const CaValidity& validity = {});
  // The CA of a folder. The folder must be private (ensure_private_dir) and the
  // key readable by its owner alone; the key must match the certificate.
  [[nodiscard]] static Result<CertificateAuthority> load(const CaFiles& files);
  // From PEM text (tests, and the files once read).
  [[nodiscard]] static Result<CertificateAuthority> from_pem(const std::string& cert_pem, const std::string& key_pem);

  [[nodiscard]] Status save(const CaFiles& files) const;

  [[nodiscard]] std::string cert_pem() const;
  [[nodiscard]] std::string key_pem() const;
  [[nodiscard]] CertificateInfo info() const;

  // A leaf for `host` (a DNS name or an IP address): SAN = host, serverAuth,
  // signed with SHA-256, its own fresh P-256 key. Errors name a bad host.
  [[nodiscard]] Result<std::shared_ptr<const LeafCertificate>> mint_leaf(std::string_view host) const;

  [[nodiscard]] x509_st* cert() const { return cert_; }
  [[nodiscard]] const CaValidity& validity() const { return validity_; }

 private:
  CertificateAuthority(x509_st* cert, evp_pkey_st* key, CaValidity validity);
  x509_st* cert_ = nullptr;
  evp_pkey_st* key_ = nullptr;
  CaValidity validity_;
};

// What `faultctl ca init|rotate` did.
struct CaOpened {
  CertificateAuthority ca;
  bool created = false;
};

// The CA of the folder, created (folder, key, certificate) when there is none.
// A folder with only one of ca.key and ca.pem is refused, never overwritten.
[[nodiscard]] Result<CaOpened> open_or_create_ca(const CaFiles& files, const CaValidity& validity = {});

// A new CA replaces the current one; the current certificate is kept as
// ca-previous.pem (replacing an older one) and its key is deleted.
[[nodiscard]] Result<CertificateAuthority> rotate_ca(const CaFiles& files, const CaValidity& validity = {});

// The previous certificate's PEM, or "" when there was no rotation.
[[nodiscard]] Result<std::string> previous_ca_pem(const CaFiles& files);

// The certificates a client of termination must trust: the current CA's, then
// the previous one's while a rotation's overlap lasts (what the trust files get).
[[nodiscard]] Result<std::string> ca_certificates_to_trust(const CaFiles& files);

// Every certificate of a PEM text, described (for show and tests).
[[nodiscard]] Result<std::vector<CertificateInfo>> describe_pem_certificates(const std::string& pem);

// A host name or IP address a leaf may be minted for: empty string if it is one,
// else why not. ("*" wildcards are not minted: a leaf names exactly one host.)
[[nodiscard]] std::string leaf_host_problem(std::string_view host);

}  // namespace faultline
