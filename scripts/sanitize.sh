#!/usr/bin/env bash
# Runs herd's unit test executables under the sanitizers: `asan` (AddressSanitizer +
# UndefinedBehaviorSanitizer: the asan preset, build-asan/) and `tsan` (ThreadSanitizer: the
# tsan preset, build-tsan/). Integration tests are left out: they start the real `herd`
# binary, whose build is another matter.
#
#   scripts/sanitize.sh asan|tsan|all [TEST_EXECUTABLE...]
#
# Without executables: every unit test executable (tests/unit/**: herd_add_test) and every
# fuzz corpus replay (fuzz/: NAME_replay) — long on two cores (each build compiles the whole
# tree). With some, only those are built and run, e.g.
#   scripts/sanitize.sh all storage_test server_engine_test scheduler_test push_fuzzer_replay
# Exit code 0 only when every run was clean.
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
shift || true
case "$which" in
  asan) kinds=(asan) ;;
  tsan) kinds=(tsan) ;;
  all) kinds=(asan tsan) ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan|all [TEST_EXECUTABLE...]" >&2; exit 2 ;;
esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(
    sed -n 's/^herd_add_test(\([a-z0-9_]*\).*/\1/p' $(find tests/unit -name CMakeLists.txt) | sort -u
    sed -n 's/^herd_add_fuzzer(\([a-z_]*\).*/\1_replay/p' fuzz/CMakeLists.txt)
fi

lock=(flock -s /tmp/herd-cpu.lock)
command -v flock >/dev/null || lock=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# UCX's memory hooks (libucm, linked through the transport) patch madvise; a new thread's
# stack advice then enters a hook before TSan has set the thread up, and the test crashes.
export UCX_MEM_MMAP_HOOK_MODE=${UCX_MEM_MMAP_HOOK_MODE:-none}
export UCX_MEM_MALLOC_HOOKS=${UCX_MEM_MALLOC_HOOKS:-no}

status=0
for kind in "${kinds[@]}"; do
  dir=build-$kind
  cmake --preset "$kind" >/dev/null
  "${lock[@]}" cmake --build "$dir" -j2 --target "${targets[@]}"
  for t in "${targets[@]}"; do
    args=()
    case "$t" in *_replay) args=(fuzz/corpus/"${t%_replay}") ;; esac
    log=$dir/sanitize-$t.log
    if "${lock[@]}" "$dir/bin/$t" "${args[@]}" >"$log" 2>&1; then
      echo "sanitize.sh: $kind $t: clean"
    else
      echo "sanitize.sh: $kind $t: FAILED (see $log)"
      grep -m5 -E "ERROR: (Address|Thread|Leak)Sanitizer|runtime error|WARNING: ThreadSanitizer|FAILED" "$log" || true
      status=1
    fi
  done
done
exit $status
