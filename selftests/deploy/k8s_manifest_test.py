#!/usr/bin/env python3
"""deploy/kubernetes/faultd-daemonset.yaml: parses as YAML, and has what
docs/control-plane.md ("Deployment") says it has. No cluster here (kubectl
cannot validate offline), so the fields are checked one by one."""
import pathlib
import sys

import yaml

root = pathlib.Path(__file__).resolve().parents[2]
manifest = root / "deploy/kubernetes/faultd-daemonset.yaml"
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


docs = list(yaml.safe_load_all(manifest.read_text()))
kinds = {d["kind"]: d for d in docs if d}
expect(set(kinds) == {"ConfigMap", "DaemonSet"}, f"kinds are ConfigMap and DaemonSet, got {sorted(kinds)}")
cm, ds = kinds.get("ConfigMap", {}), kinds.get("DaemonSet", {})
expect(ds.get("apiVersion") == "apps/v1", "DaemonSet apiVersion apps/v1")
spec = ds.get("spec", {})
pod = spec.get("template", {}).get("spec", {})
expect(spec.get("selector", {}).get("matchLabels", {}).items() <= spec.get("template", {}).get("metadata", {}).get("labels", {}).items(),
       "the selector matches the pod template's labels")
expect(pod.get("hostNetwork") is True, "hostNetwork: true")
expect(pod.get("hostPID") is True, "hostPID: true")
containers = pod.get("containers", [])
expect(len(containers) == 1, "one container")
c = containers[0] if containers else {}
sc = c.get("securityContext", {})
caps = set(sc.get("capabilities", {}).get("add", []))
for cap in ("BPF", "NET_ADMIN", "SYS_ADMIN", "PERFMON"):
    expect(cap in caps, f"capability {cap} added")
expect(sc.get("capabilities", {}).get("drop") == ["ALL"], "every other capability dropped")
expect(sc.get("privileged") is False, "not privileged (capabilities instead)")
expect(sc.get("runAsUser") == 0, "runs as root (faultd refuses otherwise)")

mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
volumes = {v["name"]: v for v in pod.get("volumes", [])}
for path in ("/sys/fs/bpf", "/sys/fs/cgroup"):
    m = mounts.get(path)
    expect(m is not None, f"{path} is mounted")
    if m:
        host = volumes.get(m["name"], {}).get("hostPath", {}).get("path")
        expect(host == path, f"{path} comes from the host's {path} (got {host})")
expect(mounts.get("/sys/fs/bpf", {}).get("mountPropagation") in ("HostToContainer", "Bidirectional"),
       "bpffs sees the host's mounts")
for m in mounts.values():
    expect(m["name"] in volumes, f"mount {m['mountPath']} has a volume")

env = {e["name"]: e for e in c.get("env", [])}
token = env.get("FAULTLINE_ENROLL_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
expect(token is not None and token.get("name") and token.get("key"), "the enrollment token comes from a Secret")
url = env.get("FAULTLINE_CP", {}).get("valueFrom", {}).get("configMapKeyRef")
expect(url is not None, "the faultcp URL comes from a ConfigMap")
if url:
    expect(url.get("name") == cm.get("metadata", {}).get("name"), "the ConfigMap referenced is the one in the file")
    expect(url.get("key") in cm.get("data", {}), f"the ConfigMap has the key {url.get('key')}")
args = c.get("args", [])
expect("--foreground" in args, "faultd runs in the foreground")
expect("$(FAULTLINE_ENROLL_TOKEN)" in args and "$(FAULTLINE_CP)" in args, "the token and URL reach faultd's flags")
expect(ds["metadata"].get("namespace") == cm["metadata"].get("namespace"), "one namespace")

doc = (root / "docs/control-plane.md").read_text()
expect("deploy/kubernetes/faultd-daemonset.yaml" in doc, "docs/control-plane.md documents the manifest")
expect("deploy/kubernetes" in (root / "docs/architecture.md").read_text(), "docs/architecture.md's layout lists deploy/kubernetes")

if failures:
    for f in failures:
        print("FAIL:", f)
    sys.exit(1)
print(f"PASS: {manifest.relative_to(root)} ({len(docs)} documents)")
