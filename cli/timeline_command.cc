// `herd timeline merge DIR [--out FILE]`: the timelines of a job's processes (every rank's
// DIR/worker-RANK.json, written with `--timeline DIR`) as one Chrome trace on one clock.
//
// Each file counts its events' microseconds from its own process's start (the steady clock)
// and carries the wall-clock time of that start (otherData.herd_origin_unix_us, see
// common/timeline.h). The merge takes the earliest start as the trace's zero and shifts every
// file's events by how much later its process started, so an all-gather that rank 0 and
// rank 3 ran together lines up in the viewer. Events are copied as they are (names, lanes,
// arguments); only "ts" moves.

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"

namespace herd::cli {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Struct;
using google::protobuf::Value;

// A timeline of a long run is a few MB; anything far larger is not one of ours.
constexpr uintmax_t kMaxFileBytes = uintmax_t{1} << 30;

// One input file, parsed.
struct Source {
  std::string file;  // the name inside DIR
  int rank = 0;
  int64_t origin_unix_us = 0;
  Struct trace;
  int64_t offset_us = 0;  // origin_unix_us - the trace's zero
  int events = 0;         // timed events (not metadata)
};

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrFormat("%s: %s", path.string(), ec.message()));
  if (size > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d bytes; a timeline is at most %d bytes", path.string(), size, kMaxFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrFormat("%s: cannot read it", path.string()));
  return text.str();
}

// A number field of `s` that holds an integer (ranks, microseconds); nullopt otherwise.
std::optional<int64_t> IntegerField(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != Value::kNumberValue) return std::nullopt;
  const double v = it->second.number_value();
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15) return std::nullopt;
  return static_cast<int64_t>(v);
}

const Struct* StructField(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != Value::kStructValue) return nullptr;
  return &it->second.struct_value();
}

// What a merged trace says about itself (so a merge skips an earlier merge's output).
bool IsMergedTrace(const Struct& trace) {
  const Struct* other = StructField(trace, "otherData");
  if (other == nullptr) return false;
  auto it = other->fields().find("herd_merged");
  return it != other->fields().end() && it->second.kind_case() == Value::kBoolValue &&
         it->second.bool_value();
}

// Parses one timeline; nullopt for a merged trace (not an input).
absl::StatusOr<std::optional<Source>> LoadSource(const fs::path& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  Source src;
  src.file = path.filename().string();
  const auto parsed = google::protobuf::util::JsonStringToMessage(*text, &src.trace);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not a JSON object: %s", path.string(), parsed.ToString()));
  }
  if (IsMergedTrace(src.trace)) return std::nullopt;
  auto events = src.trace.fields().find("traceEvents");
  if (events == src.trace.fields().end() || events->second.kind_case() != Value::kListValue) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not a Chrome trace: it has no \"traceEvents\" list", path.string()));
  }
  const Struct* other = StructField(src.trace, "otherData");
  const auto origin = other ? IntegerField(*other, "herd_origin_unix_us") : std::nullopt;
  const auto rank = other ? IntegerField(*other, "herd_rank") : std::nullopt;
  if (!origin || !rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has no clock anchor (otherData.herd_origin_unix_us and herd_rank): it was not "
        "written by herd's --timeline, or by a herd from before the anchors",
        path.string()));
  }
  src.origin_unix_us = *origin;
  src.rank = static_cast<int>(*rank);
  for (int i = 0; i < events->second.list_value().values_size(); ++i) {
    const Value& e = events->second.list_value().values(i);
    if (e.kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: traceEvents[%d] is not an object", path.string(), i));
    }
    auto ts = e.struct_value().fields().find("ts");
    if (ts == e.struct_value().fields().end()) continue;  // metadata
    if (ts->second.kind_case() != Value::kNumberValue ||
        !std::isfinite(ts->second.number_value())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: traceEvents[%d].ts is not a number", path.string(), i));
    }
    ++src.events;
  }
  return std::optional<Source>(std::move(src));
}

// Every timeline in `dir` (its *.json files but `out` and earlier merges), in file-name order.
absl::StatusOr<std::vector<Source>> LoadDirectory(const fs::path& dir, const fs::path& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrFormat("%s is not a directory", dir.string()));
  }
  std::vector<fs::path> files;
  // Error codes, not exceptions: an unreadable directory is a message, not an abort.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code skip;
    if (!it->is_regular_file(skip) || it->path().extension() != ".json") continue;
    if (fs::equivalent(it->path(), out, skip)) continue;  // `out` need not exist yet
    files.push_back(it->path());
  }
  if (ec) return absl::NotFoundError(absl::StrFormat("%s: %s", dir.string(), ec.message()));
  std::sort(files.begin(), files.end());
  std::vector<Source> sources;
  std::map<int, std::string> by_rank;
  for (const fs::path& path : files) {
    auto src = LoadSource(path);
    if (!src.ok()) return src.status();
    if (!src->has_value()) continue;
    auto [it, fresh] = by_rank.emplace((*src)->rank, (*src)->file);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s and %s both hold rank %d: merge the timelines of one run at a time",
                          it->second, (*src)->file, (*src)->rank));
    }
    sources.push_back(std::move(**src));
  }
  if (sources.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s holds no timeline (*.json written by `herd local --timeline` or `herd worker "
        "--timeline`)",
        dir.string()));
  }
  return sources;
}

std::string Quote(const std::string& s) {
  Value v;
  v.set_string_value(s);
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(v, &out);
  return out;
}

// `v` as JSON with every object's keys in sorted order, so a merge of the same files is the
// same file (a Struct's map has no order of its own). protobuf writes the leaves.
void AppendSorted(const Value& v, std::string& out) {
  switch (v.kind_case()) {
    case Value::kStructValue: {
      std::vector<const std::string*> keys;
      for (const auto& [key, value] : v.struct_value().fields()) keys.push_back(&key);
      std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
      out += '{';
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i > 0) out += ',';
        out += Quote(*keys[i]) + ':';
        AppendSorted(v.struct_value().fields().at(*keys[i]), out);
      }
      out += '}';
      return;
    }
    case Value::kListValue:
      out += '[';
      for (int i = 0; i < v.list_value().values_size(); ++i) {
        if (i > 0) out += ',';
        AppendSorted(v.list_value().values(i), out);
      }
      out += ']';
      return;
    default: {
      std::string leaf;
      (void)google::protobuf::util::MessageToJsonString(v, &leaf);
      out += leaf.empty() ? "null" : leaf;
      return;
    }
  }
}

// Writes the merged trace to `out` (replaced atomically).
absl::Status WriteMerged(std::vector<Source>& sources, int64_t zero_unix_us, const fs::path& out) {
  const std::string tmp = out.string() + ".tmp";
  {
    std::ofstream file(tmp, std::ios::trunc);
    if (!file) return absl::InvalidArgumentError(absl::StrFormat("cannot write %s", tmp));
    file << "{\"traceEvents\":[";
    bool first = true;
    for (Source& src : sources) {
      for (Value& e :
           *src.trace.mutable_fields()->at("traceEvents").mutable_list_value()->mutable_values()) {
        auto& fields = *e.mutable_struct_value()->mutable_fields();
        if (auto ts = fields.find("ts"); ts != fields.end()) {
          ts->second.set_number_value(ts->second.number_value() +
                                      static_cast<double>(src.offset_us));
        }
        std::string json;
        AppendSorted(e, json);
        file << (first ? "\n" : ",\n") << json;
        first = false;
      }
    }
    std::vector<std::string> described;
    for (const Source& src : sources) {
      described.push_back(absl::StrFormat(R"({"file":%s,"rank":%d,"offset_us":%d})",
                                          Quote(src.file), src.rank, src.offset_us));
    }
    file << absl::StrFormat(
        "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"herd_merged\":true,"
        "\"herd_origin_unix_us\":%d,\"herd_sources\":[%s]}}\n",
        zero_unix_us, absl::StrJoin(described, ","));
    if (!file.flush()) return absl::InvalidArgumentError(absl::StrFormat("cannot write %s", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, out, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot rename %s to %s: %s", tmp, out.string(), ec.message()));
  }
  return absl::OkStatus();
}

class TimelineCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.require_subcommand(1);
    merge_ = app.add_subcommand(
        "merge",
        "Merge every rank's timeline in DIR into one Chrome trace on one clock (open it in "
        "chrome://tracing or https://ui.perfetto.dev)");
    merge_->add_option("DIR", dir_, "The --timeline directory of a run")->required();
    merge_->add_option("--out", out_, "The merged trace (default: DIR/merged.json)");
  }

  int Run() override {
    const fs::path dir(dir_);
    const fs::path out = out_.empty() ? dir / "merged.json" : fs::path(out_);
    auto sources = LoadDirectory(dir, out);
    if (!sources.ok()) return Fail(sources.status());
    std::sort(sources->begin(), sources->end(),
              [](const Source& a, const Source& b) { return a.rank < b.rank; });
    int64_t zero = INT64_MAX;
    int events = 0;
    for (const Source& src : *sources) {
      zero = std::min(zero, src.origin_unix_us);
      events += src.events;
    }
    for (Source& src : *sources) src.offset_us = src.origin_unix_us - zero;
    if (auto st = WriteMerged(*sources, zero, out); !st.ok()) return Fail(st);
    std::printf("merged %d timelines (%d events) into %s, on the clock of the earliest start\n",
                static_cast<int>(sources->size()), events, out.string().c_str());
    for (const Source& src : *sources) {
      std::printf("  rank %d  %s  %d events, shifted by %+.3f ms\n", src.rank, src.file.c_str(),
                  src.events, src.offset_us / 1000.0);
    }
    return kExitOk;
  }

 private:
  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd timeline merge: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  CLI::App* merge_ = nullptr;
  std::string dir_;
  std::string out_;
};

HERD_REGISTER_COMMAND(TimelineCommand, "timeline", 50,
                      "Timelines: merge every rank's Chrome trace into one, on one clock");

}  // namespace
}  // namespace herd::cli
