// The JSON lines the ranks, the peers and --json print, and their parser.

#include "bench/json_line.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench/result.h"

namespace herd::bench {
namespace {

TEST(JsonLineWriter, WritesFlatObjectsInOrder) {
  JsonLineWriter w;
  w.Add("s", "a\"b\\c\n\x01").Add("i", int64_t{-3}).Add("u", uint64_t{1} << 40).Add("d", 0.5);
  w.Add("t", true).AddNull("n").Add("inf", std::numeric_limits<double>::infinity());
  EXPECT_EQ(w.str(), R"({"s":"a\"b\\c\n\u0001","i":-3,"u":1099511627776,"d":0.5,"t":true,"n":null,)"
                     R"("inf":null})");
  EXPECT_EQ(JsonLineWriter().str(), "{}");
}

TEST(ParseJsonLine, ReadsWhatTheWriterWrites) {
  JsonLineWriter w;
  w.Add("s", "tab\there \"q\" \\ /").Add("x", 1.25e-7).Add("big", uint64_t{4000012});
  auto o = ParseJsonLine(w.str());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*GetString(*o, "s"), "tab\there \"q\" \\ /");
  EXPECT_DOUBLE_EQ(*GetNumber(*o, "x"), 1.25e-7);
  EXPECT_EQ(*GetNumber(*o, "big"), 4000012.0);
}

TEST(ParseJsonLine, AcceptsStandardJson) {
  auto o = ParseJsonLine(R"(  { "a" : -0.5E+2 , "b":false,"c":null, "d":"\u00e9\/" }  )");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*GetNumber(*o, "a"), -50.0);
  EXPECT_EQ(*GetBool(*o, "b"), false);
  EXPECT_TRUE(std::holds_alternative<std::nullptr_t>(o->at("c")));
  EXPECT_EQ(*GetString(*o, "d"), "\xc3\xa9/");
}

TEST(ParseJsonLine, RejectsMalformedLines) {
  for (const char* bad :
       {"", "{", "}", "[1]", R"({"a":1,})", R"({"a":1 "b":2})", R"({"a":01})", R"({"a":1.})",
        R"({"a":[1]})", R"({"a":{"b":1}})", R"({"a":"x)", R"({"a":"\q"})", R"({"a":1} x)",
        R"({"a":1,"a":2})", R"({a:1})", R"({"a":tru})", R"({"a":"\u12"})", "{\"a\":\"\x01\"}"}) {
    auto o = ParseJsonLine(bad);
    EXPECT_FALSE(o.ok()) << "accepted: " << bad;
    if (!o.ok()) {
      EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ParseJsonLine, TypedAccessSaysWhatIsWrong) {
  auto o = ParseJsonLine(R"({"a":"x"})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(GetNumber(*o, "a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetNumber(*o, "b").status().code(), absl::StatusCode::kNotFound);
}

TEST(ResultLine, HasTheRequiredFieldsAndRoundTrips) {
  BenchResult r =
      MakeResult("herd", BenchOp::kAllGather, "bruck", 4, 4000012, 4000012, "fp32", 30, 0.00123);
  r.check = "failed";
  r.detail = "herd allgather bruck 4000012: rank 2 element 17 is 3, expected 4";
  r.wait_us = 800;
  const std::string line = ToJsonLine(r);
  auto o = ParseJsonLine(line);
  ASSERT_TRUE(o.ok()) << o.status();
  for (const char* key : {"impl", "op", "algo", "ranks", "bytes", "dtype", "iters", "time_us",
                          "algbw_gbps", "busbw_gbps", "check"}) {
    EXPECT_TRUE(o->count(key)) << key << " missing from " << line;
  }
  auto back = ParseResultLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->impl, "herd");
  EXPECT_EQ(back->op, "allgather");
  EXPECT_EQ(back->algo, "bruck");
  EXPECT_EQ(back->ranks, 4);
  EXPECT_EQ(back->bytes, 4000012u);
  EXPECT_EQ(back->iters, 30);
  EXPECT_NEAR(back->time_us, 1230.0, 1e-6);
  EXPECT_NEAR(back->algbw_gbps, r.algbw_gbps, 1e-6);
  EXPECT_NEAR(back->busbw_gbps, r.busbw_gbps, 1e-6);
  EXPECT_EQ(back->check, "failed");
  EXPECT_EQ(back->detail, r.detail);
  EXPECT_DOUBLE_EQ(back->wait_us, 800);
}

TEST(ResultLine, UnmeasuredRowsCarryNullTime) {
  BenchResult r = MakeUnmeasured("gloo", BenchOp::kReduceScatter, "halving_doubling", 4, 4096,
                                 "bf16", "Gloo's reduce-scatter has no bf16 reduction");
  const std::string line = ToJsonLine(r);
  EXPECT_NE(line.find(R"("time_us":null)"), std::string::npos) << line;
  auto back = ParseResultLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->measured());
  EXPECT_EQ(back->detail, r.detail);
}

TEST(ResultLine, RejectsLinesThatAreNotResults) {
  EXPECT_FALSE(ParseResultLine(R"({"impl":"herd"})").ok());
  BenchResult r = MakeResult("herd", BenchOp::kAllReduce, "ring", 2, 8, 8, "fp32", 1, 1e-6);
  std::string line = ToJsonLine(r);
  line.replace(line.find(R"("check":"off")"), 13, R"("check":"maybe")");
  EXPECT_FALSE(ParseResultLine(line).ok());
}

}  // namespace
}  // namespace herd::bench
