#pragma once
// The defaults every front end shares, one value each: the C++ option structs start from them,
// the CLI's flags show them, and the Python package reads them from its extension
// (herd._herd.DEFAULTS), so `herd worker` and a script under `herd local -- ...` behave alike
// when nothing is set. The flags and environment names that set them: docs/cli.md.

#include <chrono>
#include <string>

namespace herd::defaults {

// Every collective wait, shard call and handover of a worker.
inline constexpr std::chrono::seconds kOperationTimeout{120};
// A worker waits this long for the job's other workers to register.
inline constexpr std::chrono::seconds kStartTimeout{120};
// A process started before its job waits this long for it to be submitted.
inline constexpr std::chrono::seconds kWaitForJob{300};
// After SIGTERM, a process of a job with checkpoints serves until the job's last checkpoint,
// at most this long.
inline constexpr std::chrono::seconds kPreemptionGrace{60};

// As a duration flag takes it ("300s").
inline std::string FlagText(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

}  // namespace herd::defaults
