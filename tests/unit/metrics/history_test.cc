// The job history file: what the scheduler appends is what `herd plot` reads back, the last
// line of an iteration wins (a resumed job reports iterations again), a line cut short by a
// crash at the end is skipped, and a damaged line elsewhere is refused naming file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
#include "metrics/history.h"

namespace herd::metrics {
namespace {

HistoryRecord Record(int64_t iteration, double loss, const std::string& mode) {
  HistoryRecord r;
  r.iteration = iteration;
  r.loss = loss;
  r.samples_per_second = 1000 + iteration;
  r.exposed_comm_seconds = 0.001 * iteration;
  r.iteration_seconds = 0.05;
  r.mode = mode;
  r.epoch = 2;
  r.workers = 4;
  r.unix_ms = 1700000000000 + iteration;
  return r;
}

TEST(History, WrittenLinesReadBackByIterationLastOneWins) {
  auto dir = TempDir::Create("herd-history-test");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->path() + "/history/job-a.jsonl";
  {
    HistoryWriter writer(dir->path() + "/history");
    EXPECT_EQ(writer.PathOf("job-a"), path);
    writer.Append("job-a", Record(0, 2.5, "dear"));
    writer.Append("job-a", Record(1, 2.0, "dear"));
    writer.Append("job-a", Record(2, 1.5, "ps_sync"));
    writer.Append("job-b", Record(0, 9, "allreduce"));  // its own file
    // Rolled back and run again: the later report of iteration 1 is the one kept.
    writer.Append("job-a", Record(1, 1.9, "dear"));
    // Whole lines are on disk as they are written, before the writer closes.
    auto now = ReadHistory(path);
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_EQ(now->size(), 3u);
  }
  auto got = ReadHistory(path);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].iteration, 0);
  EXPECT_EQ((*got)[1].loss, 1.9);
  EXPECT_EQ((*got)[2].mode, "ps_sync");
  EXPECT_EQ((*got)[2].samples_per_second, 1002);
  EXPECT_EQ((*got)[2].epoch, 2u);
  EXPECT_EQ((*got)[2].workers, 4);
  EXPECT_EQ((*got)[2].unix_ms, 1700000000002);
  EXPECT_TRUE(std::filesystem::exists(dir->path() + "/history/job-b.jsonl"));
  // The format documented in docs/metrics.md, field by field.
  EXPECT_EQ(HistoryLine(Record(3, 0.5, "dear")),
            "{\"iteration\":3,\"loss\":0.5,\"samples_per_second\":1003,"
            "\"exposed_comm_seconds\":0.003,\"iteration_seconds\":0.05,\"mode\":\"dear\","
            "\"epoch\":2,\"workers\":4,\"unix_ms\":1700000000003}");
}

TEST(History, ACutLastLineIsSkippedADamagedOneRefused) {
  auto dir = TempDir::Create("herd-history-test");
  ASSERT_TRUE(dir.ok());
  const std::string cut = dir->path() + "/cut.jsonl";
  std::ofstream(cut) << HistoryLine(Record(0, 1, "dear")) << "\n{\"iteration\":1,\"lo";
  auto got = ReadHistory(cut);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);

  const std::string bad = dir->path() + "/bad.jsonl";
  std::ofstream(bad) << HistoryLine(Record(0, 1, "dear")) << "\n{\"iteration\":\"x\"}\n"
                     << HistoryLine(Record(2, 1, "dear")) << "\n";
  auto refused = ReadHistory(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(bad + " line 2"), std::string::npos)
      << refused.status();

  auto missing = ReadHistory(dir->path() + "/none.jsonl");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  const std::string empty = dir->path() + "/empty.jsonl";
  std::ofstream(empty).flush();
  auto none = ReadHistory(empty);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace herd::metrics
