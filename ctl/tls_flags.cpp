// The TLS flags' checks, shared by run http and guard.
#include "ctl/tls_flags.h"

#include "ctl/flag_error.h"
#include "userspace/proxy/tls_session.h"

namespace faultline {

Status check_upstream_ca(bool terminate, bool given, const std::string& file) {
  if (!given) return {};
  if (!terminate)
    return bad("--upstream-ca needs --terminate-tls: without termination the client verifies the upstream itself");
  if (file.empty()) return bad("--upstream-ca: empty file name");
  // The same load termination does, now: its error names the file and why.
  TlsClientOptions o;
  o.upstream_ca_file = file;
  if (auto ctx = TlsClientContext::create(o); !ctx) {
    std::string why = ctx.error().message;  // "upstream_ca FILE: ..."
    if (why.rfind("upstream_ca ", 0) == 0) why.erase(0, 12);
    return bad("--upstream-ca " + why);
  }
  return {};
}

bool target_is_tls(const TcpTarget& target, bool declared) {
  if (declared) return true;
  if (target.dests.empty()) return false;
  for (const auto& d : target.dests)
    if (d.ports.lo != 443 || d.ports.hi != 443) return false;
  return true;
}

Status check_fault_on_tls(const HttpFault& f, const std::string& fault_flag, const std::string& target) {
  const std::string why = needs_plaintext(f);
  if (why.empty()) return {};
  return bad(fault_flag + " on " + target + ": " + why +
             ", which TLS hides without --terminate-tls (matched by SNI: delay and reset only)");
}

}  // namespace faultline
