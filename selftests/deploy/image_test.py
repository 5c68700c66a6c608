#!/usr/bin/env python3
"""make image: the OCI archive scripts/build-image.sh writes holds an image that
starts. Its layers are unpacked into a folder and faultd, faultctl and faultcp
are run from it with chroot (the image's own files only: its loader, its
libraries), and its config's entrypoint is faultd.
usage: image_test.py SOURCE_DIR BUILD_DIR   (root: chroot)
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

src, build = sys.argv[1], sys.argv[2]
if os.geteuid() != 0:
    print("SKIPPED: deploy.image needs root (chroot into the unpacked image); run it as root")
    sys.exit(0)

with tempfile.TemporaryDirectory(prefix="fl-image-test-") as tmp:
    archive = os.path.join(tmp, "faultline.oci.tar")
    subprocess.run([os.path.join(src, "scripts/build-image.sh"), build, archive], check=True)
    oci = os.path.join(tmp, "oci")
    with tarfile.open(archive) as t:
        t.extractall(oci)

    def blob(digest):
        return os.path.join(oci, "blobs", *digest.split(":"))

    index = json.load(open(os.path.join(oci, "index.json")))
    manifest = json.load(open(blob(index["manifests"][0]["digest"])))
    config = json.load(open(blob(manifest["config"]["digest"])))
    entry = config["config"].get("Entrypoint")
    assert entry == ["/usr/sbin/faultd"], f"entrypoint {entry}, want /usr/sbin/faultd"
    rootfs = os.path.join(tmp, "rootfs")
    os.mkdir(rootfs)
    for layer in manifest["layers"]:
        with tarfile.open(blob(layer["digest"])) as t:
            t.extractall(rootfs)

    want = subprocess.run([os.path.join(build, "faultd"), "--version"], capture_output=True, text=True,
                          check=True).stdout.split()[1]
    for argv in (["/usr/sbin/faultd", "--version"], ["/usr/bin/faultctl", "version"], ["/usr/bin/faultcp", "version"]):
        p = subprocess.run(["/usr/sbin/chroot", rootfs] + argv, capture_output=True, text=True, env={})
        print(f"{' '.join(argv)}: exit {p.returncode}: {p.stdout.strip()} {p.stderr.strip()}")
        assert p.returncode == 0, f"{argv[0]} did not start from the image alone"
        assert want in p.stdout, f"{argv[0]}: version {p.stdout.strip()!r}, want {want}"
    assert os.path.exists(os.path.join(rootfs, "etc/ssl/certs/ca-certificates.crt")), "no CA bundle"
    print(f"ok: the image starts faultd, faultctl and faultcp {want} with its own files")
