#!/usr/bin/env bash
# Installs the Debian packages Faultline builds, tests and benchmarks with.
# Idempotent and quiet when everything is already there.
set -euo pipefail

packages=(
  # build
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev cmake ninja-build g++ pkg-config libseccomp-dev
  libcxxopts-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libyaml-cpp-dev
  # run and test
  iproute2 iputils-ping iperf3 curl openssl
  # the Prometheus guardrail tests run a real server (and promtool checks the example rules)
  prometheus
)
# `install-deps.sh vmtest` (make vmtest): also qemu and what the guest's initramfs is made of.
if [ "${1:-}" = vmtest ]; then
  packages+=(qemu-system-x86 busybox-static cpio kmod lz4 xz-utils)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root (or install them) first" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq -o DPkg::Lock::Timeout=600
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
