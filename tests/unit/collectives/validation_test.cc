// Bad options: INVALID_ARGUMENT with a message naming the operation and the field, and nothing
// sent or posted (checked through a request-counting communicator).

#include <cstdint>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/run.h"
#include "tests/unit/collectives/collective_test_util.h"
#include "tests/unit/collectives/forwarding_communicator.h"

namespace herd::collectives::testing {
namespace {

using ::testing::HasSubstr;

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comms_ = transport::MakeLoopbackCommunicators(2);
    comm_ = std::make_unique<ForwardingCommunicator>(*comms_[0]);
  }
  // Expects INVALID_ARGUMENT whose message holds every fragment, and no request posted.
  void ExpectRejected(const absl::Status& s, std::initializer_list<const char*> fragments) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (const char* f : fragments) EXPECT_THAT(std::string(s.message()), HasSubstr(f));
    EXPECT_EQ(comm_->sends() + comm_->recvs(), 0) << "requests were posted";
  }
  AllReduceOptions AllReduceOk() {
    AllReduceOptions o;
    o.comm = comm_.get();
    o.data = data_;
    o.count = 8;
    o.timeout = std::chrono::milliseconds(500);
    return o;
  }

  std::vector<std::unique_ptr<transport::Communicator>> comms_;
  std::unique_ptr<ForwardingCommunicator> comm_;
  float data_[8] = {};
};

TEST_F(ValidationTest, NullCommunicator) {
  AllReduceOptions o = AllReduceOk();
  o.comm = nullptr;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kLinearPipeline, Algorithm::kBinomialTree}) {
    ExpectRejected(AllReduce(o, a), {"all-reduce", "comm is null"});
  }
  AllGatherOptions g;
  g.data = data_;
  g.count = 8;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kBruck}) {
    ExpectRejected(AllGather(g, a), {"all-gather", "comm is null"});
  }
  AllToAllOptions t;
  ExpectRejected(PairwiseAllToAll(t), {"all-to-all", "comm is null"});
}

TEST_F(ValidationTest, NullDataWithElements) {
  AllReduceOptions o = AllReduceOk();
  o.data = nullptr;
  ExpectRejected(RingAllReduce(o), {"ring all-reduce", "data is null"});
  ReduceScatterOptions rs;
  rs.comm = comm_.get();
  rs.count = 3;
  ExpectRejected(RingReduceScatter(rs), {"ring reduce-scatter", "data is null"});
  BroadcastOptions b;
  b.comm = comm_.get();
  b.count = 3;
  ExpectRejected(BinomialBroadcast(b), {"binomial broadcast", "data is null"});
}

TEST_F(ValidationTest, TagBeyondTwentyBits) {
  AllReduceOptions o = AllReduceOk();
  o.tag = transport::Tag::kMaxId + 1;
  ExpectRejected(RingAllReduce(o), {"tag 1048576"});
  ExpectRejected(LinearPipelineAllReduce(o), {"tag 1048576"});
}

TEST_F(ValidationTest, NonPositiveTimeout) {
  AllReduceOptions o = AllReduceOk();
  o.timeout = std::chrono::milliseconds(0);
  ExpectRejected(BinomialTreeAllReduce(o), {"timeout"});
}

TEST_F(ValidationTest, UnknownDTypeAndOp) {
  AllReduceOptions o = AllReduceOk();
  o.dtype = static_cast<DType>(42);
  ExpectRejected(RingAllReduce(o), {"unknown dtype 42"});
  o = AllReduceOk();
  o.op = static_cast<ReduceOp>(9);
  ExpectRejected(RingAllReduce(o), {"unknown reduce op 9"});
}

TEST_F(ValidationTest, AverageNeedsAFloatingDType) {
  int32_t ints[8] = {};
  AllReduceOptions o = AllReduceOk();
  o.data = ints;
  o.dtype = DType::kInt32;
  o.op = ReduceOp::kAverage;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kLinearPipeline, Algorithm::kBinomialTree}) {
    ExpectRejected(AllReduce(o, a), {"avg needs a floating dtype", "int32"});
  }
  ReduceOptions r;
  r.comm = comm_.get();
  r.data = ints;
  r.count = 8;
  r.dtype = DType::kInt64;
  r.op = ReduceOp::kAverage;
  ExpectRejected(LinearPipelineReduce(r), {"avg needs a floating dtype", "int64"});
}

TEST_F(ValidationTest, ByteSizeOverflow) {
  AllReduceOptions o = AllReduceOk();
  o.count = std::numeric_limits<size_t>::max() / 2;
  ExpectRejected(RingAllReduce(o), {"overflows"});
}

TEST_F(ValidationTest, RootOutOfRange) {
  for (int root : {-1, 2}) {
    BroadcastOptions b;
    b.comm = comm_.get();
    b.data = data_;
    b.count = 8;
    b.root = root;
    ExpectRejected(LinearPipelineBroadcast(b),
                   {"linear-pipeline broadcast", "out of range [0, 2)"});
    ExpectRejected(BinomialBroadcast(b), {"binomial broadcast", "out of range"});
    ReduceOptions r;
    r.comm = comm_.get();
    r.data = data_;
    r.count = 8;
    r.root = root;
    ExpectRejected(LinearPipelineReduce(r), {"linear-pipeline reduce", "root"});
    ExpectRejected(BinomialReduce(r), {"binomial reduce", "root"});
  }
}

TEST_F(ValidationTest, ZeroSegmentOrBlock) {
  AllReduceOptions o = AllReduceOk();
  o.segment_bytes = 0;
  ExpectRejected(RingAllReduce(o), {"segment_bytes must be > 0"});
  o = AllReduceOk();
  o.block_bytes = 0;
  ExpectRejected(LinearPipelineAllReduce(o), {"block_bytes must be > 0"});
  AllGatherOptions g;
  g.comm = comm_.get();
  g.data = data_;
  g.count = 8;
  g.segment_bytes = 0;
  ExpectRejected(RingAllGather(g), {"ring all-gather", "segment_bytes"});
  BroadcastOptions b;
  b.comm = comm_.get();
  b.data = data_;
  b.count = 8;
  b.block_bytes = 0;
  ExpectRejected(LinearPipelineBroadcast(b), {"block_bytes"});
}

TEST_F(ValidationTest, AllToAllBuffersMustNotOverlap) {
  float in[8] = {}, out[8] = {};
  AllToAllOptions t;
  t.comm = comm_.get();
  t.input = in;
  t.output = in;  // the same buffer
  t.count = 8;
  ExpectRejected(PairwiseAllToAll(t), {"overlap", "out of place"});
  t.output = in + 4;  // output [4, 12) overlaps input [0, 8)
  ExpectRejected(PairwiseAllToAll(t), {"overlap"});
  t.output = nullptr;
  ExpectRejected(PairwiseAllToAll(t), {"output is null"});
  t.output = out;
  t.input = nullptr;
  ExpectRejected(PairwiseAllToAll(t), {"data is null"});
}

TEST_F(ValidationTest, UnsupportedAlgorithmListsTheSupportedOnes) {
  AllReduceOptions o = AllReduceOk();
  ExpectRejected(
      AllReduce(o, Algorithm::kBruck),
      {"all-reduce", "'bruck'", "auto, ring, lp, tree, rd, rh, oneshot, shm, hier, native"});
  AllGatherOptions g;
  g.comm = comm_.get();
  ExpectRejected(AllGather(g, Algorithm::kLinearPipeline),
                 {"auto, ring, rd, bruck, oneshot, shm, hier, native"});
  ReduceScatterOptions rs;
  rs.comm = comm_.get();
  ExpectRejected(ReduceScatter(rs, Algorithm::kBinomialTree),
                 {"'tree'", "auto, ring, rh, oneshot, shm, hier, native"});
  BroadcastOptions b;
  b.comm = comm_.get();
  ExpectRejected(Broadcast(b, Algorithm::kRing), {"broadcast", "auto, lp, tree, shm, hier"});
  ReduceOptions r;
  r.comm = comm_.get();
  ExpectRejected(Reduce(r, Algorithm::kNative), {"reduce", "'native'", "auto, lp, tree"});
}

TEST(AlgorithmNames, ParseAndPrintRoundTrip) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kLinearPipeline, Algorithm::kRecursiveDoubling,
                      Algorithm::kBruck, Algorithm::kBinomialTree, Algorithm::kPairwise,
                      Algorithm::kNative, Algorithm::kRecursiveHalving, Algorithm::kOneShot,
                      Algorithm::kAuto, Algorithm::kShm, Algorithm::kHierarchical}) {
    auto parsed = ParseAlgorithm(AlgorithmName(a));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_EQ(ParseAlgorithm("nope").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::collectives::testing
