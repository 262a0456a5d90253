// `herd checkpoint list | verify | inspect | export`: checkpoints on disk, offline (no job, no
// scheduler). Flags only; what each does is in checkpoint/ (docs/checkpoint.md, "The command
// line").

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "checkpoint/catalog.h"
#include "checkpoint/describe.h"
#include "checkpoint/reader.h"
#include "cli/checkpoint_export.h"
#include "cli/command.h"
#include "common/printable.h"

namespace herd::cli {
namespace {

using checkpoint::PosixEnv;

class CheckpointCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.require_subcommand(1);
    list_ = app.add_subcommand("list", "The checkpoints of DIR, oldest first (checksums not read)");
    list_->add_option("DIR", path_, "A checkpoint directory")->required();
    list_->add_flag("--json", json_, "One JSON object instead of the table");

    verify_ = app.add_subcommand(
        "verify",
        "Read every byte of DIR/ID (or of every checkpoint in DIR) and check every "
        "checksum; exit 0 only if all hold");
    verify_->add_option("PATH", path_, "DIR or DIR/ID")->required();

    inspect_ = app.add_subcommand("inspect", "The manifest of DIR/ID: files, extents, values");
    inspect_->add_option("PATH", path_, "DIR/ID (DIR: its newest good checkpoint)")->required();
    inspect_->add_flag("--json", json_, "The whole manifest as JSON");

    export_ = app.add_subcommand(
        "export", "The model's parameters (worker 0's param/*) as a file torch.load reads");
    export_->add_option("PATH", path_, "DIR/ID (DIR: its newest good checkpoint)")->required();
    export_->add_option("--out", out_, "The file to write, e.g. model.pt")->required();
  }

  int Run() override {
    if (list_->parsed()) return List();
    if (verify_->parsed()) return Verify();
    if (inspect_->parsed()) return Inspect();
    return Export();
  }

 private:
  int Fail(const char* verb, const absl::Status& s) {
    // Messages quote names and values from the files: escaped (common/printable.h).
    std::fprintf(stderr, "herd checkpoint %s: %s\n", verb, Printable(s.ToString()).c_str());
    return kExitFailure;
  }

  int List() {
    auto list = checkpoint::ListCheckpoints(PosixEnv(), path_);
    if (!list.ok()) return Fail("list", list.status());
    if (json_) {
      std::printf("%s\n", checkpoint::ListJson(path_, *list).c_str());
    } else if (list->empty()) {
      std::printf("no checkpoints in %s\n", path_.c_str());
    } else {
      std::printf("%s", checkpoint::ListTable(*list).c_str());
    }
    return kExitOk;
  }

  int Verify() {
    std::vector<std::string> paths;
    if (checkpoint::IsCheckpointPath(PosixEnv(), path_)) {
      paths.push_back(path_);
    } else {
      auto list = checkpoint::ListCheckpoints(PosixEnv(), path_);
      if (!list.ok()) return Fail("verify", list.status());
      if (list->empty()) {
        return Fail("verify",
                    absl::NotFoundError(absl::StrFormat(
                        "%s holds no checkpoint (no directory named like it-00000120)", path_)));
      }
      for (const auto& c : *list) paths.push_back(c.path);
    }
    int bad = 0;
    for (const std::string& p : paths) {
      absl::Status s = checkpoint::VerifyCheckpoint(PosixEnv(), p);
      if (s.ok()) {
        std::printf("ok      %s\n", p.c_str());
      } else {
        ++bad;
        std::printf("FAILED  %s: %s\n", Printable(p).c_str(), Printable(s.ToString()).c_str());
      }
    }
    if (bad > 0) {
      std::fprintf(stderr, "herd checkpoint verify: %d of %d checkpoint(s) failed\n", bad,
                   static_cast<int>(paths.size()));
      return kExitFailure;
    }
    return kExitOk;
  }

  int Inspect() {
    auto reader = checkpoint::OpenCheckpoint(PosixEnv(), path_);
    if (!reader.ok()) return Fail("inspect", reader.status());
    for (const auto& why : (*reader)->skipped()) {
      std::fprintf(stderr, "skipped %s\n", Printable(why).c_str());
    }
    const auto& m = (*reader)->manifest();
    if (json_) {
      auto text = checkpoint::ManifestJson(m);
      if (!text.ok()) return Fail("inspect", text.status());
      std::printf("%s\n", text->c_str());
      return kExitOk;
    }
    // What the manifest says is printed escaped (common/printable.h): its writer chose it.
    std::printf("checkpoint %s (%s)\n", Printable(m.id()).c_str(),
                Printable((*reader)->path()).c_str());
    std::printf("  job %s, mode %s, %d workers, %d shards, resumes at iteration %lld\n",
                Printable(m.job()).c_str(), Printable(m.mode()).c_str(), m.workers(), m.shards(),
                static_cast<long long>(m.iteration()));
    for (const auto& f : m.files()) {
      std::printf("  %-20s %10s  %d extents, %d values\n", Printable(f.file()).c_str(),
                  checkpoint::HumanBytes(f.bytes()).c_str(), f.extents_size(), f.values_size());
    }
    return kExitOk;
  }

  // herd-torch writes the file (cli/checkpoint_export.h); `herd` hands this subcommand over.
  int Export() { return ExportModel(path_, out_); }

  CLI::App* list_ = nullptr;
  CLI::App* verify_ = nullptr;
  CLI::App* inspect_ = nullptr;
  CLI::App* export_ = nullptr;
  std::string path_, out_;
  bool json_ = false;
};

HERD_REGISTER_COMMAND(CheckpointCommand, "checkpoint", 45,
                      "Checkpoints on disk: list, verify, inspect, export the model");

}  // namespace
}  // namespace herd::cli
