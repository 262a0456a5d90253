#include "bench/json_line.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace herd::bench {

// --- Writer.

namespace {

void AppendEscaped(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace

void JsonLineWriter::Key(std::string_view key) {
  if (body_.size() > 1) body_.push_back(',');
  AppendEscaped(body_, key);
  body_.push_back(':');
}

JsonLineWriter& JsonLineWriter::Add(std::string_view key, std::string_view value) {
  Key(key);
  AppendEscaped(body_, value);
  return *this;
}

JsonLineWriter& JsonLineWriter::Add(std::string_view key, double value) {
  Key(key);
  // %.10g keeps timings in microseconds and bandwidths exact to well below their noise.
  body_ += std::isfinite(value) ? absl::StrFormat("%.10g", value) : std::string("null");
  return *this;
}

JsonLineWriter& JsonLineWriter::Add(std::string_view key, int64_t value) {
  Key(key);
  body_ += absl::StrFormat("%d", value);
  return *this;
}

JsonLineWriter& JsonLineWriter::Add(std::string_view key, uint64_t value) {
  Key(key);
  body_ += absl::StrFormat("%u", value);
  return *this;
}

JsonLineWriter& JsonLineWriter::Add(std::string_view key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLineWriter& JsonLineWriter::AddNull(std::string_view key) {
  Key(key);
  body_ += "null";
  return *this;
}

// --- Parser: a recursive-descent reader restricted to one level.

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  absl::StatusOr<JsonObject> Object() {
    JsonObject object;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish(std::move(object));
    while (true) {
      SkipSpace();
      auto key = String();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      auto value = Value();
      if (!value.ok()) return value.status();
      if (!object.emplace(*key, std::move(*value)).second) {
        return Error(absl::StrFormat("duplicate key '%s'", *key));
      }
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) return Finish(std::move(object));
      return Error("expected ',' or '}'");
    }
  }

 private:
  absl::StatusOr<JsonObject> Finish(JsonObject object) {
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters after the object");
    return object;
  }

  absl::StatusOr<JsonValue> Value() {
    if (pos_ >= s_.size()) return Error("expected a value");
    const char c = s_[pos_];
    if (c == '"') {
      auto s = String();
      if (!s.ok()) return s.status();
      return JsonValue(std::move(*s));
    }
    if (Literal("true")) return JsonValue(true);
    if (Literal("false")) return JsonValue(false);
    if (Literal("null")) return JsonValue(nullptr);
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    if (c == '{' || c == '[') return Error("nested objects and arrays are not expected here");
    return Error("expected a value");
  }

  absl::StatusOr<JsonValue> Number() {
    // JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const size_t begin = pos_;
    Consume('-');
    if (Consume('0')) {
    } else if (!Digits()) {
      return Error("malformed number");
    }
    if (Consume('.') && !Digits()) return Error("malformed number: digits expected after '.'");
    if (Consume('e') || Consume('E')) {
      if (!Consume('+')) Consume('-');
      if (!Digits()) return Error("malformed number: digits expected in the exponent");
    }
    const std::string text(s_.substr(begin, pos_ - begin));
    return JsonValue(std::strtod(text.c_str(), nullptr));
  }

  bool Digits() {
    const size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ > begin;
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Error("expected a string");
    std::string out;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          auto cp = Hex4();
          if (!cp.ok()) return cp.status();
          AppendUtf8(out, *cp);
          break;
        }
        default:
          return Error("unknown escape in a string");
      }
    }
    return Error("unterminated string");
  }

  // Four hex digits of \uXXXX. Surrogate pairs are passed through as two code points encoded
  // separately: results never contain them, and a wrong glyph beats a failed parse.
  absl::StatusOr<uint32_t> Hex4() {
    if (pos_ + 4 > s_.size()) return Error("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        v |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        v |= h - 'A' + 10;
      } else {
        return Error("bad hex digit in a \\u escape");
      }
    }
    return v;
  }

  static void AppendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("JSON line at offset %u: %s", pos_, what));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

template <typename T>
absl::StatusOr<T> Get(const JsonObject& o, std::string_view key, std::string_view type) {
  auto it = o.find(key);
  if (it == o.end()) return absl::NotFoundError(absl::StrFormat("no key '%s'", key));
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return absl::InvalidArgumentError(absl::StrFormat("key '%s' is not a %s", key, type));
}

}  // namespace

absl::StatusOr<JsonObject> ParseJsonLine(std::string_view line) { return Parser(line).Object(); }

absl::StatusOr<std::string> GetString(const JsonObject& o, std::string_view key) {
  return Get<std::string>(o, key, "string");
}
absl::StatusOr<double> GetNumber(const JsonObject& o, std::string_view key) {
  return Get<double>(o, key, "number");
}
absl::StatusOr<bool> GetBool(const JsonObject& o, std::string_view key) {
  return Get<bool>(o, key, "boolean");
}

}  // namespace herd::bench
