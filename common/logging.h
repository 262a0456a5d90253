#pragma once
// herd's logger: spdlog, one shared logger named "herd", level from HERD_LOG_LEVEL
// (trace, debug, info, warn, error, off; default info), output on stderr.

#include <spdlog/spdlog.h>

namespace herd {

spdlog::logger& Log();

}  // namespace herd
