// Egress rules (allow/deny by address, CIDR, port, protocol), redirect rules, and
// their compilation into the sockaddr programs' LPM tries. Shared vocabulary: the
// guard and policy files (enforcement) compile their rules here, and a TCP stream
// fault its redirect of the target to the proxy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/units.h"
#include "faultline/sockaddr_abi.h"
#include "userspace/net/address.h"

namespace faultline {

enum class Verdict { Allow, Deny };

struct EgressRule {
  Verdict verdict = Verdict::Allow;
  Prefix prefix;
  PortRange ports;    // 0-0 = any
  uint8_t proto = 0;  // 0 = any
  std::string text;   // as written, for reports
};

// "CIDR", "CIDR:PORT", "CIDR:A-B", "[IPv6CIDR]:PORT", optional "/tcp" or "/udp" suffix
// after the port ("10.0.0.0/8:53/udp").
[[nodiscard]] Result<EgressRule> parse_rule(Verdict v, const std::string& text);

struct CompiledTrie {
  std::vector<std::pair<fl_sa_key, fl_sa_bucket>> entries;
};

// For each prefix of one verdict: the rules of that verdict covering it, longest
// prefix first, so one LPM lookup in the program finds every candidate.
[[nodiscard]] Result<CompiledTrie> compile_rules(const std::vector<EgressRule>& rules, Verdict v);

// Writes both tries into the maps (they must be empty). Returns the policy flags
// saying which tries hold rules (FL_SA_HAS_DENY, FL_SA_HAS_ALLOW): the program
// skips the lookup in an empty one.
[[nodiscard]] Result<uint32_t> load_rules(const std::vector<EgressRule>& rules, int deny_fd, int allow_fd);

[[nodiscard]] std::string decision_name(uint8_t v);

// "--redirect DEST=TARGET": calls to DEST (written as an egress rule: CIDR, port or
// range, optional /tcp or /udp) that the policy lets through go to TARGET, one
// address and port of DEST's family ("127.0.0.1:8080", "[::1]:8080").
struct RedirectRule {
  EgressRule dest;
  fl_addr target{};  // IPv4-mapped for IPv4
  uint16_t target_port = 0;
  std::string text;  // as written
  // "127.0.0.1:8080", "[::1]:8080"
  [[nodiscard]] std::string target_text() const;
};

[[nodiscard]] Result<RedirectRule> parse_redirect(const std::string& text);

struct CompiledRedirects {
  std::vector<std::pair<fl_sa_key, fl_sa_redir_bucket>> entries;
};

// As compile_rules: each prefix gets the redirect rules covering it, longest
// first, then in the order given (the first that fits wins).
[[nodiscard]] Result<CompiledRedirects> compile_redirects(const std::vector<RedirectRule>& rules);

// Writes the redirect trie (it must be empty).
[[nodiscard]] Status load_redirects(const std::vector<RedirectRule>& rules, int redirect_fd);

}  // namespace faultline
