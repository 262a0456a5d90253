#include "tests/integration/storage/wal_surgery.h"

#include <fstream>
#include <iterator>

namespace herd::testing {

namespace fs = std::filesystem;

fs::path NewestLog(const fs::path& dir) {
  fs::path newest;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".log" && e.file_size() > 0 &&
        (newest.empty() || e.path().filename() > newest.filename())) {
      newest = e.path();
    }
  }
  return newest;
}

std::vector<uint64_t> BatchEnds(const fs::path& log) {
  std::ifstream f(log, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  constexpr uint64_t kBlock = 32768, kHeader = 7;
  std::vector<uint64_t> ends;
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    const uint64_t left = kBlock - pos % kBlock;
    if (left < kHeader) {
      pos += left;
      continue;
    }
    if (pos + kHeader > bytes.size()) break;
    const auto* h = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    const uint64_t length = h[4] | (uint64_t{h[5]} << 8);
    const int type = h[6];
    if (type == 0 && length == 0) break;  // preallocated zeros: the end
    pos += kHeader + length;
    if (type == 1 || type == 4) ends.push_back(pos);  // FULL, LAST
  }
  return ends;
}

std::string DamageLog(const fs::path& dir) {
  const fs::path newest = NewestLog(dir);
  if (newest.empty()) return "";
  const auto size = fs::file_size(newest);
  std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size / 2));
  f.write("\xde\xad\xbe\xef", 4);
  return newest.filename().string();
}

}  // namespace herd::testing
