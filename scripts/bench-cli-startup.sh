#!/usr/bin/env bash
# How fast `herd` answers (docs/BENCHMARKS.md, "The command line's start-up"): the median wall
# time of N runs (default 5) of `herd --help`, `herd job list` against a running scheduler on
# loopback, `herd checkpoint list` of an empty directory, and, beside them, two commands that
# run in herd-torch and so load libtorch (`herd worker --help`, `herd local --check-args`).
# Run it alone: `flock -x /tmp/herd-cpu.lock ./scripts/bench-cli-startup.sh [N]`.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
herd=./build/bin/herd
tmp=$(mktemp -d)
sched=
cleanup() { [ -n "$sched" ] && kill "$sched" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$herd" scheduler --listen 127.0.0.1:0 --state "$tmp/state" --port-file "$tmp/port" \
  >"$tmp/scheduler.log" 2>&1 &
sched=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { cat "$tmp/scheduler.log" >&2; exit 1; }
address=127.0.0.1:$(cat "$tmp/port")
mkdir -p "$tmp/checkpoints"

median() {  # label command... -> "label  median s  (all runs)"
  local label=$1 times=() t0 t1
  shift
  "$@" >/dev/null 2>&1 || { echo "bench-cli-startup: '$*' failed" >&2; "$@"; exit 1; }  # warm
  for _ in $(seq "$runs"); do
    t0=$EPOCHREALTIME  # bash's own clock: no process of its own in the measurement
    "$@" >/dev/null 2>&1
    t1=$EPOCHREALTIME
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
  done
  local sorted
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  printf '| %-32s | %6.3f | %s |\n' "$label" \
    "$(echo "$sorted" | sed -n "$(((runs + 1) / 2))p" | awk '{print $1 / 1000}')" \
    "$(echo "$sorted" | tr '\n' ' ' | sed 's/ $//') ms"
}

echo "| command | median s | runs |"
echo "| --- | ---: | --- |"
median "herd --help" "$herd" --help
median "herd job list (running scheduler)" "$herd" job list --scheduler "$address"
median "herd checkpoint list DIR" "$herd" checkpoint list "$tmp/checkpoints"
median "herd worker --help (herd-torch)" "$herd" worker --help
median "herd local --check-args (herd-torch)" "$herd" local --check-args
