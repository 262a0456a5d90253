// common/json.h: the writer, the strict parser and its bounds, and the struct binding.

#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace herd::json {
namespace {

TEST(JsonWrite, FlatObjectsInOrderWithEscapes) {
  Object o;
  o.Add("s", "a\"b\\c\n\x01").Add("i", int64_t{-3}).Add("u", uint64_t{1} << 40).Add("d", 0.5);
  o.Add("t", true).Add("n", nullptr).Add("inf", std::numeric_limits<double>::infinity());
  EXPECT_EQ(o.Write(),
            R"({"s":"a\"b\\c\n\u0001","i":-3,"u":1099511627776,"d":0.5,"t":true,"n":null,)"
            R"("inf":null})");
  EXPECT_EQ(Object().Write(), "{}");
  // A key added again replaces its value in place.
  EXPECT_EQ(Object().Add("a", 1).Add("b", 2).Add("a", 3).Write(), R"({"a":3,"b":2})");
}

TEST(JsonWrite, NestedValues) {
  Object inner;
  inner.Add("k", Array{1, 2.5, "x", Value(), Array{}});
  EXPECT_EQ(Object().Add("o", inner).Add("e", Object()).Write(),
            R"({"o":{"k":[1,2.5,"x",null,[]]},"e":{}})");
}

TEST(JsonParse, ReadsWhatTheWriterWrites) {
  Object w;
  w.Add("s", "tab\there \"q\" \\ /").Add("x", 1.25e-7).Add("big", uint64_t{4000012});
  auto o = ParseObject(w.Write());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*o->GetString("s"), "tab\there \"q\" \\ /");
  EXPECT_DOUBLE_EQ(*o->GetNumber("x"), 1.25e-7);
  EXPECT_EQ(*o->GetNumber("big"), 4000012.0);
  ASSERT_NE(o->Find("big")->integer(), nullptr);
  EXPECT_EQ(*o->Find("big")->integer(), 4000012);
}

TEST(JsonParse, AcceptsStandardJson) {
  auto o =
      ParseObject(R"(  { "a" : -0.5E+2 , "b":false,"c":null, "d":"\u00e9\/", "e":[{}, [1]] }  )");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*o->GetNumber("a"), -50.0);
  EXPECT_EQ(*o->GetBool("b"), false);
  EXPECT_TRUE(o->Find("c")->is_null());
  EXPECT_EQ(*o->GetString("d"), "\xc3\xa9/");
  ASSERT_NE(o->Find("e")->array(), nullptr);
  EXPECT_EQ(o->Find("e")->array()->size(), 2u);
  // A surrogate pair is one code point (U+1F600), four bytes of UTF-8.
  EXPECT_EQ(*ParseObject(R"({"f":"\ud83d\ude00"})")->GetString("f"), "\xf0\x9f\x98\x80");
}

TEST(JsonParse, RejectsMalformedText) {
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[1]",
                          R"({"a":1,})",
                          R"({"a":1 "b":2})",
                          R"({"a":01})",
                          R"({"a":1.})",
                          R"({"a":[1,]})",
                          R"({"a":"x)",
                          R"({"a":"\q"})",
                          R"({"a":1} x)",
                          R"({"a":1,"a":2})",
                          R"({a:1})",
                          R"({"a":tru})",
                          R"({"a":"\u12"})",
                          "{\"a\":\"\x01\"}",
                          R"({"a":NaN})",
                          R"({"a":"\ud83d"})",
                          R"({"a":"\ude00x"})"}) {
    auto o = ParseObject(bad);
    EXPECT_FALSE(o.ok()) << "accepted: " << bad;
    if (!o.ok()) {
      EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
  // The error says where and what.
  EXPECT_EQ(ParseObject(R"({"a":1 "b":2})").status().message(),
            "JSON at offset 7: expected ',' or '}'");
}

TEST(JsonParse, DepthAndSizeAreBounded) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(Parse(deep).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Parse(deep).status().message().find("nested deeper than 64"), std::string::npos);
  EXPECT_TRUE(Parse(deep, {.max_depth = 100}).ok());
  EXPECT_FALSE(Parse(R"("0123456789")", {.max_bytes = 8}).ok());
}

TEST(JsonObject, TypedAccessSaysWhatIsWrong) {
  auto o = ParseObject(R"({"a":"x"})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->GetNumber("a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o->GetNumber("a").status().message(), "key 'a' is not a number");
  EXPECT_EQ(o->GetNumber("b").status().code(), absl::StatusCode::kNotFound);
}

// A flat struct of numbers and strings, like the worker's summary.
struct Summary {
  int rank = 0;
  int64_t iterations = 0;
  uint64_t bytes = 0;
  double loss = 0;
  double maybe = std::numeric_limits<double>::quiet_NaN();
  std::string executor;
  std::string note;
  bool done = false;
  std::vector<double> rounds;
};
const Field<Summary> kSummaryFields[] = {
    {"rank", &Summary::rank},          {"iterations", &Summary::iterations},
    {"bytes", &Summary::bytes},        {"loss", &Summary::loss},
    {"maybe", &Summary::maybe},        {"executor", &Summary::executor},
    {"note", &Summary::note, true},    {"done", &Summary::done},
    {"rounds", &Summary::rounds, true}};

TEST(JsonFields, OneListServesBothDirections) {
  Summary s{3, int64_t{1} << 40, 4000012, 0.25, std::nan(""), "ring \"8M\"", "", true, {0.5, 2}};
  const std::string line = ToObject(s, kSummaryFields).Write();
  EXPECT_EQ(line,
            R"({"rank":3,"iterations":1099511627776,"bytes":4000012,"loss":0.25,"maybe":null,)"
            R"("executor":"ring \"8M\"","done":true,"rounds":[0.5,2]})");
  Summary back;
  ASSERT_TRUE(FromObject(*ParseObject(line), kSummaryFields, back).ok());
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.iterations, int64_t{1} << 40);
  EXPECT_EQ(back.bytes, 4000012u);
  EXPECT_EQ(back.loss, 0.25);
  EXPECT_TRUE(std::isnan(back.maybe));
  EXPECT_EQ(back.executor, s.executor);
  EXPECT_EQ(back.done, true);
  EXPECT_EQ(back.rounds, (std::vector<double>{0.5, 2}));
}

TEST(JsonFields, MissingAndMistypedKeysAreNamed) {
  Summary s;
  auto st = FromObject(*ParseObject(R"({"rank":1})"), kSummaryFields, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "no key 'iterations'");
  auto typed = ParseObject(
      R"({"rank":"one","iterations":1,"bytes":1,"loss":1,"maybe":1,"executor":"","done":true})");
  st = FromObject(*typed, kSummaryFields, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "key 'rank' is not a number");
}

}  // namespace
}  // namespace herd::json
