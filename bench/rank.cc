#include "bench/rank.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/temp_dir.h"
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

std::vector<ChildSpec> RankChildren(const std::string& label, const std::vector<std::string>& argv,
                                    int ranks, const std::string& store) {
  std::vector<ChildSpec> children;
  for (int r = 0; r < ranks; ++r) {
    ChildSpec c{.name = absl::StrFormat("%s rank %d", label, r), .argv = argv};
    for (std::string a : {std::string("--rank"), absl::StrCat(r), std::string("--ranks"),
                          absl::StrCat(ranks), std::string("--store"), store}) {
      c.argv.push_back(std::move(a));
    }
    children.push_back(std::move(c));
  }
  return children;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "herd";
}

absl::StatusOr<std::vector<json::Object>> RunRanks(
    const std::string& label, const std::vector<std::string>& argv, int ranks,
    std::chrono::milliseconds silence_timeout,
    const std::function<ChildSpec(int rank, ChildSpec child)>& wrap) {
  InstallInterruptHandlers();
  HERD_ASSIGN_OR_RETURN(TempDir store, TempDir::Create("herd-bench-" + label));
  std::vector<ChildSpec> children = RankChildren(label, argv, ranks, store.path());
  for (int r = 0; wrap && r < ranks; ++r) children[r] = wrap(r, std::move(children[r]));
  std::vector<json::Object> results;
  SuperviseOptions options;
  options.silence_timeout = silence_timeout;
  options.on_stdout_line = [&](size_t child, std::string_view line) {
    auto object = child == 0 && line.starts_with("{") ? json::ParseObject(line)
                                                      : absl::StatusOr<json::Object>();
    if (!object.ok()) {
      std::fprintf(stderr, "[%s rank %d] %.*s\n", label.c_str(), static_cast<int>(child),
                   static_cast<int>(line.size()), line.data());
    } else if (auto what = object->GetString(kProgressKey); what.ok()) {
      std::fprintf(stderr, "%s: %s\n", label.c_str(), what->c_str());
    } else {
      results.push_back(*std::move(object));
    }
  };
  HERD_ASSIGN_OR_RETURN(const GroupOutcome outcome, Supervise(std::move(children), options));
  if (!outcome.ok()) {
    return absl::InternalError(absl::StrFormat("%s ranks: %s", label, outcome.Describe()));
  }
  if (results.empty()) {
    return absl::InternalError(absl::StrFormat("%s: rank 0 exited without a result line", label));
  }
  return results;
}

}  // namespace herd::bench
