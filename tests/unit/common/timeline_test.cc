// common/timeline.h: the file a Timeline writes is a Chrome trace (parsed here with
// protobuf's JSON parser) whose events count from the origin, and it carries the clock anchor
// and the identity `herd timeline merge` needs.
#include "common/timeline.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace herd {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Struct;
using google::protobuf::Value;

int64_t UnixMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-timeline-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  Struct Parse(const std::string& path) {
    Struct trace;
    const auto st = google::protobuf::util::JsonStringToMessage(Read(path), &trace);
    EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << Read(path);
    return trace;
  }
  // The events of `trace` named `name`.
  std::vector<Struct> Events(const Struct& trace, const std::string& name) {
    std::vector<Struct> out;
    for (const Value& e : trace.fields().at("traceEvents").list_value().values()) {
      if (e.struct_value().fields().at("name").string_value() == name) {
        out.push_back(e.struct_value());
      }
    }
    return out;
  }
  double Number(const Struct& s, const std::string& key) {
    auto it = s.fields().find(key);
    EXPECT_NE(it, s.fields().end()) << key;
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  std::string dir_;
};

TEST_F(TimelineTest, EventsCountFromTheOriginWhoseWallClockTimeTheFileCarries) {
  const std::string path = dir_ + "/worker-3.json";
  const int64_t before = UnixMicrosNow();
  Timeline t(path, 3);
  const int64_t after = UnixMicrosNow();
  EXPECT_GE(t.origin_unix_us(), before - 1);
  EXPECT_LE(t.origin_unix_us(), after + 1);

  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto b = t.now();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t.Add("forward", Timeline::Lane::kCompute, b, t.now());
  { Timeline::Span span(&t, "RS bucket 0", Timeline::Lane::kComm); }
  ASSERT_TRUE(t.Write().ok());

  const std::string text = Read(path);
  EXPECT_EQ(text.rfind("{\"traceEvents\":[", 0), 0u) << text.substr(0, 100);
  const Struct trace = Parse(path);
  const auto forward = Events(trace, "forward");
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_GE(Number(forward[0], "ts"), 20000);  // microseconds since the origin
  EXPECT_LT(Number(forward[0], "ts"), 1000000);
  EXPECT_GE(Number(forward[0], "dur"), 5000);
  EXPECT_EQ(Number(forward[0], "pid"), 3);
  EXPECT_EQ(Number(forward[0], "tid"), 0);
  ASSERT_EQ(Events(trace, "RS bucket 0").size(), 1u);
  EXPECT_EQ(Number(Events(trace, "RS bucket 0")[0], "tid"), 1);

  const Struct& other = trace.fields().at("otherData").struct_value();
  EXPECT_EQ(Number(other, "herd_rank"), 3);
  EXPECT_EQ(Number(other, "herd_pid"), ::getpid());
  EXPECT_EQ(static_cast<int64_t>(Number(other, "herd_origin_unix_us")), t.origin_unix_us());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(other.fields().at("herd_host").string_value(), host);

  // The viewer names the process after the rank, sorts by it, and names the lanes.
  const auto name = Events(trace, "process_name");
  ASSERT_EQ(name.size(), 1u);
  EXPECT_EQ(name[0].fields().at("args").struct_value().fields().at("name").string_value(),
            "rank 3 (pid " + std::to_string(::getpid()) + ", " + host + ")");
  const auto sort = Events(trace, "process_sort_index");
  ASSERT_EQ(sort.size(), 1u);
  EXPECT_EQ(Number(sort[0].fields().at("args").struct_value(), "sort_index"), 3);
  EXPECT_EQ(Events(trace, "thread_name").size(), 3u);
}

TEST_F(TimelineTest, AnyEventNameStillParses) {
  const std::string path = dir_ + "/odd.json";
  Timeline t(path, 0);
  t.Add("a \"quoted\" \\ name\nwith a newline", Timeline::Lane::kControl, t.now(), t.now());
  ASSERT_TRUE(t.Write().ok());
  const Struct trace = Parse(path);
  EXPECT_EQ(trace.fields().at("traceEvents").list_value().values_size(), 6);
}

TEST_F(TimelineTest, ADisabledTimelineWritesNothing) {
  Timeline t;
  EXPECT_FALSE(t.enabled());
  t.Add("x", Timeline::Lane::kCompute, t.now(), t.now());
  EXPECT_TRUE(t.Write().ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(TimelineTest, AnUnwritableFileIsAnError) {
  Timeline t(dir_ + "/missing/worker-0.json", 0);
  const absl::Status st = t.Write();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing/worker-0.json"), std::string::npos) << st;
}

}  // namespace
}  // namespace herd
