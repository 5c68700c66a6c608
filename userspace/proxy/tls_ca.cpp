// The local CA: keys, certificates and their files. EC P-256 everywhere: a
// P-256 key is generated in tens of microseconds where RSA-2048 takes tens of
// milliseconds (a leaf per server name must mint well under 5 ms), and every
// TLS client of the last decade verifies ECDSA P-256 with SHA-256.
#include "userspace/proxy/tls_ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "base/files.h"
#include "base/unique_fd.h"
#include "userspace/proxy/tls_openssl.h"

namespace faultline {
namespace {

PkeyPtr new_p256_key() { return PkeyPtr(EVP_EC_gen("P-256")); }

// A random positive 127-bit serial (RFC 5280: at most 20 bytes, positive).
bool set_random_serial(X509* x) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return false;
  bytes[0] &= 0x7f;
  bytes[0] |= 0x40;  // never a short serial
  BignumPtr bn(BN_bin2bn(bytes, sizeof(bytes), nullptr));
  return bn && BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x)) != nullptr;
}

bool add_conf_ext(X509* x, X509V3_CTX* ctx, int nid, const char* value) {
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value));
  return ext && X509_add_ext(x, ext.get(), -1) == 1;
}

std::string asn1_time_rfc3339(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "?";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::chrono::system_clock::time_point asn1_time_point(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string hostname_or_local() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string x509_pem(X509* x) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) return {};
  return bio_text(bio.get());
}

CertificateInfo describe_certificate(X509* x) {
  CertificateInfo info;
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio && X509_NAME_print_ex(bio.get(), X509_get_subject_name(x), 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0)
    info.subject = bio_text(bio.get());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(x, EVP_sha256(), md, &n) == 1) {
    static constexpr char hex[] = "0123456789ABCDEF";
    for (unsigned int i = 0; i < n; ++i) {
      if (i > 0) info.sha256_fingerprint += ':';
      info.sha256_fingerprint += hex[md[i] >> 4];
      info.sha256_fingerprint += hex[md[i] & 15];
    }
  }
  info.not_before = asn1_time_rfc3339(X509_get0_notBefore(x));
  info.not_after = asn1_time_rfc3339(X509_get0_notAfter(x));
  if (EVP_PKEY* pk = X509_get0_pubkey(x)) {
    char group[64] = {};
    size_t glen = 0;
    if (EVP_PKEY_is_a(pk, "EC") && EVP_PKEY_get_group_name(pk, group, sizeof(group), &glen) == 1)
      info.key_type = std::string("EC ") + (std::string(group) == "prime256v1" ? "P-256" : group);
    else
      info.key_type = std::string(EVP_PKEY_get0_type_name(pk) ? EVP_PKEY_get0_type_name(pk) : "?") + " " +
                      std::to_string(EVP_PKEY_get_bits(pk)) + " bits";
  }
  if (BignumPtr bn{ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr)}) {
    char* h = BN_bn2hex(bn.get());
    if (h != nullptr) info.serial = h;
    OPENSSL_free(h);
  }
  ERR_clear_error();
  return info;
}

// The key file must be the owner's alone: a CA key others can read lets them
// mint certificates every wrapped command trusts.
Status check_key_file_private(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_error("cannot stat " + path);
  if (st.st_uid != ::geteuid())
    return make_error(EPERM, "refusing CA key " + path + ": owned by uid " + std::to_string(st.st_uid) +
                                 ", not by us (uid " + std::to_string(::geteuid()) + ")");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
    return make_error(
        EPERM, "refusing CA key " + path + ": mode " + mode + " lets others read it (chmod 600 it, or rotate the CA)");
  }
  return {};
}

bool ca_file_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// mkdir -p of the parents (0755: /var/lib/faultline holds other state too), the
// CA folder itself private.
Status make_ca_dir(const std::string& dir) {
  for (size_t at = dir.find('/', 1); at != std::string::npos; at = dir.find('/', at + 1)) {
    const std::string parent = dir.substr(0, at);
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return errno_error("cannot create " + parent);
  }
  return ensure_private_dir(dir, true);
}

// The CA folder's lock (DIR/.lock, flock): creation and rotation hold it
// exclusively, loading shared, so that two first uses at once (a guard and
// faultd) cannot pair one's key with the other's certificate, and a load never
// reads a rotation half done.
class CaFolderLock {
 public:
  [[nodiscard]] static Result<CaFolderLock> take(const std::string& dir, int how) {
    const std::string path = dir + "/.lock";
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) return errno_error("cannot open the CA lock " + path);
    while (::flock(fd.get(), how) != 0) {
      if (errno != EINTR) return errno_error("cannot lock " + path);
    }
    return CaFolderLock(std::move(fd));
  }

 private:
  explicit CaFolderLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

Result<CertificateAuthority> load_unlocked(const CaFiles& files);

}  // namespace

std::string default_ca_dir() {
  const char* env = std::getenv("FAULTLINE_CA_DIR");
  return env != nullptr && env[0] != '\0' ? env : kDefaultCaDir;
}

// --- LeafCertificate ---

LeafCertificate::LeafCertificate(X509* cert, EVP_PKEY* key, std::string host,
                                 std::chrono::system_clock::time_point not_after)
    : cert_(cert), key_(key), host_(std::move(host)), not_after_(not_after) {}

LeafCertificate::~LeafCertificate() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

std::string LeafCertificate::cert_pem() const { return x509_pem(cert_); }

// --- CertificateAuthority ---

CertificateAuthority::CertificateAuthority(X509* cert, EVP_PKEY* key, CaValidity validity)
    : cert_(cert), key_(key), validity_(validity) {}

CertificateAuthority::CertificateAuthority(CertificateAuthority&& o) noexcept
    : cert_(std::exchange(o.cert_, nullptr)), key_(std::exchange(o.key_, nullptr)), validity_(o.validity_) {}

CertificateAuthority& CertificateAuthority::operator=(CertificateAuthority&& o) noexcept {
  if (this != &o) {
    X509_free(cert_);
    EVP_PKEY_free(key_);
    cert_ = std::exchange(o.cert_, nullptr);
    key_ = std::exchange(o.key_, nullptr);
    validity_ = o.validity_;
  }
  return *this;
}

CertificateAuthority::~CertificateAuthority() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

Result<CertificateAuthority> CertificateAuthority::generate(const CaValidity& validity) {
  PkeyPtr key = new_p256_key();
  if (!key) return make_error(0, with_openssl_errors("cannot generate the CA's P-256 key"));
  X509Ptr x(X509_new());
  // The name carries the creation time and a random tag (and the host, as OU),
  // so that a rotated CA and its predecessor never share a subject in a bundle.
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  struct tm tm {};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
  unsigned char tag[4];
  if (RAND_bytes(tag, sizeof(tag)) != 1) return make_error(0, with_openssl_errors("no randomness for the CA name"));
  char tag_hex[9];
  std::snprintf(tag_hex, sizeof(tag_hex), "%02x%02x%02x%02x", tag[0], tag[1], tag[2], tag[3]);
  const std::string cn = std::string("Faultline local CA ") + stamp + " " + tag_hex;
  const std::string host = hostname_or_local().substr(0, 64);
  X509_NAME* name = X509_get_subject_name(x.get());
  const long days = static_cast<long>(validity.ca.count() / 24);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x.get(), x.get(), nullptr, nullptr, 0);
  const bool ok = X509_set_version(x.get(), 2) == 1 && set_random_serial(x.get()) &&
                  X509_gmtime_adj(X509_getm_notBefore(x.get()), -validity.backdate.count()) != nullptr &&
                  X509_time_adj_ex(X509_getm_notAfter(x.get()), static_cast<int>(days), 0, nullptr) != nullptr &&
                  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                             reinterpret_cast<const unsigned char*>("Faultline"), -1, -1, 0) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_UTF8,
                                             reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) == 1 &&
                  X509_set_issuer_name(x.get(), name) == 1 && X509_set_pubkey(x.get(), key.get()) == 1 &&
                  add_conf_ext(x.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
                  add_conf_ext(x.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") &&
                  add_conf_ext(x.get(), &ctx, NID_subject_key_identifier, "hash") &&
                  X509_sign(x.get(), key.get(), EVP_sha256()) > 0;
  if (!ok) return make_error(0, with_openssl_errors("cannot make the CA certificate"));
  return CertificateAuthority(x.release(), key.release(), validity);
}

Result<CertificateAuthority> CertificateAuthority::from_pem(const std::string& cert_pem, const std::string& key_pem) {
  BioPtr cb(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  X509Ptr x(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  if (!x) return make_error(EINVAL, with_openssl_errors("the CA certificate is not a PEM certificate"));
  BioPtr kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  if (!key) return make_error(EINVAL, with_openssl_errors("the CA key is not a PEM private key"));
  if (X509_check_private_key(x.get(), key.get()) != 1)
    return make_error(EINVAL, with_openssl_errors("the CA key does not belong to the CA certificate"));
  if (X509_check_ca(x.get()) == 0) return make_error(EINVAL, "the CA certificate is not a CA (basicConstraints)");
  ERR_clear_error();
  return CertificateAuthority(x.release(), key.release(), CaValidity{});
}

Result<CertificateAuthority> CertificateAuthority::load(const CaFiles& files) {
  FL_TRY(ensure_private_dir(files.dir, false));
  auto lock = CaFolderLock::take(files.dir, LOCK_SH);
  if (!lock) return lock.error();
  return load_unlocked(files);
}

namespace {

Result<CertificateAuthority> load_unlocked(const CaFiles& files) {
  FL_TRY(check_key_file_private(files.key()));
  auto cert = read_text_file(files.cert());
  if (!cert) return cert.error();
  auto key = read_text_file(files.key());
  if (!key) return key.error();
  auto ca = CertificateAuthority::from_pem(*cert, *key);
  if (!ca) return make_error(ca.error().err, files.dir + ": " + ca.error().message);
  return ca;
}

}  // namespace

Status CertificateAuthority::save(const CaFiles& files) const {
  FL_TRY(make_ca_dir(files.dir));
  // The key first: a folder with a certificate and no key is refused on load, so
  // a crash between the two writes is noticed instead of papered over.
  FL_TRY(write_file_atomic(files.key(), key_pem()));
  return write_file_atomic(files.cert(), cert_pem());
}

std::string CertificateAuthority::cert_pem() const { return x509_pem(cert_); }

std::string CertificateAuthority::key_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key_, nullptr, nullptr, 0, nullptr, nullptr) != 1) return {};
  return bio_text(bio.get());
}

CertificateInfo CertificateAuthority::info() const { return describe_certificate(cert_); }

std::string leaf_host_problem(std::string_view host) {
  if (host.empty()) return "an empty host name";
  if (host.size() > 253) return "a host name of " + std::to_string(host.size()) + " characters (at most 253)";
  const std::string h(host);
  unsigned char addr[16];
  if (::inet_pton(AF_INET, h.c_str(), addr) == 1 || ::inet_pton(AF_INET6, h.c_str(), addr) == 1) return {};
  for (char c : host) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok) return "'" + h + "' is not a host name or IP address (character '" + std::string(1, c) + "')";
  }
  if (host.front() == '.' || host.back() == '.' || h.find("..") != std::string::npos)
    return "'" + h + "' has an empty label";
  return {};
}

Result<std::shared_ptr<const LeafCertificate>> CertificateAuthority::mint_leaf(std::string_view host_in) const {
  if (std::string why = leaf_host_problem(host_in); !why.empty())
    return input_error(EINVAL, "leaf certificate: " + why);
  std::string host(host_in);
  for (char& c : host) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  PkeyPtr key = new_p256_key();
  if (!key) return make_error(0, with_openssl_errors("cannot generate a leaf key for " + host));
  X509Ptr x(X509_new());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert_, x.get(), nullptr, nullptr, 0);
  // SAN built as a value, not through the config syntax: a host name is data.
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  GENERAL_NAME* gn = GENERAL_NAME_new();
  bool san_ok = names && gn != nullptr;
  if (san_ok) {
    if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str())) {
      GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else {
      ERR_clear_error();
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      san_ok = dns != nullptr && ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size())) == 1;
      if (dns != nullptr) GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    san_ok = san_ok && sk_GENERAL_NAME_push(names.get(), gn) > 0;
    if (!san_ok) GENERAL_NAME_free(gn);
  }
  const auto leaf_secs = static_cast<long>(validity_.leaf.count());
  const bool ok = san_ok && X509_set_version(x.get(), 2) == 1 && set_random_serial(x.get()) &&
                  X509_gmtime_adj(X509_getm_notBefore(x.get()), -validity_.backdate.count()) != nullptr &&
                  X509_gmtime_adj(X509_getm_notAfter(x.get()), leaf_secs) != nullptr &&
                  // CN is at most 64 characters; SAN is what clients check.
                  (host.size() > 64 ||
                   X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                              reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0) == 1) &&
                  X509_set_issuer_name(x.get(), X509_get_subject_name(cert_)) == 1 &&
                  X509_set_pubkey(x.get(), key.get()) == 1 &&
                  X509_add1_ext_i2d(x.get(), NID_subject_alt_name, names.get(), host.size() > 64 ? 1 : 0, 0) == 1 &&
                  add_conf_ext(x.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
                  add_conf_ext(x.get(), &ctx, NID_key_usage, "critical,digitalSignature") &&
                  add_conf_ext(x.get(), &ctx, NID_ext_key_usage, "serverAuth") &&
                  add_conf_ext(x.get(), &ctx, NID_authority_key_identifier, "keyid:always") &&
                  X509_sign(x.get(), key_, EVP_sha256()) > 0;
  if (!ok) return make_error(0, with_openssl_errors("cannot mint a leaf certificate for " + host));
  const auto not_after = asn1_time_point(X509_get0_notAfter(x.get()));
  return std::shared_ptr<const LeafCertificate>(
      std::make_shared<LeafCertificate>(x.release(), key.release(), std::move(host), not_after));
}

Result<CaOpened> open_or_create_ca(const CaFiles& files, const CaValidity& validity) {
  FL_TRY(make_ca_dir(files.dir));
  auto lock = CaFolderLock::take(files.dir, LOCK_EX);
  if (!lock) return lock.error();
  const bool has_key = ca_file_exists(files.key());
  const bool has_cert = ca_file_exists(files.cert());
  if (has_key && has_cert) {
    auto ca = load_unlocked(files);
    if (!ca) return ca.error();
    return CaOpened{std::move(*ca), false};
  }
  if (has_key != has_cert)
    return make_error(ENOENT, "the CA folder " + files.dir + " has " +
                                  (has_key ? "ca.key but no ca.pem" : "ca.pem but no ca.key") +
                                  ": refusing to replace half a CA (move the folder away, then init)");
  auto ca = CertificateAuthority::generate(validity);
  if (!ca) return ca.error();
  FL_TRY(ca->save(files));
  return CaOpened{std::move(*ca), true};
}

Result<CertificateAuthority> rotate_ca(const CaFiles& files, const CaValidity& validity) {
  FL_TRY(ensure_private_dir(files.dir, false));
  auto lock = CaFolderLock::take(files.dir, LOCK_EX);
  if (!lock) return lock.error();
  auto old = load_unlocked(files);
  if (!old) return old.error();
  auto fresh = CertificateAuthority::generate(validity);
  if (!fresh) return fresh.error();
  // Order: keep the old certificate, then replace key and certificate. The old
  // key goes with the replacement (write_file_atomic renames over it).
  FL_TRY(write_file_atomic(files.previous_cert(), old->cert_pem()));
  FL_TRY(fresh->save(files));
  return fresh;
}

Result<std::string> previous_ca_pem(const CaFiles& files) {
  if (!ca_file_exists(files.previous_cert())) return std::string();
  return read_text_file(files.previous_cert());
}

Result<std::string> ca_certificates_to_trust(const CaFiles& files) {
  auto current = read_text_file(files.cert());
  if (!current) return current.error();
  auto previous = previous_ca_pem(files);
  if (!previous) return previous.error();
  return *current + *previous;
}

Result<std::vector<CertificateInfo>> describe_pem_certificates(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<CertificateInfo> out;
  while (X509Ptr x{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)})
    out.push_back(describe_certificate(x.get()));
  ERR_clear_error();  // the end of the text reads as "no start line"
  if (out.empty()) return make_error(EINVAL, "no PEM certificate in the text");
  return out;
}

}  // namespace faultline
