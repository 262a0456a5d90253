#!/usr/bin/env bash
# The convergence table of docs/BENCHMARKS.md: each mode trains the model with W workers for E
# epochs; the baseline is one worker with W times the batch (the same global batch, the same
# data, the same epochs). Prints a Markdown table: mode, test accuracy, difference from the
# baseline in points, samples/s, wall time.
#
#   bench/convergence/table.sh [--model cnn] [--epochs 2] [--workers 4] [--modes "a b c"]
#                              [--optimizer adam] [--lr 0.002] [--baseline ACCURACY]
#                              [--extra "more herd local flags for the mode runs"]
# --baseline reuses a baseline accuracy measured before instead of training the one worker.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=cnn epochs=2 workers=4 batch=64 optimizer=adam lr=0.002 baseline= extra=
modes="allreduce dear lp sparse topk_allgather ps_sync ps_async ps_ec decentralized decentralized_lp clps"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --optimizer) optimizer=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
herd=./build/bin/herd
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }

echo "| mode | workers | test accuracy | vs 1 worker (points) | samples/s | wall s |"
echo "| --- | --- | --- | --- | --- | --- |"
if [ -n "$baseline" ]; then
  base_acc=$baseline
else
  base=$($herd local --workers 1 --mode allreduce --model "$model" --epochs "$epochs" \
    --optimizer "$optimizer" --lr "$lr" --batch-size $((batch * workers)) --json 2>/dev/null |
    grep '^{"job"')
  base_acc=$(field test_accuracy "$base")
  printf "| 1 worker, batch %d | 1 | %.4f | - | %.0f | %.1f |\n" $((batch * workers)) "$base_acc" \
    "$(field samples_per_second "$base")" "$(field wall_seconds "$base")"
fi
for mode in $modes; do
  out=$($herd local --workers "$workers" --mode "$mode" --model "$model" --epochs "$epochs" \
    --optimizer "$optimizer" --lr "$lr" --batch-size "$batch" $extra --json 2>/dev/null |
    grep '^{"job"' || true)
  if [ -z "$out" ]; then
    echo "| $mode | $workers | failed | | | |"
    continue
  fi
  acc=$(field test_accuracy "$out")
  printf "| %s | %d | %.4f | %+.1f | %.0f | %.1f |\n" "$mode" "$workers" "$acc" \
    "$(awk -v a="$acc" -v b="$base_acc" 'BEGIN { print (a - b) * 100 }')" "$(field samples_per_second "$out")" \
    "$(field wall_seconds "$out")"
done
