#!/bin/sh
# /init of the vmtest guest (scripts/vmtest.sh): mount what faultctl and the tests
# need, load the modules (there is no on-demand module loader), print the
# kernel's `faultctl features` (text and JSON, between marker lines the host's
# scripts/kernel-report.sh reads), run the suite named by fl_suite= on the kernel
# command line, with fl_bench=1 the BPF_PROG_TEST_RUN benchmark, print
# "vmtest-guest: N passed, M failed" and hand M to qemu.
# busybox sh runs its own applets before $PATH: iproute2 is called by full path.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t securityfs securityfs /sys/kernel/security
mount -t cgroup2 cgroup2 /sys/fs/cgroup
for m in veth sch_fq sch_netem sch_ingress cls_bpf; do
	insmod /lib/modules/$m.ko || echo "vmtest-guest: insmod $m failed"
done
/usr/sbin/ip link set lo up

suite=main
for arg in $(cat /proc/cmdline); do
	case $arg in
	fl_suite=*) suite=${arg#fl_suite=} ;;
	fl_filter=*) only=${arg#fl_filter=} ;;
	fl_bench=*) bench=${arg#fl_bench=} ;;
	fl_libbpf_log=1) export FAULTLINE_LIBBPF_LOG=1 ;; # the verifier's log of every load, for a failing one
	esac
done
echo "vmtest-guest: kernel $(uname -r), active LSMs $(cat /sys/kernel/security/lsm), suite $suite"
echo "===== faultctl features ====="
/opt/faultline/faultctl features
echo "===== end of faultctl features ====="
echo "===== faultctl features --json ====="
/opt/faultline/faultctl features --json
echo "===== end of faultctl features --json ====="
# What the verifier spends on each program here (exit 1 over budget: the report says so).
echo "===== faultctl features --verifier-cost --json ====="
/opt/faultline/faultctl features --verifier-cost --json || true
echo "===== end of faultctl features --verifier-cost --json ====="

case $suite in
nolsm) filter='NoBpfLsm.*' ;;
*) filter="${only:-*}-NoBpfLsm.*" ;;
esac
# Straight to the console as it runs: a boot cut by the host's timeout still shows
# every test that finished.
/opt/faultline/vm_tests --gtest_filter="$filter" --gtest_color=no 2>&1 | tee /tmp/gtest.log
passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' /tmp/gtest.log)
failed=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*listed below.*/\1/p' /tmp/gtest.log)
passed=${passed:-0}
failed=${failed:-0}
# No summary at all: the test binary crashed or never ran.
grep -q '^\[==========\] .* ran\.' /tmp/gtest.log || failed=$((failed + 1))
# The benchmark: ratios measured in this guest's own run, so emulation speed cancels
# out. Its figures are reported, never counted as passed or failed.
if [ "${bench:-0}" = 1 ] && [ -x /opt/faultline/fl_bench_progrun ]; then
	echo "===== fl_bench_progrun ====="
	/opt/faultline/fl_bench_progrun --quick --json /tmp/bench.json >/tmp/bench.log 2>&1 || echo "vmtest-guest: fl_bench_progrun exited $?"
	cat /tmp/bench.log
	echo "===== end of fl_bench_progrun ====="
	[ -s /tmp/bench.json ] && echo "vmtest-bench: $(cat /tmp/bench.json)"
fi
if [ "${bench:-0}" = 1 ] && [ -x /opt/faultline/fl_bench_connect ]; then
	echo "===== fl_bench_connect ====="
	/opt/faultline/fl_bench_connect --reps 3 --udp-iters 2000 --tcp-iters 300 --syscalls 20000 \
		--faultctl /opt/faultline/faultctl --json /tmp/bench-connect.json >/tmp/bench-connect.log 2>&1 ||
		echo "vmtest-guest: fl_bench_connect exited $?"
	cat /tmp/bench-connect.log
	echo "===== end of fl_bench_connect ====="
	[ -s /tmp/bench-connect.json ] && echo "vmtest-bench: $(cat /tmp/bench-connect.json)"
fi
echo "vmtest-guest: $passed passed, $failed failed"
sync
code=$failed
[ "$code" -gt 100 ] && code=100
/opt/faultline/fl-vmexit "$code"
poweroff -f
