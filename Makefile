# Faultline: `make demo` runs the main job, `make test` runs every test.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps build test unit bpftest e2e demo bench fmt lint clean vmtest

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS)

# Every test: unit, BPF (BPF_PROG_TEST_RUN) and end-to-end (netns + veth). The
# BPF and e2e suites need root and skip loudly without it; they run serially
# because they share the kernel.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j 1

demo: build
	@scripts/demo.sh $(BUILD)/faultctl

bench: build
	@scripts/bench.sh $(BUILD)

fmt:
	@clang-format -i $$(git ls-files '*.cpp' '*.h' | grep -v '^vmlinux/' | grep -v '^bpf/')

lint: $(BUILD)/build.ninja
	@clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.h' | grep -v '^vmlinux/' | grep -v '^bpf/')
	@clang-tidy -p $(BUILD) --quiet $$(git ls-files 'loader/*.cpp' 'userspace/*.cpp' 'ctl/*.cpp')

clean:
	@rm -rf $(BUILD)
