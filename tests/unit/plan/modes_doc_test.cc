// docs/modes.md's table says what the mode registry (plan/modes.h) says: every mode has its row
// and its section, runs where the registry says, and lists exactly the parameters it takes with
// the registry's defaults and the compressors it takes. A new mode or a changed default that the
// page does not follow fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "plan/modes.h"

namespace herd::plan {
namespace {

std::string ReadDoc() {
  std::ifstream in(std::string(HERD_SOURCE_DIR) + "/docs/modes.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The cells of the table row of `mode` ("| `mode` | ... |"), trimmed; empty when there is none.
std::vector<std::string> Row(const std::string& doc, std::string_view mode) {
  const std::string start = absl::StrFormat("| `%s` |", std::string(mode));
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (!absl::StartsWith(line, start)) continue;
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, '|')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    // "| a | b |" splits into "", a, b, "".
    return std::vector<std::string>(cells.begin() + 1, cells.end() - 1);
  }
  return {};
}

std::string Default(const ModeInfo& m, Param p) {
  const ParamDefaults& d = m.defaults;
  switch (p) {
    case Param::kTopology:
      return std::string(d.topology);
    case Param::kTeams:
      return absl::StrFormat("%d", d.teams);
    case Param::kDensity:
      return absl::StrFormat("%g", d.density);
    case Param::kBlockBytes:
      return absl::StrFormat("%d", d.block_bytes);
    case Param::kStaleness:
      return absl::StrFormat("%d", d.staleness);
    case Param::kCompressor:
      return std::string(d.compressor);
  }
  return "?";
}

// What the page's parameter cell must say: "`name` (default), ..." in the registry's order.
std::string ParameterCell(const ModeInfo& m) {
  std::vector<std::string> parts;
  for (Param p : kAllParams) {
    if (m.Takes(p)) parts.push_back(absl::StrFormat("`%s` (%s)", ParamName(p), Default(m, p)));
  }
  return parts.empty() ? "—" : absl::StrJoin(parts, ", ");
}

std::string CompressorCell(const ModeInfo& m) {
  switch (m.compressors) {
    case Compressors::kNone:
      return "—";
    case Compressors::kWorkers:
      return "the workers'";
    case Compressors::kServers:
      return "the servers'";
  }
  return "?";
}

TEST(ModesDoc, TheTableFollowsTheRegistry) {
  const std::string doc = ReadDoc();
  ASSERT_FALSE(doc.empty()) << "cannot read docs/modes.md";
  for (const ModeInfo& m : Modes()) {
    SCOPED_TRACE(std::string(m.name));
    const std::vector<std::string> row = Row(doc, m.name);
    ASSERT_EQ(row.size(), 5u) << "docs/modes.md has no table row for the mode";
    EXPECT_EQ(row[1], m.runs_on == RunsOn::kWorkers ? "workers" : "parameter servers");
    EXPECT_EQ(row[2], ParameterCell(m));
    EXPECT_EQ(row[3], CompressorCell(m));
    EXPECT_NE(doc.find(absl::StrFormat("\n## `%s`\n", m.name)), std::string::npos)
        << "docs/modes.md has no section for the mode";
  }
}

TEST(ModesDoc, EveryModeOnThePageIsInTheRegistry) {
  const std::string doc = ReadDoc();
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (!absl::ConsumePrefix(&line, "## `")) continue;
    const std::string name(line.substr(0, line.find('`')));
    EXPECT_NE(FindMode(name), nullptr) << "docs/modes.md describes '" << name << "'";
  }
}

}  // namespace
}  // namespace herd::plan
