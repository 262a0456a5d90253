#pragma once
// The scheduler-backed bootstrap Store: transport::Store over herd.v1.Scheduler StoreSet /
// StoreGet / StoreGetMany, scoped to one job, so processes started with only --scheduler ADDR find
// each other (UCX worker addresses, the NCCL unique id of an epoch). Keys are written once per job
// and survive a scheduler restart (they live in its RocksDB state); the job's ending drops them.
//
// Get waits on the scheduler side (a long poll bounded by the deadline); when the scheduler is
// unreachable it retries until the deadline, so a scheduler restart is ridden out. GetMany is
// one StoreGetMany call when every key is there (or appears within the call's 5 s slice);
// a slice that ends with keys missing asks again for those only.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "scheduler/client/scheduler_client.h"
#include "transport/store/store.h"

namespace herd::worker {

std::shared_ptr<transport::Store> MakeSchedulerStore(
    std::shared_ptr<scheduler::SchedulerClient> client, std::string job);

}  // namespace herd::worker
