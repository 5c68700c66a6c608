# Faultline: `make demo` runs the main job, `make test` runs every test.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps build test demo bench build-time fuzz fmt lint lint-fast image clean vmtest kernel-report install

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS)

# Every test: unit, BPF (BPF_PROG_TEST_RUN) and end-to-end (netns + veth). The
# BPF and e2e suites need root and skip loudly without it; they run serially
# because they share the kernel. lint-fast first: a tree CI would refuse for its
# format or its layers fails here too, in seconds.
test: lint-fast build
	@cd $(BUILD) && ctest --output-on-failure -j 1

# The kernel matrix: each kernel of KERNELS (`host`: this machine's, no VM; Debian's
# stock cloud kernels 6.1 and 6.12 under qemu (TCG), one after another, booted with
# BPF LSM active and once more without it); writes $(BUILD)/kernel-report/report.{json,md}
# and prints the summary table. scripts/vmtest.sh says what runs there.
KERNELS ?= host bookworm trixie
vmtest: build
	@scripts/install-deps.sh vmtest
	@KERNELS="$(KERNELS)" scripts/vmtest.sh $(BUILD)

# The same report for this machine's kernel alone, no VM: $(BUILD)/kernel-report/host/.
kernel-report: build
	@scripts/kernel-report.sh --host $(BUILD)

# The demo builds only what it runs: faultctl and the test host it serves traffic with.
demo: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) faultctl fl-testhost
	@scripts/demo.sh $(BUILD)/faultctl

bench: build
	@scripts/bench.sh $(BUILD)

# The compile-time budget: a from-scratch build in a throw-away folder, the
# compile time per target (docs/code-map.md, "Building, and its compile time").
build-time: deps
	@scripts/build-time.sh $(JOBS)

# libFuzzer runs of every parser of untrusted bytes (clang, ASan, UBSan), 30 s each.
FUZZ_SECONDS ?= 30
FUZZ_TARGETS = http_status http_url http_response prometheus_answer http_request policy_parse policy_import \
  guard_section client_hello http_session dns_answer proxy_request llm_request_scan llm_usage cp_body cp_alert \
  cp_proto toxic_json mcp_wire dlp_stream content_policy pg_session response_guard
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DFAULTLINE_FUZZ=ON >/dev/null
	@ninja -C build-fuzz $(addsuffix _fuzz,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus-$$t && cp selftests/fuzz/corpus/$$t/* build-fuzz/corpus-$$t/ && \
	  build-fuzz/selftests/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 build-fuzz/corpus-$$t || exit 1; \
	done

fmt:
	@clang-format -i $$(git ls-files '*.cpp' '*.h' | grep -v '^vmlinux/' | grep -v '^bpf/')

# What keeps the tree as it should be. lint-fast needs no build (CI runs it
# before make test): the layers and the format. lint adds the docs check (links,
# routes, every flag of a doc's command lines in the binary's --help) and
# clang-tidy on the sources changed since LINT_BASE (and uncommitted ones).
LINT_BASE ?= HEAD~1
lint-fast: deps
	@scripts/check-layers.sh
	@scripts/check-test-names.sh
	@clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.h' | grep -v '^vmlinux/' | grep -v '^bpf/')
	@echo "lint-fast: layers and format clean"

lint: lint-fast $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) faultctl faultd faultcp
	@scripts/check-docs.py $(BUILD)
	@scripts/tidy.py $(BUILD) $(LINT_BASE)

# The OCI image the DaemonSet runs: FROM scratch, the three binaries, the
# libraries they load and the CA bundle (buildah, no network):
# $(BUILD)/image/faultline-VERSION.oci.tar, tagged faultline/faultd:VERSION.
image: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) faultctl faultd faultcp
	@scripts/build-image.sh $(BUILD)

# faultctl, faultd (sbin), faultcp, the systemd units (ExecStart rewritten to
# PREFIX), the docs and the Kubernetes manifest, under DESTDIR/PREFIX.
PREFIX ?= /usr/local
DESTDIR ?=
install: $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS) faultctl faultd faultcp
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

clean:
	@rm -rf $(BUILD)
