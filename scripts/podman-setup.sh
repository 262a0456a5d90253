#!/usr/bin/env bash
# Makes Debian's podman usable on this kind of host, once: runc as the runtime (crun fails on
# hybrid cgroup hierarchies), cgroupfs as the cgroup manager (no systemd session here), and
# default ulimits within the host's (podman's defaults exceed them, and containers fail to
# start). Writes /etc/containers/containers.conf only when it has none of these settings;
# an existing file with its own choices is left alone. Sourced by the image and run scripts.
set -euo pipefail

conf=/etc/containers/containers.conf
if ! command -v podman >/dev/null; then
  echo "podman-setup: podman is not installed (apt-get install podman runc)" >&2
  exit 1
fi
if [ -f "$conf" ] && grep -Eq '^\s*(runtime|cgroup_manager|default_ulimits)\s*=' "$conf"; then
  exit 0
fi
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "podman-setup: writing runtime, cgroup manager and ulimits to $conf" >&2
"${sudo_cmd[@]}" mkdir -p /etc/containers
"${sudo_cmd[@]}" tee -a "$conf" >/dev/null <<'CONF'
# Written by herd's scripts/podman-setup.sh.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=1000:1000"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
