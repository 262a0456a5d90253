#!/usr/bin/env bash
# The whole suite: installs what is missing, builds, runs every test with ctest.
# GPU (NCCL) tests report themselves skipped, with the reason, on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
ctest --preset default -j"$(nproc)" --timeout 300 "$@"
