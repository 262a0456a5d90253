#include "bench/emulator/replay_rank.h"

#include <cstdio>

#include "absl/strings/str_split.h"

#include "bench/emulator/model_profile.h"
#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::emulator {

int RunReplayRank(ReplayRankOptions o) {
  auto fail = [&](const absl::Status& st) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, st.ToString().c_str());
    std::fflush(stderr);
    return 1;
  };
  auto model = ModelByName(o.model);
  if (!model.ok()) return fail(model.status());
  if (!(o.compute_scale >= 0)) return fail(absl::InvalidArgumentError("compute scale < 0"));
  model->ScaleCompute(o.compute_scale);
  o.replay.model = *std::move(model);
  o.replay.configs.clear();
  for (absl::string_view text : absl::StrSplit(o.configs, ',', absl::SkipEmpty())) {
    auto c = ParseReplayConfig(std::string_view(text.data(), text.size()));
    if (!c.ok()) return fail(c.status());
    o.replay.configs.push_back(*c);
  }
  auto store = transport::MakeFileStore(o.store_dir);
  if (!store.ok()) return fail(store.status());
  transport::UcxOptions ucx;
  ucx.prefix = "replay";
  auto comm = transport::CreateUcxCommunicator(o.rank, o.ranks, *store, ucx);
  if (!comm.ok()) return fail(comm.status());
  if (o.rank == 0) {
    o.replay.progress = [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    };
  }
  auto results = RunReplay(**comm, o.replay);
  if (!results.ok()) return fail(results.status());
  if (o.rank == 0) {
    for (const ReplayResult& r : *results) std::printf("%s\n", ToJsonLine(r).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace herd::emulator
