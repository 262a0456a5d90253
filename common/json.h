#pragma once
// JSON for what herd's programs hand each other and print for machines: the benchmarks'
// result lines, the rank processes' reports to their drivers, the worker's summary.
//
// - Value: null, bool, number, string, array, or object; an object keeps its members in the
//   order they were added (so written lines read in a fixed order) and its keys unique.
// - Writing escapes strings (quote, backslash, control characters as \n, \t, ... or \u00XX;
//   other bytes, UTF-8 included, as they are). Integers that fit int64 are kept exact and
//   written as digits; other numbers are doubles, written with 10 significant digits; a
//   non-finite double is written as null (JSON has none).
// - Parsing is strict RFC 8259 (no comments, no trailing commas, no NaN, no leading zeros, no
//   duplicate keys, nothing after the value); an error is INVALID_ARGUMENT with the offset and
//   what was expected. Nesting and size are bounded (ParseLimits), so input from a file or a
//   peer cannot exhaust the stack or memory.
// - Fields<T>: one list binding a flat struct's members to keys serves both directions
//   (ToObject, FromObject), instead of a writer and a reader to keep in step.
//
// Values are plain data: thread-compatible.

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::json {

class Value;
using Array = std::vector<Value>;
namespace internal {
class Parser;
}

class Object {
 public:
  // Appends `key` (or replaces the value of an existing one); returns *this for chaining.
  Object& Add(std::string_view key, Value value);
  const Value* Find(std::string_view key) const;  // nullptr when absent
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  size_t size() const;
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }

  // Typed access: NOT_FOUND when absent, INVALID_ARGUMENT naming the key when of another type.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<double> GetNumber(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;

  std::string Write() const;  // one line, no spaces

 private:
  friend class internal::Parser;
  std::vector<std::pair<std::string, Value>> members_;
};

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Value(T n) {
    if constexpr (std::is_signed_v<T>) {
      v_ = static_cast<int64_t>(n);
    } else if (static_cast<uint64_t>(n) <= uint64_t{INT64_MAX}) {
      v_ = static_cast<int64_t>(n);
    } else {
      v_ = static_cast<double>(n);
    }
  }
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool is_number() const { return integer() != nullptr || std::holds_alternative<double>(v_); }
  const bool* boolean() const { return std::get_if<bool>(&v_); }
  const int64_t* integer() const { return std::get_if<int64_t>(&v_); }  // exact integers only
  double number() const;  // any number as a double; NaN when not a number
  const std::string* string() const { return std::get_if<std::string>(&v_); }
  const Array* array() const { return std::get_if<Array>(&v_); }
  const Object* object() const { return std::get_if<Object>(&v_); }

  std::string Write() const;

 private:
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> v_;
};

inline size_t Object::size() const { return members_.size(); }

struct ParseLimits {
  int max_depth = 64;                   // nested arrays and objects
  size_t max_bytes = size_t{16} << 20;  // of the text
};

absl::StatusOr<Value> Parse(std::string_view text, const ParseLimits& limits = {});
// Parse, requiring an object ("expected an object" otherwise).
absl::StatusOr<Object> ParseObject(std::string_view text, const ParseLimits& limits = {});

// --- Binding a flat struct to an object.

template <typename T>
struct Field {
  using Member = std::variant<std::string T::*, bool T::*, int T::*, int64_t T::*, uint64_t T::*,
                              double T::*, std::vector<double> T::*>;
  std::string_view key;
  Member member;
  // Reading: the key may be absent (the member keeps its value). Writing: left out when the
  // value is empty (an empty string or vector, a NaN).
  bool optional = false;
};
// A struct's fields, declared once: `const json::Field<Row> kRowFields[] = {{"algo",
// &Row::algo}, ...};`.
template <typename T>
using Fields = std::span<const Field<T>>;

// The members in the order of `fields`. A NaN double that is not optional is written as null.
template <typename T>
Object ToObject(const T& from, std::type_identity_t<Fields<T>> fields);
// Reads every field into `to`: a number into a numeric member (null into a double: NaN), a
// string, a bool, an array of numbers. Errors: NOT_FOUND for a missing key that is not
// optional, INVALID_ARGUMENT naming the key for a value of another type.
template <typename T>
absl::Status FromObject(const Object& from, std::type_identity_t<Fields<T>> fields, T& to);

// --- Implementation of the templates.

namespace internal {
absl::Status WrongType(std::string_view key, std::string_view expected);
bool Empty(const Value& v);
}  // namespace internal

template <typename T>
Object ToObject(const T& from, std::type_identity_t<Fields<T>> fields) {
  Object out;
  for (const Field<T>& f : fields) {
    Value v = std::visit(
        [&](auto member) -> Value {
          const auto& m = from.*member;
          if constexpr (std::is_same_v<std::decay_t<decltype(m)>, std::vector<double>>) {
            return Array(m.begin(), m.end());
          } else {
            return Value(m);
          }
        },
        f.member);
    if (!(f.optional && internal::Empty(v))) out.Add(f.key, std::move(v));
  }
  return out;
}

template <typename T>
absl::Status FromObject(const Object& from, std::type_identity_t<Fields<T>> fields, T& to) {
  for (const Field<T>& f : fields) {
    const Value* v = from.Find(f.key);
    if (v == nullptr) {
      if (f.optional) continue;
      return absl::NotFoundError("no key '" + std::string(f.key) + "'");
    }
    absl::Status st = std::visit(
        [&](auto member) -> absl::Status {
          auto& m = to.*member;
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, std::string>) {
            if (!v->string()) return internal::WrongType(f.key, "string");
            m = *v->string();
          } else if constexpr (std::is_same_v<M, bool>) {
            if (!v->boolean()) return internal::WrongType(f.key, "boolean");
            m = *v->boolean();
          } else if constexpr (std::is_same_v<M, std::vector<double>>) {
            if (!v->array()) return internal::WrongType(f.key, "array of numbers");
            m.clear();
            for (const Value& e : *v->array()) {
              if (!e.is_number()) return internal::WrongType(f.key, "array of numbers");
              m.push_back(e.number());
            }
          } else if constexpr (std::is_same_v<M, double>) {
            if (!v->is_number() && !v->is_null()) return internal::WrongType(f.key, "number");
            m = v->number();  // null: NaN, what ToObject wrote for it
          } else {
            if (!v->is_number()) return internal::WrongType(f.key, "number");
            m = v->integer() ? static_cast<M>(*v->integer()) : static_cast<M>(v->number());
          }
          return absl::OkStatus();
        },
        f.member);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace herd::json
