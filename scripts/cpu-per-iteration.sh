#!/usr/bin/env bash
# CPU time and page faults per iteration of a job's workers in its steady state: a measure of
# what one iteration costs that a loaded machine disturbs much less than samples/s does.
#
#   ./scripts/cpu-per-iteration.sh [--skip N] [--window S] -- HERD_LOCAL_ARGS...
#   ./scripts/cpu-per-iteration.sh -- --workers 4 --mode dear --model cnn --epochs 1
#   ./scripts/cpu-per-iteration.sh -- --workers 4 --mode dear -- /usr/bin/python3 train.py
#
# Runs `build/bin/herd local HERD_LOCAL_ARGS`, waits until worker-0 has completed N iterations
# (default 25: start-up and warm-up excluded), then reads every worker process's user+system
# CPU (all its threads) and minor page faults from /proc over S seconds (default 10), and the
# iterations each completed from its metrics endpoint (herd_worker_iteration). Prints one line
# per worker and their mean. The job runs to its end; its own output goes to a temporary file.
set -euo pipefail
cd "$(dirname "$0")/.."
skip=25
window=10
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --skip) skip=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    *) echo "unknown option $1 (usage: $0 [--skip N] [--window S] -- HERD_LOCAL_ARGS...)" >&2
       exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] || { echo "usage: $0 [--skip N] [--window S] -- HERD_LOCAL_ARGS..." >&2; exit 2; }
shift
tick=$(getconf CLK_TCK)
out=$(mktemp)
./build/bin/herd local "$@" >"$out" 2>&1 &
local_pid=$!
trap 'kill $local_pid 2>/dev/null || true; rm -f "$out"' EXIT

# The workers: children of herd local named worker-N (the built-in's `--name worker-N`, a
# program's HERD_NAME=worker-N), each with its metrics address.
declare -A port
find_workers() {
  local c args env
  for c in $(pgrep -P $local_pid); do
    args=$(tr '\0' ' ' </proc/$c/cmdline 2>/dev/null) || continue
    env=$(tr '\0' '\n' </proc/$c/environ 2>/dev/null) || continue
    if [[ $args == *" --name worker-"* ]]; then
      port[$c]=$(sed -n 's/.*--metrics-listen \([^ ]*\).*/\1/p' <<<"$args")
    elif grep -q '^HERD_NAME=worker-' <<<"$env"; then
      port[$c]=$(sed -n 's/^HERD_METRICS_LISTEN=//p' <<<"$env")
    fi
  done
}
iteration() {  # "" until the endpoint answers
  { curl -s --max-time 2 "http://$1/metrics" || true; } | awk '/^herd_worker_iteration /{print int($2)}'
}
# minor faults, utime + stime (ticks) of process $1: fields 10, 14 and 15 after the name.
stat_of() { sed 's/.*) //' /proc/$1/stat | awk '{print $8, $12 + $13}'; }

deadline=$((SECONDS + 300))
first=
while :; do
  kill -0 $local_pid 2>/dev/null || { echo "the job ended before iteration $skip:" >&2; tail -5 "$out" >&2; exit 1; }
  ((SECONDS < deadline)) || { echo "no worker reached iteration $skip within 300 s" >&2; exit 1; }
  find_workers
  for c in "${!port[@]}"; do [[ -n ${port[$c]} ]] && first=$c && break; done
  if [[ -n $first ]]; then
    it=$(iteration "${port[$first]}")
    [[ -n $it && $it -ge $skip ]] && break
  fi
  sleep 1
done

declare -A it0 st0
for c in "${!port[@]}"; do it0[$c]=$(iteration "${port[$c]}"); st0[$c]=$(stat_of $c); done
sleep "$window"
total_ms=0
total_its=0
for c in "${!port[@]}"; do
  it1=$(iteration "${port[$c]}")
  read -r f1 t1 < <(stat_of $c)
  read -r f0 t0 <<<"${st0[$c]}"
  n=$((it1 - it0[$c]))
  ((n > 0)) || { echo "worker pid $c completed no iteration in the window" >&2; continue; }
  awk -v p=$c -v n=$n -v t=$((t1 - t0)) -v f=$((f1 - f0)) -v hz=$tick \
    'BEGIN {printf "worker pid %d: %d iterations, %.2f ms CPU and %.1f page faults per iteration\n", p, n, t * 1000 / hz / n, f / n}'
  total_ms=$((total_ms + (t1 - t0) * 1000 / tick))
  total_its=$((total_its + n))
done
((total_its > 0)) && awk -v t=$total_ms -v n=$total_its \
  'BEGIN {printf "mean: %.2f ms CPU per worker-iteration\n", t / n}'
wait $local_pid || true
grep -o '"samples_per_second":[0-9.]*' "$out" || true
