#!/usr/bin/env bash
# make vmtest: validates Faultline on a matrix of real kernels. For each kernel
# named in KERNELS it fetches the Debian cloud kernel package with apt (cached,
# one per name), builds an initramfs holding this build's faultctl, the VM tests
# (selftests/vm) and the in-guest benchmark, and boots it under qemu (TCG, no KVM
# needed, no terminal needed), one kernel after another, twice each: with the
# kernel's default LSM list (BPF LSM active) for the main suite, and with an lsm=
# list without bpf for the silent-LSM-trap checks. Then scripts/kernel-report.sh
# writes BUILD/kernel-report/report.{json,md} and prints the summary table.
# Ends with "N passed, M failed" and exits non-zero on any failure (a kernel that
# cannot be fetched or boot counts as one failure, named as such in the report).
#
# usage: scripts/vmtest.sh [BUILD_DIR]      (default: build)
# env:   KERNELS                  the kernels, by name (default: "host bookworm trixie"):
#                                   bookworm  Debian 12's linux-image-cloud-amd64 (6.1), from the system's apt
#                                   trixie    Debian 13's linux-image-cloud-amd64 (6.12), through a private
#                                             apt configuration under the cache (the system's sources,
#                                             lists and caches are never touched)
#                                   host      this machine's kernel, no VM (scripts/kernel-report.sh --host)
#        FAULTLINE_VMTEST_CACHE   where kernels and the private apt state are kept
#                                 (default ~/.cache/faultline-vmtest)
#        FAULTLINE_VMTEST_KERNEL  bookworm only: a package name to use instead of resolving the current one
#        FAULTLINE_VMTEST_TIMEOUT seconds per boot before qemu is stopped and the boot reported as cut (default 420)
#        FAULTLINE_VMTEST_FILTER  a gtest filter for the first boot's suite (e.g. 'Packet*')
#        FAULTLINE_VMTEST_BENCH   0 to leave the in-guest benchmark out
#        FAULTLINE_VMTEST_LIBBPF_LOG 1: faultctl prints libbpf's and the verifier's log in the guest
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$root_dir" && realpath "${1:-build}")
cache=${FAULTLINE_VMTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/faultline-vmtest}
work=$build/vmtest
boot_timeout=${FAULTLINE_VMTEST_TIMEOUT:-420}
kernels=${KERNELS:-host bookworm trixie}
bench=${FAULTLINE_VMTEST_BENCH:-1}
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
if [ "$bench" = 1 ] && [ ! -x "$build/bench/fl_bench_progrun" ]; then
	say "$build/bench/fl_bench_progrun is not built: the in-guest benchmark is left out"
	bench=0
fi
for tool in qemu-system-x86_64 busybox cpio apt-get apt-cache dpkg-deb gzip xz ldd python3; do
	command -v "$tool" >/dev/null || fail "$tool is missing: run scripts/install-deps.sh vmtest"
done
for k in $kernels; do
	case $k in bookworm | trixie | host) ;; *) fail "unknown kernel '$k' in KERNELS (known: bookworm trixie host)" ;; esac
done
mkdir -p "$cache" "$work"

# --- fetching a kernel -------------------------------------------------------------
# Both set pkg (the versioned package the meta package depends on today: it moves
# with ABI bumps) or return non-zero with the reason in $why.

# Debian 12's kernel: the system's own apt (the machine runs Debian 12).
resolve_system() {
	r() { apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'; }
	pkg=${FAULTLINE_VMTEST_KERNEL:-$(r)}
	if [ -z "$pkg" ]; then
		apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null 2>&1 || true
		pkg=$(r)
	fi
	[ -n "$pkg" ] || { why="apt-cache cannot resolve $meta"; return 1; }
}

# Another Debian release: a private apt configuration (its own sources file, lists
# and package cache under $cache/apt/SUITE; an empty dpkg status). apt checks the
# suite's InRelease signature against Debian's archive keyring and every
# downloaded .deb against the hashes of the signed lists, as it does for the system.
private_apt() {
	local suite=$1
	local d=$cache/apt/$suite
	apt_opts=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$d/lists"
		-o "Dir::Cache=$d/cache" -o Dir::State::status=/dev/null)
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	echo "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" >"$d/sources.list.new"
	cmp -s "$d/sources.list.new" "$d/sources.list" 2>/dev/null || rm -f "$d/lists/"*_InRelease
	mv "$d/sources.list.new" "$d/sources.list"
}
resolve_private() {
	local suite=$1 d=$cache/apt/$1
	[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || { why="no /usr/share/keyrings/debian-archive-keyring.gpg (package debian-archive-keyring)"; return 1; }
	private_apt "$suite"
	r() { apt-cache "${apt_opts[@]}" depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'; }
	# Lists older than a day are refreshed; a failed refresh keeps the old ones.
	if [ -z "$(find "$d/lists" -maxdepth 1 -name '*_InRelease' -mmin -1440 2>/dev/null)" ]; then
		say "$suite: apt-get update (private lists in $d)"
		apt-get "${apt_opts[@]}" update -qq 2>&1 | grep -v '^W: Download is performed unsandboxed' | sed "s/^/  $suite apt: /" || true
	fi
	pkg=$(r)
	[ -n "$pkg" ] || { why="apt (private lists for $suite in $d) cannot resolve $meta"; return 1; }
}

# Downloads and unpacks $pkg into $cache/NAME/$pkg; keeps only that one for NAME.
fetch_kernel() {
	local name=$1 dl deb
	kdir=$cache/$name/$pkg
	[ -f "$kdir/.complete" ] && return 0
	# The layout before the matrix kept the bookworm kernel at the top level.
	if [ "$name" = bookworm ] && [ -f "$cache/$pkg/.complete" ]; then
		mkdir -p "$cache/$name"
		mv "$cache/$pkg" "$kdir"
		return 0
	fi
	say "$name: downloading $pkg into $cache/$name"
	mkdir -p "$cache/$name"
	dl=$(mktemp -d "$cache/download.XXXXXX")
	chmod 0777 "$dl" # apt drops to the _apt user for downloads
	if [ "$name" = bookworm ]; then
		(cd "$dl" && apt-get download -qq -o DPkg::Lock::Timeout=600 "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	else
		(cd "$dl" && apt-get "${apt_opts[@]}" download -qq "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
	fi
	deb=$(ls "$dl"/*.deb 2>/dev/null | head -1)
	if [ -z "$deb" ]; then
		rm -rf "$dl"
		why="apt-get download $pkg failed"
		return 1
	fi
	rm -rf "$kdir"
	dpkg-deb -x "$deb" "$kdir"
	rm -rf "$dl"
	touch "$kdir/.complete"
	# One kernel per name: older ABIs are not tested any more.
	find "$cache/$name" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' ! -name "$pkg" -exec rm -rf {} +
}

# When apt cannot resolve (offline), the newest kernel cached for the name.
cached_kernel() {
	local name=$1
	pkg=$(find "$cache/$name" -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null | xargs -r -n1 basename | sort -V | tail -1)
	[ -n "$pkg" ]
}

# --- the initramfs -------------------------------------------------------------------
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

# The part every kernel shares: busybox, iproute2, ping, the binaries, /init.
common=$work/common
build_common() {
	stage=$common
	rm -rf "$stage"
	mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,lib/modules,opt/faultline}
	cp /bin/busybox "$stage/bin/busybox"
	for applet in $("$stage/bin/busybox" --list); do
		case $applet in ip | tc | ping | ping6 | busybox) continue ;; esac # the real ones are copied below
		ln -sf busybox "$stage/bin/$applet"
	done
	copy_bin "$build/faultctl" /opt/faultline/faultctl
	copy_bin "$build/selftests/vm/vm_tests" /opt/faultline/vm_tests
	copy_bin "$build/selftests/vm/fl-vmprobe" /opt/faultline/fl-vmprobe
	[ "$bench" = 1 ] && copy_bin "$build/bench/fl_bench_progrun" /opt/faultline/fl_bench_progrun
	[ "$bench" = 1 ] && [ -x "$build/bench/fl_bench_connect" ] && copy_bin "$build/bench/fl_bench_connect" /opt/faultline/fl_bench_connect
	install -m 0755 "$build/selftests/vm/fl-vmexit" "$stage/opt/faultline/fl-vmexit"
	copy_bin "$(command -v ip)" /usr/sbin/ip
	copy_bin "$(command -v tc)" /usr/sbin/tc
	copy_bin "$(command -v ping)" /usr/bin/ping
	install -m 0755 "$root_dir/selftests/vm/guest_init.sh" "$stage/init"
	echo faultline-vm >"$stage/etc/hostname"
	echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
	(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) >"$work/common.cpio"
}

# The kernel's modules, appended to the common archive (a cpio may be concatenated).
build_initrd() {
	local out=$1 m ko mods mdir=$kdir/lib/modules/$kver
	# Debian 13 ships its modules under /usr/lib (merged /usr), xz-compressed.
	[ -d "$mdir" ] || mdir=$kdir/usr/lib/modules/$kver
	mods=$(mktemp -d "$work/mods.XXXXXX")
	mkdir -p "$mods/lib/modules"
	for m in drivers/net/veth net/sched/sch_fq net/sched/sch_netem net/sched/sch_ingress net/sched/cls_bpf; do
		ko=$(ls "$mdir/kernel/$m".ko* 2>/dev/null | head -1)
		if [ -z "$ko" ]; then
			rm -rf "$mods"
			why="module $m not in $pkg"
			return 1
		fi
		case $ko in
		*.xz) xz -dc "$ko" >"$mods/lib/modules/$(basename "$m").ko" ;;
		*.zst) zstd -qdc "$ko" >"$mods/lib/modules/$(basename "$m").ko" ;;
		*) cp "$ko" "$mods/lib/modules/$(basename "$m").ko" ;;
		esac
	done
	{
		cat "$work/common.cpio"
		(cd "$mods" && find lib -print0 | cpio --null -o -H newc --quiet)
	} | gzip -1 >"$out"
	rm -rf "$mods"
}

# --- a boot ------------------------------------------------------------------------
# boot NAME BOOT APPEND: boots, then writes $kwork/BOOT.status (how it ended) next
# to the serial log $kwork/BOOT.log; kernel-report.sh reads both.
boot() {
	local name=$1 which=$2 append=$3 log=$kwork/$2.log start rc=0 line f secs status
	start=$(date +%s)
	timeout --kill-after=10 "$boot_timeout" qemu-system-x86_64 -accel tcg -m 1G -smp 1 -no-reboot -nic none \
		-display none -monitor none -serial "file:$log" \
		-device isa-debug-exit,iobase=0xf4,iosize=0x04 \
		-kernel "$vmlinuz" -initrd "$kwork/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet $append" </dev/null >"$kwork/$which.qemu" 2>&1 || rc=$?
	secs=$(($(date +%s) - start))
	tr -d '\r' <"$log" >"$log.txt" && mv "$log.txt" "$log"
	grep -E '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z0-9_/]+\.[A-Za-z0-9_/]+(, where .*)? \([0-9]+ ms\)$' "$log" | sed 's/^/  /' || true
	grep '^vmtest-na:' "$log" | sed 's/^vmtest-na:/  not applicable:/' || true
	grep '^vmtest-figure:' "$log" | sed 's/^vmtest-figure:/  figure:/' || true
	line=$(grep -E '^vmtest-guest: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1 || true)
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		status="timeout after ${secs} s (FAULTLINE_VMTEST_TIMEOUT=$boot_timeout)"
	elif [ -z "$line" ]; then
		status="no verdict from the guest (qemu exit $rc after $secs s)"
	else
		f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
		# isa-debug-exit makes qemu exit with (code << 1) | 1.
		if [ "$rc" -ne $(((f > 100 ? 100 : f) * 2 + 1)) ]; then
			status="qemu exit $rc does not carry the guest's verdict ($f failed)"
		else
			status=ok
		fi
	fi
	printf '%s\n%s\n' "$status" "$secs" >"$kwork/$which.status"
	if [ "$status" = ok ]; then
		say "$name/$which: kernel $kver: ${line#vmtest-guest: } in $secs s (log: $log)"
	else
		say "$name/$which: $status; the end of $log:"
		tail -n 30 "$log" | sed 's/^/  | /'
	fi
}

# --- the matrix ----------------------------------------------------------------------
rm -rf "${work:?}"/*
mkdir -p "$work"
echo "$kernels" >"$work/kernels"
build_common
say "initramfs common part: $(du -h "$work/common.cpio" | cut -f1) (uncompressed)"
for name in $kernels; do
	kwork=$work/$name
	mkdir -p "$kwork"
	kstart=$(date +%s)
	if [ "$name" = host ]; then
		say "host: the host's kernel $(uname -r), no VM"
		"$root_dir/scripts/kernel-report.sh" --host-run "$build" "$kwork" || true
		continue
	fi
	why=""
	pkg=""
	ok=1
	case $name in
	bookworm) resolve_system || ok=0 ;;
	trixie) resolve_private trixie || ok=0 ;;
	esac
	if [ "$ok" = 0 ]; then
		if cached_kernel "$name"; then
			say "$name: $why; using the cached $pkg"
			ok=1
		fi
	fi
	[ "$ok" = 1 ] && { fetch_kernel "$name" || ok=0; }
	if [ "$ok" = 1 ]; then
		kver=${pkg#linux-image-}
		vmlinuz=$kdir/boot/vmlinuz-$kver
		[ -f "$vmlinuz" ] || { why="$vmlinuz missing from $pkg"; ok=0; }
	fi
	[ "$ok" = 1 ] && { build_initrd "$kwork/initrd.gz" || ok=0; }
	if [ "$ok" = 0 ]; then
		say "$name: cannot be tested: $why"
		printf '%s\n' "$why" >"$kwork/unavailable"
		continue
	fi
	echo "$pkg" >"$kwork/package"
	say "$name: kernel $kver, initramfs $(du -h "$kwork/initrd.gz" | cut -f1)"
	extra=${FAULTLINE_VMTEST_LIBBPF_LOG:+fl_libbpf_log=$FAULTLINE_VMTEST_LIBBPF_LOG}
	boot "$name" lsm-default "fl_suite=main fl_bench=$bench${FAULTLINE_VMTEST_FILTER:+ fl_filter=$FAULTLINE_VMTEST_FILTER} $extra"
	boot "$name" lsm-without-bpf "fl_suite=nolsm lsm=landlock,lockdown,yama $extra"
	echo $(($(date +%s) - kstart)) >"$kwork/seconds"
	say "$name: done in $(cat "$kwork/seconds") s"
done

# --- the report ----------------------------------------------------------------------
"$root_dir/scripts/kernel-report.sh" --collect "$work" "$build/kernel-report"
