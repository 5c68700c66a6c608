#!/usr/bin/env bash
# `make install` into a DESTDIR: the binaries where the units expect them, the
# units' ExecStart rewritten to PREFIX, the docs and the manifest, and one
# version string printed by all three binaries.
# install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
dest=$(mktemp -d /tmp/fl-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
make -s -C "$src" install BUILD="$build" DESTDIR="$dest" PREFIX=/opt/faultline JOBS=2 >"$dest.log" 2>&1 || {
  cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: make install"; exit 1; }
rm -f "$dest.log"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
p=$dest/opt/faultline
check '[ -x "$p/bin/faultctl" ] && [ -x "$p/bin/faultcp" ] && [ -x "$p/sbin/faultd" ]' "binaries in bin/ and sbin/"
check 'grep -q "^ExecStart=/opt/faultline/sbin/faultd " "$p/lib/systemd/system/faultd.service"' "faultd.service runs PREFIX/sbin/faultd"
check 'grep -q "^ExecStart=/opt/faultline/bin/faultcp serve" "$p/lib/systemd/system/faultcp.service"' "faultcp.service runs PREFIX/bin/faultcp"
check '! grep -q "/usr/local/" "$p/lib/systemd/system/faultd.service" "$p/lib/systemd/system/faultcp.service"' "no /usr/local left in the units"
check '[ -f "$p/share/doc/faultline/control-plane.md" ] && [ -f "$p/share/doc/faultline/README.md" ]' "docs installed"
check '[ -f "$p/share/doc/faultline/kubernetes/faultd-daemonset.yaml" ]' "the DaemonSet manifest installed"
check '[ -z "$(find "$dest" -path "$p" -prune -o -type f -print)" ]' "nothing outside PREFIX"
check '[ -z "$(find "$p" -name "*.a" -o -name "*.h" -o -name "*.cmake")" ]' "no libraries, headers or CMake files of dependencies"
ctl=$("$p/bin/faultctl" version) cp=$("$p/bin/faultcp" version) d=$("$p/sbin/faultd" --version)
check '[ "${ctl#faultctl }" = "${cp#faultcp }" ] && [ "${cp#faultcp }" = "${d#faultd }" ]' "one version: '$ctl' '$cp' '$d'"
check '[[ "${cp#faultcp }" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]' "the version starts with the project version: $cp"
echo "installed tree:"; (cd "$dest" && find . -type f | sort | sed 's/^/  /' | head -60)
[ "$fail" -eq 0 ] && echo "PASS: make install ($cp)"
exit "$fail"
