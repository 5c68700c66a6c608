// libFuzzer target: a Kubernetes API request's method and target, any bytes
// (the first line the method, the rest the target): read into RBAC facts, and
// judged by Kubernetes rules, with invariants that hold for every input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guard/guard_policy.h"
#include "userspace/guard/k8s_facts.h"

namespace {

const faultline::GuardPolicy& policy() {
  static const faultline::GuardPolicy p = [] {
    faultline::GuardPolicy g;
    g.mode = faultline::GuardMode::Enforce;
    faultline::GuardRule deny;
    deny.name = "no-prod-secrets";
    deny.action = faultline::GuardVerdict::Deny;
    deny.k8s_verb = "delete";
    deny.k8s_resource = "secrets";
    deny.k8s_namespace = "prod";
    faultline::GuardRule allow;
    allow.name = "reads";
    allow.action = faultline::GuardVerdict::Allow;
    allow.k8s_verb = "*";
    allow.k8s_resource = "*";
    g.rules = {deny, allow};
    g.default_allow = false;
    return g;
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view method = nl == std::string_view::npos ? "GET" : in.substr(0, nl);
  const std::string_view target = nl == std::string_view::npos ? in : in.substr(nl + 1);
  const auto f = faultline::k8s_request_facts(method, target);
  if (f) {
    if (f->unknown && (!f->verb.empty() || !f->resource.empty() || !f->name.empty())) __builtin_trap();
    if (!f->unknown && f->resource.empty()) __builtin_trap();
    // Facts never hold the separators that would make them read otherwise.
    if (f->namespace_.find('/') != std::string::npos || f->name.find('/') != std::string::npos) __builtin_trap();
  }
  faultline::RequestFacts r;
  r.method = std::string(method);
  r.host = "127.0.0.1";
  r.port = 6443;
  r.path = std::string(target);
  r.k8s = f;
  const faultline::GuardDecision d = faultline::decide(policy(), r);
  // Allowed by the allow rule only with facts the guard could read.
  if (d.rule == "reads" && (!f || f->unknown)) __builtin_trap();
  // A request the guard cannot read is never let through by a Kubernetes rule.
  if (f && f->unknown && d.verdict == faultline::GuardVerdict::Allow) __builtin_trap();
  return 0;
}
