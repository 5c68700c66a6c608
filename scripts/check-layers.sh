#!/usr/bin/env bash
# Fails on an #include that goes against the layer order of docs/architecture.md:
#
#   base  <-  loader  <-  userspace/{net,guardrails,state}  <-  userspace/run
#         <-  userspace/faults/{packet,syscall,resource,stream}, userspace/enforce
#         <-  userspace/policy (on enforce and guard)
#         <-  userspace/guard_runtime (the guard's runtime: GuardCapture, the
#             gateway, and its faultcp links; on policy, guard, proxy, guardrails)
#         <-  userspace/ops  <-  userspace/daemon  <-  ctl, daemon (faultd's main)
#   base  <-  userspace/proxy (its own library, faultline_proxy, under the rest;
#             faults/stream, daemon, ctl use it)
#   base, userspace/net  <-  cp (faultcp; plus userspace/faults/packet/spec.h for the kinds,
#             the typed experiment's reader userspace/ops/experiment.h, and userspace/policy's
#             headers: faultcp checks a policy bundle with faultctl's own validator)
#   base, userspace/net, userspace/proxy  <-  userspace/guard (the AI-agent
#             guard's decisions, denial answers, activity chain: no BPF, no I/O
#             loop; the policy file reads its section, so policy sits on guard)
#   base, userspace/guardrails  <-  userspace/orchestration (services, facts,
#             validator, preflight, the catalogue, scenarios; cp uses it; the
#             typed experiment's reader userspace/ops/experiment.h, which the
#             catalogue renders to)
#   base  <-  cp/proto (the agent wire format, faultline_cp_proto; cp and
#             userspace/daemon use it)
#
# A layer includes only layers to its left (and the ABI headers, faultline/*.h,
# which every C++ layer above base may use). Bpftool skeletons (*.skel.h) are
# included by loader/ alone. Fault families do not include each other, and
# enforcement and faults do not include each other. A file directly in
# userspace/faults/ (the capability ladders, which span every family) belongs
# to no family: it may use what a family may, and every family may use it.
# The policy model sits on enforce (its compiler is the guard's) and includes
# no fault family: the CLI checks a policy's experiments with the run parsers
# (ctl/policy_faults.cpp); the Chaos Mesh import, which builds experiments of
# several families, is therefore in ops (userspace/ops/chaos_mesh_import.h).
# Its DNS answer parser is bpf/lib/dns_parse.h, the
# one C core the kernel program runs too (no BPF helper in it). userspace/daemon
# sits on userspace/policy: faultd reaps learned addresses and applies the
# bundles faultcp sends. A run faultd serves for faultctl arrives as the typed
# experiment (userspace/daemon/served_run.h) and is read by the packet family's
# reader: faultd's main includes nothing of ctl/. The guard's runtime (the proxy
# a GuardCapture runs, its gateway, its faultcp reporter, relay, policy sync,
# remote budget and proctor) is userspace/guard_runtime: faultctl guard and
# faultd's gateway (--guard-gateway) both start it; it includes no ops, daemon
# or ctl, and neither ops nor the lower layers include it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The quoted includes a folder may use, as extended regexes over the include path.
allowed_for() {
  case "$1" in
    base/*) echo '^base/' ;;
    loader/*) echo '^(base|loader|faultline)/|\.skel\.h$' ;;
    userspace/net/*) echo '^(base|faultline|userspace/net)/' ;;
    userspace/proxy/*) echo '^(base|faultline|userspace/proxy)/' ;;
    # The guard's decision library: it answers in the proxy's own response
    # format (http_answer.h) and judges CIDR patterns with net's egress rules.
    userspace/guard/*) echo '^(base|faultline|userspace/(net|proxy|guard))/' ;;
    # The guard's runtime: the judge (guard) behind a proxy (proxy), its policy
    # file's section (policy), the kernel's redirected connections (enforce) and
    # faultcp over the guardrails' HTTP client.
    userspace/guard_runtime/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|enforce|guard|policy|proxy|guard_runtime))/' ;;
    userspace/guardrails/*) echo '^(base|loader|faultline|userspace/(net|guardrails))/' ;;
    # The orchestration (services, facts, the validator, the watchdog's
    # preflight): Prometheus through the guardrails' client; no kernel, no I/O loop.
    # The catalogue renders its templates to the typed experiment (ops/experiment.h;
    # a scenario step adds the shared guardrail fields, experiment_guardrails.h).
    userspace/orchestration/*) echo '^(base|userspace/(net|guardrails|orchestration))/|^userspace/ops/experiment\.h$|^userspace/faults/experiment_guardrails\.h$' ;;
    userspace/state/*) echo '^(base|loader|faultline|userspace/state)/' ;;
    userspace/run/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|run))/' ;;
    userspace/faults/stream/*)
      echo '^(base|loader|faultline|userspace/(net|guardrails|state|run|proxy|faults/stream))/|^userspace/faults/[^/]+$'
      ;;
    userspace/faults/*/*)
      local family=${1#userspace/faults/}
      family=${family%%/*}
      echo "^(base|loader|faultline|userspace/(net|guardrails|state|run|faults/$family))/|^userspace/faults/[^/]+$"
      ;;
    userspace/faults/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|run))/|^userspace/faults/[^/]+$' ;;
    userspace/enforce/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|enforce))/' ;;
    userspace/ops/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|run|faults|enforce|guard|policy|ops))/' ;;
    # faultd's agent speaks faultcp's wire format: cp/proto (the messages and
    # their codec, a library of its own) and nothing else of cp/.
    userspace/daemon/*) echo '^(base|loader|faultline|userspace/(net|guardrails|state|run|faults|enforce|guard|policy|guard_runtime|ops|proxy|daemon)|cp/proto)/' ;;
    userspace/policy/*) echo '^(base|loader|faultline|userspace/(net|state|enforce|guard|policy))/|^bpf/lib/dns_parse\.h$' ;;
    ctl/*) echo '^(base|loader|faultline|userspace|ctl)/' ;;
    daemon/*) echo '^(base|loader|faultline|userspace)/' ;;
    # The control plane serves HTTP with userspace/net and checks experiment
    # specs with the typed experiment's reader (ops/experiment.h, the one
    # faultd's agent runs a spec with; spec_fields.h for its error form) and
    # names the packet kinds (spec.h), and reads Chaos Mesh files with the
    # reader faultctl apply uses (ops/chaos_mesh_import.h, which builds such
    # specs): nothing else of the host side.
    # The agent wire format (faultline_cp_proto) is under both faultcp and
    # faultd: base and itself only.
    cp/proto/*) echo '^(base|cp/proto)/' ;;
    cp/*) echo '^(base|faultline|userspace/(net|guard|policy|orchestration)|cp)/|^userspace/faults/packet/spec\.h$|^userspace/ops/experiment\.h$|^userspace/ops/chaos_mesh_import\.h$|^userspace/faults/spec_fields\.h$' ;;
    *) return 1 ;;
  esac
}

bad=0
while IFS= read -r file; do
  allowed=$(allowed_for "$file") || continue
  while IFS= read -r inc; do
    if [[ $inc == *.skel.h && $file != loader/* ]]; then
      echo "check-layers: $file includes the skeleton $inc: skeletons are loaded through loader/ only" >&2
      bad=1
    elif ! [[ $inc =~ $allowed ]]; then
      echo "check-layers: $file includes \"$inc\", against the layer order (docs/architecture.md)" >&2
      bad=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'base/*' 'loader/*' 'userspace/*' 'ctl/*' 'daemon/*' 'cp/*' | grep -E '\.(h|cpp)$'; git ls-files --others --exclude-standard 'base/*' 'loader/*' 'userspace/*' 'ctl/*' 'daemon/*' 'cp/*' | grep -E '\.(h|cpp)$')

if [ "$bad" -ne 0 ]; then
  echo "check-layers: FAILED" >&2
  exit 1
fi
echo "check-layers: every include follows the layer order"
