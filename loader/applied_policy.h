// The pinned state of an applied egress policy (faultctl policy apply): the one
// generation map every applied scope's programs read first, the policy's
// source per generation, and each scope's pinned program instance and maps.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"  // boottime_ns(): the clock learned addresses expire by
#include "base/result.h"
#include "base/unique_fd.h"
#include "faultline/dns_abi.h"
#include "faultline/sockaddr_abi.h"
#include "loader/bpffs.h"

namespace faultline {

// <root>/policy/: fl_sa_gen (the live generation, 0 or 1), fl_pol_source (per
// generation, the canonical policy text), scopes/<key>/ per applied scope.
struct AppliedPolicyPins {
  std::string dir;
  [[nodiscard]] std::string gen() const { return dir + "/fl_sa_gen"; }
  [[nodiscard]] std::string source() const { return dir + "/fl_pol_source"; }
  [[nodiscard]] std::string scopes() const { return dir + "/scopes"; }
  [[nodiscard]] std::string scope(const std::string& key) const { return scopes() + "/" + key; }
};
[[nodiscard]] AppliedPolicyPins applied_policy_pins(const BpffsLayout& layout);

// The lock serialising applies, deletes and exports of one layout: the file
// of policy_lock_path() (loader/bpffs.h).
class AppliedPolicyLock {
 public:
  [[nodiscard]] static Result<AppliedPolicyLock> acquire(const BpffsLayout& layout, bool exclusive);

 private:
  explicit AppliedPolicyLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// What one generation of one scope holds: the fl_sa_policy value, both tries
// and how many rule counters (ids 0..rules-1).
struct ScopeImage {
  fl_sa_policy policy{};
  std::vector<std::pair<fl_sa_key, fl_sa_bucket>> deny, allow;
  uint32_t rules = 0;
  // Watched names of host rules (the key's gen is set by fill()).
  std::vector<std::pair<fl_dns_watch_key, fl_dns_watch>> watch;
};

// A trie of n entries is created with room for this many: headroom, so a map
// is never filled to the last entry, and never past what the programs' key
// space allows (FL_SA_MAX_PREFIXES per trie, checked before anything changes).
[[nodiscard]] uint32_t applied_trie_capacity(size_t entries);

// The generation map and the source, shared by every scope.
class PolicyGenerations {
 public:
  // Opens the pins; with create, makes them when missing (generation 0, empty).
  // Nothing pinned and !create: an empty optional-like error with err ENOENT.
  [[nodiscard]] static Result<PolicyGenerations> open(const AppliedPolicyPins& pins, bool create);

  [[nodiscard]] Result<uint32_t> live() const;
  // The one write that switches every hook of every applied scope.
  [[nodiscard]] Status flip(uint32_t to) const;
  // The text and its digest (an opaque string of at most kSourceDigestMax
  // bytes, the caller's hash of text): an apply of the same text reads the
  // digest alone (source_digest()), not the text, to find nothing changed.
  [[nodiscard]] Status put_source(uint32_t gen, const std::string& text, const std::string& digest) const;
  // "" when the generation has none.
  [[nodiscard]] Result<std::string> source(uint32_t gen) const;
  // The digest stored with the generation's text; "" when it has no text or
  // was stored by a faultctl that kept none (then read source()).
  [[nodiscard]] Result<std::string> source_digest(uint32_t gen) const;
  static constexpr size_t kSourceDigestMax = 64;
  [[nodiscard]] Status clear_source(uint32_t gen) const;
  [[nodiscard]] int gen_fd() const { return gen_.get(); }

 private:
  PolicyGenerations(UniqueFd gen, UniqueFd source) : gen_(std::move(gen)), source_(std::move(source)) {}
  UniqueFd gen_, source_;
};

// One applied scope: its programs attached to a cgroup with pinned links, and
// its generation maps, pinned beside them.
class AppliedScope {
 public:
  // Loads an instance sharing gen_fd, attaches it to the cgroup, pins it in dir.
  // With the DNS learner when it loads on this kernel; else without it (the
  // scope then judges address rules only, and fill() refuses host rules), so
  // that a policy of address rules never depends on the learner.
  [[nodiscard]] static Result<AppliedScope> create(const std::string& dir, int gen_fd, int cgroup_fd);
  [[nodiscard]] static Result<AppliedScope> open(const std::string& dir);

  // Builds generation gen beside the live one: new tries and counters sized
  // to the image, filled, then put in the generation's slots, the policy
  // value last. The slot must not be live.
  [[nodiscard]] Status fill(uint32_t gen, const ScopeImage& img) const;
  // Empties generation gen (its maps go when no program holds them).
  [[nodiscard]] Status clear(uint32_t gen) const;
  // The generation's policy value (armed 0: none).
  [[nodiscard]] Result<fl_sa_policy> policy(uint32_t gen) const;
  [[nodiscard]] Result<fl_sa_stats> stats() const;
  // Per rule id; empty when the generation has no counters.
  [[nodiscard]] Result<std::vector<uint64_t>> rule_hits(uint32_t gen) const;

  // Host rules. Learns (seeds) addr under a watched name until expires_ns
  // (CLOCK_BOOTTIME), as the kernel does from a DNS answer.
  [[nodiscard]] Status learn(const fl_addr& addr, uint64_t hash, uint8_t wild, uint64_t expires_ns) const;
  // Deletes the learned addresses whose every name has expired by now_ns; how many.
  [[nodiscard]] Result<size_t> reap_learned(uint64_t now_ns) const;
  // Learned addresses with at least one name alive at now_ns.
  [[nodiscard]] Result<size_t> learned_count(uint64_t now_ns) const;
  [[nodiscard]] Result<fl_dns_stats> dns_stats() const;
  // Whether fl_dns_ingress is attached to this scope (its link is pinned).
  [[nodiscard]] bool has_dns_learner() const { return has_learner_; }

 private:
  AppliedScope(UniqueFd gpolicy, UniqueFd gdeny, UniqueFd gallow, UniqueFd ghits, UniqueFd stats, UniqueFd watch,
               UniqueFd learn, UniqueFd dns_stats, bool has_learner)
      : gpolicy_(std::move(gpolicy)),
        gdeny_(std::move(gdeny)),
        gallow_(std::move(gallow)),
        ghits_(std::move(ghits)),
        stats_(std::move(stats)),
        watch_(std::move(watch)),
        learn_(std::move(learn)),
        dns_stats_(std::move(dns_stats)),
        has_learner_(has_learner) {}
  UniqueFd gpolicy_, gdeny_, gallow_, ghits_, stats_;
  UniqueFd watch_, learn_, dns_stats_;  // empty in a scope pinned before host rules existed
  bool has_learner_ = false;
};

// Removes a scope's pins (its links detach) and its folder.
[[nodiscard]] Status remove_applied_scope(const std::string& dir);
// The scope folders pinned now (their keys).
[[nodiscard]] std::vector<std::string> applied_scope_keys(const AppliedPolicyPins& pins);
// Removes the shared pins and the folders, once no scope is left.
void remove_applied_policy_pins(const AppliedPolicyPins& pins);

// Waits until no program that may have read the generation map before the
// last flip is still running (an RCU grace period: membarrier(GLOBAL)), so the
// old generation can be emptied under no reader.
void wait_for_policy_readers();

}  // namespace faultline
