#!/usr/bin/env bash
# Installs the Debian packages Faultline builds, tests and benchmarks with.
# Idempotent and quiet when everything is already there.
set -euo pipefail

packages=(
  # build
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev cmake ninja-build g++ pkg-config libseccomp-dev
  libcxxopts-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev liburing-dev libyaml-cpp-dev
  libhttp-parser-dev libsystemd-dev
  # faultctl mcp-guard --upstream-url: MCP over HTTP(S) to a remote server
  libcurl4-openssl-dev
  # make lint-fast (CI runs it first) and make lint
  clang-format clang-tidy
  # make image: the DaemonSet's OCI image, FROM scratch (deploy.image tests it)
  buildah
  # faultcp's storage backends: SQLite (embedded) and PostgreSQL's client library
  libsqlite3-dev libpq-dev
  # faultcp's schedules: cron in IANA time zones (libdate-tz over the system tzdata)
  libhowardhinnant-date-dev tzdata
  # run and test
  iproute2 iputils-ping iperf3 curl openssl
  # the TLS tests: python3's https server and urllib, the system trust store
  python3 ca-certificates
  # the guard's agent tests: a python agent using requests (selftests/agents)
  python3-requests
  # the guard's CA reaching git (git http-backend as the HTTPS server) and a Go
  # binary (gh, through SSL_CERT_FILE) through a terminating guard (selftests/guard)
  git gh
  # the Prometheus guardrail tests run a real server (and promtool checks the example rules)
  prometheus
  # the orchestration's catalogue test: Debian's JSON Schema validator judges the templates' parameters too
  python3-jsonschema
  # faultcp's storage suite starts a throw-away PostgreSQL cluster (initdb, pg_ctl)
  postgresql
  # the guard's ClickHouse gate (--clickhouse-host) is tested against a throw-away clickhouse-server
  clickhouse-server clickhouse-client
  # make bench: the peers the proxy is measured against, and their load generators
  nginx-light haproxy redis-server redis-tools wrk
  # faultd <-> faultcp payloads are protobuf-lite messages (cp/proto/)
  protobuf-compiler libprotobuf-dev
  # the dashboard's test drives headless Chromium
  chromium
  # the policy's DNS-learning test runs dnsmasq as the resolver in a test namespace
  dnsmasq-base
  # make bench: the egress policy compared with the firewalls operators run now
  iptables nftables ipset
  # the policy test counts an apply's bpf() calls (strace -c)
  strace
  # the guard's DLP engine (Hyperscan, streaming) and its email detector's TLDs;
  # make bench: the regex engines it is measured against (RE2::Set, PCRE2-JIT)
  libhyperscan-dev publicsuffix libre2-dev libpcre2-dev
  # the guard's Postgres gate reads SQL with PostgreSQL 15's own parser
  libpg-query-dev
  # the prompt guard's normalisation (NFKC with case folding, confusables)
  libicu-dev
  # the guard's WebAssembly policy plugins (--wasm-policy): wabt's interpreter
  # (libwabt.a); the tests build their example plugins with clang's wasm32
  # target, linked by lld's wasm-ld
  wabt lld
  # make bench's report page (build/bench/report.html): its plots, as inline SVG
  python3-matplotlib
)
# The Toxiproxy client test runs the official Node.js client: Node.js from
# Debian when the machine has none.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
# The guard's Kubernetes tests (selftests/k8s) run real kubectl: Debian's when
# the machine has none (a newer one, where installed, is used as it is).
command -v kubectl >/dev/null || packages+=(kubernetes-client)
# `install-deps.sh vmtest` (make vmtest): also qemu and what the guest's initramfs is made of.
if [ "${1:-}" = vmtest ]; then
  # python3: scripts/kernel-report.sh; debian-archive-keyring: the private apt lists of other releases
  packages+=(qemu-system-x86 busybox-static cpio kmod lz4 xz-utils zstd python3 debian-archive-keyring)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root (or install them) first" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq -o DPkg::Lock::Timeout=600
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
fi

# Test-only clients from npm, pinned by the committed lockfiles under selftests/
# (npm ci installs exactly what the lockfile says, or fails).
root=$(cd "$(dirname "$0")/.." && pwd)
for lock in "$root"/selftests/*/package-lock.json; do
  dir=$(dirname "$lock")
  [ -d "$dir/node_modules" ] && [ "$dir/node_modules/.package-lock.json" -nt "$lock" ] && continue
  echo "install-deps: npm ci in ${dir#"$root"/}"
  npm ci --prefix "$dir" --no-audit --no-fund --silent
done
