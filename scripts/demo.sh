#!/usr/bin/env bash
# The main job on this machine: 4 workers train the CNN on Fashion-MNIST in the `dear` mode
# (reduce-scatter overlapped with backward, all-gather with the next forward), coordinated by
# a real scheduler, all as child processes of `herd local` on loopback. Installs what is missing
# and builds first. Extra arguments go to `herd local` (e.g. --mode allreduce, --epochs 1,
# --timeline DIR). `./scripts/demo.sh --python` trains the same CNN from a PyTorch script
# (examples/python/fashion_mnist.py) through herd's Python front end.
#
# The run's state stays in build/demo (logs, the scheduler's state with the job's history), and
# the end draws the history (loss, samples/s, exposed communication, mode switches) with
# `herd plot` into build/demo/plot.png. While it runs every process serves Prometheus metrics
# (herd local prints the ports; docs/metrics.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
state=build/demo
rm -rf "$state"  # a new job each run: the scheduler's state would still hold the last one

# The demo's settings, each unless the arguments give it (herd local takes an option once).
args=()
default() {  # FLAG VALUE
  local given
  for given in "${user_args[@]}"; do
    if [ "$given" = "$1" ] || [[ "$given" == "$1="* ]]; then return; fi
  done
  args+=("$1" "$2")
}
if [ "${1:-}" = "--python" ]; then
  # The same job with the user's own script: examples/python/fashion_mnist.py (its own reader,
  # CNN, loop and evaluation over herd.torch), as each of the 4 workers.
  shift
  user_args=("$@")
  default --workers 4
  default --mode dear
  ./build/bin/herd local "${args[@]}" --state "$state" "$@" \
    -- /usr/bin/python3 examples/python/fashion_mnist.py --epochs 3 --lr 0.002
else
  user_args=("$@")
  for setting in "--workers 4" "--mode dear" "--model cnn" "--epochs 3" "--optimizer adam" \
    "--lr 0.002"; do
    default ${setting}
  done
  ./build/bin/herd local "${args[@]}" --state "$state" "$@"
fi
if ./build/bin/herd plot "$state" --out "$state/plot.png" >/dev/null; then
  echo "plot: $state/plot.png (loss, samples/s and exposed communication over iterations)"
fi
