#!/usr/bin/env bash
# The kernel report: what each kernel can do (faultctl features), what passed there
# (the VM suite, grouped), and what the mechanisms cost there (in-guest
# ratios: per packet, connect(), seccomp, map writes). scripts/vmtest.sh writes it for its matrix of kernels;
# this script also runs the host's part alone and compares two reports.
#
# usage:
#   scripts/kernel-report.sh --host [BUILD_DIR]        (make kernel-report) this machine's kernel, no VM:
#                                                      BUILD/kernel-report/host/report.{json,md}
#   scripts/kernel-report.sh --compare A.json B.json   every capability gained or lost, every test group
#                                                      that changed, every ratio that moved by more than
#                                                      its run-to-run spread. FILE#NAME picks one kernel
#                                                      of a report (report.json#bookworm report.json#trixie)
#   scripts/kernel-report.sh --update-docs [REPORT] [DOC]
#                                                      rewrite the generated section of docs/kernel-support.md
#                                                      (default: build/kernel-report/report.json)
#   scripts/kernel-report.sh --collect WORK OUT        (scripts/vmtest.sh) the report from WORK/<kernel>/
#   scripts/kernel-report.sh --host-run BUILD DIR      (scripts/vmtest.sh, KERNELS=host) the host's part into DIR
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
py() { python3 "$root_dir/scripts/kernel_report.py" "$@"; }

# The host's part: the same binaries and suite as in a guest, run on this kernel,
# its log in the guest's format (DIR/host.log, DIR/host.status).
host_run() {
	local build=$1 dir=$2 start rc=0 bin=$2/bin filter
	build=$(realpath "$build")
	mkdir -p "$dir" "$bin"
	for b in faultctl selftests/vm/vm_tests selftests/vm/fl-vmprobe; do
		[ -x "$build/$b" ] || { echo "kernel-report: $build/$b is not built (ninja -C $build faultctl vm_tests fl-vmprobe)" >&2; return 1; }
		ln -sf "$build/$b" "$bin/$(basename "$b")"
	done
	[ -x "$build/bench/fl_bench_progrun" ] && ln -sf "$build/bench/fl_bench_progrun" "$bin/fl_bench_progrun"
	[ -x "$build/bench/fl_bench_connect" ] && ln -sf "$build/bench/fl_bench_connect" "$bin/fl_bench_connect"
	if [ "$(id -u)" -ne 0 ]; then
		echo "kernel-report: the host's part needs root (BPF, network namespaces)" >&2
		return 1
	fi
	start=$(date +%s)
	# The silent-LSM-trap suite needs a boot without bpf in lsm=: a VM's part only.
	filter=${FAULTLINE_VMTEST_FILTER:-*}-NoBpfLsm.*
	{
		echo "vmtest-guest: kernel $(uname -r), active LSMs $(cat /sys/kernel/security/lsm 2>/dev/null || echo unknown), suite host"
		echo "===== faultctl features --json ====="
		"$bin/faultctl" features --json
		echo "===== end of faultctl features --json ====="
		echo "===== faultctl features --verifier-cost --json ====="
		"$bin/faultctl" features --verifier-cost --json || true
		echo "===== end of faultctl features --verifier-cost --json ====="
		FL_VM_BIN=$bin "$bin/vm_tests" --gtest_filter="$filter" --gtest_color=no 2>&1 || true
		if [ -x "$bin/fl_bench_progrun" ] && [ "${FAULTLINE_VMTEST_BENCH:-1}" = 1 ]; then
			echo "===== fl_bench_progrun ====="
			"$bin/fl_bench_progrun" --quick --json "$dir/bench.json" 2>&1 || echo "kernel-report: fl_bench_progrun exited $?"
			echo "===== end of fl_bench_progrun ====="
			[ -s "$dir/bench.json" ] && echo "vmtest-bench: $(cat "$dir/bench.json")"
		fi
		if [ -x "$bin/fl_bench_connect" ] && [ "${FAULTLINE_VMTEST_BENCH:-1}" = 1 ]; then
			echo "===== fl_bench_connect ====="
			"$bin/fl_bench_connect" --reps 3 --udp-iters 2000 --tcp-iters 300 --syscalls 20000 \
				--faultctl "$bin/faultctl" --json "$dir/bench-connect.json" 2>&1 ||
				echo "kernel-report: fl_bench_connect exited $?"
			echo "===== end of fl_bench_connect ====="
			[ -s "$dir/bench-connect.json" ] && echo "vmtest-bench: $(cat "$dir/bench-connect.json")"
		fi
	} >"$dir/host.log" 2>&1 || rc=$?
	grep -E '^\[ +(OK|FAILED|SKIPPED) +\] [^ ]+(, where .*)? \([0-9]+ ms\)$' "$dir/host.log" | sed 's/^/  /' || true
	grep '^vmtest-na:' "$dir/host.log" | sed 's/^vmtest-na:/  not applicable:/' || true
	if grep -q '^\[==========\] .* ran\.' "$dir/host.log"; then
		printf 'ok\n%s\n' $(($(date +%s) - start)) >"$dir/host.status"
	else
		printf 'the suite did not finish (exit %s)\n%s\n' "$rc" $(($(date +%s) - start)) >"$dir/host.status"
	fi
	echo $(($(date +%s) - start)) >"$dir/seconds"
	uname -r >"$dir/package"
}

case ${1:-} in
--collect)
	[ $# -ge 3 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
	py collect "$2" "$3" "${4:-make vmtest}"
	;;
--compare)
	[ $# -eq 3 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
	py compare "$2" "$3"
	;;
--update-docs)
	py docs "${2:-$root_dir/build/kernel-report/report.json}" "${3:-$root_dir/docs/kernel-support.md}"
	;;
--host-run)
	[ $# -eq 3 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
	host_run "$2" "$3"
	;;
--host)
	build=$(cd "$root_dir" && realpath "${2:-build}")
	work=$build/kernel-report-host
	rm -rf "$work"
	mkdir -p "$work/host"
	echo host >"$work/kernels"
	echo "kernel-report: the host's kernel $(uname -r), no VM"
	host_run "$build" "$work/host"
	py collect "$work" "$build/kernel-report/host" "make kernel-report"
	;;
*)
	sed -n '2,20p' "$0" >&2
	exit 2
	;;
esac
