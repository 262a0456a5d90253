#include "storage/rocksdb_logger.h"

#include <cstdarg>
#include <cstdio>

#include "common/logging.h"

namespace herd::storage {
namespace {

class SpdlogLogger final : public rocksdb::Logger {
 public:
  SpdlogLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char line[1024];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(line, sizeof line, format, copy);
    va_end(copy);
    switch (level) {
      case rocksdb::InfoLogLevel::ERROR_LEVEL:
      case rocksdb::InfoLogLevel::FATAL_LEVEL:
        Log().error("rocksdb: {}", line);
        break;
      case rocksdb::InfoLogLevel::WARN_LEVEL:
        Log().warn("rocksdb: {}", line);
        break;
      default:
        Log().debug("rocksdb: {}", line);
    }
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger() { return std::make_shared<SpdlogLogger>(); }

}  // namespace herd::storage
