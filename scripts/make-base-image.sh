#!/usr/bin/env bash
# Makes the Debian 12 base image locally, for hosts that cannot pull one: mmdebstrap builds a
# minimal bookworm root filesystem from Debian's package mirror (with -updates and -security),
# and `podman import` tags it as the name the Dockerfile starts FROM (debian:12, which podman
# resolves to docker.io/library/debian:12). Elsewhere, Docker pulls the official image instead.
#   scripts/make-base-image.sh [--force] [MIRROR]    (default MIRROR http://deb.debian.org)
set -euo pipefail
cd "$(dirname "$0")/.."

force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
mirror=${1:-http://deb.debian.org}
tag=docker.io/library/debian:12

./scripts/podman-setup.sh
if [ "$force" = 0 ] && podman image exists "$tag"; then
  echo "make-base-image: $tag exists (--force to make it again)" >&2
  exit 0
fi
for tool in mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "make-base-image: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# minbase: essential packages + apt, as the official image. ca-certificates for https mirrors.
mmdebstrap --variant=minbase --include=ca-certificates \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$work/rootfs.tar" \
  "deb $mirror/debian bookworm main" \
  "deb $mirror/debian bookworm-updates main" \
  "deb $mirror/debian-security bookworm-security main"

podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' \
  --message "Debian 12 (bookworm) minbase from $mirror, made by mmdebstrap" \
  "$work/rootfs.tar" "$tag" >/dev/null
podman image ls "$tag"
