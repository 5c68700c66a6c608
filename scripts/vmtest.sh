#!/usr/bin/env bash
# make vmtest: validates Faultline on a second kernel. Fetches Debian's current
# linux-image-cloud-amd64 with apt (cached), builds an initramfs holding this
# build's faultctl and the VM tests (selftests/vm), and boots it under qemu
# (TCG, no KVM needed, no terminal needed) twice: once with the kernel's default
# LSM list (BPF LSM active) for the LSM, EDT and clsact checks, once with an
# lsm= list without bpf for the silent-LSM-trap checks. Ends with
# "N passed, M failed" and exits non-zero on any failure.
#
# usage: scripts/vmtest.sh [BUILD_DIR]      (default: build)
# env:   FAULTLINE_VMTEST_CACHE   where kernels are kept (default ~/.cache/faultline-vmtest)
#        FAULTLINE_VMTEST_KERNEL  a package name to use instead of resolving the current one
#        FAULTLINE_VMTEST_TIMEOUT seconds per boot (default 900)
#        FAULTLINE_VMTEST_FILTER  a gtest filter for the first boot's suite (e.g. 'ClsactPacket.*')
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$root_dir" && realpath "${1:-build}")
cache=${FAULTLINE_VMTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/faultline-vmtest}
work=$build/vmtest
boot_timeout=${FAULTLINE_VMTEST_TIMEOUT:-900}
meta=linux-image-cloud-amd64

say() { echo "vmtest: $*"; }
fail() {
	echo "vmtest: $*" >&2
	echo "0 passed, 1 failed"
	exit 1
}

for b in faultctl selftests/vm/vm_tests selftests/vm/fl-vmprobe selftests/vm/fl-vmexit; do
	[ -x "$build/$b" ] || fail "$build/$b is not built (run make build, or ninja -C $build)"
done
for tool in qemu-system-x86_64 busybox cpio apt-get dpkg-deb gzip ldd; do
	command -v "$tool" >/dev/null || fail "$tool is missing: run scripts/install-deps.sh vmtest"
done

# --- the kernel: the package the meta package depends on today (it moves with ABI bumps)
resolve() { apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'; }
pkg=${FAULTLINE_VMTEST_KERNEL:-$(resolve)}
if [ -z "$pkg" ]; then
	apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null 2>&1 || true
	pkg=$(resolve)
fi
mkdir -p "$cache"
if [ -z "$pkg" ]; then
	pkg=$(find "$cache" -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null | xargs -r -n1 basename | sort -V | tail -1)
	[ -n "$pkg" ] || fail "cannot resolve $meta with apt-cache and no kernel is cached in $cache"
	say "apt cannot resolve $meta; using the cached $pkg"
fi
kver=${pkg#linux-image-}
kdir=$cache/$pkg
if [ ! -f "$kdir/.complete" ]; then
	say "downloading $pkg into $cache"
	dl=$(mktemp -d "$cache/download.XXXXXX")
	chmod 0777 "$dl" # apt drops to the _apt user for downloads
	(cd "$dl" && apt-get download -qq -o DPkg::Lock::Timeout=600 "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	deb=$(ls "$dl"/*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || { rm -rf "$dl"; fail "apt-get download $pkg failed"; }
	rm -rf "$kdir"
	dpkg-deb -x "$deb" "$kdir"
	rm -rf "$dl"
	touch "$kdir/.complete"
	# Keep one kernel: older ABIs are not tested any more.
	find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' ! -name "$pkg" -exec rm -rf {} +
fi
vmlinuz=$kdir/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || fail "$vmlinuz missing from $pkg"

# --- the initramfs
stage=$work/root
rm -rf "$stage"
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,lib/modules,opt/faultline}
cp /bin/busybox "$stage/bin/busybox"
for applet in $("$stage/bin/busybox" --list); do
	case $applet in ip | tc | ping | ping6 | busybox) continue ;; esac # the real ones are copied below
	ln -sf busybox "$stage/bin/$applet"
done

# A dynamic binary with its ldd closure (and the loader), at the paths ldd names.
copy_bin() {
	local src=$1 dst=$2 lib
	install -D -m 0755 "$(readlink -f "$src")" "$stage$dst"
	strip --strip-debug "$stage$dst" 2>/dev/null || true
	ldd "$src" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
		while read -r lib; do
			[ -e "$stage$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$stage$lib"
		done
}
copy_bin "$build/faultctl" /opt/faultline/faultctl
copy_bin "$build/selftests/vm/vm_tests" /opt/faultline/vm_tests
copy_bin "$build/selftests/vm/fl-vmprobe" /opt/faultline/fl-vmprobe
install -m 0755 "$build/selftests/vm/fl-vmexit" "$stage/opt/faultline/fl-vmexit"
copy_bin "$(command -v ip)" /usr/sbin/ip
copy_bin "$(command -v tc)" /usr/sbin/tc
copy_bin "$(command -v ping)" /usr/bin/ping
for m in drivers/net/veth net/sched/sch_fq net/sched/sch_netem net/sched/sch_ingress net/sched/cls_bpf; do
	ko=$(ls "$kdir/lib/modules/$kver/kernel/$m".ko* 2>/dev/null | head -1)
	[ -n "$ko" ] || fail "module $m not in $pkg"
	case $ko in
	*.xz) xz -dc "$ko" >"$stage/lib/modules/$(basename "$m").ko" ;;
	*.zst) zstd -qdc "$ko" >"$stage/lib/modules/$(basename "$m").ko" ;;
	*) cp "$ko" "$stage/lib/modules/$(basename "$m").ko" ;;
	esac
done
install -m 0755 "$root_dir/selftests/vm/guest_init.sh" "$stage/init"
echo faultline-vm >"$stage/etc/hostname"
echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$work/initrd.gz"
say "kernel $kver, initramfs $(du -h "$work/initrd.gz" | cut -f1)"

# --- boot, twice
total_pass=0
total_fail=0
boot() {
	local name=$1 append=$2 log=$work/$1.log start rc=0 line p f
	start=$(date +%s)
	timeout "$boot_timeout" qemu-system-x86_64 -accel tcg -m 1G -smp 1 -no-reboot -nic none \
		-display none -monitor none -serial "file:$log" \
		-device isa-debug-exit,iobase=0xf4,iosize=0x04 \
		-kernel "$vmlinuz" -initrd "$work/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet $append" </dev/null >"$work/$name.qemu" 2>&1 || rc=$?
	tr -d '\r' <"$log" >"$log.txt" && mv "$log.txt" "$log"
	grep -E '^\[ +(OK|FAILED) +\] [A-Za-z]+\.[A-Za-z]+ \(' "$log" | sed 's/^/  /' || true
	grep '^vmtest-figure:' "$log" | sed 's/^vmtest-figure:/  figure:/' || true
	line=$(grep -E '^vmtest-guest: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1 || true)
	if [ -z "$line" ]; then
		say "$name: no verdict from the guest (qemu exit $rc after $(($(date +%s) - start)) s); the end of $log:"
		tail -n 30 "$log" | sed 's/^/  | /'
		total_fail=$((total_fail + 1))
		return
	fi
	p=$(echo "$line" | sed -E 's/.* ([0-9]+) passed.*/\1/')
	f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
	# isa-debug-exit makes qemu exit with (code << 1) | 1.
	if [ "$rc" -ne $(((f > 100 ? 100 : f) * 2 + 1)) ]; then
		say "$name: qemu exit $rc does not carry the guest's verdict ($f failed)"
		f=$((f + 1))
	fi
	say "$name: kernel $kver, $p passed, $f failed in $(($(date +%s) - start)) s (log: $log)"
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
}

boot lsm-default "fl_suite=main${FAULTLINE_VMTEST_FILTER:+ fl_filter=$FAULTLINE_VMTEST_FILTER}"
sed -n '/^===== faultctl features =====$/,/^===== end of faultctl features =====$/p' "$work/lsm-default.log" |
	sed '1d;$d' >"$work/features-$kver.txt"
boot lsm-without-bpf "fl_suite=nolsm lsm=landlock,lockdown,yama"
sed -n '/^===== faultctl features =====$/,/^===== end of faultctl features =====$/p' "$work/lsm-without-bpf.log" |
	sed '1d;$d' >"$work/features-$kver-nobpf.txt"
say "faultctl features on $kver: $work/features-$kver.txt"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
