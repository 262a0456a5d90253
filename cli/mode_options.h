#pragma once
// The ModeSpec flags of the command line (--topology, --teams, --density, --block-bytes,
// --staleness, --compressor), shared by `herd local` and `herd job set-mode`. Their help says
// which modes take each one, from the mode registry (plan/modes.h).
//
// `herd local` runs one mode or several (--switch-mode-at): a flag goes to the job's modes that
// take it and is refused when none does, so no option is silently dropped. `herd job set-mode`
// sends every flag given and lets the scheduler refuse what does not apply.

#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "herd/v1/job.pb.h"
#include "plan/modes.h"

namespace herd::cli {

class ModeOptions {
 public:
  // Adds the flags to `app`. Call once; the values are bound to this object.
  void Configure(CLI::App& app);

  // OK when every flag given applies to at least one of `modes` (the job's modes);
  // INVALID_ARGUMENT naming the flag, the job's modes and the modes it applies to otherwise.
  absl::Status CheckApplies(const std::vector<const plan::ModeInfo*>& modes) const;

  // The ModeSpec of `mode` with the flags given that it takes.
  herd::v1::ModeSpec SpecFor(const plan::ModeInfo& mode) const;

  // Every flag given, set on `spec` whether or not its mode takes it.
  void SetAllGiven(herd::v1::ModeSpec* spec) const;

 private:
  bool Given(plan::Param p) const;
  void Set(plan::Param p, herd::v1::ModeSpec* spec) const;

  std::array<CLI::Option*, std::size(plan::kAllParams)> flags_{};
  std::string topology_;
  int32_t teams_ = 0;
  double density_ = 0;
  int64_t block_bytes_ = 0;
  int32_t staleness_ = 0;
  std::string compressor_;
};

}  // namespace herd::cli
