#!/usr/bin/env bash
# make image: the OCI image the DaemonSet runs (deploy/kubernetes/), built from
# the binaries of BUILD with Debian's buildah, no network and no base image:
# FROM scratch, then faultd, faultctl and faultcp, the shared libraries they
# load (as ldd lists them), the dynamic loader, the CA bundle and the tzdata.
#
# usage: scripts/build-image.sh BUILD [OUT]
#   OUT: the OCI archive to write (default BUILD/image/faultline-VERSION.oci.tar),
#   tagged faultline/faultd:VERSION. Load it with
#   `podman load -i OUT` or `skopeo copy oci-archive:OUT docker://REGISTRY/...`.
# buildah's storage is a folder of BUILD/image, removed at the end: nothing is
# left in the machine's container storage.
set -euo pipefail

build=$(realpath "${1:?usage: scripts/build-image.sh BUILD [OUT]}")
for b in faultd faultctl faultcp; do
  [[ -x $build/$b ]] || { echo "build-image: $build/$b is not built (ninja -C $build faultd faultctl faultcp)" >&2; exit 2; }
done
command -v buildah >/dev/null || { echo "build-image: buildah is not installed (scripts/install-deps.sh image)" >&2; exit 2; }
version=$("$build/faultd" --version | awk '{print $2}')
out=${2:-$build/image/faultline-$version.oci.tar}
work=$build/image/work.$$
mkdir -p "$(dirname "$out")" "$work"
bah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
container=""
cleanup() {
  [[ -n $container ]] && "${bah[@]}" rm "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

container=$("${bah[@]}" from scratch)
root=$("${bah[@]}" mount "$container")
install -D -s -m 0755 "$build/faultd" "$root/usr/sbin/faultd"
install -D -s -m 0755 "$build/faultctl" "$root/usr/bin/faultctl"
install -D -s -m 0755 "$build/faultcp" "$root/usr/bin/faultcp"
# Every library the three binaries load, at the path the loader looks for it.
for lib in $(ldd "$build/faultd" "$build/faultctl" "$build/faultcp" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
  install -D -m 0755 "$(realpath "$lib")" "$root$lib"
done
install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# faultcp's schedules read their IANA time zones from the tzdata (libdate-tz).
mkdir -p "$root/usr/share" && cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
mkdir -p "$root/run/faultline" "$root/tmp" "$root/sys/fs/bpf"
chmod 1777 "$root/tmp"
"${bah[@]}" umount "$container" >/dev/null

"${bah[@]}" config \
  --entrypoint '["/usr/sbin/faultd"]' --cmd '--foreground' \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --label org.opencontainers.image.title=faultd \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="Faultline: faultd, faultctl and faultcp" \
  "$container"
rm -f "$out"
"${bah[@]}" commit --quiet "$container" "oci-archive:$out:faultline/faultd:$version" >/dev/null
echo "build-image: $out (faultline/faultd:$version, $(du -h "$out" | cut -f1))"
