#!/usr/bin/env bash
# The main job on this machine: 4 workers train the CNN on Fashion-MNIST in the `dear` mode
# (reduce-scatter overlapped with backward, all-gather with the next forward), coordinated by
# a real scheduler, all as child processes of `herd local` on loopback. Installs what is missing
# and builds first. Extra arguments go to `herd local` (e.g. --mode allreduce, --epochs 1,
# --timeline DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec ./build/bin/herd local --workers 4 --mode dear --model cnn --epochs 3 --optimizer adam --lr 0.002 "$@"
