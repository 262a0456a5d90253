#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries the given executables load directly
# (their DT_NEEDED entries, resolved by ldd): the runtime stage installs exactly these, and apt
# brings their own dependencies. Run in the build stage on the built binaries, so the list
# follows the build (a new library linked is a new package installed) with nothing to maintain.
# Fails, naming it, on a library no package owns.
set -euo pipefail

owner() {  # the package owning a library path; Debian 12 merged /lib into /usr/lib, and dpkg
  local path=$1 candidate  # knows each file under the one name its package shipped.
  for candidate in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    if out=$(dpkg -S "$candidate" 2>/dev/null); then
      echo "${out%%:*}" | cut -d, -f1
      return 0
    fi
  done
  return 1
}

for exe in "$@"; do
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for lib in $needed; do
    path=$(ldd "$exe" | awk -v lib="$lib" '$1 == lib && $3 ~ /^\// { print $3 }')
    if [ -z "$path" ]; then
      case "$lib" in ld-linux*) continue ;; esac  # the loader itself (libc6)
      echo "runtime-packages: $exe needs $lib, which ldd does not resolve" >&2
      exit 1
    fi
    owner "$path" || { echo "runtime-packages: no package owns $path ($lib of $exe)" >&2; exit 1; }
  done
done | sort -u
