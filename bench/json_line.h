#pragma once
// One flat JSON object per line: how herd's ranks and the peer programs hand results to the
// driver, and what `--json` prints. Flat means string, number, boolean and null values only;
// that is all a result needs, and it keeps the parser small enough to read in one sitting.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"

namespace herd::bench {

// Builds `{"key":value,...}` in insertion order. Non-finite doubles are written as null (JSON
// has no inf/nan); strings are escaped (quotes, backslash, control characters as \u00XX).
class JsonLineWriter {
 public:
  JsonLineWriter& Add(std::string_view key, std::string_view value);
  JsonLineWriter& Add(std::string_view key, const char* value) {
    return Add(key, std::string_view(value));
  }
  JsonLineWriter& Add(std::string_view key, double value);
  JsonLineWriter& Add(std::string_view key, int64_t value);
  JsonLineWriter& Add(std::string_view key, int value) { return Add(key, int64_t{value}); }
  JsonLineWriter& Add(std::string_view key, uint64_t value);
  JsonLineWriter& Add(std::string_view key, bool value);
  JsonLineWriter& AddNull(std::string_view key);

  // The object, without a trailing newline.
  std::string str() const { return body_ + "}"; }

 private:
  void Key(std::string_view key);
  std::string body_ = "{";
};

using JsonValue = std::variant<std::nullptr_t, bool, double, std::string>;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;

// Parses one flat object (surrounding whitespace allowed). Nested objects or arrays, trailing
// garbage, duplicate keys and malformed escapes are INVALID_ARGUMENT with the offset.
absl::StatusOr<JsonObject> ParseJsonLine(std::string_view line);

// Typed access: NOT_FOUND when absent, INVALID_ARGUMENT when of another type.
absl::StatusOr<std::string> GetString(const JsonObject& o, std::string_view key);
absl::StatusOr<double> GetNumber(const JsonObject& o, std::string_view key);
absl::StatusOr<bool> GetBool(const JsonObject& o, std::string_view key);

}  // namespace herd::bench
