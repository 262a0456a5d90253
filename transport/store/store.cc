// What every Store shares: the key-by-key GetMany and its error.

#include "transport/store/store.h"

#include "absl/strings/str_format.h"

namespace herd::transport {
namespace {

// Keys named in a MissingKeysError before "and N more".
constexpr size_t kKeysNamed = 8;

}  // namespace

absl::StatusOr<std::vector<std::string>> Store::GetMany(const std::vector<std::string>& keys,
                                                        Deadline deadline,
                                                        std::vector<size_t>* missing) {
  std::vector<std::string> values(keys.size());
  std::vector<size_t> absent;
  for (size_t i = 0; i < keys.size(); ++i) {
    // Once the deadline has passed, each Get looks once: the error lists every missing key.
    absl::StatusOr<std::string> value = Get(keys[i], deadline);
    if (value.ok()) {
      values[i] = std::move(*value);
    } else if (absl::IsDeadlineExceeded(value.status())) {
      absent.push_back(i);
    } else {
      return value.status();
    }
  }
  if (absent.empty()) return values;
  if (missing != nullptr) *missing = absent;
  return MissingKeysError(keys, absent, "");
}

absl::Status MissingKeysError(const std::vector<std::string>& keys,
                              const std::vector<size_t>& missing, std::string_view where) {
  std::string named;
  for (size_t i = 0; i < missing.size() && i < kKeysNamed; ++i) {
    absl::StrAppendFormat(&named, "%s'%s'", i == 0 ? "" : ", ", keys[missing[i]]);
  }
  if (missing.size() > kKeysNamed) {
    absl::StrAppendFormat(&named, " and %d more", missing.size() - kKeysNamed);
  }
  return absl::DeadlineExceededError(
      absl::StrFormat("store key%s %s (%d of %d)%s%s did not appear before the deadline",
                      missing.size() == 1 ? "" : "s", named, missing.size(), keys.size(),
                      where.empty() ? "" : " ", where));
}

}  // namespace herd::transport
