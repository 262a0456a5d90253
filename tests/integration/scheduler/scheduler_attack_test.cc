// The real `herd scheduler` process under hostile or careless input, over gRPC as any client
// generated from the protos would send it: every class of oversized, malformed or non-finite
// input gets its documented code and changes nothing; answers stay within a default client's
// 4 MiB message limit however many large jobs there are; planning work is bounded; a stored
// record the scheduler cannot serve never stops it from starting (scheduler/limits.h).

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "scheduler/client/scheduler_client.h"
#include "scheduler/limits.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::AsyncSpec;
using testing::ExampleSpec;
using testing::SchedulerProcess;
using testing::TempDir;

// A client with gRPC's default message limits, like any client generated from the protos.
std::unique_ptr<SchedulerClient> Client(const std::string& address) {
  ClientOptions o;
  o.address = address;
  o.call_timeout = 10s;
  auto c = SchedulerClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(c).value();
}

herd::v1::RegisterNodeRequest Reg(const std::string& job, herd::v1::Role role,
                                  const std::string& name) {
  herd::v1::RegisterNodeRequest r;
  r.set_job(job);
  r.set_role(role);
  r.set_name(name);
  r.set_address(name + ":9000");
  return r;
}

std::string Jobs(SchedulerClient& c) {
  auto jobs = c.ListJobs();
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  return jobs.ok() ? jobs->SerializeAsString() : "";
}

// Checks one refused call: its code, a message naming `needle`, and the state unchanged.
class Refusals {
 public:
  explicit Refusals(SchedulerClient& c) : c_(c), before_(Jobs(c)) {}
  void Expect(const absl::Status& st, absl::StatusCode code, const std::string& needle,
              const char* what) {
    EXPECT_EQ(st.code(), code) << what << ": " << st;
    EXPECT_NE(std::string(st.message()).find(needle), std::string::npos)
        << what << ": the message should say '" << needle << "': " << st;
    EXPECT_LE(st.message().size(), 4096u) << what << ": the message is cut";
    EXPECT_EQ(Jobs(c_), before_) << what << " changed the state";
  }

 private:
  SchedulerClient& c_;
  const std::string before_;
};

// A job whose state is about `tensors` x (name_bytes + 12) bytes.
herd::v1::JobSpec ManyTensors(const std::string& name, int tensors, size_t name_bytes) {
  auto spec = ExampleSpec(name, 2, 0);
  spec.clear_tensors();
  for (int i = 0; i < tensors; ++i) {
    auto* t = spec.add_tensors();
    std::string n = std::to_string(i) + ".";
    n.resize(name_bytes, 'w');
    t->set_name(n);
    t->add_shape(4);
    t->set_dtype("fp32");
  }
  return spec;
}

TEST(SchedulerAttack, OversizedAndMalformedInputsAreRefusedAndChangeNothing) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  auto c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  auto w0 = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w0"));
  ASSERT_TRUE(w0.ok()) << w0.status();
  Refusals r(*c);
  const auto invalid = absl::StatusCode::kInvalidArgument;

  // Planning work: a 2^48-element tensor, and a model of 2^20 one-element chunks, are refused
  // at validation, before any shard map exists.
  auto huge = ExampleSpec("huge", 2, 1);
  huge.mutable_mode()->Clear();
  huge.mutable_mode()->set_mode("ps_sync");
  huge.mutable_tensors(0)->clear_shape();
  huge.mutable_tensors(0)->add_shape(int64_t{1} << 24);
  huge.mutable_tensors(0)->add_shape(int64_t{1} << 24);
  const auto t0 = std::chrono::steady_clock::now();
  r.Expect(c->SubmitJob(huge).status(), invalid, "more than 1099511627776 elements",
           "2^48-element tensor");
  auto chunks = huge;
  chunks.mutable_tensors(0)->clear_shape();
  chunks.mutable_tensors(0)->add_shape(1 << 20);
  chunks.set_chunk_bytes(4);
  r.Expect(c->SubmitJob(chunks).status(), invalid, "shard-map chunks", "2^20 shard-map entries");
  // Generous for a loaded machine; planning 2^30 entries took seconds and gigabytes.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "refused without planning";

  // Names: long, NUL, escape sequences.
  auto long_name = ExampleSpec("long");
  long_name.mutable_tensors(0)->set_name(std::string(1 << 20, 't'));
  r.Expect(c->SubmitJob(long_name).status(), invalid, "more than the limit of 256",
           "1 MiB tensor name");
  auto nul = ExampleSpec("nul");
  nul.mutable_tensors(0)->set_name(std::string("fc1\0weight", 10));
  r.Expect(c->SubmitJob(nul).status(), invalid, "control byte 0x00", "NUL in a tensor name");
  auto nul_job = ExampleSpec(std::string("j\0b", 3));
  r.Expect(c->SubmitJob(nul_job).status(), invalid, "job name", "NUL in a job name");
  auto long_mode = ExampleSpec("mode");
  long_mode.mutable_mode()->set_mode(std::string(1 << 20, 'm'));
  r.Expect(c->SubmitJob(long_mode).status(), invalid, "mode has 1048576 bytes", "1 MiB mode");
  r.Expect(c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, std::string("w\0x", 3))).status(),
           invalid, "node name", "NUL in a node name");
  auto long_address = Reg("j1", herd::v1::ROLE_WORKER, "w1");
  long_address.set_address(std::string(1 << 20, 'a'));
  r.Expect(c->RegisterNode(long_address).status(), invalid, "more than the limit of 256",
           "1 MiB address");

  // Reasons: a 3 MiB cancel reason once made every later `herd job list` fail.
  r.Expect(c->CancelJob("j1", std::string(3 << 20, 'r')).status(), invalid,
           "cancel reason has 3145728 bytes", "3 MiB cancel reason");
  r.Expect(c->CancelJob("j1", "done\x1b[2J").status(), invalid, "control byte 0x1b",
           "an escape sequence in a cancel reason");

  // Numbers.
  auto lr = ExampleSpec("lr");
  lr.mutable_optimizer()->set_learning_rate(INFINITY);
  r.Expect(c->SubmitJob(lr).status(), invalid, "learning_rate", "learning_rate inf");
  auto wd = ExampleSpec("wd");
  wd.mutable_optimizer()->set_weight_decay(INFINITY);
  r.Expect(c->SubmitJob(wd).status(), invalid, "weight_decay", "weight_decay inf");
  auto mom = ExampleSpec("mom");
  mom.mutable_optimizer()->set_name("momentum");
  mom.mutable_optimizer()->set_momentum(1.5);
  r.Expect(c->SubmitJob(mom).status(), invalid, "momentum", "momentum 1.5");
  herd::v1::SetModeRequest sm;
  sm.set_job("j1");
  sm.mutable_mode()->set_mode("topk_allgather");
  sm.mutable_mode()->set_density(NAN);
  r.Expect(c->SetMode(sm).status(), invalid, "density", "density NaN");

  // The documented codes: a negative iteration report is malformed.
  herd::v1::ReportIterationRequest rep;
  rep.set_job("j1");
  rep.set_node_id(w0->node_id());
  rep.set_iteration(-5);
  r.Expect(c->ReportIteration(rep).status(), invalid, "iterations are >= 0", "iteration -5");

  // The store: a value over the bound; keys with control bytes.
  r.Expect(c->StoreSet("j1", "k", std::string(2 << 20, 'v')), invalid, "more than the limit",
           "2 MiB store value");
  r.Expect(c->StoreSet("j1", std::string("k\0", 2), "v"), invalid, "control byte",
           "NUL in a store key");
  // StoreGetMany: more keys than one call may name, a bad key, an unknown job.
  const std::vector<std::string> too_many(limits::kMaxStoreGetManyKeys + 1, "k");
  r.Expect(c->StoreGetMany("j1", too_many, Deadline::After(1s)).status(), invalid,
           "more than the limit of 4096", "4097 keys in one StoreGetMany");
  r.Expect(c->StoreGetMany("j1", {"k", std::string("k\0", 2)}, Deadline::After(1s)).status(),
           invalid, "store key 1 of the request", "NUL in a StoreGetMany key");
  r.Expect(c->StoreGetMany("j1", {}, Deadline::After(1s)).status(), invalid, "names no key",
           "StoreGetMany of no key");
  r.Expect(c->StoreGetMany("nope", {"k"}, Deadline::After(1s)).status(),
           absl::StatusCode::kNotFound, "does not exist", "StoreGetMany of an unknown job");

  // A long unknown name: the message echoing it is cut, so the client still gets NOT_FOUND.
  r.Expect(c->GetJob(std::string(3 << 20, 'x')).status(), absl::StatusCode::kNotFound,
           "does not exist", "3 MiB unknown job name");
}

TEST(SchedulerAttack, AnswersStayWithinADefaultClientsMessageLimit) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  auto c = Client(proc.address());
  // Three jobs of about 1.5 MiB each: one answer with all of them would pass 4 MiB.
  for (const char* name : {"big1", "big2", "big3"}) {
    auto st = c->SubmitJob(ManyTensors(name, 10000, 150)).status();
    ASSERT_TRUE(st.ok()) << name << ": " << st;
  }
  auto jobs = c->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs_size(), 3) << "every page was fetched";
  auto cli = testing::RunHerd({"job", "list", "--scheduler", proc.address()});
  EXPECT_EQ(cli.rc, 0) << cli.out;
  EXPECT_NE(cli.out.find("big3"), std::string::npos) << cli.out;

  // A job whose state alone would pass the bound is refused as a quota, naming it.
  Refusals r(*c);
  r.Expect(c->SubmitJob(ManyTensors("bigger", 15000, 200)).status(),
           absl::StatusCode::kResourceExhausted, "more than the limit of 2097152", "a 3 MiB spec");

  // A plan at the shard-map bound is built quickly and fits.
  auto wide = ExampleSpec("wide", 2, 4);
  wide.mutable_mode()->Clear();
  wide.mutable_mode()->set_mode("ps_sync");
  wide.mutable_tensors(0)->clear_shape();
  wide.mutable_tensors(0)->add_shape(limits::kMaxShardEntries - 128);
  wide.set_chunk_bytes(4);
  ASSERT_TRUE(c->SubmitJob(wide).ok());
  herd::v1::GetPlanRequest pr;
  pr.set_job("wide");
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = c->GetPlan(pr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->shards_size(), limits::kMaxShardEntries);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(SchedulerAttack, StoreQuotasHoldPerJob) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  auto c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j2", 2, 0)).ok());
  const std::string value(limits::kMaxStoreValueBytes, 'v');
  int stored = 0;
  absl::Status st;
  for (; stored < 100; ++stored) {
    st = c->StoreSet("j1", "k" + std::to_string(stored), value);
    if (!st.ok()) break;
  }
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(std::string(st.message()).find("bootstrap store of job 'j1'"), std::string::npos) << st;
  EXPECT_EQ(stored, static_cast<int>(limits::kMaxStoreBytesPerJob / (value.size() + 3)));
  auto missing = c->StoreGet("j1", "k" + std::to_string(stored), Deadline::After(100ms));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded)
      << "the refused key was not stored";
  EXPECT_TRUE(c->StoreSet("j2", "k", "v").ok()) << "another job's store is its own";
  // Reading them back: one StoreGetMany answers at most a few MiB, the rest is refused whole.
  auto three = c->StoreGetMany("j1", {"k0", "k1", "k2"}, Deadline::After(5s));
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->values_size(), 3);
  EXPECT_EQ(three->values(2), value);
  auto four = c->StoreGetMany("j1", {"k0", "k1", "k2", "k3"}, Deadline::After(5s));
  EXPECT_EQ(four.status().code(), absl::StatusCode::kResourceExhausted) << four.status();
  EXPECT_NE(std::string(four.status().message()).find("ask for fewer keys"), std::string::npos);
  // A wait that ends lists the keys still missing, through gRPC.
  auto late = c->StoreGetMany("j2", {"k", "absent"}, Deadline::After(200ms));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_NE(std::string(late.status().message()).find("store key 'absent' (1 of 2) of job 'j2'"),
            std::string::npos)
      << late.status();
  auto partial = c->StoreGetMany("j2", {"k", "absent"}, Deadline::After(200ms), true);
  ASSERT_TRUE(partial.ok()) << partial.status();
  ASSERT_EQ(partial->missing_size(), 1);
  EXPECT_EQ(partial->missing(0), 1u);
  EXPECT_EQ(partial->values(0), "v");
  // A job that ends frees its store.
  ASSERT_TRUE(c->CancelJob("j1", "").ok());
  ASSERT_TRUE(c->DeleteJob("j1").ok());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  EXPECT_TRUE(c->StoreSet("j1", "k0", value).ok());
}

TEST(SchedulerAttack, AReplacedNodeIsToldSoWithTheDocumentedCode) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "300ms"});
  auto c = Client(proc.address());
  // ps_async with its server missing: the job stays PENDING, so deaths do not end it.
  ASSERT_TRUE(c->SubmitJob(AsyncSpec("j1", 2, 1)).ok());
  auto w0 = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w0"));
  auto w1 = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w1"));
  ASSERT_TRUE(w0.ok() && w1.ok());
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (c->GetJob("j1")->workers(0).alive() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(50ms);
  }
  auto w2 = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w2"));
  ASSERT_TRUE(w2.ok()) << w2.status();
  ASSERT_EQ(w2->rank(), 0) << "w2 took the dead slot 0";
  Refusals r(*c);
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j1");
  hb.set_node_id(w0->node_id());
  r.Expect(c->Heartbeat(hb).status(), absl::StatusCode::kFailedPrecondition,
           "its slot taken by worker 'w2'", "heartbeat of a replaced node");
  herd::v1::GetPlanRequest pr;
  pr.set_job("j1");
  pr.set_node_id(w0->node_id());
  r.Expect(c->GetPlan(pr).status(), absl::StatusCode::kFailedPrecondition, "slot taken",
           "plan of a replaced node");
}

// Writes records straight into the scheduler's RocksDB, as a damaged disk or an older version
// with looser bounds could have left them.
void PutRecords(const std::string& dir, const std::map<std::string, std::string>& records) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [k, v] : records) ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
}

TEST(SchedulerAttack, AStoredJobThatCannotBeServedIsSetAsideAndTheRestServed) {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  {
    SchedulerProcess proc;
    proc.Start(state, 0);
    auto c = Client(proc.address());
    ASSERT_TRUE(c->SubmitJob(ExampleSpec("good", 2, 0)).ok());
    proc.Stop(SIGTERM);
  }
  herd::v1::JobStatus unbounded;
  *unbounded.mutable_spec() = ExampleSpec("unbounded", 2, 1);
  unbounded.mutable_spec()->mutable_mode()->Clear();
  unbounded.mutable_spec()->mutable_mode()->set_mode("ps_sync");
  unbounded.mutable_spec()->mutable_tensors(0)->add_shape(int64_t{1} << 40);
  unbounded.set_state(herd::v1::JOB_PENDING);
  unbounded.set_epoch(1);
  PutRecords(state, {{"job/unbounded", unbounded.SerializeAsString()},
                     {"job/junk", std::string("\xff\xff\xff garbage", 12)},
                     {"meta/next_node_id", "not a number"}});

  SchedulerProcess proc;
  proc.Start(state, 0);
  auto c = Client(proc.address());
  auto jobs = c->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).spec().name(), "good");
  EXPECT_EQ(c->GetJob("unbounded").status().code(), absl::StatusCode::kNotFound);
  const std::string log = proc.log();
  EXPECT_NE(log.find("set aside as 'bad/job/unbounded'"), std::string::npos) << log;
  EXPECT_NE(log.find("set aside as 'bad/job/junk'"), std::string::npos) << log;
  // The node-id counter was recomputed; the names are free again.
  EXPECT_TRUE(c->RegisterNode(Reg("good", herd::v1::ROLE_WORKER, "w0")).ok());
  EXPECT_TRUE(c->SubmitJob(ExampleSpec("unbounded", 2, 0)).ok());
  // And the next start does not meet them again (the log file is appended to).
  proc.Stop(SIGTERM);
  const size_t first_run = proc.log().size();
  SchedulerProcess again;
  again.Start(state, 0);
  EXPECT_EQ(again.log().find("set aside", first_run), std::string::npos) << again.log();
}

TEST(SchedulerAttack, HugeOrDeepJobSpecFilesAreRefusedByTheClient) {
  TempDir dir;
  const std::string big = dir.path() + "/big.yaml", deep = dir.path() + "/deep.yaml";
  {
    std::ofstream out(big);
    out << "name: j1\nmode: allreduce\nworkers: 1\n";
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (int i = 0; i < 50 * 1000; ++i) out << line;  // 50 MB
    std::ofstream(deep) << "name: j1\nx: " << std::string(100000, '[') << "\n";
  }
  // No scheduler is needed: the file is refused before any call. The messages come from the
  // checks made before the file is read whole (size) and before it is parsed (nesting).
  for (const std::string& file : {big, deep}) {
    auto r = testing::RunHerd({"job", "submit", file, "--scheduler", "127.0.0.1:1"});
    EXPECT_EQ(r.rc, 2) << r.out;  // a configuration error
    EXPECT_NE(r.out.find(file == big ? "at most 1048576 bytes" : "collections nest"),
              std::string::npos)
        << r.out;
  }
}

}  // namespace
}  // namespace herd::scheduler
