#include "algorithms/collectives/decision_table.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "algorithms/collectives/topology.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

constexpr CollectiveOp kOps[] = {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter,
                                 CollectiveOp::kAllGather, CollectiveOp::kBroadcast,
                                 CollectiveOp::kReduce};

auto GroupKey(const DecisionRule& r) {
  return std::make_tuple(r.op, r.ranks, r.hosts, r.dtype_bytes);
}

// A whole decimal number, nothing else on the field.
template <typename T>
bool ParseNumber(const std::string& s, T* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// |a - b| for sizes and rank counts.
size_t Distance(size_t a, size_t b) { return a > b ? a - b : b - a; }

bool Supports(CollectiveOp op, Algorithm a) {
  const auto& supported = HostAlgorithms(op);
  return std::find(supported.begin(), supported.end(), a) != supported.end();
}

}  // namespace

bool RunsOn(Algorithm a, CollectiveOp op, const LayoutTraits& l) {
  switch (a) {
    case Algorithm::kShm:
      return l.hosts == 1 && l.ranks > 1 && l.shm;
    case Algorithm::kHierarchical:
      return l.hosts > 1 && l.hosts < l.ranks && l.shm &&
             (l.uniform || op == CollectiveOp::kAllReduce || op == CollectiveOp::kBroadcast);
    default:
      return true;
  }
}

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
  static const std::vector<A> kAllReduce = {A::kRing,
                                            A::kLinearPipeline,
                                            A::kBinomialTree,
                                            A::kRecursiveDoubling,
                                            A::kRecursiveHalving,
                                            A::kOneShot,
                                            A::kShm,
                                            A::kHierarchical};
  static const std::vector<A> kReduceScatter = {A::kRing, A::kRecursiveHalving, A::kOneShot,
                                                A::kShm, A::kHierarchical};
  static const std::vector<A> kAllGather = {A::kRing, A::kRecursiveDoubling, A::kBruck, A::kOneShot,
                                            A::kShm,  A::kHierarchical};
  static const std::vector<A> kBroadcast = {A::kLinearPipeline, A::kBinomialTree, A::kShm,
                                            A::kHierarchical};
  static const std::vector<A> kReduce = {A::kLinearPipeline, A::kBinomialTree};
  switch (op) {
    case CollectiveOp::kAllReduce:
      return kAllReduce;
    case CollectiveOp::kReduceScatter:
      return kReduceScatter;
    case CollectiveOp::kAllGather:
      return kAllGather;
    case CollectiveOp::kBroadcast:
      return kBroadcast;
    case CollectiveOp::kReduce:
      return kReduce;
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
    if (f.size() != 5 && f.size() != 6) {
      return bad(
          absl::StrFormat("expected '<op> <ranks> <hosts> <dtype bytes> <up to bytes|inf> "
                          "<algorithm>[,<fallback>]' "
                          "(or the five fields without <hosts>), got %d fields",
                          f.size()));
    }
    if (f.size() == 5) f.insert(f.begin() + 2, "1");
    DecisionRule rule;
    auto op = ParseCollectiveOp(f[0]);
    if (!op.ok()) return bad(std::string(op.status().message()));
    rule.op = *op;
    if (!ParseNumber(f[1], &rule.ranks) || rule.ranks < 2) {
      return bad(absl::StrFormat("ranks must be an integer >= 2, got '%s'", f[1]));
    }
    if (!ParseNumber(f[2], &rule.hosts) || rule.hosts < 1 || rule.hosts > rule.ranks) {
      return bad(absl::StrFormat("hosts must be an integer in [1, ranks], got '%s'", f[2]));
    }
    if (!ParseNumber(f[3], &rule.dtype_bytes) || (rule.dtype_bytes != 1 && rule.dtype_bytes != 2 &&
                                                  rule.dtype_bytes != 4 && rule.dtype_bytes != 8)) {
      return bad(absl::StrFormat("dtype bytes must be 1, 2, 4 or 8, got '%s'", f[3]));
    }
    if (f[4] == "inf") {
      rule.up_to_bytes = kUnbounded;
    } else if (!ParseNumber(f[4], &rule.up_to_bytes) || rule.up_to_bytes == 0) {
      return bad(absl::StrFormat("the bound must be a positive byte count or inf, got '%s'", f[4]));
    }
    std::vector<std::string> names;
    for (absl::string_view n : absl::StrSplit(f[5], ',')) names.emplace_back(n.data(), n.size());
    if (names.size() > 2) {
      return bad(absl::StrFormat("at most an algorithm and a fallback, got '%s'", f[5]));
    }
    std::vector<Algorithm> picks;
    for (const std::string& name : names) {
      auto algorithm = ParseAlgorithm(name);
      if (!algorithm.ok()) return bad(std::string(algorithm.status().message()));
      if (!Supports(rule.op, *algorithm)) {
        std::string list;
        for (Algorithm a : HostAlgorithms(rule.op)) {
          if (!list.empty()) list += ", ";
          list += AlgorithmName(a);
        }
        return bad(absl::StrFormat("%s has no algorithm '%s' on host memory; it has %s", f[0], name,
                                   list));
      }
      picks.push_back(*algorithm);
    }
    rule.algorithm = picks[0];
    if (picks.size() == 2) {
      if (picks[1] == Algorithm::kShm || picks[1] == Algorithm::kHierarchical) {
        return bad(absl::StrFormat("the fallback '%s' must run on every layout (not shm or hier)",
                                   names[1]));
      }
      rule.fallback = picks[1];
    }
    for (const DecisionRule& other : table.rules_) {
      if (GroupKey(other) == GroupKey(rule) && other.up_to_bytes == rule.up_to_bytes) {
        return bad(absl::StrFormat(
            "a second rule for %s, %d ranks on %d host(s), %d-byte elements up to %s", f[0],
            rule.ranks, rule.hosts, rule.dtype_bytes, f[4]));
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
    return std::make_tuple(a.op, a.ranks, a.hosts, a.dtype_bytes, a.up_to_bytes) <
           std::make_tuple(b.op, b.ranks, b.hosts, b.dtype_bytes, b.up_to_bytes);
  });
}

std::string DecisionTable::Format() const {
  std::string out =
      "# herd collectives decision table (algorithms/collectives/decision_table.h)\n"
      "# op             ranks  hosts  dtype_bytes  up_to_bytes  algorithm[,fallback]\n";
  for (const DecisionRule& r : rules_) {
    std::string algorithm(AlgorithmName(r.algorithm));
    if (r.fallback != Algorithm::kAuto) {
      algorithm += ",";
      algorithm += AlgorithmName(r.fallback);
    }
    absl::StrAppendFormat(
        &out, "%-16s %5d  %5d  %11d  %11s  %s\n", CollectiveOpName(r.op), r.ranks, r.hosts,
        r.dtype_bytes,
        r.up_to_bytes == kUnbounded ? std::string("inf") : absl::StrFormat("%d", r.up_to_bytes),
        algorithm);
  }
  return out;
}

Algorithm DecisionTable::Choose(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                                int ranks) const {
  return Choose(op, dtype_bytes, bytes, LayoutTraits{ranks, 1, true, true});
}

Algorithm DecisionTable::Choose(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                                const LayoutTraits& layout) const {
  // The nearest group for op: of the same kind (one host or several), then the nearest rank
  // count (the smaller on a tie), host count, element size.
  const bool one_host = layout.hosts <= 1;
  auto distance = [&](const DecisionRule& r) {
    return std::make_tuple((r.hosts == 1) != one_host, Distance(r.ranks, layout.ranks), r.ranks,
                           Distance(r.hosts, layout.hosts), r.hosts,
                           Distance(r.dtype_bytes, dtype_bytes));
  };
  const DecisionRule* group = nullptr;
  for (const DecisionRule& r : rules_) {
    if (r.op != op) continue;
    if (group == nullptr || distance(r) < distance(*group)) group = &r;
  }
  if (group == nullptr) return ClassicAlgorithm(op);
  const auto key = GroupKey(*group);
  const DecisionRule* pick = nullptr;
  for (const DecisionRule& r : rules_) {  // sorted: bounds ascending within the group
    if (GroupKey(r) != key) continue;
    pick = &r;
    if (bytes <= r.up_to_bytes) break;
  }
  if (RunsOn(pick->algorithm, op, layout)) return pick->algorithm;
  if (pick->fallback != Algorithm::kAuto && RunsOn(pick->fallback, op, layout)) {
    return pick->fallback;
  }
  return ClassicAlgorithm(op);
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

absl::StatusOr<Algorithm> ResolveFor(CollectiveOp op, size_t dtype_bytes, size_t bytes,
                                     const LayoutTraits& layout) {
  HERD_ASSIGN_OR_RETURN(std::shared_ptr<const DecisionTable> table, ActiveDecisionTable());
  return table->Choose(op, dtype_bytes, bytes, layout);
}

absl::StatusOr<Algorithm> ResolveAuto(CollectiveOp op, const CommonOptions& o, size_t count) {
  if (o.comm == nullptr) return absl::InvalidArgumentError("collective options: comm is null");
  if (o.comm->memory() != transport::MemoryKind::kHost) return Algorithm::kRing;
  HERD_ASSIGN_OR_RETURN(std::shared_ptr<const DecisionTable> table, ActiveDecisionTable());
  const size_t esize = DTypeSize(o.dtype);
  const size_t bytes = esize == 0 || count > kUnbounded / esize ? kUnbounded : count * esize;
  LayoutTraits traits{o.comm->size(), o.comm->size(), false, true};
  if (o.comm->size() > 1) {
    HERD_ASSIGN_OR_RETURN(Topology * topo, TopologyOf(*o.comm, Deadline::After(o.timeout)));
    traits.hosts = topo->layout().hosts;
    traits.shm = topo->shm_ok();
    traits.uniform = topo->layout().per_host > 0;
  }
  return table->Choose(op, esize, bytes, traits);
}

}  // namespace herd::collectives
