#include "algorithms/collectives/decision_table.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

constexpr CollectiveOp kOps[] = {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter,
                                 CollectiveOp::kAllGather, CollectiveOp::kBroadcast,
                                 CollectiveOp::kReduce};

auto GroupKey(const DecisionRule& r) { return std::make_tuple(r.op, r.ranks, r.dtype_bytes); }

// A whole decimal number, nothing else on the field.
template <typename T>
bool ParseNumber(const std::string& s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// |a - b| for sizes and rank counts.
size_t Distance(size_t a, size_t b) { return a > b ? a - b : b - a; }

}  // namespace

Algorithm ClassicAlgorithm(CollectiveOp op) {
  return op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce ? Algorithm::kLinearPipeline
                                                                       : Algorithm::kRing;
}

std::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
  }
  return "unknown";
}

absl::StatusOr<CollectiveOp> ParseCollectiveOp(std::string_view name) {
  for (CollectiveOp op : kOps) {
    if (CollectiveOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown operation '%s'; expected allreduce, reduce_scatter, allgather, broadcast or reduce",
      name));
}

const std::vector<Algorithm>& HostAlgorithms(CollectiveOp op) {
  using A = Algorithm;
  static const std::vector<A> kAllReduce = {
      A::kRing,   A::kLinearPipeline, A::kBinomialTree, A::kRecursiveDoubling, A::kRecursiveHalving,
      A::kOneShot};
  static const std::vector<A> kReduceScatter = {A::kRing, A::kRecursiveHalving, A::kOneShot};
  static const std::vector<A> kAllGather = {A::kRing, A::kRecursiveDoubling, A::kBruck,
                                            A::kOneShot};
  static const std::vector<A> kRooted = {A::kLinearPipeline, A::kBinomialTree};
  switch (op) {
    case CollectiveOp::kAllReduce:
      return kAllReduce;
    case CollectiveOp::kReduceScatter:
      return kReduceScatter;
    case CollectiveOp::kAllGather:
      return kAllGather;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
      return kRooted;
  }
  return kAllReduce;
}

absl::StatusOr<DecisionTable> DecisionTable::Parse(std::string_view text, std::string_view source) {
  DecisionTable table;
  int line_no = 0;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrFormat("decision table %s, line %d: %s", source, line_no, why));
    };
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> f;
    std::istringstream words(line);
    for (std::string w; words >> w;) f.push_back(w);
    if (f.empty()) continue;
    if (f.size() != 5) {
      return bad(absl::StrFormat(
          "expected '<op> <ranks> <dtype bytes> <up to bytes|inf> <algorithm>', got %d fields",
          f.size()));
    }
    DecisionRule rule;
    auto op = ParseCollectiveOp(f[0]);
    if (!op.ok()) return bad(std::string(op.status().message()));
    rule.op = *op;
    if (!ParseNumber(f[1], &rule.ranks) || rule.ranks < 2) {
      return bad(absl::StrFormat("ranks must be an integer >= 2, got '%s'", f[1]));
    }
    if (!ParseNumber(f[2], &rule.dtype_bytes) || (rule.dtype_bytes != 1 && rule.dtype_bytes != 2 &&
                                                  rule.dtype_bytes != 4 && rule.dtype_bytes != 8)) {
      return bad(absl::StrFormat("dtype bytes must be 1, 2, 4 or 8, got '%s'", f[2]));
    }
    if (f[3] == "inf") {
      rule.up_to_bytes = kUnbounded;
    } else if (!ParseNumber(f[3], &rule.up_to_bytes) || rule.up_to_bytes == 0) {
      return bad(absl::StrFormat("the bound must be a positive byte count or inf, got '%s'", f[3]));
    }
    auto algorithm = ParseAlgorithm(f[4]);
    if (!algorithm.ok()) return bad(std::string(algorithm.status().message()));
    const auto& supported = HostAlgorithms(rule.op);
    if (std::find(supported.begin(), supported.end(), *algorithm) == supported.end()) {
      std::string names;
      for (Algorithm a : supported) {
        if (!names.empty()) names += ", ";
        names += AlgorithmName(a);
      }
      return bad(
          absl::StrFormat("%s has no algorithm '%s' on host memory; it has %s", f[0], f[4], names));
    }
    rule.algorithm = *algorithm;
    for (const DecisionRule& other : table.rules_) {
      if (GroupKey(other) == GroupKey(rule) && other.up_to_bytes == rule.up_to_bytes) {
        return bad(absl::StrFormat("a second rule for %s, %d ranks, %d-byte elements up to %s",
                                   f[0], rule.ranks, rule.dtype_bytes, f[3]));
      }
    }
    table.rules_.push_back(rule);
  }
  table.Sort();
  return table;
}

absl::StatusOr<DecisionTable> DecisionTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("cannot read the decision table %s", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

void DecisionTable::Sort() {
  std::sort(rules_.begin(), rules_.end(), [](const DecisionRule& a, const DecisionRule& b) {
    return std::make_tuple(a.op, a.ranks, a.dtype_bytes, a.up_to_bytes) <
           std::make_tuple(b.op, b.ranks, b.dtype_bytes, b.up_to_bytes);
  });
}

std::string DecisionTable::Format() const {
  std::string out =
      "# herd collectives decision table (algorithms/collectives/decision_table.h)\n"
      "# op             ranks  dtype_bytes  up_to_bytes  algorithm\n";
  for (const DecisionRule& r : rules_) {
    absl::StrAppendFormat(
        &out, "%-16s %5d  %11d  %11s  %s\n", CollectiveOpName(r.op), r.ranks, r.dtype_bytes,
        r.up_to_bytes == kUnbounded ? std::string("inf") : absl::StrFormat("%d", r.up_to_bytes),
        AlgorithmName(r.algorithm));
  }
  return out;
}

Algorithm DecisionTable::Choose(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                                int ranks) const {
  // The nearest rank count with rules for op, then the nearest element size among those.
  const DecisionRule* group = nullptr;
  for (const DecisionRule& r : rules_) {
    if (r.op != op) continue;
    if (group == nullptr) {
      group = &r;
      continue;
    }
    const size_t d = Distance(r.ranks, ranks), best = Distance(group->ranks, ranks);
    if (d < best || (d == best && r.ranks < group->ranks)) {
      group = &r;
    } else if (r.ranks == group->ranks &&
               Distance(r.dtype_bytes, dtype_bytes) < Distance(group->dtype_bytes, dtype_bytes)) {
      group = &r;
    }
  }
  if (group == nullptr) return ClassicAlgorithm(op);
  const auto key = GroupKey(*group);
  const DecisionRule* last = nullptr;
  for (const DecisionRule& r : rules_) {  // sorted: bounds ascending within the group
    if (GroupKey(r) != key) continue;
    if (bytes <= r.up_to_bytes) return r.algorithm;
    last = &r;
  }
  return last->algorithm;
}

void DecisionTable::Merge(const std::vector<DecisionRule>& rules) {
  std::erase_if(rules_, [&](const DecisionRule& old) {
    return std::any_of(rules.begin(), rules.end(),
                       [&](const DecisionRule& r) { return GroupKey(r) == GroupKey(old); });
  });
  rules_.insert(rules_.end(), rules.begin(), rules.end());
  Sort();
}

const DecisionTable& DefaultDecisionTable() {
  static const DecisionTable* table = [] {
    auto parsed = DecisionTable::Parse(DefaultDecisionTableText(), "(compiled in)");
    // The compiled-in text is checked by a unit test; an invalid one is a build defect.
    if (!parsed.ok()) std::abort();
    return new DecisionTable(*std::move(parsed));
  }();
  return *table;
}

namespace {

struct ActiveState {
  std::mutex mu;
  std::shared_ptr<const DecisionTable> set;                  // SetActiveDecisionTable
  absl::StatusOr<std::shared_ptr<const DecisionTable>> env;  // $HERD_COLLECTIVES_TABLE
  bool env_read = false;
};

ActiveState& State() {
  static auto* state = new ActiveState();
  return *state;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const DecisionTable>> ActiveDecisionTable() {
  ActiveState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.set) return s.set;
  if (!s.env_read) {
    s.env_read = true;
    const char* path = std::getenv("HERD_COLLECTIVES_TABLE");
    if (path != nullptr && *path != '\0') {
      auto loaded = DecisionTable::Load(path);
      if (loaded.ok()) {
        s.env = std::make_shared<const DecisionTable>(*std::move(loaded));
      } else {
        s.env = absl::Status(
            loaded.status().code(),
            absl::StrFormat("$HERD_COLLECTIVES_TABLE: %s", std::string(loaded.status().message())));
      }
    } else {
      s.env = std::shared_ptr<const DecisionTable>(std::shared_ptr<const DecisionTable>(),
                                                   &DefaultDecisionTable());
    }
  }
  return s.env;
}

void SetActiveDecisionTable(std::shared_ptr<const DecisionTable> table) {
  ActiveState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.set = std::move(table);
}

absl::StatusOr<Algorithm> ResolveAuto(CollectiveOp op, const CommonOptions& o, size_t count) {
  if (o.comm == nullptr) return absl::InvalidArgumentError("collective options: comm is null");
  if (o.comm->memory() != transport::MemoryKind::kHost) return Algorithm::kRing;
  HERD_ASSIGN_OR_RETURN(std::shared_ptr<const DecisionTable> table, ActiveDecisionTable());
  const size_t esize = DTypeSize(o.dtype);
  const size_t bytes = esize == 0 || count > kUnbounded / esize ? kUnbounded : count * esize;
  return table->Choose(op, esize, bytes, o.comm->size());
}

}  // namespace herd::collectives
