#pragma once
// The life of one parameter-server shard process (`herd server`), from start to exit:
//
//   open the state directory (a second shard on the same directory stops here), listen
//   wait for the job (--wait-for-job: a pod may start before `herd job submit`)
//   register as a shard of the job (a restarted shard with the same name takes its slot back)
//   wait until the model's layout is known (the spec's, or the first worker's declaration)
//   serve: an engine for the job's ps_* mode, its keys restored from the state directory;
//          while the job runs a collective mode the shard stands by (calls are UNAVAILABLE)
//          and starts serving when a ps_* mode is scheduled
//   follow the plan: live workers bound ps_async's staleness
//   checkpoints: at each one the scheduler announces, the engine's state once every worker
//          is at the cut (server/shard_checkpoints.h); a resumed job's shard imports its keys
//          from the checkpoint when its own state holds none
//   exit when the job ends (0 when it COMPLETED or was PREEMPTED, 1 with the reason
//          otherwise), or on SIGINT (0): serving stops first, then the final write of what the
//          durability policy has not written yet. SIGTERM is a preemption: the job saves a
//          last checkpoint and stops (a second signal, or a job without checkpoints: at once).

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "common/defaults.h"
#include "scheduler/client/scheduler_client.h"
#include "server/service.h"
#include "server/shard_config.h"

namespace herd::server {

struct ShardOptions {
  scheduler::ClientOptions scheduler;
  ServiceOptions service;
  std::string job;                // empty: the only job on the scheduler waiting for a shard
  std::string state_dir;          // the shard's RocksDB state
  bool accept_data_loss = false;  // open a damaged state at its last consistent point
  Durability durability;
  std::string advertise;  // host:port the workers dial (default: the listen host, bound port)
  std::string name;       // default: server-HOST:STATE-DIR (a restart retakes its shard id)
  int shard = -1;         // requested shard id (-1: the scheduler's choice)
  std::string port_file;  // the bound port is written there once serving
  std::chrono::milliseconds register_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds wait_for_job{defaults::kWaitForJob};
  std::chrono::milliseconds start_timeout{std::chrono::minutes(5)};  // the job to run
  // SIGTERM while the job runs: the job checkpoints and stops (preemption); the shard serves
  // until it has, at most this long.
  std::chrono::milliseconds preempt_grace{defaults::kPreemptionGrace};
};

// Runs the shard until its job ends or a stop signal arrives. SIGINT and SIGTERM must be
// blocked in every thread of the process before the call (it waits for them with sigwait).
// OK when the job completed or a signal stopped the shard; the job's outcome when it ended
// otherwise (CANCELLED, ABORTED); the error that kept the shard from serving.
absl::Status RunShard(ShardOptions options);

}  // namespace herd::server
