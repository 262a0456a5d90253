#include "bench/rank_process.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "bench/herd_sweep.h"
#include "bench/json_line.h"
#include "common/logging.h"
#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::bench {

int RunRankProcess(const RankProcessOptions& o) {
  auto fail = [&](const absl::Status& st) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, st.ToString().c_str());
    std::fflush(stderr);
    return 1;
  };
  auto store = transport::MakeFileStore(o.store_dir);
  if (!store.ok()) return fail(store.status());

  transport::UcxOptions ucx;
  ucx.prefix = "bench";
  ucx.bootstrap_timeout = o.spec.timeout;
  ucx.same_host_zero_copy = o.ucx_zero_copy;
  ucx.busy_poll = o.busy_poll;
  const auto start = Clock::now();
  auto comm = transport::CreateUcxCommunicator(o.rank, o.ranks, *store, ucx);
  if (!comm.ok()) return fail(comm.status());
  Log().debug("bench rank {}: UCX communicator of {} ranks up in {:.3f} s", o.rank, o.ranks,
              std::chrono::duration<double>(Clock::now() - start).count());

  // One line per result and per heartbeat, flushed at once: the driver's watchdog counts
  // lines as signs of life.
  absl::Status st = RunHerdSweep(
      **comm, o.spec,
      [](const BenchResult& r) {
        std::printf("%s\n", ToJsonLine(r).c_str());
        std::fflush(stdout);
      },
      [](const std::string& what) {
        std::printf("%s\n", JsonLineWriter().Add(kProgressKey, what).str().c_str());
        std::fflush(stdout);
      });
  if (!st.ok()) return fail(st);
  return 0;
}

}  // namespace herd::bench
