#!/usr/bin/env bash
# Longer libFuzzer runs of herd's fuzz targets (fuzz/): builds the `fuzz` preset (clang with
# libFuzzer, ASan and UBSan) and runs each target for SECONDS (default 60) from its checked-in
# corpus. New inputs go to build-fuzz/fuzz/scratch/NAME; a crash is written to
# build-fuzz/fuzz/artifacts/NAME/ and the script exits 1. Add every crash to fuzz/corpus/NAME/
# (and fix it): the default test suite replays that corpus (fuzz_corpus_NAME).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 300 push_fuzzer
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(job_spec_fuzzer plan_fuzzer push_fuzzer store_fuzzer checkpoint_fuzzer)
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi

lock=(flock -s /tmp/herd-cpu.lock)
command -v flock >/dev/null || lock=()
cmake --preset fuzz >/dev/null
"${lock[@]}" cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  scratch=build-fuzz/fuzz/scratch/$t
  artifacts=build-fuzz/fuzz/artifacts/$t/
  mkdir -p "$scratch" "$artifacts"
  echo "fuzz.sh: $t for ${seconds}s"
  if ! "${lock[@]}" build-fuzz/bin/"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" -print_final_stats=1 "$scratch" fuzz/corpus/"$t"; then
    echo "fuzz.sh: $t found a crash: see $artifacts" >&2
    failed=1
  fi
done
exit $failed
