#include "common/logging.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace herd {

spdlog::logger& Log() {
  // Never destroyed: threads that outlive static destruction (the metrics endpoint's, gRPC's)
  // may still log while the process exits.
  static auto* logger = new std::shared_ptr<spdlog::logger>([] {
    auto l = spdlog::stderr_color_mt("herd");
    const char* level = std::getenv("HERD_LOG_LEVEL");
    l->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] [pid %P] %v");
    return l;
  }());
  return **logger;
}

}  // namespace herd
