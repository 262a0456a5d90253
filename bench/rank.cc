#include "bench/rank.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "transport/store/store.h"

namespace herd::bench {

void RankFlags::Register(CLI::App& app, bool required, bool with_ranks) {
  std::vector<CLI::Option*> added = {
      app.add_option("--rank", rank, "(internal) this process's rank"),
      app.add_option("--store", store, "(internal) the driver's bootstrap directory")};
  if (with_ranks) {
    added.push_back(app.add_option("--ranks", ranks, "(internal) number of ranks")
                        ->check(CLI::Range(1, 65536)));
  }
  for (CLI::Option* o : added) required ? o->required() : o->group("");
}

int RunRank(const RankFlags& flags, const transport::UcxOptions& ucx,
            const std::function<absl::Status(transport::Communicator&)>& body) {
  absl::Status st = [&]() -> absl::Status {
    if (flags.rank < 0 || flags.rank >= flags.ranks) {
      return absl::InvalidArgumentError("--rank must be in [0, --ranks)");
    }
    auto store = transport::MakeFileStore(flags.store);
    if (!store.ok()) return store.status();
    auto comm = transport::CreateUcxCommunicator(flags.rank, flags.ranks, *store, ucx);
    if (!comm.ok()) return comm.status();
    return body(**comm);
  }();
  if (st.ok()) return 0;
  std::fprintf(stderr, "rank %d: %s\n", flags.rank, st.ToString().c_str());
  std::fflush(stderr);
  return 1;
}

void PrintLine(const json::Object& line) {
  std::printf("%s\n", line.Write().c_str());
  std::fflush(stdout);
}

}  // namespace herd::bench
