#!/usr/bin/env bash
# torch.distributed's backend="herd" against gloo (docs/BENCHMARKS.md, "torch.distributed:
# backend=herd against gloo"), side by side in one run:
#   1. the same unmodified DDP script (examples/python/ddp_train.py: AdamW, no-decay group,
#      OneCycle, clipping, DistributedSampler) with --backend gloo and --backend herd, under
#      `herd local --workers P` (for gloo herd local is only the launcher), P = 2 and 4, the CNN
#      and the wide MLP (6.9 M parameters: the gradient exchange is a large part of each
#      iteration); and the same script in one process (P = 1, gloo), whose iteration time says
#      how much of each P-worker iteration is communication (and waiting); and the P-worker run
#      with --no-exchange (DDP's exchange replaced by a hook that keeps the local gradient: the
#      same P processes on the same cores without communication), whose rate against gloo's
#      says what share of gloo's iteration the exchange is (the issue's "communication is a
#      fifth of the iteration or more");
#   2. torch.distributed's all_reduce / all_gather / reduce_scatter through both backends,
#      4 KiB .. 256 MiB (examples/python/bench_c10d.py), P = 2 and 4.
# Run it alone: `flock -x /tmp/herd-cpu.lock ./scripts/bench-torch-backend.sh [ITERS [ROUNDS]]`.
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-60}
rounds=${2:-2}
herd=./build/bin/herd
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ddp() {  # backend workers model [flag] -> samples/s of rank 0
  local out=$tmp/$1-$2-$3
  rm -rf "$out"
  if [[ $2 == 1 ]]; then
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29600 + RANDOM % 300)) RANK=0 WORLD_SIZE=1 \
      OMP_NUM_THREADS=1 PYTHONPATH=build/python $py examples/python/ddp_train.py \
      --backend "$1" --model "$3" --max-iterations "$iters" --threads 1 --out "$out" \
      >/dev/null 2>&1
  else
    $herd local --workers "$2" -- $py examples/python/ddp_train.py --backend "$1" \
      --model "$3" --max-iterations "$iters" --threads 1 --out "$out" ${4:-} >/dev/null 2>&1
  fi
  sed -n 's/.*"samples_per_second": \([0-9.]*\).*/\1/p' "$out/rank-0.json"
}

echo "uptime at the start: $(uptime)"
echo
echo "| model | P | round | gloo samples/s | herd samples/s | herd / gloo | no exchange samples/s | exchange share of gloo's iteration | one process samples/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for model in cnn mlp; do
  one=$(ddp gloo 1 "$model")
  for P in 2 4; do
    for ((r = 1; r <= rounds; r++)); do
      g=$(ddp gloo "$P" "$model")
      h=$(ddp herd "$P" "$model")
      n=$(ddp herd "$P" "$model" --no-exchange)
      printf '| %s | %d | %d | %.0f | %.0f | %.2fx | %.0f | %.0f %% | %.0f |\n' "$model" "$P" \
        "$r" "$g" "$h" "$(echo "$h / $g" | bc -l)" "$n" "$(echo "100 * (1 - $g / $n)" | bc -l)" \
        "$one"
    done
  done
done
echo
for P in 2 4; do
  $herd local --workers "$P" --state "$tmp/c10d-$P" -- $py examples/python/bench_c10d.py \
    --rounds "$rounds" >/dev/null 2>&1
  sed -n '/^| op/,$p' "$tmp/c10d-$P/logs/worker-0.log"
  echo
done
echo "uptime at the end: $(uptime)"
