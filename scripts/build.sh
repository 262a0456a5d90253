#!/usr/bin/env bash
# Configures and builds herd in build/ (the `default` preset). Used by test.sh and demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
