// Apply, delete and read back the applied egress policy. The generation
// protocol (loader/applied_policy.h): every scope's next generation is built
// beside the live one, the source beside it, then one write to the shared
// generation map switches every hook of every scope; after an RCU grace
// period the old generation is emptied and the scopes the file dropped are
// detached.
#include "userspace/policy/policy_apply.h"

#include <sys/stat.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/cgroup.h"
#include "loader/applied_policy.h"
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
  img.rules = static_cast<uint32_t>(c.rules.size());
  return img;
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

Result<ApplyOutcome> apply_locked(const BpffsLayout& layout, const Policy& p, bool dry_run) {
  const AppliedPolicyPins pins = applied_policy_pins(layout);
  const std::vector<EgressScope>& next_scopes = *p.egress;
  auto live = read_live_locked(pins);
  if (!live) return live.error();
  const std::vector<EgressScope> none;
  const std::vector<EgressScope>& live_scopes = *live && (*live)->policy.egress ? *(*live)->policy.egress : none;
  const std::string source = next_scopes.empty() ? std::string() : policy_json_text(p);

  ApplyOutcome out;
  out.changes = diff_egress(live_scopes, next_scopes);
  out.scopes = next_scopes.size();
  out.generation = *live ? (*live)->generation : 0;
  const bool same = *live ? (*live)->source == source : source.empty();
  if (same || dry_run) {
    out.changed = !same;
    return out;
  }

  auto compiled = compile_policy(p);
  if (!compiled) return as_bad_input(compiled.error());
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
  // Scopes the file drops judge nothing in the next generation.
  for (const auto& key : applied_scope_keys(pins)) {
    if (kept.contains(key)) continue;
    auto s = AppliedScope::open(pins.scope(key));
    if (s) (void)s->clear(next);
  }
  if (!source.empty()) {
    if (auto st = gens->put_source(next, source); !st) return roll_back(st.error());
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
  if (p.faults)
    return input_error(EINVAL,
                       "spec.faults: apply writes the egress section only and runs no experiments; run them "
                       "with faultctl run, or leave spec.faults out of the file you apply");
  if (!p.egress) return input_error(0, "spec.egress: the file has no egress section: nothing to apply");
  for (size_t i = 0; i < p.egress->size(); ++i) {
    const EgressScope& s = (*p.egress)[i];
    for (size_t j = 0; j < s.rules.size(); ++j) {
      const PolicyRule& r = s.rules[j];
      if (!r.cidr)
        return input_error(0, "spec.egress[" + std::to_string(i) + "].rules[" + std::to_string(j) + "] (" + r.name +
                                  "): host rules are not enforced yet (no DNS learning): write the "
                                  "addresses as cidr rules");
    }
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
  }
  const std::string text = policy_json_text(p);
  if (text.size() > kMaxPolicyBytes) return input_error(0, "the policy is larger than 16 MiB once written out");
  return {};
}

Result<ApplyOutcome> apply_policy(const BpffsLayout& layout, const Policy& p, bool dry_run) {
  FL_TRY(check_appliable(p));
  auto lock = AppliedPolicyLock::acquire(layout, true);
  if (!lock) return lock.error();
  return apply_locked(layout, p, dry_run);
}

Result<ApplyOutcome> delete_policy(const BpffsLayout& layout, bool dry_run) {
  auto lock = AppliedPolicyLock::acquire(layout, true);
  if (!lock) return lock.error();
  Policy empty;
  empty.egress = std::vector<EgressScope>{};
  auto out = apply_locked(layout, empty, dry_run);
  if (out && !dry_run) {
    // Leftovers of an apply that was interrupted before its switch.
    const AppliedPolicyPins pins = applied_policy_pins(layout);
    for (const auto& key : applied_scope_keys(pins)) FL_TRY(remove_applied_scope(pins.scope(key)));
    remove_applied_policy_pins(pins);
  }
  return out;
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
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace faultline
