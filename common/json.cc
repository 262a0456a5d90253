#include "common/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "absl/strings/str_format.h"

namespace herd::json {

namespace {

void WriteString(std::string& out, std::string_view s) {
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

void WriteValue(std::string& out, const Value& v);

void WriteObject(std::string& out, const Object& o) {
  out.push_back('{');
  for (const auto& [key, value] : o.members()) {
    if (out.back() != '{') out.push_back(',');
    WriteString(out, key);
    out.push_back(':');
    WriteValue(out, value);
  }
  out.push_back('}');
}

void WriteValue(std::string& out, const Value& v) {
  if (v.boolean()) {
    out += *v.boolean() ? "true" : "false";
  } else if (v.integer()) {
    out += absl::StrFormat("%d", *v.integer());
  } else if (v.is_number()) {
    // %.10g keeps timings in microseconds and bandwidths exact to well below their noise.
    out += std::isfinite(v.number()) ? absl::StrFormat("%.10g", v.number()) : "null";
  } else if (v.string()) {
    WriteString(out, *v.string());
  } else if (v.array()) {
    out.push_back('[');
    for (const Value& e : *v.array()) {
      if (out.back() != '[') out.push_back(',');
      WriteValue(out, e);
    }
    out.push_back(']');
  } else if (v.object()) {
    WriteObject(out, *v.object());
  } else {
    out += "null";
  }
}

template <typename T>
absl::StatusOr<T> Typed(const Object& o, std::string_view key, const T* (Value::*get)() const,
                        std::string_view type) {
  const Value* v = o.Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrFormat("no key '%s'", key));
  if (const T* t = (v->*get)()) return *t;
  return internal::WrongType(key, type);
}

}  // namespace

namespace internal {

// Recursive descent over the RFC 8259 grammar; `depth` bounds the recursion.
class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : s_(text), limits_(limits) {}

  absl::StatusOr<Value> Document() {
    if (s_.size() > limits_.max_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "JSON text of %u bytes exceeds the limit of %u", s_.size(), limits_.max_bytes));
    }
    auto v = ParseValue(0);
    if (!v.ok()) return v;
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters after the value");
    return v;
  }

 private:
  absl::StatusOr<Value> ParseValue(int depth) {
    SkipSpace();
    if (pos_ >= s_.size()) return Error("expected a value");
    const char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= limits_.max_depth) {
        return Error(absl::StrFormat("nested deeper than %d levels", limits_.max_depth));
      }
      return c == '{' ? ParseObject(depth + 1) : ParseArray(depth + 1);
    }
    if (c == '"') {
      auto s = ParseString();
      if (!s.ok()) return s.status();
      return Value(std::move(*s));
    }
    if (Literal("true")) return Value(true);
    if (Literal("false")) return Value(false);
    if (Literal("null")) return Value(nullptr);
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    return Error("expected a value");
  }

  absl::StatusOr<Value> ParseObject(int depth) {
    ++pos_;  // '{'
    Object object;
    std::unordered_set<std::string> keys;  // Object::Add's own check would be quadratic
    SkipSpace();
    if (Consume('}')) return Value(std::move(object));
    while (true) {
      SkipSpace();
      auto key = ParseString();
      if (!key.ok()) return key.status();
      if (!keys.insert(*key).second) return Error(absl::StrFormat("duplicate key '%s'", *key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      auto value = ParseValue(depth);
      if (!value.ok()) return value.status();
      object.members_.emplace_back(std::move(*key), std::move(*value));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) return Value(std::move(object));
      return Error("expected ',' or '}'");
    }
  }

  absl::StatusOr<Value> ParseArray(int depth) {
    ++pos_;  // '['
    Array array;
    SkipSpace();
    if (Consume(']')) return Value(std::move(array));
    while (true) {
      auto value = ParseValue(depth);
      if (!value.ok()) return value.status();
      array.push_back(std::move(*value));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume(']')) return Value(std::move(array));
      return Error("expected ',' or ']'");
    }
  }

  absl::StatusOr<Value> ParseNumber() {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const size_t begin = pos_;
    Consume('-');
    if (!Consume('0') && !Digits()) return Error("malformed number");
    bool integral = true;
    if (Consume('.')) {
      integral = false;
      if (!Digits()) return Error("malformed number: digits expected after '.'");
    }
    if (Consume('e') || Consume('E')) {
      integral = false;
      if (!Consume('+')) Consume('-');
      if (!Digits()) return Error("malformed number: digits expected in the exponent");
    }
    const std::string text(s_.substr(begin, pos_ - begin));
    if (integral) {
      errno = 0;
      char* end = nullptr;
      const long long n = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end == text.c_str() + text.size()) return Value(int64_t{n});
    }
    return Value(std::strtod(text.c_str(), nullptr));
  }

  bool Digits() {
    const size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ > begin;
  }

  absl::StatusOr<std::string> ParseString() {
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
      switch (const char e = s_[pos_++]) {
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
          auto cp = CodePoint();
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

  // The code point of \uXXXX (after the 'u'), joining a surrogate pair into one.
  absl::StatusOr<uint32_t> CodePoint() {
    auto hi = Hex4();
    if (!hi.ok() || *hi < 0xd800 || *hi > 0xdfff) return hi;
    if (*hi >= 0xdc00 || !Literal("\\u")) return Error("unpaired surrogate in a \\u escape");
    auto lo = Hex4();
    if (!lo.ok()) return lo;
    if (*lo < 0xdc00 || *lo > 0xdfff) return Error("unpaired surrogate in a \\u escape");
    return 0x10000 + ((*hi - 0xd800) << 10) + (*lo - 0xdc00);
  }

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
    auto put = [&](uint32_t b) { out.push_back(static_cast<char>(b)); };
    if (cp < 0x80) {
      put(cp);
    } else if (cp < 0x800) {
      put(0xc0 | (cp >> 6));
      put(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      put(0xe0 | (cp >> 12));
      put(0x80 | ((cp >> 6) & 0x3f));
      put(0x80 | (cp & 0x3f));
    } else {
      put(0xf0 | (cp >> 18));
      put(0x80 | ((cp >> 12) & 0x3f));
      put(0x80 | ((cp >> 6) & 0x3f));
      put(0x80 | (cp & 0x3f));
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool Consume(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("JSON at offset %u: %s", pos_, what));
  }

  std::string_view s_;
  const ParseLimits& limits_;
  size_t pos_ = 0;
};

absl::Status WrongType(std::string_view key, std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat("key '%s' is not a %s", key, expected));
}

bool Empty(const Value& v) {
  if (v.string()) return v.string()->empty();
  if (v.array()) return v.array()->empty();
  return v.is_number() && std::isnan(v.number());
}

}  // namespace internal

Object& Object::Add(std::string_view key, Value value) {
  for (auto& [k, v] : members_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  members_.emplace_back(std::string(key), std::move(value));
  return *this;
}

const Value* Object::Find(std::string_view key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return &v;
  }
  return nullptr;
}

absl::StatusOr<std::string> Object::GetString(std::string_view key) const {
  return Typed<std::string>(*this, key, &Value::string, "string");
}
absl::StatusOr<bool> Object::GetBool(std::string_view key) const {
  return Typed<bool>(*this, key, &Value::boolean, "boolean");
}
absl::StatusOr<double> Object::GetNumber(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrFormat("no key '%s'", key));
  if (!v->is_number()) return internal::WrongType(key, "number");
  return v->number();
}

std::string Object::Write() const {
  std::string out;
  WriteObject(out, *this);
  return out;
}

double Value::number() const {
  if (const int64_t* i = integer()) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&v_)) return *d;
  return std::numeric_limits<double>::quiet_NaN();
}

std::string Value::Write() const {
  std::string out;
  WriteValue(out, *this);
  return out;
}

absl::StatusOr<Value> Parse(std::string_view text, const ParseLimits& limits) {
  return internal::Parser(text, limits).Document();
}

absl::StatusOr<Object> ParseObject(std::string_view text, const ParseLimits& limits) {
  auto v = Parse(text, limits);
  if (!v.ok()) return v.status();
  if (!v->object()) return absl::InvalidArgumentError("JSON: expected an object");
  return *v->object();
}

}  // namespace herd::json
