#pragma once
// Runs a short administrative command (ip, tc) to completion and reports how it went. The
// emulator drives the kernel through iproute2 rather than netlink: every step is then a
// command a person can copy from an error message and run by hand.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::emulator {

// argv[0] is looked up in PATH. Returns the command's stdout when it exits 0; otherwise
// INTERNAL (FAILED_PRECONDITION when it cannot be started) with the command line, the exit
// status and its stderr. stdin is /dev/null.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// "ip -n herd-emu-12-0 link set lo up": for messages.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace herd::emulator
