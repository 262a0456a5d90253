#!/usr/bin/env bash
# Installs every Debian package that herd's build, tests, benchmarks and demo need.
# Idempotent: packages already present are left alone, and `apt-get update` only runs
# when something is missing. Needs root (or sudo) only when it has something to install.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git clang-format
  # the fuzz preset and scripts/fuzz.sh: clang with libFuzzer and the sanitizers' runtimes
  clang libclang-rt-14-dev
  # test certificates for the TLS tests (openssl req)
  openssl
  # libraries found with find_package
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libucx-dev ucx-utils
  librocksdb-dev
  # XXH3 checksums of checkpoints
  libxxhash-dev
  # YAML JobSpec files of `herd job submit`
  libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libabsl-dev
  # Prometheus metrics of every process (metrics/), the Prometheus server the metrics test
  # scrapes them with, and gnuplot for `herd plot`
  prometheus-cpp-dev prometheus gnuplot-nox
  # the metrics endpoint's HTTP server (metrics/endpoint.cc): connection limits and timeouts
  libmicrohttpd-dev
  # peers of the collectives benchmark
  libopenmpi-dev openmpi-bin libgloo-dev
  # network namespaces and bandwidth caps of the cluster emulator
  iproute2
  # the worker: libtorch (CPU) for the models, zlib for the gzip-compressed dataset, and the
  # Fashion-MNIST dataset itself (/usr/share/datasets/fashion-mnist)
  libtorch-dev zlib1g-dev dataset-fashion-mnist
  # the Python front end (herd.torch): Debian's torch for /usr/bin/python3 (the same libtorch
  # build as libtorch-dev) and pybind11 for the extension module
  python3-dev python3-torch python3-pybind11 pybind11-dev
  # the Kubernetes manifests' tests (deploy/k8s/tests): PyYAML reads what kubectl renders
  python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The manifests' schema checks run the npm packages pinned in deploy/k8s/validate (installed by
# the test itself with `npm ci` into the build tree). Debian's nodejs and npm only where no npm
# is installed: a node from elsewhere (e.g. NodeSource's, which bundles npm) is kept.
if ! command -v npm >/dev/null 2>&1; then
  for p in nodejs npm; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
