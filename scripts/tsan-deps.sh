#!/usr/bin/env bash
# Builds ThreadSanitizer-instrumented copies of Debian's own abseil, protobuf, gRPC and RocksDB:
# the very source packages of the versions installed (`apt-get source`, from a deb-src line for
# the machine's own Debian mirror), built by Debian's own rules with -fsanitize=thread added.
# Their shared libraries keep Debian's names and ABI, so a TSan build of herd (the tsan preset,
# linked against Debian's packages as always) runs with them in their place:
#
#   scripts/tsan-deps.sh            # once; cached in build-tsan/deps (a stamp per version)
#   scripts/sanitize.sh tsan ...    # puts build-tsan/deps/lib first on LD_LIBRARY_PATH
#
# Why: TSan sees only the synchronisation of instrumented code. Debian's gRPC, abseil and
# RocksDB hand strings and buffers between their threads through locks and atomics TSan cannot
# see, and every test that makes a gRPC call stopped at such a report (docs/errors.md,
# "Sanitizers"); ignore_noninstrumented_modules=1 hides the accesses inside them, not the ones
# of herd's code inlined from their headers.
#
# Slow on two cores (hours: gRPC is the longest) and outside the default suite. Needs root (or
# sudo) for the deb-src line and the build dependencies (Debian packages only). Nothing is
# installed system-wide but those build dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$PWD/build-tsan/deps
mkdir -p "$root/src" "$root/lib"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
lock=(nice -n 15 flock -s /tmp/herd-cpu.lock)
command -v flock >/dev/null || lock=(nice -n 15)

# deb-src for the same mirrors as the machine's deb lines (deb822 sources of Debian 12).
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  src=/etc/apt/sources.list.d/herd-deb-src.sources
  sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
    "${sudo_cmd[@]}" tee "$src" >/dev/null
  "${sudo_cmd[@]}" apt-get update -qq
fi

# source package : the binary package whose installed version is built
pairs=(abseil:libabsl-dev protobuf:libprotobuf-dev grpc:libgrpc++-dev rocksdb:librocksdb-dev)
for pair in "${pairs[@]}"; do
  pkg=${pair%%:*}
  bin=${pair#*:}
  version=$(dpkg-query -W -f='${source:Version}' "$bin")
  stamp=$root/$pkg-$version.done
  if [ -f "$stamp" ]; then
    echo "tsan-deps: $pkg $version: cached"
    continue
  fi
  echo "tsan-deps: $pkg $version: building with -fsanitize=thread" >&2
  work=$root/src/$pkg
  rm -rf "$work"
  mkdir -p "$work"
  (cd "$work" && apt-get source -qq "$pkg=$version" >/dev/null)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$pkg=$version" \
    >/dev/null
  dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
  (cd "$dir" &&
    DEB_BUILD_OPTIONS="nocheck nodoc noddebs parallel=2" \
      DEB_CFLAGS_APPEND="-fsanitize=thread -fno-omit-frame-pointer" \
      DEB_CXXFLAGS_APPEND="-fsanitize=thread -fno-omit-frame-pointer" \
      DEB_LDFLAGS_APPEND="-fsanitize=thread" \
      "${lock[@]}" dpkg-buildpackage -b -uc -us >"$work/build.log" 2>&1) || {
    echo "tsan-deps: $pkg failed; see $work/build.log" >&2
    tail -20 "$work/build.log" >&2
    exit 1
  }
  # The shared libraries of every binary package built, under their Debian names.
  for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
  done
  find "$work/root" -name 'lib*.so.*' \( -type f -o -type l \) -exec cp -a {} "$root/lib/" \;
  rm -rf "$dir" "$work"/*.deb "$work/root"
  touch "$stamp"
done
echo "tsan-deps: instrumented libraries in $root/lib"
