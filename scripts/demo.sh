#!/usr/bin/env bash
# The main job on this machine: 4 workers train the CNN on Fashion-MNIST in the `dear` mode
# (reduce-scatter overlapped with backward, all-gather with the next forward), coordinated by
# a real scheduler, all as child processes of `herd local` on loopback. Installs what is missing
# and builds first. Extra arguments go to `herd local` (e.g. --mode allreduce, --epochs 1,
# --timeline DIR). `./scripts/demo.sh --python` trains the same CNN from a PyTorch script
# (examples/python/fashion_mnist.py) through herd's Python front end.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
if [ "${1:-}" = "--python" ]; then
  # The same job with the user's own script: examples/python/fashion_mnist.py (its own reader,
  # CNN, loop and evaluation over herd.torch), as each of the 4 workers.
  shift
  exec ./build/bin/herd local --workers 4 --mode dear "$@" \
    -- /usr/bin/python3 examples/python/fashion_mnist.py --epochs 3 --lr 0.002
fi
exec ./build/bin/herd local --workers 4 --mode dear --model cnn --epochs 3 --optimizer adam --lr 0.002 "$@"
