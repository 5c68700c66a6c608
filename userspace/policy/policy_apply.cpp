// Apply, delete and read back the applied egress policy. The generation
// protocol (loader/applied_policy.h): every scope's next generation is built
// beside the live one, the source beside it, then one write to the shared
// generation map switches every hook of every scope; after an RCU grace
// period the old generation is emptied and the scopes the file dropped are
// detached.
#include "userspace/policy/policy_apply.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/cgroup.h"
#include "base/sha256.h"
#include "loader/applied_policy.h"
#include "loader/sockaddr_object.h"
#include "userspace/policy/policy_compiler.h"
#include "userspace/policy/policy_writer.h"

namespace faultline {
namespace {

// The folder name of a scope's pins: "all", or "cg" and the cgroup path with
// '%' and '/' escaped (reversible, and one path component).
std::string scope_key(const EgressScope& s) {
  if (s.host_wide) return "all";
  std::string k = "cg";
  for (char c : s.cgroup) {
    if (c == '%')
      k += "%25";
    else if (c == '/')
      k += "%2F";
    else
      k += c;
  }
  return k;
}

ScopeImage image_of(const CompiledScope& c) {
  ScopeImage img;
  img.policy = c.policy;
  img.deny = c.deny.entries;
  img.allow = c.allow.entries;
  img.rules = c.rule_count();
  for (const auto& w : c.watched) img.watch.emplace_back(w.key, w.value);
  return img;
}

// The addresses of each exact host name, resolved once (getaddrinfo, the
// host's resolver) to seed the learned map: the first connect after an apply
// is decided even if the application's lookup never crosses the scope (a
// cache it shares, an answer from before the apply). All names at once, each
// on its own thread, and at most kSeedBudget in all: a name whose resolution
// takes longer is not seeded (its addresses are learned from the next
// answer the scope receives).
constexpr auto kSeedBudget = std::chrono::seconds(2);

std::map<std::string, std::vector<fl_addr>> resolve_for_seed(const std::vector<std::string>& names) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::vector<fl_addr>> out;
    size_t left = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->left = names.size();
  for (const auto& name : names) {
    std::thread([shared, name] {
      std::vector<fl_addr> addrs;
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) == 0) {
        for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
          fl_addr k{};
          if (a->ai_family == AF_INET) {
            k.b[10] = 0xff;
            k.b[11] = 0xff;
            std::memcpy(&k.b[12], &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, 4);
          } else if (a->ai_family == AF_INET6) {
            std::memcpy(k.b, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, 16);
          } else {
            continue;
          }
          addrs.push_back(k);
        }
        ::freeaddrinfo(res);
      }
      std::lock_guard lock(shared->mu);
      shared->out[name] = std::move(addrs);
      --shared->left;
      shared->cv.notify_all();
    }).detach();
  }
  std::unique_lock lock(shared->mu);
  shared->cv.wait_for(lock, kSeedBudget, [&] { return shared->left == 0; });
  return shared->out;
}

// Seeds each scope's learned map with the addresses of its exact host names,
// for the scope's dns_ttl_min (getaddrinfo gives no TTL).
void seed_learned(const CompiledPolicy& compiled,
                  const std::vector<std::pair<const CompiledScope*, AppliedScope*>>& scopes) {
  std::vector<std::string> names;
  for (const auto& [c, s] : scopes) {
    for (const auto& w : c->watched) {
      if (!w.key.wild) names.push_back(w.name);
    }
  }
  (void)compiled;
  if (names.empty()) return;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const auto resolved = resolve_for_seed(names);
  const uint64_t now = boottime_ns();
  for (const auto& [c, s] : scopes) {
    for (const auto& w : c->watched) {
      auto it = w.key.wild ? resolved.end() : resolved.find(w.name);
      if (it == resolved.end()) continue;
      for (const auto& a : it->second)
        (void)s->learn(a, w.key.hash, w.key.wild, now + uint64_t{w.value.ttl_min} * 1000000000ULL);
    }
  }
}

Result<std::optional<LivePolicy>> read_live_locked(const AppliedPolicyPins& pins) {
  auto gens = PolicyGenerations::open(pins, false);
  if (!gens) {
    if (gens.error().err == ENOENT) return std::optional<LivePolicy>{};
    return gens.error();
  }
  auto g = gens->live();
  if (!g) return g.error();
  auto src = gens->source(*g);
  if (!src) return src.error();
  if (src->empty()) return std::optional<LivePolicy>{};
  auto parsed = policy_from_canonical_json(*src);
  if (!parsed)
    return make_error(EINVAL, "the applied policy's stored text does not read back: " + parsed.error().message);
  return std::optional<LivePolicy>{LivePolicy{*src, std::move(*parsed), *g}};
}

// What apply writes, made once per apply: the compiled images and the
// canonical text (both take a while at 100k rules).
struct Prepared {
  CompiledPolicy compiled;
  std::string source;  // "" for no scopes
  std::string digest;  // SHA-256 of source, kept beside it
};

// Whether the live generation holds exactly this text, told by the digest
// stored with it (one map read): an apply of the file already applied
// changes nothing and reads back no text. Nothing when it cannot be told (no
// applied policy, or a text stored without a digest): read the text then.
Result<std::optional<uint32_t>> live_if_same_digest(const AppliedPolicyPins& pins, const std::string& digest) {
  auto gens = PolicyGenerations::open(pins, false);
  if (!gens) {
    if (gens.error().err == ENOENT) return std::optional<uint32_t>{};
    return gens.error();
  }
  auto g = gens->live();
  if (!g) return g.error();
  auto d = gens->source_digest(*g);
  if (!d) return d.error();
  if (d->empty() || *d != digest) return std::optional<uint32_t>{};
  return std::optional<uint32_t>{*g};
}

// Everything apply refuses, checked before anything changes; on_this_host:
// the scopes' cgroups are looked for (faultcp checks bundles for other hosts).
Result<Prepared> prepare(const Policy& p, bool on_this_host = true) {
  if (p.faults)
    return input_error(EINVAL,
                       "spec.faults: apply writes the egress section only and runs no experiments; run them "
                       "with faultctl run, or leave spec.faults out of the file you apply");
  if (!p.egress) return input_error(0, "spec.egress: the file has no egress section: nothing to apply");
  for (size_t i = 0; i < p.egress->size(); ++i) {
    const EgressScope& s = (*p.egress)[i];
    if (!s.host_wide && on_this_host) {
      auto dir = resolve_cgroup_v2_dir(s.cgroup, "spec.egress[" + std::to_string(i) + "].cgroup");
      if (!dir) return as_bad_input(dir.error());
    }
  }
  auto c = compile_policy(p);
  if (!c) return as_bad_input(c.error());
  for (const auto& s : c->scopes) {
    for (const auto* t : {&s.deny, &s.allow}) {
      if (t->entries.size() > FL_SA_MAX_PREFIXES)
        return input_error(0, s.scope->label() + ": " + std::to_string(t->entries.size()) +
                                  " prefixes in one trie, more than the " + std::to_string(FL_SA_MAX_PREFIXES) +
                                  " the programs' maps hold");
    }
    if (s.watched.size() > FL_DNS_MAX_WATCH / 2)
      return input_error(0, s.scope->label() + ": " + std::to_string(s.watched.size()) +
                                " watched host names, more than the " + std::to_string(FL_DNS_MAX_WATCH / 2) +
                                " a generation's map holds");
    // Host rules learn their addresses in the kernel: refused whole, before
    // anything changes, where the learner does not load (address rules alone
    // do not need it and apply without it).
    if (!s.watched.empty() && on_this_host && !dns_learner_probe().available)
      return input_error(0, s.scope->label() + ": host rules need the DNS learner, and " + dns_learner_probe().detail +
                                "; nothing was applied: write this scope's rules as addresses (cidr), or apply on a "
                                "kernel where `faultctl features` lists DNS-learned host rules as available");
  }
  Prepared out{std::move(*c), p.egress->empty() ? std::string() : policy_json_text(p), ""};
  if (out.source.size() > kMaxPolicyBytes) return input_error(0, "the policy is larger than 16 MiB once written out");
  if (!out.source.empty()) out.digest = sha256_hex(out.source);
  return out;
}

Result<ApplyOutcome> apply_locked(const BpffsLayout& layout, const Policy& p, const Prepared& prep, bool dry_run) {
  const AppliedPolicyPins pins = applied_policy_pins(layout);
  const std::vector<EgressScope>& next_scopes = *p.egress;
  if (!prep.source.empty()) {
    auto same_gen = live_if_same_digest(pins, prep.digest);
    if (!same_gen) return same_gen.error();
    if (*same_gen) {
      ApplyOutcome out;
      out.scopes = next_scopes.size();
      out.generation = **same_gen;
      return out;
    }
  }
  auto live = read_live_locked(pins);
  if (!live) return live.error();
  const std::vector<EgressScope> none;
  const std::vector<EgressScope>& live_scopes = *live && (*live)->policy.egress ? *(*live)->policy.egress : none;
  const std::string& source = prep.source;

  ApplyOutcome out;
  out.changes = diff_egress(live_scopes, next_scopes);
  out.scopes = next_scopes.size();
  out.generation = *live ? (*live)->generation : 0;
  const bool same = *live ? (*live)->source == source : source.empty();
  if (same || dry_run) {
    out.changed = !same;
    return out;
  }

  const CompiledPolicy* compiled = &prep.compiled;
  auto gens = PolicyGenerations::open(pins, true);
  if (!gens) return gens.error();
  auto cur = gens->live();
  if (!cur) return cur.error();
  const uint32_t now = *cur, next = now ^ 1U;

  // Build the next generation of every scope in the file beside the live one.
  struct Held {
    std::string dir;
    bool created;
    AppliedScope scope;
  };
  std::vector<Held> held;
  std::map<std::string, bool> kept;
  auto roll_back = [&](const Error& e) -> Error {
    for (auto& h : held) {
      if (h.created)
        (void)remove_applied_scope(h.dir);
      else
        (void)h.scope.clear(next);
    }
    (void)gens->clear_source(next);
    if (next_scopes.empty() || live_scopes.empty()) {
      if (applied_scope_keys(pins).empty()) remove_applied_policy_pins(pins);
    }
    return e;
  };
  for (const CompiledScope& c : compiled->scopes) {
    const std::string key = scope_key(*c.scope);
    const std::string dir = pins.scope(key);
    kept[key] = true;
    auto opened = AppliedScope::open(dir);
    bool created = false;
    if (!opened) {
      auto cg = open_cgroup_v2(c.scope->host_wide ? "/" : c.scope->cgroup, "cgroup");
      if (!cg) return roll_back(as_bad_input(cg.error()));
      (void)remove_applied_scope(dir);  // a half-made folder of an interrupted apply
      opened = AppliedScope::create(dir, gens->gen_fd(), cg->fd.get());
      if (!opened) return roll_back(opened.error());
      created = true;
    }
    held.push_back({dir, created, std::move(*opened)});
    if (auto st = held.back().scope.fill(next, image_of(c)); !st) return roll_back(st.error());
  }
  // Host rules: addresses resolved now, before the switch, and the expired
  // learned addresses of every scope reaped (faultd reaps them too).
  {
    std::vector<std::pair<const CompiledScope*, AppliedScope*>> seeds;
    for (size_t i = 0; i < held.size(); ++i) seeds.emplace_back(&compiled->scopes[i], &held[i].scope);
    seed_learned(*compiled, seeds);
    const uint64_t now = boottime_ns();
    for (auto& h : held) (void)h.scope.reap_learned(now);
  }
  // Scopes the file drops judge nothing in the next generation.
  for (const auto& key : applied_scope_keys(pins)) {
    if (kept.contains(key)) continue;
    auto s = AppliedScope::open(pins.scope(key));
    if (s) (void)s->clear(next);
  }
  if (!source.empty()) {
    if (auto st = gens->put_source(next, source, prep.digest); !st) return roll_back(st.error());
  }
  // The switch: one write, every hook of every scope.
  if (auto st = gens->flip(next); !st) return roll_back(st.error());
  wait_for_policy_readers();
  for (auto& h : held) (void)h.scope.clear(now);
  (void)gens->clear_source(now);
  for (const auto& key : applied_scope_keys(pins)) {
    if (!kept.contains(key)) FL_TRY(remove_applied_scope(pins.scope(key)));
  }
  if (next_scopes.empty()) remove_applied_policy_pins(pins);
  out.changed = true;
  out.generation = next;
  return out;
}

}  // namespace

Result<std::optional<LivePolicy>> read_live_policy(const BpffsLayout& layout) {
  // Nothing pinned, nothing to read: and no lock file made in /run by every
  // status of a layout that never had a policy.
  struct stat st {};
  if (::stat(applied_policy_pins(layout).gen().c_str(), &st) != 0) return std::optional<LivePolicy>{};
  auto lock = AppliedPolicyLock::acquire(layout, false);
  if (!lock) return lock.error();
  return read_live_locked(applied_policy_pins(layout));
}

Status check_appliable(const Policy& p, bool on_this_host) {
  auto prep = prepare(p, on_this_host);
  if (!prep) return prep.error();
  return {};
}

Result<ApplyOutcome> apply_policy(const BpffsLayout& layout, const Policy& p, bool dry_run) {
  auto prep = prepare(p);
  if (!prep) return prep.error();
  auto lock = AppliedPolicyLock::acquire(layout, true);
  if (!lock) return lock.error();
  return apply_locked(layout, p, *prep, dry_run);
}

Result<ApplyOutcome> delete_policy(const BpffsLayout& layout, bool dry_run) {
  auto lock = AppliedPolicyLock::acquire(layout, true);
  if (!lock) return lock.error();
  Policy empty;
  empty.egress = std::vector<EgressScope>{};
  auto prep = prepare(empty);
  if (!prep) return prep.error();
  auto out = apply_locked(layout, empty, *prep, dry_run);
  if (out && !dry_run) {
    // Leftovers of an apply that was interrupted before its switch.
    const AppliedPolicyPins pins = applied_policy_pins(layout);
    for (const auto& key : applied_scope_keys(pins)) FL_TRY(remove_applied_scope(pins.scope(key)));
    remove_applied_policy_pins(pins);
  }
  return out;
}

Result<size_t> reap_learned_addresses(const BpffsLayout& layout) {
  const AppliedPolicyPins pins = applied_policy_pins(layout);
  struct stat st {};
  if (::stat(pins.gen().c_str(), &st) != 0) return size_t{0};
  auto lock = AppliedPolicyLock::acquire(layout, false);
  if (!lock) return lock.error();
  size_t n = 0;
  const uint64_t now = boottime_ns();
  for (const auto& key : applied_scope_keys(pins)) {
    auto s = AppliedScope::open(pins.scope(key));
    if (!s) continue;
    auto r = s->reap_learned(now);
    if (!r) return r.error();
    n += *r;
  }
  return n;
}

std::vector<std::string> applied_policy_lines(const BpffsLayout& layout) {
  std::vector<std::string> out;
  auto live = read_live_policy(layout);
  if (!live || !*live || !(*live)->policy.egress) return out;
  const AppliedPolicyPins pins = applied_policy_pins(layout);
  for (const auto& s : *(*live)->policy.egress) {
    std::string line = s.label() + ": " + scope_settings(s) + " (policy " + (*live)->policy.name + ", " +
                       std::to_string(s.rules.size()) + " rule" + (s.rules.size() == 1 ? "" : "s") + ")";
    if (auto sc = AppliedScope::open(pins.scope(scope_key(s)))) {
      if (auto st = sc->stats())
        line += " allowed " + std::to_string(st->allowed) + " denied " + std::to_string(st->denied) + " would_deny " +
                std::to_string(st->would_deny) + " exfil_dropped " + std::to_string(st->exfil_dropped);
      const bool hosts = std::any_of(s.rules.begin(), s.rules.end(), [](const PolicyRule& r) { return !r.cidr; });
      auto learned = sc->learned_count(boottime_ns());
      auto ds = sc->dns_stats();
      if (hosts && learned && ds)
        line += "; host rules: " + std::to_string(*learned) + " learned addresses, dns answers " +
                std::to_string(ds->answers) + " matched " + std::to_string(ds->matched) + " malformed " +
                std::to_string(ds->malformed) + " learned " + std::to_string(ds->learned) + " expired " +
                std::to_string(ds->expired);
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace faultline
