#!/usr/bin/env bash
# The main job on this machine. Installs what is missing and builds; then, until the training
# job lands, runs a small collectives benchmark: herd's ring allreduce, reduce-scatter and
# all-gather across 4 processes over UCX, checked against a reference and compared with
# OpenMPI and Gloo in the same rank layout.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec ./build/bin/herd bench collectives --ranks 4 --ops allreduce,reduce_scatter,allgather \
  --sizes 64K,1M,16M --iters 10 --check "$@"
