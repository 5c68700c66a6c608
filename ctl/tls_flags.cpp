// The TLS flags' checks, shared by run http and guard.
#include "ctl/tls_flags.h"

#include "ctl/flag_error.h"
#include "userspace/proxy/tls_session.h"

namespace faultline {

Status check_upstream_ca(bool terminate, bool given, const std::string& file) {
  if (!given) return {};
  FL_TRY(check_upstream_ca_flags(terminate, given, file));
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

}  // namespace faultline
