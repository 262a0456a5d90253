#!/usr/bin/env bash
# The Python front end's benchmark (docs/BENCHMARKS.md, "Python front end"): the same CNN and
# Fashion-MNIST loop (examples/python/) on 4 workers, side by side in one run:
#   herd (allreduce, dear) through herd.torch, PyTorch DDP with gloo started by hand (as a
#   user runs it, and with herd's malloc settings), and herd's built-in C++ CNN (allreduce, dear).
# Every row: Adam lr 0.002, batch 64 per worker, one thread per worker, SAMPLES training
# samples, one epoch; samples/s of the training loop (start-up and evaluation excluded).
# Run it alone: `flock -x /tmp/herd-cpu.lock ./scripts/bench-python.sh [SAMPLES [ROUNDS]]`.
set -euo pipefail
cd "$(dirname "$0")/.."
samples=${1:-12800}
rounds=${2:-1}
herd=./build/bin/herd
py=/usr/bin/python3
field() { sed -n 's/.*"'"$1"'":\([0-9.eE+-]*\).*/\1/p' | head -1; }

row() {  # name, samples/s, exposed communication s, train s, accuracy
  printf '| %-32s | %8.0f | %6s | %6s | %6s |\n' "$1" "$2" "$3" "$4" "$5"
}
echo "| run (4 workers, $samples samples, 1 epoch) | samples/s | exposed comm s (rank 0) | train s | test acc |"
echo "| --- | ---: | ---: | ---: | ---: |"

herd_torch() {
  local out
  out=$($herd local --workers 4 --mode "$1" --optimizer adam --lr 0.002 --json -- \
        $py examples/python/fashion_mnist.py --epochs 1 --train-samples "$samples" 2>/dev/null)
  row "herd.torch $1" "$(echo "$out" | field samples_per_second)" \
      "$(echo "$out" | field exposed_comm_seconds)" "$(echo "$out" | field train_seconds)" \
      "$(echo "$out" | field test_accuracy)"
}

# herd's workers fix glibc's malloc thresholds (worker/training_memory.h); DDP's ranks run with
# glibc's adaptive defaults, as a DDP user's do. `ddp tuned` gives DDP the same thresholds
# through GLIBC_TUNABLES: what DDP would train at with herd's allocator settings.
herd_malloc=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728

ddp() {
  local port=$((29500 + RANDOM % 400)) log pids=() line name="PyTorch DDP gloo" env=()
  if [[ ${1:-} == tuned ]]; then
    name="PyTorch DDP gloo, herd's malloc"
    env=("GLIBC_TUNABLES=$herd_malloc")
  fi
  log=$(mktemp)
  for r in 0 1 2 3; do
    env "${env[@]}" PYTHONPATH=build/python MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r \
      WORLD_SIZE=4 $py examples/python/ddp_fashion_mnist.py --epochs 1 \
      --train-samples "$samples" >>"$log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  line=$(grep "ddp gloo" "$log")
  rm -f "$log"
  row "$name" "$(echo "$line" | sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p')" "-" \
      "$(echo "$line" | sed -n 's/.*, \([0-9.]*\) s training.*/\1/p')" \
      "$(echo "$line" | sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p')"
}

builtin() {
  local out
  out=$($herd local --workers 4 --mode "$1" --model cnn --optimizer adam --lr 0.002 \
        --epochs 1 --train-samples "$samples" --json 2>/dev/null)
  row "built-in C++ CNN $1" "$(echo "$out" | field samples_per_second)" \
      "$(echo "$out" | field exposed_comm_seconds)" "$(echo "$out" | field train_seconds)" \
      "$(echo "$out" | field test_accuracy)"
}

# Rounds interleave the systems, so a change in the machine's load touches all of them.
for ((round = 1; round <= rounds; round++)); do
  herd_torch allreduce
  herd_torch dear
  ddp
  ddp tuned
  builtin allreduce
  builtin dear
done
