#!/usr/bin/env bash
# Runs herd's tests under the sanitizers: `asan` (AddressSanitizer + UndefinedBehaviorSanitizer,
# with LeakSanitizer: the asan preset, build-asan/) and `tsan` (ThreadSanitizer: the tsan
# preset, build-tsan/). Every binary is built with the sanitizer, the `herd` the integration
# tests start included.
#
#   scripts/sanitize.sh asan|tsan|all --suite [CTEST_ARGS...]
#   scripts/sanitize.sh asan|tsan|all [TEST_EXECUTABLE...]
#
# --suite: builds the whole tree and runs the default ctest suite (what scripts/test.sh runs:
# everything not labelled `slow`), e.g. `scripts/sanitize.sh tsan --suite -R 'scheduler|server'`
# for a part of it. The Python front end's tests (label `python`) run a python3 that is not
# instrumented: under asan they run with the sanitizer's runtime preloaded and leak checks off
# (the interpreter's own allocations are not ours); under tsan they are left out (TSan cannot
# be preloaded into a process that has started threads of its own before it).
# With executables: only those unit test executables (tests/unit/**: herd_add_test) and fuzz
# corpus replays (fuzz/: NAME_replay) are built and run, e.g.
#   scripts/sanitize.sh all storage_test server_engine_test scheduler_test push_fuzzer_replay
# Without either: every unit test executable and corpus replay.
# Long on two cores: each build compiles the whole tree (Debug, instrumented). Exit code 0 only
# when every run was clean. Suppressions (third-party false positives only, each with its
# reason): scripts/sanitizers/.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
shift || true
case "$which" in
  asan) kinds=(asan) ;;
  tsan) kinds=(tsan) ;;
  all) kinds=(asan tsan) ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan|all [--suite [CTEST_ARGS...] | TEST_EXECUTABLE...]" >&2
    exit 2
    ;;
esac
suite=0
if [ "${1:-}" = "--suite" ]; then
  suite=1
  shift
fi
args=("$@")

lock=(nice -n 10 flock -s /tmp/herd-cpu.lock)
command -v flock >/dev/null || lock=()
supp=$PWD/scripts/sanitizers
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# ignore_noninstrumented_modules: accesses made inside libraries that are not instrumented
# (Debian's gRPC, abseil, RocksDB, OpenSSL, ...) are not reported; herd's own code still is.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$supp/tsan.supp}
# Instrumented builds of Debian's own gRPC, abseil, protobuf and RocksDB, when
# scripts/tsan-deps.sh made them: they take the place of the packages' libraries (same names
# and ABI), so TSan sees their synchronisation too.
tsan_libs=$PWD/build-tsan/deps/lib
# UCX's memory hooks (libucm, linked through the transport) patch madvise; a new thread's
# stack advice then enters a hook before TSan has set the thread up, and the test crashes.
export UCX_MEM_MMAP_HOOK_MODE=${UCX_MEM_MMAP_HOOK_MODE:-none}
export UCX_MEM_MALLOC_HOOKS=${UCX_MEM_MALLOC_HOOKS:-no}
# Instrumented processes start several times slower: the integration tests' waits for them
# are scaled (tests/integration/scheduler/scheduler_process.h).
export HERD_TEST_TIME_SCALE=${HERD_TEST_TIME_SCALE:-4}

status=0
for kind in "${kinds[@]}"; do
  dir=build-$kind
  if [ "$kind" = tsan ] && [ -d "$tsan_libs" ] && [ -n "$(ls -A "$tsan_libs")" ]; then
    export LD_LIBRARY_PATH=$tsan_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "sanitize.sh: tsan with the instrumented libraries of $tsan_libs" >&2
  fi
  cmake --preset "$kind" >/dev/null
  if [ $suite -eq 1 ]; then
    "${lock[@]}" cmake --build "$dir" -j2
    log=$dir/sanitize-suite.log
    # Instrumented Debug code is several times slower: the presets scale the tests' timeouts
    # (HERD_TEST_TIMEOUT_SCALE).
    if ! "${lock[@]}" ctest --test-dir "$dir" -LE 'slow|python' \
        --output-on-failure "${args[@]}" 2>&1 | tee "$log"; then
      status=1
    fi
    if [ "$kind" = asan ]; then
      # libstdc++ is preloaded too: python3 does not link it, so without it ASan's __cxa_throw
      # interceptor finds no real __cxa_throw and the first C++ exception in herd's extension
      # module (an error raised into Python) stops the process with "CHECK failed".
      if ! LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
          ASAN_OPTIONS=detect_leaks=0 \
          "${lock[@]}" ctest --test-dir "$dir" -L python -LE slow --output-on-failure \
          "${args[@]}" 2>&1 | tee -a "$log"; then
        status=1
      fi
    fi
    grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$log" || true
    continue
  fi
  targets=("${args[@]}")
  if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(
      sed -n 's/^herd_add_test(\([a-z0-9_]*\).*/\1/p' $(find tests/unit -name CMakeLists.txt) | sort -u
      sed -n 's/^herd_add_fuzzer(\([a-z_]*\).*/\1_replay/p' fuzz/CMakeLists.txt)
  fi
  "${lock[@]}" cmake --build "$dir" -j2 --target "${targets[@]}"
  for t in "${targets[@]}"; do
    targs=()
    case "$t" in *_replay) targs=(fuzz/corpus/"${t%_replay}") ;; esac
    log=$dir/sanitize-$t.log
    if "${lock[@]}" "$dir/bin/$t" "${targs[@]}" >"$log" 2>&1; then
      echo "sanitize.sh: $kind $t: clean"
    else
      echo "sanitize.sh: $kind $t: FAILED (see $log)"
      grep -m5 -E "ERROR: (Address|Thread|Leak)Sanitizer|runtime error|WARNING: ThreadSanitizer|FAILED" "$log" || true
      status=1
    fi
  done
done
exit $status
