#include "checkpoint/describe.h"

#include <google/protobuf/util/json_util.h>

#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checksum.h"
#include "common/json.h"
#include "common/printable.h"

namespace herd::checkpoint {
namespace {

std::string UtcTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", bytes) : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string ListTable(const std::vector<CheckpointInfo>& checkpoints) {
  std::string out =
      absl::StrFormat("%-14s %10s  %-19s  %-16s %7s %6s %10s  %s\n", "ID", "ITERATION",
                      "CREATED (UTC)", "MODE", "WORKERS", "SHARDS", "SIZE", "STATUS");
  for (const CheckpointInfo& c : checkpoints) {
    // Ids, modes and problems come from files anybody may have written: printed escaped.
    std::string status = c.problem.empty() ? "ok" : "BROKEN: " + Printable(c.problem);
    if (c.latest) status += " (LATEST)";
    const auto& m = c.manifest;
    out +=
        absl::StrFormat("%-14s %10d  %-19s  %-16s %7s %6s %10s  %s\n", Printable(c.id), c.iteration,
                        UtcTime(m.created_unix_ms()), c.manifest_ok ? Printable(m.mode()) : "-",
                        c.manifest_ok ? absl::StrCat(m.workers()) : "-",
                        c.manifest_ok ? absl::StrCat(m.shards()) : "-",
                        c.manifest_ok ? HumanBytes(c.bytes) : "-", status);
  }
  return out;
}

std::string ListJson(const std::string& dir, const std::vector<CheckpointInfo>& checkpoints) {
  json::Array rows;
  for (const CheckpointInfo& c : checkpoints) {
    json::Object row;
    row.Add("id", c.id).Add("iteration", c.iteration).Add("path", c.path);
    if (c.manifest_ok) {
      const auto& m = c.manifest;
      row.Add("created_unix_ms", m.created_unix_ms())
          .Add("job", m.job())
          .Add("mode", m.mode())
          .Add("workers", m.workers())
          .Add("shards", m.shards())
          .Add("bytes", c.bytes)
          .Add("files", c.files);
    }
    row.Add("latest", c.latest).Add("whole", c.problem.empty()).Add("problem", c.problem);
    rows.push_back(std::move(row));
  }
  json::Object out;
  out.Add("dir", dir).Add("checkpoints", std::move(rows));
  return out.Write();
}

absl::StatusOr<std::string> ManifestJson(const herd::v1::CheckpointManifest& manifest) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  auto s = google::protobuf::util::MessageToJsonString(manifest, &text, options);
  if (!s.ok()) {
    return absl::InternalError(absl::StrFormat("manifest to JSON: %s", s.ToString()));
  }
  return text;
}

}  // namespace herd::checkpoint
