#pragma once
// Every size a peer, an operator or a file can make the scheduler hold, work on or answer,
// with the reason for each number. The scheduler checks them before anything changes (a
// refused call changes nothing), so no request can make it do unbounded work under its lock,
// grow without bound, store a record that breaks a restart, or build an answer a client cannot
// receive. docs/scheduler.md ("Limits") lists them for operators.
//
// Codes: a field over its bound is INVALID_ARGUMENT naming the field; a quota that the sum of
// several valid requests exhausts (jobs held, store bytes of a job, the size of a job's state)
// is RESOURCE_EXHAUSTED naming the quota.
//
// Header only: the scheduler (validation), its client (the YAML reader) and the tests share it.

#include <cstddef>
#include <cstdint>

namespace herd::scheduler::limits {

// --- Messages -------------------------------------------------------------------------------

// The largest message a gRPC client receives unless it raises its limit (gRPC's default, which
// every client generated from the protos has). Every answer of the scheduler stays below it.
inline constexpr size_t kMaxAnswerBytes = 4 << 20;
// The largest request the scheduler reads (gRPC's default, set explicitly on the server).
inline constexpr size_t kMaxRequestBytes = 4 << 20;
// The serialized JobStatus of one job (spec, members, progress, results, schedule, reasons).
// Half an answer: a plan adds at most the shard map (kMaxShardEntries entries of <= 32 bytes,
// 1 MiB) and the ranks, ring and peers (<= 20 bytes a worker, 320 KiB) to the members it
// copies from the status, so plans and GetJob answers stay below kMaxAnswerBytes. Checked where
// a request can grow the state (submission, registration, a declared model, a result, a mode
// switch); the rest grows by a bounded amount over it: progress reports are fixed-size (at most
// 80 bytes a worker, 1.3 MiB at kMaxWorkers) and an ending adds a few KiB of reasons.
inline constexpr size_t kMaxJobStatusBytes = 2 << 20;
// One page of ListJobs: at least one job, then jobs while the page stays below this.
inline constexpr size_t kMaxListPageBytes = 3 << 20;
// Error messages are cut to this: they travel in gRPC trailers (8 KiB of metadata by default),
// and a message that echoes a megabyte of input would turn a precise error into a broken call.
inline constexpr size_t kMaxErrorMessageBytes = 2048;
// Strings from the request echoed in messages are cut to this many bytes.
inline constexpr size_t kMaxEchoBytes = 80;

// --- Names and strings ------------------------------------------------------------------------

// Job names: a DNS label (63), so a job name can be a Kubernetes label or pod name prefix.
inline constexpr size_t kMaxJobNameBytes = 63;
// Node names: pod or host names (a Kubernetes pod name has at most 63; FQDNs up to 128 in
// practice). Printable ASCII without spaces.
inline constexpr size_t kMaxNodeNameBytes = 128;
// Tensor names: framework parameter paths ("encoder.layers.23.attention.q_proj.weight" is 45
// bytes); 256 leaves room for deep module trees. Printable, no control bytes.
inline constexpr size_t kMaxTensorNameBytes = 256;
// Mode, topology, compressor, optimizer, model and dtype names: all are short registry words
// ("qsgd:16", "topk:0.001"); 64 bytes is far above the longest.
inline constexpr size_t kMaxWordBytes = 64;
// host:port of a process, and its host name (a DNS name has at most 253 bytes).
inline constexpr size_t kMaxAddressBytes = 256;
// A UCX worker address blob: with every transport of a multi-rail node it is a few KiB. A
// RegisterNode may still carry one (older clients); it is checked against this and not kept.
inline constexpr size_t kMaxUcxAddressBytes = 16 << 10;
// Reasons an operator gives (cancel) are refused above this; a process's failure reason is cut
// to it (the start says the most). Both are kept in the job's state and shown in every answer.
inline constexpr size_t kMaxReasonBytes = 1024;
// Barrier names and store keys.
inline constexpr size_t kMaxKeyBytes = 1024;

// --- Jobs ---------------------------------------------------------------------------------------

// Jobs held at once (ended ones count until `herd job delete`): the scheduler keeps every job
// in memory, so this times kMaxJobStatusBytes bounds its memory (2 GiB at worst, a few MiB in
// practice).
inline constexpr size_t kMaxJobs = 1024;
// Workers and servers of one job. Every plan lists every member, and the ring and peers of a
// plan grow with the workers: 16384 keeps a plan below kMaxAnswerBytes with short addresses.
inline constexpr int32_t kMaxWorkers = 16384;
inline constexpr int32_t kMaxServers = 4096;
// Tensors of one model: real models have hundreds to a few thousand parameter tensors.
inline constexpr int32_t kMaxTensors = 16384;
// Dimensions of one tensor (real tensors have at most 5 or 6).
inline constexpr int32_t kMaxTensorRank = 16;
// Elements of one tensor and of the whole model: 2^40 (a trillion parameters, 4 TiB of fp32)
// is beyond any model this system trains, and keeps every byte count far inside int64.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
inline constexpr int64_t kMaxModelElements = int64_t{1} << 40;
// Shard-map entries (chunks of all tensors): the plan lists them all, and the scheduler builds
// them under its lock for every plan. 32768 entries is a 32 GiB model at the default 1 MiB
// chunks; a larger model takes larger chunks. Checked at validation, in closed form, before
// any shard map is built.
inline constexpr int64_t kMaxShardEntries = 32768;
// A chunk travels as one message to a shard (whose message limit is 64 MiB, ps_ec and pulls
// included): 16 MiB chunks leave room for framing and for several chunks in flight.
inline constexpr int64_t kMaxChunkBytes = 16 << 20;
// The lp pipeline block: at most a chunk of a tensor in flight at once.
inline constexpr int64_t kMaxBlockBytes = 256 << 20;
// Scheduled mode switches of one job: each is a ModeSwitch in every status answer.
inline constexpr int kMaxModeSwitches = 1024;
// Optimizer hyper-parameters are finite; a learning rate above this is a typo, not a setting
// (it makes any model diverge at once).
inline constexpr double kMaxLearningRate = 1e6;
inline constexpr double kMaxWeightDecay = 1e6;
// A training result: metrics and their names (each is kept per worker in the job's state).
inline constexpr int kMaxMetrics = 64;
inline constexpr size_t kMaxMetricNameBytes = 128;

// --- Following a job -------------------------------------------------------------------------

// Iterations one Follow message reports (rank 0 sends those since its last message, about a
// quarter second's worth): a slow reader of a fast job sends several messages instead.
inline constexpr int kMaxReportsPerMessage = 1024;
// How far ahead of the job's progress a worker may ask about an iteration (a horizon, a plan):
// beyond any real lookahead, so an iteration of 2^62 cannot move the job's horizon there.
inline constexpr int64_t kMaxIterationsAhead = int64_t{1} << 20;

// --- Bootstrap store ----------------------------------------------------------------------------

// One value: a UCX address or an NCCL unique id is at most a few KiB; 1 MiB is generous.
inline constexpr size_t kMaxStoreValueBytes = 1 << 20;
// Keys and bytes of one job's store (keys plus values): the workers write a few keys per rank
// and epoch stretch; 64 MiB holds a 1000-worker job through dozens of membership changes.
inline constexpr size_t kMaxStoreKeysPerJob = 65536;
inline constexpr size_t kMaxStoreBytesPerJob = 64 << 20;
// All stores together (the stores live in memory and in RocksDB).
inline constexpr size_t kMaxStoreBytesTotal = 1 << 30;
// Keys of one StoreGetMany. A rank of a UCX communicator reads its peers' records in one call:
// about 3 log2(P) keys (35 at 4,096 ranks); 4,096 lets one call read every record of a
// 4,096-rank communicator. The request itself stays below kMaxRequestBytes (gRPC refuses it
// otherwise), so the keys' bytes need no bound of their own.
inline constexpr size_t kMaxStoreGetManyKeys = 4096;
// The values one StoreGetMany answers: below kMaxAnswerBytes with room for the framing (a few
// bytes a value). 4,096 UCX records of 250 bytes are 1 MiB.
inline constexpr size_t kMaxStoreGetManyAnswerBytes = 3 << 20;

// --- JobSpec files (the client's YAML reader) --------------------------------------------------

// A JobSpec file, refused before it is read whole. The YAML parser holds about 50 bytes per byte
// of text (a 50 MB file took 2.3 GB), so 1 MiB keeps the client below about 100 MB; a spec of
// 16384 tensors with short names fits. A larger model leaves `tensors` out: the workers
// declare it (DeclareModel).
inline constexpr size_t kMaxSpecFileBytes = 1 << 20;
// Nesting of YAML collections: a JobSpec nests 3 deep (tensors -> tensor -> shape); the YAML
// parser recurses once per level, so deep nesting could exhaust the client's stack. Checked by
// a scan of the text before it is parsed.
inline constexpr int kMaxSpecNesting = 16;

}  // namespace herd::scheduler::limits
