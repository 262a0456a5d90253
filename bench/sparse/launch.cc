// How herd_sparse_bench runs its ranks: threads over a loopback fabric, or processes over UCX
// (this same executable started once per rank, bootstrapping through a FileStore in a fresh
// temporary directory; bench/process_group.h supervises them).

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/process_group.h"
#include "bench/sparse/sparse_bench.h"
#include "transport/loopback/loopback_communicator.h"
#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::bench::sparse {

absl::StatusOr<std::vector<SparseBenchRow>> RunLoopback(int ranks, const SparseBenchSpec& spec) {
  auto comms = transport::MakeLoopbackCommunicators(ranks);
  std::vector<absl::StatusOr<std::vector<SparseBenchRow>>> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      results[r] = MeasureOnCommunicator(*comms[r], spec, [](const std::string& line) {
        std::fprintf(stderr, "loopback: %s\n", line.c_str());
      });
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!results[r].ok()) return results[r].status();
  }
  return std::move(results[0]).value();
}

absl::StatusOr<std::vector<SparseBenchRow>> RunUcxProcesses(
    int ranks, const std::string& self_exe, const std::vector<std::string>& child_args) {
  const char* base = std::getenv("TMPDIR");
  std::string dir = absl::StrFormat("%s/herd-sparse-bench-XXXXXX", base && *base ? base : "/tmp");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrFormat("cannot create %s: %s", dir, strerror(errno)));
  }
  std::vector<ChildSpec> children;
  for (int r = 0; r < ranks; ++r) {
    ChildSpec c;
    c.label = absl::StrFormat("ucx rank %d", r);
    c.argv = {self_exe};
    c.argv.insert(c.argv.end(), child_args.begin(), child_args.end());
    c.argv.insert(c.argv.end(), {"--rank", absl::StrFormat("%d", r), "--store", dir});
    children.push_back(std::move(c));
  }
  std::vector<SparseBenchRow> rows;
  absl::Status parse_error;
  RunOptions options;
  options.silence_timeout = std::chrono::seconds(300);
  options.on_stdout_line = [&](size_t child, std::string_view line) {
    if (child != 0) return;
    if (line.rfind("progress ", 0) == 0) {
      std::fprintf(stderr, "ucx: %s\n", std::string(line.substr(9)).c_str());
      return;
    }
    auto row = FromJson(std::string(line));
    if (row.ok()) {
      rows.push_back(*row);
    } else if (parse_error.ok()) {
      parse_error = row.status();
    }
  };
  InstallInterruptHandlers();
  auto outcome = RunProcessGroup(children, options);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!outcome.ok()) return outcome.status();
  if (!outcome->ok()) return absl::InternalError(outcome->Describe());
  if (!parse_error.ok()) return parse_error;
  return rows;
}

int RunUcxRank(int rank, int ranks, const std::string& store_dir, const SparseBenchSpec& spec) {
  auto fail = [&](const absl::Status& st) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
    return 1;
  };
  auto store = transport::MakeFileStore(store_dir);
  if (!store.ok()) return fail(store.status());
  transport::UcxOptions ucx;
  ucx.prefix = "sparse-bench";
  auto comm = transport::CreateUcxCommunicator(rank, ranks, *store, ucx);
  if (!comm.ok()) return fail(comm.status());
  auto rows = MeasureOnCommunicator(**comm, spec, [](const std::string& line) {
    std::printf("progress %s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!rows.ok()) return fail(rows.status());
  for (const SparseBenchRow& row : *rows) std::printf("%s\n", ToJson(row).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace herd::bench::sparse
