// `herd timeline merge DIR`: every rank's timeline as one Chrome trace on one clock. Files
// written by the Timeline class with known offsets between their origins, and files from a
// real `herd local --timeline` run, go through the real `herd` binary; the merged trace is read
// back with protobuf's JSON parser.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/timeline.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using scheduler::testing::CliResult;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
namespace fs = std::filesystem;

class TimelineMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-timeline-merge-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Struct Parse(const std::string& path) {
    Struct trace;
    const auto st = google::protobuf::util::JsonStringToMessage(ReadFile(path), &trace);
    EXPECT_TRUE(st.ok()) << path << ": " << st.ToString();
    return trace;
  }
  struct Span {
    double begin_us, end_us;
  };
  // The timed events of `trace` named `name`, by pid.
  std::map<int, std::vector<Span>> Spans(const Struct& trace, const std::string& name) {
    std::map<int, std::vector<Span>> out;
    for (const Value& v : trace.fields().at("traceEvents").list_value().values()) {
      const auto& f = v.struct_value().fields();
      if (f.at("name").string_value() != name || !f.contains("ts")) continue;
      const double ts = f.at("ts").number_value();
      out[static_cast<int>(f.at("pid").number_value())].push_back(
          {ts, ts + f.at("dur").number_value()});
    }
    return out;
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  CliResult Merge(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"timeline", "merge", dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunHerd(args);
  }

  std::string dir_;
};

TEST_F(TimelineMerge, ShiftsEveryFileOntoTheClockOfTheEarliestStart) {
  // Three processes' timelines whose origins are about 40 ms apart, each recording the very same
  // instant ("marker"): in their own files the marker's ts differ by the origins' distance.
  Timeline r2(dir_ + "/worker-2.json", 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  Timeline r0(dir_ + "/worker-0.json", 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  Timeline r1(dir_ + "/worker-1.json", 1);
  const auto b = r0.now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto e = r0.now();
  for (Timeline* t : {&r0, &r1, &r2}) {
    t->Add("marker", Timeline::Lane::kComm, b, e);
    ASSERT_TRUE(t->Write().ok());
  }
  const auto raw0 = Spans(Parse(dir_ + "/worker-0.json"), "marker")[0][0];
  const auto raw2 = Spans(Parse(dir_ + "/worker-2.json"), "marker")[2][0];
  EXPECT_GE(raw2.begin_us - raw0.begin_us, 39000) << "the files' clocks differ";

  CliResult r = Merge({"--out", dir_ + "/all.json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("merged 3 timelines (3 events) into " + dir_ + "/all.json"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 2"), std::string::npos) << r.out;
  const Struct merged = Parse(dir_ + "/all.json");
  const auto markers = Spans(merged, "marker");
  ASSERT_EQ(markers.size(), 3u);
  // On one clock the same instant has one ts (the anchors are read within microseconds of the
  // origins); the earliest start (rank 2's) is the zero.
  for (int rank : {0, 1}) {
    EXPECT_NEAR(markers.at(rank)[0].begin_us, markers.at(2)[0].begin_us, 500) << rank;
  }
  EXPECT_NEAR(markers.at(2)[0].begin_us, raw2.begin_us, 1);
  const Struct& other = merged.fields().at("otherData").struct_value();
  EXPECT_TRUE(other.fields().at("herd_merged").bool_value());
  EXPECT_EQ(static_cast<int64_t>(other.fields().at("herd_origin_unix_us").number_value()),
            r2.origin_unix_us());
  const auto& sources = other.fields().at("herd_sources").list_value().values();
  ASSERT_EQ(sources.size(), 3);
  std::map<int, double> offsets;
  for (const Value& s : sources) {
    const auto& f = s.struct_value().fields();
    offsets[static_cast<int>(f.at("rank").number_value())] = f.at("offset_us").number_value();
  }
  EXPECT_EQ(offsets[2], 0);
  EXPECT_EQ(offsets[0], r0.origin_unix_us() - r2.origin_unix_us());
  EXPECT_EQ(offsets[1], r1.origin_unix_us() - r2.origin_unix_us());
  EXPECT_GE(offsets[1], 79000);
  // The viewer's rows: every rank's process name survives the merge.
  int names = 0;
  for (const Value& v : merged.fields().at("traceEvents").list_value().values()) {
    names += v.struct_value().fields().at("name").string_value() == "process_name";
  }
  EXPECT_EQ(names, 3);
}

TEST_F(TimelineMerge, TheDefaultOutputIsInTheDirectoryAndIsNotMergedAgain) {
  for (int rank : {0, 1}) {
    Timeline t(dir_ + "/worker-" + std::to_string(rank) + ".json", rank);
    t.Add("x", Timeline::Lane::kCompute, t.now(), t.now());
    ASSERT_TRUE(t.Write().ok());
  }
  CliResult first = Merge();
  ASSERT_EQ(first.rc, 0) << first.out;
  ASSERT_TRUE(fs::exists(dir_ + "/merged.json"));
  const std::string once = ReadFile(dir_ + "/merged.json");
  // A second merge reads the two timelines again, not its own earlier output.
  CliResult second = Merge();
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_NE(second.out.find("merged 2 timelines (2 events)"), std::string::npos) << second.out;
  EXPECT_EQ(ReadFile(dir_ + "/merged.json"), once);
  // Nor is a merged trace under another name an input.
  fs::copy_file(dir_ + "/merged.json", dir_ + "/copy.json");
  CliResult third = Merge({"--out", dir_ + "/again.json"});
  EXPECT_NE(third.out.find("merged 2 timelines (2 events)"), std::string::npos) << third.out;
}

TEST_F(TimelineMerge, BadInputIsAClearErrorAndWritesNothing) {
  auto expect_error = [&](const std::string& message) {
    CliResult r = Merge();
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir_ + "/merged.json"));
  };
  expect_error("holds no timeline");
  Write("notes.json", "{\"traceEvents\":[");
  expect_error("notes.json is not a JSON object");
  Write("notes.json", "{\"traceEvents\":[{\"name\":\"x\",\"ph\":\"X\",\"ts\":1,\"dur\":1}]}");
  expect_error("notes.json has no clock anchor");
  Write("notes.json", "{\"events\":[]}");
  expect_error("notes.json is not a Chrome trace");
  Write("notes.json",
        "{\"traceEvents\":[{\"name\":\"x\",\"ph\":\"X\",\"ts\":\"soon\"}],"
        "\"otherData\":{\"herd_rank\":0,\"herd_origin_unix_us\":1}}");
  expect_error("notes.json: traceEvents[0].ts is not a number");
  fs::remove(dir_ + "/notes.json");
  for (const char* name : {"a.json", "b.json"}) {
    Timeline t(dir_ + "/" + name, 4);
    ASSERT_TRUE(t.Write().ok());
  }
  expect_error("a.json and b.json both hold rank 4");

  CliResult missing = RunHerd({"timeline", "merge", dir_ + "/nowhere"});
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_NE(missing.out.find(dir_ + "/nowhere is not a directory"), std::string::npos)
      << missing.out;
  CliResult usage = RunHerd({"timeline", "merge"});
  EXPECT_EQ(usage.rc, 2) << usage.out;
}

// A real run: 2 workers all-reduce every iteration, so on one clock each iteration's span on
// rank 0 overlaps the same iteration's span on rank 1, and so do their all-reduces. Each worker
// counts its timeline from its own start (they differ by tens to hundreds of ms here), which
// the merge undoes.
TEST_F(TimelineMerge, ARealRunsRanksMeetInEveryIteration) {
  const std::string timeline = dir_ + "/timeline";
  CliResult run = RunHerd({"local", "--workers", "2", "--mode", "allreduce", "--model", "mlp",
                           "--epochs", "1", "--train-samples", "2560", "--timeline", timeline});
  ASSERT_EQ(run.rc, 0) << run.out;
  CliResult r = RunHerd({"timeline", "merge", timeline});
  ASSERT_EQ(r.rc, 0) << r.out;
  const Struct merged = Parse(timeline + "/merged.json");
  int checked = 0;
  for (int it = 0; it < 20; ++it) {
    const auto spans = Spans(merged, "iteration " + std::to_string(it));
    ASSERT_EQ(spans.size(), 2u) << it;
    const Span a = spans.at(0)[0], b = spans.at(1)[0];
    EXPECT_LT(a.begin_us, b.end_us) << "iteration " << it;
    EXPECT_LT(b.begin_us, a.end_us) << "iteration " << it;
    ++checked;
  }
  EXPECT_EQ(checked, 20);
  const auto reduce = Spans(merged, "allreduce bucket 0");  // the MLP fits in one bucket
  ASSERT_EQ(reduce.size(), 2u);
  ASSERT_EQ(reduce.at(0).size(), 20u);
  ASSERT_EQ(reduce.at(1).size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_LT(reduce.at(0)[i].begin_us, reduce.at(1)[i].end_us) << i;
    EXPECT_LT(reduce.at(1)[i].begin_us, reduce.at(0)[i].end_us) << i;
  }
}

}  // namespace
}  // namespace herd
