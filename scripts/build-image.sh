#!/usr/bin/env bash
# Builds herd's image (deploy/docker/Dockerfile) with podman, from the local Debian 12 base
# (scripts/make-base-image.sh makes it when it is missing), never pulling.
#   scripts/build-image.sh [TAG]                  (default TAG localhost/herd:dev)
# Environment: JOBS (compile jobs, default 2), NICE (niceness, default 10), HERD_CPU_LOCK (a
# lock file shared with other builds on this host, default /tmp/herd-cpu.lock).
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-localhost/herd:dev}
./scripts/podman-setup.sh
./scripts/make-base-image.sh

lock=${HERD_CPU_LOCK:-/tmp/herd-cpu.lock}
start=$(date +%s)
nice -n "${NICE:-10}" flock -s "$lock" \
  podman build --pull=never --layers -f deploy/docker/Dockerfile \
    --build-arg JOBS="${JOBS:-2}" -t "$tag" .
podman image exists "$tag" || { echo "build-image: podman build ended without $tag" >&2; exit 1; }
echo "build-image: $tag built in $(( $(date +%s) - start )) s" >&2
podman image ls "$tag"
