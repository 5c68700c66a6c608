// faultctl ca init|show|export|rotate: the local CA of TLS termination, as files
// in a root-only folder (userspace/proxy/tls_ca.h does the work).
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "ctl/ca_args.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "userspace/proxy/tls_ca.h"

namespace faultline {
namespace {

void print_info(const std::string& title, const CertificateInfo& info) {
  std::cout << title << "\n"
            << "  subject:      " << info.subject << "\n"
            << "  SHA-256:      " << info.sha256_fingerprint << "\n"
            << "  valid:        " << info.not_before << " to " << info.not_after << "\n"
            << "  key:          " << info.key_type << "\n"
            << "  serial:       " << info.serial << "\n";
}

nlohmann::json info_json(const CertificateInfo& info) {
  return {{"subject", info.subject},       {"sha256_fingerprint", info.sha256_fingerprint},
          {"not_before", info.not_before}, {"not_after", info.not_after},
          {"key_type", info.key_type},     {"serial", info.serial}};
}

// The previous CA's certificate, if a rotation left one.
Result<std::optional<CertificateInfo>> previous_info(const CaFiles& files) {
  auto pem = previous_ca_pem(files);
  if (!pem) return pem.error();
  if (pem->empty()) return std::optional<CertificateInfo>();
  auto described = describe_pem_certificates(*pem);
  if (!described) return make_error(EINVAL, files.previous_cert() + ": " + described.error().message);
  return std::optional<CertificateInfo>(described->front());
}

void print_files(const CaFiles& files, bool has_previous) {
  std::cout << "  files:        " << files.cert() << " (certificate), " << files.key() << " (key, mode 0600)\n";
  if (has_previous) std::cout << "                " << files.previous_cert() << " (the CA before the last rotation)\n";
}

// show and rotate need a CA: without one (neither file), say how to make it.
bool no_ca_there(const CaFiles& files, const std::string& who) {
  struct stat st {};
  if (::stat(files.cert().c_str(), &st) == 0 || ::stat(files.key().c_str(), &st) == 0) return false;
  std::cerr << who << ": no CA in " << files.dir << " (faultctl ca init creates one)\n";
  return true;
}

int show(const CaArgs& a, const CaFiles& files, const std::string& who) {
  if (no_ca_there(files, who)) return kExitFailure;
  auto ca = CertificateAuthority::load(files);
  if (!ca) return report_error(who, ca.error());
  auto prev = previous_info(files);
  if (!prev) return report_error(who, prev.error());
  if (a.json) {
    nlohmann::json j = {
        {"dir", files.dir}, {"cert", files.cert()}, {"key", files.key()}, {"ca", info_json(ca->info())}};
    if (*prev) j["previous"] = info_json(**prev);
    std::cout << j.dump(2) << "\n";
    return kExitCompleted;
  }
  print_info("Faultline local CA (" + files.dir + ")", ca->info());
  print_files(files, prev->has_value());
  if (*prev) print_info("previous CA (trusted during the overlap, signs nothing)", **prev);
  return kExitCompleted;
}

int init(const CaFiles& files, const std::string& who) {
  auto opened = open_or_create_ca(files);
  if (!opened) return report_error(who, opened.error());
  std::cout << (opened->created ? "created the local CA in " : "the local CA already exists in ") << files.dir << "\n";
  print_info("Faultline local CA", opened->ca.info());
  print_files(files, false);
  return kExitCompleted;
}

int export_pem(const CaArgs& a, const CaFiles& files, const std::string& who) {
  auto opened = open_or_create_ca(files);
  if (!opened) return report_error(who, opened.error());
  if (opened->created) std::cerr << who << ": created the local CA in " << files.dir << "\n";
  std::string pem = opened->ca.cert_pem();
  if (a.with_previous) {
    auto prev = previous_ca_pem(files);
    if (!prev) return report_error(who, prev.error());
    pem += *prev;
  }
  if (a.out.empty()) {
    std::cout << pem;
    return kExitCompleted;
  }
  if (auto st = write_file_atomic(a.out, pem); !st) return report_error(who, st.error());
  // A certificate is public: whoever runs the client must be able to read it.
  if (::chmod(a.out.c_str(), 0644) != 0) return report_error(who, errno_error("cannot chmod 644 " + a.out));
  std::cerr << who << ": wrote " << a.out << " (" << opened->ca.info().sha256_fingerprint << ")\n";
  return kExitCompleted;
}

int rotate(const CaFiles& files, const std::string& who) {
  if (no_ca_there(files, who)) return kExitFailure;
  auto before = CertificateAuthority::load(files);
  if (!before) return report_error(who, before.error());
  const CertificateInfo old = before->info();
  auto fresh = rotate_ca(files);
  if (!fresh) return report_error(who, fresh.error());
  std::cout << "rotated the local CA in " << files.dir << ": new leaves are signed by the new CA once the proxies\n"
            << "using it restart; the old key is deleted, its certificate kept as " << files.previous_cert() << "\n";
  print_info("Faultline local CA", fresh->info());
  print_info("previous CA", old);
  return kExitCompleted;
}

int run_ca(const CaArgs& a) {
  const std::string who = "faultctl ca " + a.action;
  const CaFiles files{a.dir.empty() ? default_ca_dir() : a.dir};
  // The default folder is root's (its key signs what wrapped commands trust);
  // a CA of one's own is one --dir away.
  if (files.dir == kDefaultCaDir && ::geteuid() != 0) {
    std::cerr << who << ": the CA in " << kDefaultCaDir
              << " is root's: run as root (or --dir DIR for a CA of your own)\n";
    return kExitFailure;
  }
  if (a.action == "init") return init(files, who);
  if (a.action == "show") return show(a, files, who);
  if (a.action == "export") return export_pem(a, files, who);
  return rotate(files, who);
}

}  // namespace

int cmd_ca(const std::vector<std::string>& args) {
  return run_command("faultctl ca", parse_ca_args(args), kRootNever, run_ca);
}

}  // namespace faultline
