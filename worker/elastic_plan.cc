#include "worker/elastic_plan.h"

#include <algorithm>
#include <vector>

namespace herd::worker {

int MemberIndex(const herd::v1::Plan& plan, int rank) {
  for (int i = 0; i < plan.ranks_size(); ++i) {
    if (plan.ranks(i) == rank) return i;
  }
  return -1;
}

herd::v1::Plan CompactPlan(const herd::v1::Plan& plan) {
  const int n = plan.ranks_size();
  bool identity = n == plan.world_size();
  for (int i = 0; identity && i < n; ++i) identity = plan.ranks(i) == i;
  if (identity) return plan;
  // index[r]: the position of job rank r among the live ranks (-1: not live).
  int top = plan.world_size();
  for (int r : plan.ranks()) top = std::max(top, r + 1);
  std::vector<int> index(static_cast<size_t>(top), -1);
  for (int i = 0; i < n; ++i) index[static_cast<size_t>(plan.ranks(i))] = i;
  auto map = [&](int r) { return r >= 0 && r < top ? index[static_cast<size_t>(r)] : -1; };

  herd::v1::Plan out = plan;
  out.set_world_size(n);
  out.clear_ranks();
  for (int i = 0; i < n; ++i) out.add_ranks(i);
  out.clear_ring();
  for (int r : plan.ring()) out.add_ring(map(r));
  out.clear_peers();
  if (plan.peers_size() > 0) {
    for (int i = 0; i < n; ++i) {
      auto* list = out.add_peers();
      const int r = plan.ranks(i);
      if (r < plan.peers_size()) {
        for (int q : plan.peers(r).ranks()) list->add_ranks(map(q));
      }
    }
  }
  out.clear_teams();
  for (const auto& team : plan.teams()) {
    auto* t = out.add_teams();
    for (int r : team.ranks()) t->add_ranks(map(r));
  }
  out.clear_workers();
  for (int i = 0; i < n; ++i) {
    const int r = plan.ranks(i);
    for (const auto& m : plan.workers()) {
      if (m.rank() == r) {
        auto* w = out.add_workers();
        *w = m;
        w->set_rank(i);
      }
    }
  }
  return out;
}

BatchSlice SliceOfGlobalBatch(int64_t global, int index, int members) {
  if (members <= 0 || index < 0 || index >= members) return {};
  const int64_t first = global * index / members;
  const int64_t end = global * (index + 1) / members;
  return {first, end - first};
}

}  // namespace herd::worker
