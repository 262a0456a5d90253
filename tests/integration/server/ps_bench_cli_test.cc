// `herd bench ps --json`: one JSON object per configuration with the documented fields, and
// goodputs that are positive and finite. (Small sizes: this checks the output, not speed.)

#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/str_split.h"
#include "common/json.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::bench {
namespace {

TEST(PsBenchCliTest, JsonLinesCarryEveryField) {
  auto r = scheduler::testing::RunHerd({"bench", "ps", "--modes", "ps_sync,ps_async,ps_ec",
                                        "--durability", "every-round,checkpoint-only", "--shards",
                                        "2", "--workers", "2", "--sizes", "256KiB", "--chunk-bytes",
                                        "64KiB", "--iters", "1", "--json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (line.empty() || line[0] != '{') continue;  // log lines go elsewhere or start with '['
    auto o = json::ParseObject(std::string(line));
    ASSERT_TRUE(o.ok()) << o.status() << ": " << line;
    for (const char* key : {"mode", "durability"}) EXPECT_TRUE(o->GetString(key).ok()) << key;
    EXPECT_EQ(*o->GetNumber("shards"), 2);
    EXPECT_EQ(*o->GetNumber("workers"), 2);
    EXPECT_EQ(*o->GetNumber("bytes"), 256 * 1024);
    for (const char* key : {"push_gbps", "pull_gbps"}) {
      auto v = o->GetNumber(key);
      ASSERT_TRUE(v.ok()) << key << " in " << line;
      EXPECT_GT(*v, 0.0) << key;
    }
    ++lines;
  }
  EXPECT_EQ(lines, 6) << r.out;
}

}  // namespace
}  // namespace herd::bench
