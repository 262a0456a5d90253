// Which peers a UCX communicator connects while it is built, and the peers it connects on
// first use: store calls per rank, endpoint counts, and what happens when such a peer is gone.

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/broadcast.h"
#include "common/status.h"
#include "tests/unit/ucx/ucx_test_util.h"
#include "transport/ucx/bootstrap_peers.h"

namespace herd::transport {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::set<int> PeerSet(int rank, int size) {
  auto v = ucx::BootstrapPeers(rank, size);
  return {v.begin(), v.end()};
}

// Runs body(rank) on one thread per communicator and returns the statuses.
template <typename Body>
std::vector<absl::Status> OnEveryRank(int size, Body body) {
  std::vector<absl::Status> results(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { results[r] = body(r); });
  for (auto& t : threads) t.join();
  return results;
}

void ExpectAllOk(const std::vector<absl::Status>& results, std::string_view what) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << what << ", rank " << r << ": " << results[r];
  }
}

TEST(BootstrapPeersTest, SymmetricAndCoverTheCollectivesPartners) {
  std::vector<int> sizes(130);
  std::iota(sizes.begin(), sizes.end(), 1);
  for (int big : {255, 256, 257, 1000, 4095, 4096, 4097}) sizes.push_back(big);
  for (int P : sizes) {
    int p2 = 1;
    while (p2 * 2 <= P) p2 *= 2;
    const int step = P > 300 ? 37 : 1;  // every rank of the small sizes, a sample of the big
    for (int r = 0; r < P; r += step) {
      const std::vector<int> list = ucx::BootstrapPeers(r, P);
      ASSERT_TRUE(std::is_sorted(list.begin(), list.end())) << P << " " << r;
      const std::set<int> peers(list.begin(), list.end());
      ASSERT_EQ(peers.size(), list.size()) << "duplicates, P " << P << " rank " << r;
      ASSERT_EQ(peers.count(r), 0u);
      for (int q : peers) {
        ASSERT_TRUE(q >= 0 && q < P);
        ASSERT_EQ(PeerSet(q, P).count(r), 1u)
            << "P " << P << ": " << q << " in " << r << "'s set but not the other way";
      }
      auto covered = [&](int q, const char* who) {
        if (q != r) EXPECT_EQ(peers.count(q), 1u) << who << " " << q << " of " << r << ", P " << P;
      };
      if (P == 1) continue;
      covered((r + 1) % P, "ring right");
      covered((r + P - 1) % P, "ring left");
      for (int m = 1; m < P; m <<= 1) {
        covered((r + m) % P, "bruck/tree");
        covered((r - m % P + P) % P, "bruck/tree");
        if (m < p2 && r < p2) covered(r ^ m, "recursive doubling");
      }
      if (r < P - p2) covered(r + p2, "fold");
      if (r >= p2) covered(r - p2, "fold");
      // Binomial trees rooted anywhere: parent and children of r.
      for (int root : {0, 1, P / 2, P - 1}) {
        const int v = (r - root + P) % P;
        for (int m = 1; m < P; m <<= 1) {
          if (v & m) {
            covered((v - m + root) % P, "tree parent");
            break;
          }
          if (v + m < P) covered((v + m + root) % P, "tree child");
        }
      }
    }
  }
  EXPECT_EQ(ucx::BootstrapPeers(0, 4096).size(), 23u);
  EXPECT_EQ(ucx::BootstrapPeers(17, 4095).size(), 24u);
  EXPECT_EQ(ucx::BootstrapPeers(5, 16384).size(), 27u);
  EXPECT_TRUE(ucx::BootstrapPeers(0, 1).empty());
}

class UcxLazyTest : public ::testing::TestWithParam<int> {};

// Building costs each rank one Set and one GetMany, and the algorithms that talk to the
// bootstrap peers only (ring, recursive doubling and halving, Bruck, trees rooted anywhere)
// never connect another peer.
TEST_P(UcxLazyTest, BuildingIsOneSetAndOneGetManyPerRankAndTheCollectivesNeedNoMore) {
  const int P = GetParam();
  auto store = std::make_shared<herd::testing::CountingStore>(MakeInProcessStore());
  auto comms = herd::testing::MakeUcxCommunicators(P, store, UcxOptions{});
  ASSERT_EQ(comms.size(), static_cast<size_t>(P));
  EXPECT_EQ(store->sets, P);
  EXPECT_EQ(store->get_manys, P);
  EXPECT_EQ(store->gets, 0);
  for (int r = 0; r < P; ++r) {
    auto stats = GetUcxEndpointStats(*comms[r]);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->bootstrap_peers, static_cast<int>(ucx::BootstrapPeers(r, P).size()));
    EXPECT_EQ(stats->lazy_peers, 0);
  }

  constexpr size_t kCount = 1000;
  ExpectAllOk(OnEveryRank(P,
                          [&](int r) -> absl::Status {
                            Communicator* c = comms[r].get();
                            std::vector<float> data(kCount, static_cast<float>(r + 1));
                            collectives::AllReduceOptions ar;
                            ar.comm = c;
                            ar.data = data.data();
                            ar.count = kCount;
                            ar.timeout = 30s;
                            for (auto algo : {&collectives::RingAllReduce,
                                              &collectives::RecursiveDoublingAllReduce,
                                              &collectives::RecursiveHalvingAllReduce,
                                              &collectives::BinomialTreeAllReduce}) {
                              std::fill(data.begin(), data.end(), static_cast<float>(r + 1));
                              HERD_RETURN_IF_ERROR(algo(ar));
                              if (data[kCount - 1] != static_cast<float>(P * (P + 1) / 2)) {
                                return absl::DataLossError("wrong sum");
                              }
                              ++ar.tag;
                            }
                            std::vector<int32_t> gathered(kCount * P);
                            collectives::AllGatherOptions ag;
                            ag.comm = c;
                            ag.dtype = DType::kInt32;
                            ag.data = gathered.data();
                            ag.count = gathered.size();
                            ag.timeout = 30s;
                            ag.tag = 10;
                            HERD_RETURN_IF_ERROR(collectives::BruckAllGather(ag));
                            ag.tag = 11;
                            HERD_RETURN_IF_ERROR(collectives::RecursiveDoublingAllGather(ag));
                            collectives::BroadcastOptions bc;
                            bc.comm = c;
                            bc.data = data.data();
                            bc.count = kCount;
                            bc.root = P / 2;
                            bc.timeout = 30s;
                            bc.tag = 12;
                            return collectives::BinomialBroadcast(bc);
                          }),
              "collectives");
  EXPECT_EQ(store->gets, 0) << "a collective connected a peer outside the bootstrap set";
  for (int r = 0; r < P; ++r) EXPECT_EQ(GetUcxEndpointStats(*comms[r])->lazy_peers, 0);
}

// An all-to-all talks to every peer: the ones outside the bootstrap set are connected on first
// use, one Get each, once.
TEST_P(UcxLazyTest, AllToAllConnectsTheOtherPeersOnFirstUseOnce) {
  const int P = GetParam();
  auto store = std::make_shared<herd::testing::CountingStore>(MakeInProcessStore());
  auto comms = herd::testing::MakeUcxCommunicators(P, store, UcxOptions{});
  ASSERT_EQ(comms.size(), static_cast<size_t>(P));
  int expected_gets = 0;
  for (int r = 0; r < P; ++r) expected_gets += P - 1 - static_cast<int>(PeerSet(r, P).size());
  for (int round = 0; round < 2; ++round) {
    ExpectAllOk(OnEveryRank(P,
                            [&](int r) -> absl::Status {
                              // Chunk j of rank r's input holds 1000 * r + j.
                              std::vector<int32_t> in(P * 3), out(P * 3);
                              for (int j = 0; j < P; ++j) {
                                std::fill_n(in.begin() + 3 * j, 3, 1000 * r + j);
                              }
                              collectives::AllToAllOptions o;
                              o.comm = comms[r].get();
                              o.dtype = DType::kInt32;
                              o.input = in.data();
                              o.output = out.data();
                              o.count = in.size();
                              o.timeout = 30s;
                              o.tag = static_cast<uint32_t>(round);
                              HERD_RETURN_IF_ERROR(collectives::PairwiseAllToAll(o));
                              for (int j = 0; j < P; ++j) {
                                if (out[3 * j] != 1000 * j + r) {
                                  return absl::DataLossError(
                                      absl::StrFormat("block %d is %d", j, out[3 * j]));
                                }
                              }
                              return absl::OkStatus();
                            }),
                absl::StrFormat("all-to-all round %d", round));
    EXPECT_EQ(store->gets, expected_gets) << "round " << round;
  }
  EXPECT_EQ(store->sets, P);
  EXPECT_EQ(store->get_manys, P);
  for (int r = 0; r < P; ++r) {
    auto stats = GetUcxEndpointStats(*comms[r]);
    EXPECT_EQ(stats->bootstrap_peers + stats->lazy_peers, P - 1) << "rank " << r;
  }
}

// A decentralized mode's random pairs: each rank talks to a different peer every round.
TEST_P(UcxLazyTest, RandomPairsConnectOnFirstUse) {
  const int P = GetParam();
  constexpr int kRounds = 6;
  // The same matchings on every rank (a shared seed), as a plan would give them.
  std::vector<std::vector<int>> partner(kRounds, std::vector<int>(P, -1));
  std::mt19937 rng(7);
  for (auto& round : partner) {
    std::vector<int> order(P);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i + 1 < P; i += 2) {
      round[order[i]] = order[i + 1];
      round[order[i + 1]] = order[i];
    }
  }
  int expected_gets = 0;
  for (int r = 0; r < P; ++r) {
    std::set<int> met;
    for (const auto& round : partner) {
      if (round[r] >= 0 && PeerSet(r, P).count(round[r]) == 0) met.insert(round[r]);
    }
    expected_gets += static_cast<int>(met.size());
  }
  auto store = std::make_shared<herd::testing::CountingStore>(MakeInProcessStore());
  auto comms = herd::testing::MakeUcxCommunicators(P, store, UcxOptions{});
  ASSERT_EQ(comms.size(), static_cast<size_t>(P));
  ExpectAllOk(OnEveryRank(P,
                          [&](int r) -> absl::Status {
                            Communicator& c = *comms[r];
                            for (int k = 0; k < kRounds; ++k) {
                              const int q = partner[k][r];
                              if (q < 0) continue;
                              int32_t mine = 100 * r + k, theirs = -1;
                              Tag tag = Tag::Make(OpKind::kUser, 5, static_cast<uint32_t>(k));
                              Request rr = c.irecv(q, tag, AsMutableBytes(&theirs, 4));
                              Request s = c.isend(q, tag, AsBytes(&mine, 4));
                              HERD_RETURN_IF_ERROR(c.WaitAll({&rr, &s}, Deadline::After(20s)));
                              if (theirs != 100 * q + k) return absl::DataLossError("bad value");
                            }
                            return absl::OkStatus();
                          }),
              "random pairs");
  EXPECT_EQ(store->gets, expected_gets);
  EXPECT_EQ(store->get_manys, P);
}

INSTANTIATE_TEST_SUITE_P(Sizes, UcxLazyTest, ::testing::Values(2, 6, 9, 17),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// A store that never shows one key to Get (GetMany sees it): a peer whose record a lazy
// connection cannot find.
class HidingStore final : public Store {
 public:
  HidingStore(std::shared_ptr<Store> inner, std::string hidden)
      : inner_(std::move(inner)), hidden_(std::move(hidden)) {}
  absl::Status Set(std::string_view key, std::string_view value) override {
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    if (key != hidden_) return inner_->Get(key, deadline);
    std::this_thread::sleep_until(std::min(deadline.at(), Clock::now() + 1h));
    return absl::DeadlineExceededError(absl::StrFormat("store key '%s' did not appear", key));
  }
  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   Deadline deadline,
                                                   std::vector<size_t>* missing) override {
    return inner_->GetMany(keys, deadline, missing);
  }

 private:
  std::shared_ptr<Store> inner_;
  std::string hidden_;
};

// In a 6-rank communicator rank 3 is outside rank 0's bootstrap set.
constexpr int kFar = 3;

TEST(UcxLazyFailureTest, PeerWhoseRecordNeverAppearsIsUnreachableAfterTheBootstrapTimeout) {
  ASSERT_EQ(PeerSet(0, 6).count(kFar), 0u);
  UcxOptions options;
  options.prefix = "lazy";
  options.bootstrap_timeout = 1500ms;
  auto store = std::make_shared<HidingStore>(MakeInProcessStore(), "lazy/ucx/3");
  auto comms = herd::testing::MakeUcxCommunicators(6, store, options);
  ASSERT_EQ(comms.size(), 6u);
  int v = 0;
  auto start = Clock::now();
  Request r = comms[0]->irecv(kFar, Tag{}, AsMutableBytes(&v, 4));
  absl::Status st = comms[0]->wait(r, Deadline::After(10s));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank 3 is unreachable"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("did not publish its address under "
                                                   "'lazy/ucx/3'"));
  // Later operations with it fail at once; the others still work.
  start = Clock::now();
  Request s = comms[0]->isend(kFar, Tag{}, AsBytes(&v, 4));
  EXPECT_EQ(comms[0]->wait(s, Deadline::After(10s)).code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, 100ms);
  int got = 0, one = 1;
  Request from1 = comms[0]->irecv(1, Tag{}, AsMutableBytes(&got, 4));
  Request to0 = comms[1]->isend(0, Tag{}, AsBytes(&one, 4));
  EXPECT_TRUE(comms[1]->wait(to0, Deadline::After(10s)).ok());
  EXPECT_TRUE(comms[0]->wait(from1, Deadline::After(10s)).ok());
  EXPECT_EQ(got, 1);
}

TEST(UcxLazyFailureTest, AbortEndsTheWaitForALazyPeersRecord) {
  UcxOptions options;
  options.prefix = "lazy";
  options.bootstrap_timeout = 60s;
  auto store = std::make_shared<HidingStore>(MakeInProcessStore(), "lazy/ucx/3");
  auto comms = herd::testing::MakeUcxCommunicators(6, store, options);
  ASSERT_EQ(comms.size(), 6u);
  std::thread aborter([&] {
    std::this_thread::sleep_for(300ms);
    EXPECT_TRUE(comms[0]->abort(absl::UnavailableError("the scheduler declared rank 3 dead")).ok());
  });
  int v = 0;
  auto start = Clock::now();
  Request r = comms[0]->isend(kFar, Tag{}, AsBytes(&v, 4));  // blocks on the record
  absl::Status st = comms[0]->wait(r, Deadline::After(10s));
  aborter.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("the scheduler declared rank 3 dead"));
}

TEST(UcxLazyFailureTest, PeerThatLeftBeforeItsFirstUseIsNamed) {
  auto comms = herd::testing::MakeUcxCommunicators(6);
  ASSERT_EQ(comms.size(), 6u);
  comms[kFar].reset();  // rank 3 closes its communicator before rank 0 ever talks to it
  int v = 0;
  auto start = Clock::now();
  Request r = comms[0]->irecv(kFar, Tag{}, AsMutableBytes(&v, 4));
  absl::Status st = comms[0]->wait(r, Deadline::After(20s));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank 3"));
}

TEST(UcxLazyFailureTest, LazilyConnectedPeerThatGoesAwayIsNamed) {
  auto comms = herd::testing::MakeUcxCommunicators(6);
  ASSERT_EQ(comms.size(), 6u);
  // Ranks 0 and 3 exchange once: each connects the other on first use.
  int a = 1, b = 2, got_a = 0, got_b = 0;
  Tag tag = Tag::Make(OpKind::kUser, 1, 0);
  std::thread far([&] {
    Request r = comms[kFar]->irecv(0, tag, AsMutableBytes(&got_a, 4));
    Request s = comms[kFar]->isend(0, tag, AsBytes(&b, 4));
    EXPECT_TRUE(comms[kFar]->WaitAll({&r, &s}, Deadline::After(20s)).ok());
  });
  Request r = comms[0]->irecv(kFar, tag, AsMutableBytes(&got_b, 4));
  Request s = comms[0]->isend(kFar, tag, AsBytes(&a, 4));
  ASSERT_TRUE(comms[0]->WaitAll({&r, &s}, Deadline::After(20s)).ok());
  far.join();
  EXPECT_EQ(got_a, 1);
  EXPECT_EQ(got_b, 2);
  EXPECT_EQ(GetUcxEndpointStats(*comms[0])->lazy_peers, 1);
  // Rank 0 waits for a second message; rank 3 goes away instead.
  Request next = comms[0]->irecv(kFar, Tag::Make(OpKind::kUser, 1, 1), AsMutableBytes(&got_b, 4));
  auto start = Clock::now();
  comms[kFar].reset();
  absl::Status st = comms[0]->wait(next, Deadline::After(20s));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("from rank 3"));
}

}  // namespace
}  // namespace herd::transport
