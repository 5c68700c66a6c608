// `faultctl ca` words: one action and a few flags, each allowed with the actions
// it means something to.
#include "ctl/ca_args.h"

#include <set>

#include "ctl/flag_error.h"

namespace faultline {
namespace {

constexpr const char* kCaUsage =
    "usage: faultctl ca init   [--dir DIR]\n"
    "       faultctl ca show   [--dir DIR] [--json]\n"
    "       faultctl ca export [--dir DIR] [--out FILE] [--with-previous]\n"
    "       faultctl ca rotate [--dir DIR]\n"
    "  The local CA of TLS termination (an EC P-256 key and a self-signed\n"
    "  certificate, 2 years): leaf certificates for the names a terminated\n"
    "  connection asks for are signed with it, so the wrapped command must trust it.\n"
    "  init:    create the CA if there is none (TLS termination also creates it on\n"
    "           first use); print it\n"
    "  show:    subject, SHA-256 fingerprint, validity, key type, files\n"
    "  export:  the CA certificate as PEM, to stdout or --out FILE (mode 0644);\n"
    "           --with-previous adds the certificate of the CA before the last\n"
    "           rotation, for trust stores that must accept both during the overlap\n"
    "  rotate:  a new CA replaces the current one, whose key is deleted and whose\n"
    "           certificate is kept as ca-previous.pem\n"
    "  --dir DIR  the CA folder (default $FAULTLINE_CA_DIR, else\n"
    "             /var/lib/faultline/ca, which needs root); mode 0700, ca.key 0600\n"
    "  Reference: docs/tls.md\n";

constexpr Example kCaExamples[] = {
    {"create the CA and see its fingerprint", "faultctl ca init"},
    {"the certificate for a container's trust store", "faultctl ca export --out /tmp/faultline-ca.pem"},
    {"a CA of your own for tests, without root", "faultctl ca init --dir /tmp/test-ca"},
    {"replace the CA, keeping the old certificate for the overlap", "faultctl ca rotate"},
};

const std::set<std::string> kActions = {"init", "show", "export", "rotate"};

}  // namespace

Result<Parsed<CaArgs>> parse_ca_args(const std::vector<std::string>& args) {
  CaArgs a;
  std::vector<std::string> positional;
  bool out_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string w = args[i];
    if (w == "-h" || w == "--help") return Parsed<CaArgs>(HelpText{with_examples(kCaUsage, kCaExamples)});
    std::string value;
    bool has_value = false;
    if (auto eq = w.find('='); w.starts_with("--") && eq != std::string::npos) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
      has_value = true;
    }
    auto take_value = [&](const std::string& flag) -> Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= args.size() || args[i + 1].starts_with("--")) return bad(flag + " needs a value");
      return args[++i];
    };
    if (w == "--dir" || w == "--out") {
      auto v = take_value(w);
      if (!v) return v.error();
      if (v->empty()) return bad(w + ": an empty path");
      (w == "--dir" ? a.dir : a.out) = *v;
      if (w == "--out") out_given = true;
    } else if (w == "--json" || w == "--with-previous") {
      if (has_value) return bad(w + " takes no value");
      (w == "--json" ? a.json : a.with_previous) = true;
    } else if (w.size() > 1 && w.front() == '-') {
      return bad("unknown flag '" + w + "'");
    } else {
      positional.push_back(w);
    }
  }
  if (positional.empty()) return bad("missing the action: faultctl ca init|show|export|rotate");
  a.action = positional[0];
  if (!kActions.contains(a.action)) return bad("unknown action '" + a.action + "' (init, show, export, rotate)");
  if (positional.size() > 1) return bad("unexpected argument '" + positional[1] + "'");
  if (out_given && a.action != "export") return bad("--out is an option of export");
  if (a.with_previous && a.action != "export") return bad("--with-previous is an option of export");
  if (a.json && a.action != "show") return bad("--json is an option of show");
  return Parsed<CaArgs>(std::move(a));
}

}  // namespace faultline
